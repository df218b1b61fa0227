#!/usr/bin/env python3
"""Rotated NMS (results/rotated.py: probiou, fast NMS in blocks) against the upright NMS of the same boxes
(results/boxes.py's nms, OpenCV's greedy loop) in the same run: milliseconds per call and their ratio, for N random
candidates of 15 classes (DOTA's count) on a 1024 x 1024 frame, IoU 0.7, at most 300 kept (Ultralytics' defaults).

    python benchmarks/bench_rotated_nms.py [--counts 500 5000 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from vision_factory.results.boxes import nms  # noqa: E402
from vision_factory.results.rotated import rotated_nms  # noqa: E402


def best_ms(function, repeat: int, *arguments) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function(*arguments, 0.7, 300)
        times.append(time.perf_counter() - start)
    return 1000 * min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[500, 5000, 20000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("candidates  rotated ms  upright ms  ratio")
    for count in args.counts:
        xywhr = np.column_stack(
            [rng.uniform(0, 1024, (count, 2)), rng.uniform(5, 80, (count, 2)), rng.uniform(0, 3, count)]
        )
        scores, classes = rng.uniform(0, 1, count), rng.integers(0, 15, count)
        xyxy = np.column_stack([xywhr[:, :2] - xywhr[:, 2:4] / 2, xywhr[:, :2] + xywhr[:, 2:4] / 2])
        rotated = best_ms(rotated_nms, args.repeat, xywhr, scores, classes)
        upright = best_ms(nms, args.repeat, xyxy, scores, classes)
        print(f"{count:10d}  {rotated:10.1f}  {upright:10.1f}  {rotated / upright:5.1f}")


if __name__ == "__main__":
    main()
