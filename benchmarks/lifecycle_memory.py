#!/usr/bin/env python3
"""Resident memory of a node through its lifecycle: what configure takes and cleanup gives back.

    python benchmarks/lifecycle_memory.py [--model ../shared/models/yolo11n-pose.onnx] [--family yolo_pose]
                                          [--cycles 3]

One process, one real node (ONNX Runtime on CPU; no DDS traffic needed): VmRSS from /proc/self/status
before configure, after configure, after the first frames through the model (ONNX Runtime sizes its memory
arena on the first runs), and after cleanup; then ``--cycles`` more configure / frames / cleanup rounds, so a
leak would show as a cleanup level that keeps rising. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

import numpy as np
import rclpy
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter

from vision_factory.families.registry import family
from vision_factory.ros.detection_node import DetectionNode
from vision_factory.runtime.onnx_runner import OnnxRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_detection import shared_dir  # noqa: E402  (the shared models folder, found as the tests find it)


def resident_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=shared_dir(None) / "models" / "yolo11n-pose.onnx")
    parser.add_argument("--family", default="yolo_pose")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--frames", type=int, default=5, help="frames through the model after each configure")
    options = parser.parse_args()

    rclpy.init()
    overrides = [Parameter("autostart", value=False), Parameter("model_path", value=str(options.model))]
    node = DetectionNode(OnnxRunner, family(options.family), parameter_overrides=overrides)
    frame = np.random.default_rng(0).integers(0, 255, (720, 1280, 3), dtype=np.uint8)
    gc.collect()
    rows = [("before configure", resident_mib())]
    for cycle in range(1 + options.cycles):
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS, node.failure
        if cycle == 0:
            rows.append(("after configure", resident_mib()))
        for _ in range(options.frames):
            node.detector.detect(frame)
        rows.append((f"cycle {cycle + 1}: after {options.frames} frames", resident_mib()))
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        rows.append((f"cycle {cycle + 1}: after cleanup", resident_mib()))
    node.destroy_node()
    rclpy.shutdown()

    print(f"{options.family} {options.model.name}, ONNX Runtime on CPU, 1280x720 frames")
    base = rows[0][1]
    for label, mib in rows:
        print(f"  {label:<32} {mib:8.1f} MiB  ({mib - base:+.1f})")


if __name__ == "__main__":
    main()
