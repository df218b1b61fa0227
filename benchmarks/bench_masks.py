#!/usr/bin/env python3
"""Instance mask decoding: models/masks.py's ``instance_masks`` against Ultralytics' own mask processing, same run.

    YOLO_OFFLINE=1 YOLO_CONFIG_DIR=/tmp/ul_config PYTHONPATH=. /tmp/ul_venv/bin/python benchmarks/bench_masks.py

N detections (default 30) on a 1280x720 frame from a 640x640 YOLOv8-seg (prototypes [32, 160, 160]), prototypes
and coefficients seeded random, boxes 40-250 px. Timed, p50 and p90 over --rounds after a warm-up, one thread each
(torch.set_num_threads(1); NumPy's BLAS as it is): ours (masks at the frame's size, each kept as its box's pixels)
and our instance label image; Ultralytics' ``process_mask_native`` (masks at the frame's size, what
``retina_masks=True`` gives: the same masks) and ``process_mask(upsample=True)`` (its default predict path: masks at
the 640x640 input size, not the frame's). Run it in the scratch venv of benchmarks/ultralytics_seg_reference.py
(Ultralytics and PyTorch, which the project does not depend on); without them only ours is timed. It is a
benchmark, not a test: nothing is asserted. Results: benchmarks/README.md, "Instance masks".
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from vision_factory.models.masks import instance_masks, label_image

FRAME = (720, 1280)
PROTOTYPES = (32, 160, 160)


def timed(function, rounds: int) -> tuple[float, float]:
    for _ in range(3):
        function()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.percentile(times, 50)), float(np.percentile(times, 90))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detections", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    prototypes = rng.standard_normal(PROTOTYPES).astype(np.float32)
    coefficients = rng.standard_normal((args.detections, PROTOTYPES[0])).astype(np.float32)
    corner = rng.uniform((0, 0), (FRAME[1] - 40, FRAME[0] - 40), (args.detections, 2))
    size = rng.uniform(40, 250, (args.detections, 2))
    boxes = np.concatenate([corner, np.minimum(corner + size, (FRAME[1], FRAME[0]))], axis=1).astype(np.float32)

    rows = {}
    rows["ours: instance_masks (frame size)"] = timed(
        lambda: instance_masks(prototypes, coefficients, boxes, FRAME), args.rounds
    )
    masks = instance_masks(prototypes, coefficients, boxes, FRAME)
    rows["ours: label image (mono16)"] = timed(lambda: label_image(masks, FRAME), args.rounds)
    try:
        import torch
        from ultralytics.utils import ops
    except ImportError:
        print("Ultralytics or PyTorch not installed: only ours is timed")
    else:
        torch.set_num_threads(1)
        protos_t, coefficients_t, boxes_t = map(torch.from_numpy, (prototypes, coefficients, boxes))
        # Its boxes for process_mask are in the 640x640 input: the frame's scaled by 0.5 and shifted down by 140.
        input_boxes = boxes_t * 0.5 + torch.tensor([0, 140, 0, 140])
        rows["Ultralytics: process_mask_native (frame size)"] = timed(
            lambda: ops.process_mask_native(protos_t, coefficients_t, boxes_t, FRAME), args.rounds
        )
        rows["Ultralytics: process_mask upsample (640x640 input)"] = timed(
            lambda: ops.process_mask(protos_t, coefficients_t, input_boxes, (640, 640), upsample=True), args.rounds
        )
        theirs = ops.process_mask_native(protos_t, coefficients_t, boxes_t, FRAME).numpy() > 0
        ious = [(mask.full() & their).sum() / max((mask.full() | their).sum(), 1) for mask, their in zip(masks, theirs)]
        print(f"mask IoU ours vs process_mask_native: min {min(ious):.4f}, mean {np.mean(ious):.4f}")
    print(f"{args.detections} detections, frame {FRAME[1]}x{FRAME[0]}, prototypes {PROTOTYPES}")
    for name, (p50, p90) in rows.items():
        print(f"  {name}: p50 {p50:.2f} ms, p90 {p90:.2f} ms")
    ours = rows["ours: instance_masks (frame size)"][0]
    for name, (p50, _) in rows.items():
        if name.startswith("Ultralytics"):
            print(f"  ratio {name} / ours: {p50 / ours:.1f}x")


if __name__ == "__main__":
    main()
