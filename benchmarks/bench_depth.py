#!/usr/bin/env python3
"""The depth node's work beyond the model's session per 1280x720 frame, as a ratio to the raw session, same run.

    PYTHONPATH=. python benchmarks/bench_depth.py [--model test/data/depth/depth-anything-relative.onnx]

A 1280x720 frame (skimage's coffee, resized) through what depth_node runs on it (families/depth.py's pipeline on
ONNX Runtime, CPU), once per resize_filter: the resize (exact: the processor's PIL bicubic; fast: OpenCV's area
filter; keep aspect, multiple of 14) and normalisation, the session, the bicubic resize of the map back to
1280x720 with the invalid pixels made NaN, and the 32FC1 message serialized as the node publishes it
(results/dense.py's DenseMap.to_cdr); the point cloud (only while subscribed) timed apart. The processor's size is
518x518 (Depth Anything's own: a 518x924 input for 1280x720) unless --processor-size; the model is the committed
tiny architecture-true export, whose session is far cheaper than a real checkpoint's, so the ratio here is an upper
bound of the real one. The session and the node's frame are timed in turn each round and the overhead is the median
of the rounds' differences (a shared machine's load falls on both alike); the stages apart: the fastest of --rounds
(the least disturbed). One intra-op thread. It is a benchmark, not a test:
nothing is asserted. Results: benchmarks/README.md, "Depth node overhead".
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import cv2
import numpy as np
import skimage.data
from sensor_msgs.msg import CameraInfo
from std_msgs.msg import Header

from vision_factory.families.registry import family
from vision_factory.models.depth import RESIZES
from vision_factory.parameters import with_defaults
from vision_factory.ros.depth_node import point_cloud
from vision_factory.runtime.onnx_runner import OnnxRunner

ROOT = Path(__file__).resolve().parent.parent
FRAME = (720, 1280)


def timed(function, rounds: int) -> float:
    """The fastest of ``rounds`` runs after a warm-up, ms: on a shared machine the least disturbed one."""
    for _ in range(3):
        function()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.min(times))


def paired(session, node, rounds: int) -> tuple[float, float]:
    """The raw session and the node's frame timed in turn, round after round (a shared machine's load falls on
    both alike): the median session, and the median of the session plus each round's node-minus-session, ms."""
    for _ in range(3):
        session(), node()
    sessions, overheads = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        session()
        middle = time.perf_counter()
        node()
        end = time.perf_counter()
        sessions.append((middle - start) * 1e3)
        overheads.append((end - middle - (middle - start)) * 1e3)
    middle_session = float(np.median(sessions))
    return middle_session, middle_session + float(np.median(overheads))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "test/data/depth/depth-anything-metric.onnx")
    parser.add_argument("--processor-size", default="518x518")
    parser.add_argument("--depth-kind", default="metric")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    spec = family("depth")
    frame = cv2.resize(np.ascontiguousarray(skimage.data.coffee()[..., ::-1]), FRAME[::-1])
    header = Header(frame_id="camera")
    info = CameraInfo(width=FRAME[1], height=FRAME[0], k=[1000.0, 0, 640, 0, 1000.0, 360, 0, 0, 1])
    for resize_filter in RESIZES:
        measure(spec, args, resize_filter, frame, header, info)


def measure(spec, args: argparse.Namespace, resize_filter: str, frame: np.ndarray, header: Header, info) -> None:
    """Time the node's frame against the raw session, and its stages, with ``resize_filter``; print them."""
    settings = {"intra_op_threads": 1}
    given = {
        "model_path": str(args.model),
        "processor_size": args.processor_size,
        "depth_kind": args.depth_kind,
        "resize_filter": resize_filter,
    }
    values = with_defaults(spec.parameters, given, "depth")
    estimator = spec.pipeline(values, lambda path: OnnxRunner.load(path, settings, logging.getLogger("bench"))).model
    tensor = estimator.prepare(frame)
    raw = estimator.raw(tensor)
    result = estimator.finish(raw, *FRAME)
    session, node = paired(
        lambda: estimator.runner.run({estimator.input.name: tensor}),
        lambda: estimator.infer(frame).dense.to_cdr(header),
        args.rounds,
    )
    prepare = timed(lambda: estimator.prepare(frame), args.rounds)
    finish = timed(lambda: estimator.finish(raw, *FRAME), args.rounds)
    message = timed(lambda: result.to_cdr(header), args.rounds)
    points = timed(lambda: point_cloud(header, result.values, info), args.rounds)
    overhead = node - session
    print(
        f"model {args.model.name}, input {list(tensor.shape)} for a 1280x720 frame, {args.depth_kind}, "
        f"resize_filter {resize_filter}"
    )
    print(f"  raw session        {session:8.2f} ms")
    print(f"  node's frame       {node:8.2f} ms (pre-processing, session, post-processing, 32FC1 message)")
    print(f"    pre-processing   {prepare:8.2f} ms")
    print(f"    post-processing  {finish:8.2f} ms")
    print(f"    32FC1 message    {message:8.2f} ms (serialized, as the node publishes it)")
    print(f"  overhead           {overhead:8.2f} ms = {overhead / session:.2f} x the raw session")
    print(f"  stages' sum        {prepare + finish + message:8.2f} ms (fastest of each)")
    print(f"  points (when subscribed) {points:8.2f} ms")


if __name__ == "__main__":
    main()
