"""bench's timers of a family's per-frame pipeline (tools/bench.py runs them in its worker): a detector's
pre-processing, inference and decoding, a dense map's, a streamed family's, and a prompted family's (the text side of
a text prompt timed apart, a box prompt's encoder and decoder apart: tools/bench_prompted.py) on a 1280x720 frame."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..families.registry import family
from .synthetic import BallClip


def stride_values(stride: int) -> dict[str, int]:
    """The node parameter of a --stride (only a family whose model runs over windows has it)."""
    return {"stride": stride} if stride != 1 else {}


def detection_frame() -> np.ndarray:
    """The frame detectors are timed on: a photo of a person, resized to 1280x720."""
    import cv2
    import matplotlib.cbook

    photo = cv2.imread(str(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)))
    return cv2.resize(photo, (1280, 720))


def detection_pipeline(runner, model: Path, model_type: str, frames: int) -> dict[str, float]:
    """Pre-processing, inference and decoding per 1280x720 frame (a photo, resized): yolo, yolo_pose, fasterrcnn;
    the detector of the node's pipeline (families/pipeline.py) with the node's parameter defaults."""
    spec = family(model_type)
    detector = spec.pipeline(spec.values_from_model(model, "bench"), lambda path: runner).detector
    frame = detection_frame()
    stages = {"preprocess_ms": [], "inference_ms": [], "postprocess_ms": []}
    masks = bool(getattr(detector, "mask_channels", 0))  # a segmentation model: post-processing split in two
    parts: dict[str, list[float]] = {"decode_ms": [], "masks_ms": []}
    for _ in range(frames):
        times = [time.perf_counter()]
        tensor, fit = detector.preprocess(frame)
        times.append(time.perf_counter())
        output = detector.infer(tensor)
        times.append(time.perf_counter())
        detector.masks_s = 0.0
        detector.decode(output, fit)
        times.append(time.perf_counter())
        for name, start, end in zip(stages, times, times[1:]):
            stages[name].append(end - start)
        if masks:
            parts["masks_ms"].append(detector.masks_s)
            parts["decode_ms"].append(times[-1] - times[-2] - detector.masks_s)
    split = {name: 1000 * float(np.median(values)) for name, values in stages.items()}
    split |= {name: 1000 * float(np.median(values)) for name, values in parts.items() if values}
    head = getattr(detector, "head", None)
    return {
        "frame_size": "1280x720",
        **({"head": head} if head else {}),
        **split,
        "fps": 1000.0 / sum(split[name] for name in stages),
    }


def maps(model_type: str | None) -> bool:
    """Whether the family's result is a dense map (results/dense.py: depth): its model of dynamic size is timed on
    the input its pipeline makes of a 1280x720 frame."""
    return model_type is not None and family(model_type).result.name == "dense"


def map_estimator(runner, model: Path, model_type: str):
    """The dense model of the family's pipeline (families/frame_pipeline.py's SingleFrame)."""
    spec = family(model_type)
    return spec.pipeline(spec.values_from_model(model, "bench"), lambda path: runner).model


def map_feeds(runner, model: Path, model_type: str) -> dict[str, np.ndarray]:
    """The input a dense family's pipeline makes of the 1280x720 frame (its processor's size for it)."""
    estimator = map_estimator(runner, model, model_type)
    return {estimator.input.name: estimator.prepare(detection_frame())}


def map_pipeline(runner, model: Path, model_type: str, frames: int) -> dict[str, float]:
    """Pre-processing, inference and the map back at the frame's size per 1280x720 frame: the node's pipeline with
    the node's parameter defaults (and the values the model file records)."""
    estimator = map_estimator(runner, model, model_type)
    frame = detection_frame()
    stages = {"preprocess_ms": [], "inference_ms": [], "postprocess_ms": []}
    for _ in range(frames):
        times = [time.perf_counter()]
        tensor = estimator.prepare(frame)
        times.append(time.perf_counter())
        depth = estimator.raw(tensor)
        times.append(time.perf_counter())
        estimator.finish(depth, *frame.shape[:2])
        times.append(time.perf_counter())
        for name, start, end in zip(stages, times, times[1:]):
            stages[name].append(end - start)
    split = {name: 1000 * float(np.median(values)) for name, values in stages.items()}
    return {"frame_size": "1280x720", "input": list(tensor.shape), **split, "fps": 1000.0 / sum(split.values())}


def stream_pipeline(
    runner, model: Path, model_type: str, frames: int, stride: int = 1
) -> tuple[list[float], dict[str, float]]:
    """Per-frame latency of a streamed family's whole node pipeline (families/pipeline.py: tracknet's BallStream,
    with the values its model file records and the node's defaults) on synthetic 1280x720 frames (the model once
    every ``stride`` frames), and its stage split."""
    spec = family(model_type)
    values = spec.values_from_model(model, "bench", **stride_values(stride))
    stream = spec.pipeline(values, lambda path: runner)
    warmup = values["median_warmup"]
    clip = BallClip(num_frames=frames + warmup, width=1280, height=720)
    latencies = []
    for index, frame in enumerate(clip.frames()):
        start = time.perf_counter()
        stream.push(frame, index)
        if index >= warmup + values["seq_len"]:  # after the median warm-up and the first full window
            latencies.append(1000 * (time.perf_counter() - start))
    stats = stream.stats
    per_frame = lambda seconds: 1000 * seconds / max(1, stats.push_calls)
    split = {
        "frame_size": f"{clip.width}x{clip.height}",
        "preprocess_ms": per_frame(stats.preprocess_s),
        "inference_ms": per_frame(stats.inference_s),
        "postprocess_ms": per_frame(stats.postprocess_s),
        "fps": 1000.0 / float(np.mean(latencies)),
        "stride": stride,
        "frames": stats.push_calls,  # the median warm-up's included
        "model_runs": stats.inference_calls,
    }
    return latencies, split
