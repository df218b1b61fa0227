"""Tracking costs per frame: the tracker's update for many objects, with and without appearance, and the re-id
embedding of the crops with the real MobileNetV2 embedders (dynamic batch and fixed batch 16).

    python benchmarks/bench_tracking.py [--objects 50] [--frames 300] [--shared ../shared]

The update is timed on a synthetic scene: ``--objects`` boxes moving at constant velocity in a 1920x1080 frame,
each detected with probability 0.9 and with a score between 0.3 and 1 (so both association stages run), and,
with appearance, a noisy 512-d unit feature per object (OSNet's size). The embedding is timed on the astronaut
photo of scikit-image with 1, 8, 16 and 32 boxes, ONNX Runtime on CPU. A benchmark, not a test: nothing is
asserted. Prints milliseconds per frame (median and 90th percentile).
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np

from vision_factory.models.tracker import Tracker
from vision_factory.results.boxes import Boxes

ROOT = Path(__file__).resolve().parent.parent


def scene(objects: int, frames: int, dim: int, seed: int = 0):
    """Per frame: the detections and their features."""
    rng = np.random.default_rng(seed)
    start = rng.uniform([0, 0], [1800, 900], (objects, 2))
    velocity = rng.uniform(-4, 4, (objects, 2))
    size = rng.uniform([30, 60], [80, 180], (objects, 2))
    identity = rng.standard_normal((objects, dim))
    for t in range(frames):
        seen = np.flatnonzero(rng.random(objects) < 0.9)
        corner = start[seen] + velocity[seen] * t + rng.normal(0, 1.5, (len(seen), 2))
        boxes = np.concatenate([corner, corner + size[seen]], axis=1)
        scores = rng.uniform(0.3, 1.0, len(seen))
        detections = Boxes(boxes, scores, np.zeros(len(seen), np.int64), ["person"] * len(seen))
        features = identity[seen] + 0.3 * rng.standard_normal((len(seen), dim))
        yield detections, features / np.linalg.norm(features, axis=1, keepdims=True)


def time_updates(objects: int, frames: int, appearance: bool) -> np.ndarray:
    tracker = Tracker()
    times = []
    for detections, features in scene(objects, frames, 512):
        started = time.perf_counter()
        tracker.update(detections, features if appearance else None)
        times.append(time.perf_counter() - started)
    return np.array(times[10:]) * 1000  # after the first frames, once the tracks exist


def time_embedding(model: Path, counts: list[int], repeats: int) -> dict[int, np.ndarray]:
    import skimage.data

    from vision_factory.models.reid import ReidEmbedder
    from vision_factory.runtime.onnx_runner import OnnxRunner

    embedder = ReidEmbedder(OnnxRunner.load(model, {}, logging.getLogger("bench")))
    image = np.ascontiguousarray(skimage.data.astronaut()[..., ::-1])
    rng = np.random.default_rng(1)
    results = {}
    for count in counts:
        corners = rng.uniform(0, 400, (count, 2))
        boxes = np.concatenate([corners, corners + rng.uniform(40, 110, (count, 2))], axis=1)
        embedder.embed(image, boxes)  # warm-up
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            embedder.embed(image, boxes)
            times.append(time.perf_counter() - started)
        results[count] = np.array(times) * 1000
    return results


def summary(times: np.ndarray) -> str:
    return f"p50 {np.percentile(times, 50):8.3f} ms   p90 {np.percentile(times, 90):8.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=50)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=20, help="timed embedding runs per crop count")
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared", help="folder with models/")
    arguments = parser.parse_args()

    print(f"tracker update, {arguments.objects} objects, {arguments.frames} frames:")
    for appearance in (False, True):
        label = "with appearance (512-d)" if appearance else "motion only"
        print(f"  {label:26s} {summary(time_updates(arguments.objects, arguments.frames, appearance))}")

    for name in ("mobilenetv2-reid-embedder.onnx", "mobilenetv2-reid-embedder-b16.onnx"):
        model = arguments.shared / "models" / name
        if not model.is_file():
            print(f"{model} not found: embedding not timed")
            continue
        print(f"embedding, {name} (onnx:cpu), crops per frame:")
        for count, times in time_embedding(model, [1, 8, 16, 32], arguments.repeats).items():
            print(f"  {count:3d} crops  {summary(times)}   {np.percentile(times, 50) / count:7.2f} ms per crop")


if __name__ == "__main__":
    main()
