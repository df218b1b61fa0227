#!/usr/bin/env python3
"""Identities across cameras (``cross_camera_reid``, models/global_ids.py) on composed hand-overs: global IDF1 over
both cameras of each scene, on the scenes the rules were chosen on and on scenes kept apart from that choice.

    python benchmarks/bench_cross_camera.py [--scenes held-out|tuning|more|all] [--seeds 201,202] [--truth-boxes]
                                            [--cache DIR [--record-only]] [--set NAME=VALUE ...] [--markdown]

The scenes are tools/compose.py's hand-overs made from a seed (handover_scene): two 560x360 cameras over one wider
scene, a pillar over the gap between their views; five people (the three photos and two lookalikes: a photo's
colours turned, an appearance distance of about 0.05 from its person) cross from one view into the other behind
the pillar, pass each other with full occlusion, turn back while hidden. HANDOVER_TUNING's seeds (1-3, and 101-104
which were held out from the first rules and then looked at) are those the rules and the threshold were chosen on;
HANDOVER_HELD_OUT's (201-204, other backdrops and pillar textures) were made after the rules were fixed and run
once. Each camera's frames go through its own pipeline as a node with
``cameras`` and ``cross_camera_reid`` runs them (tools/track.global_tracks): the PyPI fall detector (YOLOv8s,
found as the tests find it) on the node's default options, each camera's tracker with the shipped MobileNetV2
re-id embedder (its thresholds calibrated online, no threshold option), the global identities over both.
``--truth-boxes``: the composed truth boxes as the detections instead (what a perfect detector finds; fast).
HANDOVER_TUNING_MORE's seeds (301-310, ``--scenes more``; backdrops and pillars of their own) were made to study where
each camera's tracks break (issue 31's second round): tuning scenes too.

``--cache DIR`` (scene_cache.py): each camera's detections and re-id features of each scene recorded in DIR on the
first run (then replayed at once: the replay must give the very rows of the run), replayed on later runs, so that a
tracker or global-ID change re-runs in seconds (the fall detector takes minutes a scene). ``--record-only`` records
and prints nothing of the tracks: scenes held out can be recorded, unseen, while the rules are chosen.
``--set NAME=VALUE``: a tracking parameter other than the node's default (e.g. track_per_class=false).

Prints per scene: global IDF1 over both cameras together (tools/mot.evaluate_cameras; the per-camera track IDs
scored alike beside it: what a node without cross_camera_reid gives; "linked perfectly": each camera's tracks as its
tracker made them, each given its person's ID: what the trackers leave to link), ID switches, global IDs against
people, and the frames where one global ID was on two tracks at once (0 by the rules). A benchmark, not a test:
nothing is asserted (test/test_cross_camera.py asserts the rules).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from vision_factory.models.global_ids import GlobalIdentities
from vision_factory.tools.compose import (
    GARAGE,
    camera_view,
    compose,
    handover_scene,
    truth_detections,
)
from vision_factory.tools.mot import evaluate_cameras, iou_ltwh
from vision_factory.tools.track import REID_OPTION, TRACKING, camera_pipelines, global_tracks

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scene_cache  # noqa: E402
from bench_detection import FALL_WHEEL, shared_dir, wheel_model  # noqa: E402

# The seeds of tools/compose.py's hand-overs (handover_scene): those the cross-camera rules were chosen on (1-3
# first; 101-104 were held out from those first rules, then looked at to find what they still got wrong, so they are
# tuning scenes now) and the seeds kept apart from every choice (201-204, made after the rules were fixed and run once),
# each on backdrops and pillar textures of their own:
HANDOVER_TUNING = (
    (1, GARAGE, "skimage:brick"),
    (2, "skimage:rocket", "skimage:brick"),
    (3, GARAGE, "skimage:gravel"),
    (101, "skimage:coffee", "skimage:grass"),
    (102, "skimage:rocket", "skimage:grass"),
    (103, "skimage:chelsea", "skimage:moon"),
    (104, "skimage:coffee", "skimage:gravel"),
)
# More tuning scenes (issue 31's second round, to study where each camera's tracks break): other seeds, on backdrops
# and pillar textures of their own.
HANDOVER_TUNING_MORE = (
    (301, "skimage:hubble_deep_field", "skimage:text"),
    (302, "skimage:immunohistochemistry", "skimage:brick"),
    (303, "skimage:retina", "skimage:gravel"),
    (304, GARAGE, "skimage:clock"),
    (305, "skimage:rocket", "skimage:text"),
    (306, "skimage:coffee", "skimage:moon"),
    (307, "skimage:chelsea", "skimage:grass"),
    (308, "skimage:hubble_deep_field", "skimage:clock"),
    (309, "skimage:immunohistochemistry", "skimage:gravel"),
    (310, GARAGE, "skimage:text"),
)
HANDOVER_HELD_OUT = (
    (201, "skimage:rocket", "skimage:coins"),
    (202, GARAGE, "skimage:page"),
    (203, "skimage:coffee", "skimage:cell"),
    (204, "skimage:chelsea", "skimage:brick"),
)

FPS = 30


def at_once(rows: dict[str, list[tuple]]) -> int:
    """Frames where one global ID is on two tracks (of one camera or two)."""
    shown = Counter((row[0], row[1]) for found in rows.values() for row in found)
    return len({frame for (frame, _), count in shown.items() if count > 1})


def run_scene(
    scene_key: tuple,
    detector: Path,
    embedder: Path,
    truth_boxes: bool,
    cache: Path | None = None,
    options: dict | None = None,
) -> dict:
    seed, backdrop, pillars = scene_key
    scene, cameras = handover_scene(seed, backdrop, pillars)
    composed = compose(scene)
    views = {camera: camera_view(composed, columns) for camera, columns in cameras.items()}
    built = camera_pipelines(
        "yolo", detector, "onnx:cpu", {}, {**(options or {}), REID_OPTION: str(embedder)}, len(views)
    )
    pipelines = dict(zip(views, built))
    frames = {camera: view[0] for camera, view in views.items()}
    detections = {camera: truth_detections(view[1], view[0]) for camera, view in views.items()}
    started = time.perf_counter()
    if truth_boxes:
        rows, local = global_tracks(pipelines, frames, GlobalIdentities(), FPS, detections)
    else:
        rows, local = cached_tracks(scene_key, pipelines, frames, detector, embedder, cache)
    seconds = time.perf_counter() - started
    truth = {camera: view[1] for camera, view in views.items()}
    found = evaluate_cameras(truth, rows, scene.frames).metrics
    apart = {  # each camera's own track IDs
        camera: [(frame, track + 1000 * order, *rest) for frame, track, *rest in local[camera]]
        for order, camera in enumerate(views)
    }
    return {
        "scene": scene.name,
        "textures": f"{backdrop.split(':')[-1]}, {pillars.split(':')[-1]} pillar",
        "IDF1": found["IDF1"],
        "IDF1 per-camera IDs": evaluate_cameras(truth, apart, scene.frames).metrics["IDF1"],
        "linked perfectly": evaluate_cameras(truth, linked_perfectly(truth, local), scene.frames).metrics["IDF1"],
        "switches": int(found["id_switches"]),
        "global IDs": len({row[1] for each in rows.values() for row in each}),
        "people": len(scene.walkers),
        "at once": at_once(rows),
        "frames/s": sum(len(each) for each in frames.values()) / seconds,
    }


def cached_tracks(scene_key: tuple, pipelines: dict, frames: dict, detector: Path, embedder: Path, cache: Path | None):
    """global_tracks on the fall detector's detections and the embedder's features: from ``cache`` where recorded
    there (scene_cache.py), else run (and recorded there, then replayed at once: the replay must give the same
    rows, or the cache is not what the pipeline consumes)."""
    if cache is None:
        return global_tracks(pipelines, frames, GlobalIdentities(), FPS)
    values = {key: value for key, value in vars(next(iter(pipelines.values())).detector).items() if _plain(value)}
    key = scene_cache.cache_key(scene_key, detector, embedder, values)
    files = {camera: cache / f"handover_{scene_key[0]}-{camera}-{key}.npz" for camera in pipelines}
    if all(path.is_file() for path in files.values()):
        return _replayed(pipelines, frames, files)
    recorders = {camera: scene_cache.Recorder(pipeline) for camera, pipeline in pipelines.items()}
    rows, local = global_tracks(pipelines, frames, GlobalIdentities(), FPS)
    for camera, recorder in recorders.items():
        recorder.save(files[camera])
        pipelines[camera].detector, pipelines[camera].tracking.embedder = recorder.detector, recorder.embedder
        pipelines[camera].reset()
    if _replayed(pipelines, frames, files) != (rows, local):
        raise RuntimeError(f"scene {scene_key[0]}: the cache's replay gives other tracks than the run recorded")
    return rows, local


def _setting(text: str) -> tuple[str, object]:
    """``--set``'s NAME=VALUE: the track tool's option and its value (a number, or true / false, where it reads so)."""
    name, _, value = text.partition("=")
    option = "--" + name.strip().replace("_", "-")
    if option not in TRACKING:
        raise SystemExit(f"--set {text}: {name} is not a tracking parameter ({', '.join(sorted(TRACKING))})")
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return option, lowered == "true"
    for kind in (int, float):
        try:
            return option, kind(value)
        except ValueError:
            pass
    return option, value


def _plain(value) -> bool:
    return isinstance(value, int | float | str | bool | tuple | list) and len(repr(value)) < 2000


def _replayed(pipelines: dict, frames: dict, files: dict):
    detections = {}
    for camera, pipeline in pipelines.items():
        detections[camera], replayer = scene_cache.load(files[camera], frames[camera])
        pipeline.tracking.embedder = replayer
    return global_tracks(pipelines, frames, GlobalIdentities(), FPS, detections)


def linked_perfectly(truth: dict, local: dict) -> dict:
    """Each camera's tracks as its tracker made them, each given its person's ID (the truth ID it overlaps most,
    IoU >= 0.5): what the trackers leave to the global identities."""
    linked = {}
    for order, camera in enumerate(local):
        found = local[camera]
        votes: dict[int, Counter] = {}
        boxes = truth[camera]
        for frame, track, x, y, w, h, _ in found:
            here = boxes.frames == frame
            if not here.any():
                continue
            overlap = iou_ltwh(np.array([[x, y, w, h]]), boxes.boxes[here])[0]
            if overlap.max() >= 0.5:
                votes.setdefault(track, Counter())[int(boxes.ids[here][overlap.argmax()])] += 1
        person = {track: counted.most_common(1)[0][0] for track, counted in votes.items()}
        linked[camera] = [
            (frame, person.get(track, 1000 * (order + 1) + track), *rest) for frame, track, *rest in found
        ]
    return linked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", choices=("held-out", "tuning", "more", "all"), default="held-out")
    parser.add_argument("--seeds", default="", help="only these seeds of the scenes chosen (comma-separated)")
    parser.add_argument("--truth-boxes", action="store_true", help="the truth boxes as detections (no detector)")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a tracking parameter other than its default, e.g. track_buffer=60 (repeatable)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="a folder for each camera's detections and re-id features (scene_cache.py): recorded there on the first "
        "run, replayed after (a tracker or global-ID change re-runs in seconds)",
    )
    parser.add_argument("--shared", type=Path, default=None, help="the shared folder (default ../shared)")
    parser.add_argument(
        "--record-only",
        action="store_true",
        help="record the scenes' detections and features in --cache and print nothing of their tracks (scenes held "
        "out can be recorded while the rules are chosen, unseen)",
    )
    options = parser.parse_args()
    shared = shared_dir(options.shared)
    detector, _ = wheel_model(*FALL_WHEEL, True)
    embedder = shared / "models" / "mobilenetv2-reid-embedder.onnx"
    groups = {"tuning": HANDOVER_TUNING, "more": HANDOVER_TUNING_MORE, "held-out": HANDOVER_HELD_OUT}
    chosen = groups if options.scenes == "all" else {options.scenes: groups[options.scenes]}
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    source = "truth boxes" if options.truth_boxes else f"{detector.name} (fall detector)"
    print(f"detections: {source}; re-id: {embedder.name}, calibrated online; load average {load}")
    columns = (
        "IDF1",
        "IDF1 per-camera IDs",
        "linked perfectly",
        "switches",
        "global IDs",
        "people",
        "at once",
        "frames/s",
    )
    if options.markdown:
        print("| scenes | scene | textures | " + " | ".join(columns) + " |")
        print("|" + "---|" * (len(columns) + 3))
    if options.record_only and (options.cache is None or options.truth_boxes or options.set):
        raise SystemExit("--record-only records the detector's run in --cache: give --cache, no --truth-boxes or --set")
    chosen_options = dict(_setting(text) for text in options.set)
    seeds = {int(seed) for seed in options.seeds.split(",") if seed}
    for group, scenes in chosen.items():
        scenes = [scene for scene in scenes if not seeds or scene[0] in seeds]
        if not scenes:
            continue
        if options.record_only:  # the detections and features only: nothing about the tracks is shown
            for scene in scenes:
                started = time.perf_counter()
                run_scene(scene, detector, embedder, False, options.cache)
                print(f"{group} seed {scene[0]}: in {options.cache} ({time.perf_counter() - started:.0f} s)")
            continue
        results = [
            run_scene(scene, detector, embedder, options.truth_boxes, options.cache, chosen_options) for scene in scenes
        ]
        for result in results:
            values = [f"{result[c]:.3f}" if isinstance(result[c], float) else str(result[c]) for c in columns]
            values[-1] = f"{result['frames/s']:.1f}"
            if options.markdown:
                print(f"| {group} | {result['scene']} | {result['textures']} | " + " | ".join(values) + " |")
            else:
                print(f"{group:8} {result['scene']:13} " + ", ".join(f"{c} {v}" for c, v in zip(columns, values)))
        mean = float(np.mean([result["IDF1"] for result in results]))
        lowest = min(result["IDF1"] for result in results)
        print(f"{group}: global IDF1 mean {mean:.3f}, lowest {lowest:.3f}")


if __name__ == "__main__":
    main()
