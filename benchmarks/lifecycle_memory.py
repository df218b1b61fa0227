#!/usr/bin/env python3
"""Resident memory of a node through its lifecycle: what configure takes and cleanup gives back.

    python benchmarks/lifecycle_memory.py [--model ../shared/models/yolo11n-pose.onnx] [--family yolo_pose]
                                          [--backend onnx] [--frames 5] [--cycles 3] [--runs 1]

One process per run, one real node (no DDS traffic needed): from /proc/self/status, VmRSS and its two parts,
RssAnon (private memory: the model, its session and arenas, Python objects) and RssFile (pages of mapped files:
the libraries' code), before the node is made, once it is made (unconfigured: its backend's runtime loaded,
``Runner.prepare``), after configure, after the first frames through the model (ONNX Runtime sizes its memory
arena on the first runs), and after cleanup; then ``--cycles`` more configure / frames / cleanup rounds, so a
leak would show as a cleanup level that keeps rising. Each cleanup's line says what share of what its configure
and frames took it gave back. ``--runs`` repeats the whole in fresh processes and ends with each run's first and
later cleanup shares. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import gc
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import rclpy
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter

from vision_factory.families.registry import family
from vision_factory.ros.detection_node import DetectionNode
from vision_factory.runtime.backends import BACKENDS, backend

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_detection import shared_dir  # noqa: E402  (the shared models folder, found as the tests find it)

MEASURES = ("VmRSS", "RssAnon", "RssFile")


def resident_mib() -> dict[str, float]:
    """VmRSS, RssAnon and RssFile of this process, MiB."""
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    return {name: int(fields[name].split()[0]) / 1024 for name in MEASURES}


def given_back(taken: dict[str, float], kept: dict[str, float], base: dict[str, float]) -> str:
    """The share of what was taken since ``base`` (at its highest, ``taken``) that is back at ``kept``."""
    shares = []
    for name in MEASURES:
        grown = taken[name] - base[name]
        shares.append(f"{name} {100 * (taken[name] - kept[name]) / grown:.0f} %" if grown > 0.5 else f"{name} --")
    return ", ".join(shares)


def given_back_shares(text: str) -> list[str]:
    """The 'gave back' notes of a run's printed table, in order."""
    return re.findall(r"gave back (.*)", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=shared_dir(None) / "models" / "yolo11n-pose.onnx")
    parser.add_argument("--family", default="yolo_pose")
    parser.add_argument("--backend", default="onnx", choices=list(BACKENDS), help="on its CPU (the default device)")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--frames", type=int, default=5, help="frames through the model after each configure")
    parser.add_argument("--runs", type=int, default=1, help="fresh processes, each measuring the whole")
    options = parser.parse_args()
    if options.runs > 1:
        summary = []
        for run in range(options.runs):
            done = subprocess.run(
                [sys.executable, __file__, *_without_runs(sys.argv[1:])], capture_output=True, text=True, check=True
            )
            print(done.stdout, end="")
            shares = given_back_shares(done.stdout)
            summary.append(f"  run {run + 1}: first cleanup {shares[0]}; later ones {' | '.join(shares[1:])}")
        print("\n".join(["cleanup gave back, per run:", *summary]))
        return
    measure(options)


def _without_runs(arguments: list[str]) -> list[str]:
    """The command line less its --runs option (a run measures once)."""
    kept, skip = [], False
    for argument in arguments:
        if skip:
            skip = False
        elif argument == "--runs":
            skip = True
        elif not argument.startswith("--runs="):
            kept.append(argument)
    return kept


def measure(options: argparse.Namespace) -> None:
    runner_class = backend(options.backend).runner()
    rclpy.init()
    overrides = [Parameter("autostart", value=False), Parameter("model_path", value=str(options.model))]
    frame = np.random.default_rng(0).integers(0, 255, (720, 1280, 3), dtype=np.uint8)
    gc.collect()
    before_node = resident_mib()
    node = DetectionNode(runner_class, family(options.family), parameter_overrides=overrides)
    gc.collect()
    rows = [("before the node", before_node, ""), ("node made: unconfigured", resident_mib(), "")]
    for cycle in range(1 + options.cycles):
        start = rows[-1][1]
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS, node.failure
        if cycle == 0:
            rows.append(("after configure", resident_mib(), ""))
        for _ in range(options.frames):
            node.detector.detect(frame)
        rows.append((f"cycle {cycle + 1}: after {options.frames} frames", resident_mib(), ""))
        taken = rows[-1][1]
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        kept = resident_mib()
        rows.append((f"cycle {cycle + 1}: after cleanup", kept, f"gave back {given_back(taken, kept, start)}"))
    node.destroy_node()
    rclpy.shutdown()

    title = BACKENDS[options.backend].title
    print(f"{options.family} {options.model.name}, {title} on CPU, 1280x720 frames; MiB (+ over the unconfigured node)")
    base = rows[1][1]
    print(f"  {'':<32} {'VmRSS':>16} {'RssAnon':>16} {'RssFile':>16}")
    for label, mib, note in rows:
        cells = " ".join(f"{mib[name]:7.1f} ({mib[name] - base[name]:+6.1f})" for name in MEASURES)
        print(f"  {label:<32} {cells}  {note}")


if __name__ == "__main__":
    main()
