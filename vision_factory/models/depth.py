"""Monocular depth (Depth Anything V1/V2, DPT/MiDaS-style) as transformers runs it: its image processor's
pre-processing, the model, and post_process_depth_estimation's resize back to the frame (models/depth_interface.py
for the processors and the rule).

Metric maps are metres; a pixel the model gives no finite positive depth for (or, with ``max_depth``, more than
that) is NaN, invalid (REP-118). Relative maps are the model's relative inverse depth as it is (larger is nearer;
scale and shift unknown), never metres.
"""

from __future__ import annotations

import math
import time

import cv2
import numpy as np

from ..results.dense import DenseMap
from ..runtime.runner import Runner, tensor_text
from ..text import untrusted
from .depth_interface import Processor
from .interface import check_image_input

KIND = "depth"
UNITS = {"metric": "m", "relative": "relative"}  # results/dense.py's unit of each depth kind


def constrain(value: float, multiple: int) -> int:
    """DPTImageProcessor's constrain_to_multiple_of: the nearest multiple (Python's round: halves to even), at least
    ``multiple``."""
    found = round(value / multiple) * multiple
    return found if found >= multiple else math.ceil(value / multiple) * multiple


def resized_size(height: int, width: int, processor: Processor) -> tuple[int, int]:
    """The (height, width) DPTImageProcessor resizes a frame of ``height`` x ``width`` to: scaling as little as
    possible when keeping the aspect ratio, each side to a multiple."""
    scale_height, scale_width = processor.size[0] / height, processor.size[1] / width
    if processor.keep_aspect:
        if abs(1 - scale_width) < abs(1 - scale_height):
            scale_height = scale_width
        else:
            scale_width = scale_height
    return constrain(scale_height * height, processor.multiple), constrain(scale_width * width, processor.multiple)


# How frames are resized to the processor's size (the depth family's resize_filter), the default first.
RESIZES = ("exact", "fast")


def resized_colour(image: np.ndarray, size: tuple[int, int], resize: str = "exact") -> np.ndarray:
    """The 8-bit colour frame resized to ``size`` (height, width), its channels kept in their order (each filter
    works on each channel alone). ``exact``: PIL's bicubic filter, antialiased as it shrinks: the resampling the
    checkpoints' processors name (transformers' torchvision backend computes the same filter). ``fast``: OpenCV's
    bilinear as it shrinks by less than 2x (1280x720 to 924x518: 0.5 ms against PIL's 10), its area filter as it
    shrinks more (alias-free, as the processor's is), its bicubic as it enlarges; the input differs from exact's by
    a few levels (benchmarks/README.md, "Depth node overhead", has both and what they change in the maps)."""
    if image.shape[:2] == size:
        return image
    if resize == "fast":
        shrink = max(image.shape[0] / size[0], image.shape[1] / size[1])
        if shrink <= 1:
            interpolation = cv2.INTER_CUBIC
        else:  # bilinear samples enough of a frame shrunk less than 2x; beyond, the area filter keeps it alias-free
            interpolation = cv2.INTER_LINEAR if shrink < 2 else cv2.INTER_AREA
        return cv2.resize(image, size[::-1], interpolation=interpolation)
    from PIL import Image

    return np.asarray(Image.fromarray(image).resize((size[1], size[0]), Image.Resampling.BICUBIC))


class DepthEstimator:
    """A depth model on a runner: BGR frame in, a DenseMap of the frame's size out (metres or relative)."""

    def __init__(
        self, runner: Runner, processor: Processor, depth_kind: str, max_depth: float = 0.0, resize: str = "exact"
    ):
        if depth_kind not in UNITS:
            raise ValueError(f"depth_kind must be one of {', '.join(UNITS)}, not {untrusted(depth_kind, 40)}")
        if resize not in RESIZES:
            raise ValueError(f"resize_filter must be one of {', '.join(RESIZES)}, not {untrusted(resize, 40)}")
        self.runner, self.processor, self.depth_kind, self.max_depth = runner, processor, depth_kind, max_depth
        self.resize = resize
        self.input = runner.inputs[0]
        check_image_input(self.input)
        height, width = self.input.shape[2:]
        # A fixed-size export takes only its own size: every frame is resized to it (the aspect ratio not kept).
        self.fixed = (height, width) if isinstance(height, int) and isinstance(width, int) else None
        # x / 255, minus mean, over std, of each 8-bit value of each channel: looked up (cv2.LUT, float32); the
        # tables in BGR order, as frames come (the model's channel c is the frame's channel 2 - c)
        levels = np.arange(256, dtype=np.float32)[:, None] * np.float32(1 / 255)
        mean, std = np.asarray(processor.mean, np.float32), np.asarray(processor.std, np.float32)
        self.table = np.ascontiguousarray(((levels - mean) / std).T[:, :, None])  # [3 (RGB), 256, 1]
        self.unit = UNITS[depth_kind]
        self.seconds = {"preprocess": 0.0, "inference": 0.0, "postprocess": 0.0}

    def input_size(self, height: int, width: int) -> tuple[int, int]:
        """The model input's (height, width) for a frame of that size."""
        return self.fixed or resized_size(height, width, self.processor)

    def prepare(self, image_bgr: np.ndarray) -> np.ndarray:
        """The model's input tensor [1, 3, h, w] float32 for a BGR frame."""
        if image_bgr.ndim != 3 or image_bgr.shape[2] != 3 or image_bgr.dtype != np.uint8:
            raise ValueError(
                f"a depth model takes 8-bit colour frames, not {image_bgr.dtype} of shape {image_bgr.shape}"
            )
        bgr = resized_colour(image_bgr, self.input_size(*image_bgr.shape[:2]), self.resize)
        tensor = np.empty((1, 3, *bgr.shape[:2]), np.float32)
        for channel, plane in enumerate(cv2.split(bgr)):  # B, G, R: the model's channels 2, 1, 0
            cv2.LUT(plane, self.table[2 - channel], dst=tensor[0, 2 - channel])
        return tensor

    def raw(self, tensor: np.ndarray) -> np.ndarray:
        """The model's map [h, w] for an input tensor."""
        output = self.runner.run({self.input.name: tensor})[0]
        if output.ndim not in (3, 4) or output.shape[0] != 1 or (output.ndim == 4 and output.shape[1] != 1):
            shown = tensor_text(self.runner.outputs[0])
            raise ValueError(f"the depth model's output {shown} gave {output.shape}: not one [1, H, W] map")
        return output.reshape(output.shape[-2:])

    def finish(self, depth: np.ndarray, height: int, width: int) -> DenseMap:
        """The model's map resized to the frame (bicubic, as post_process_depth_estimation), invalid pixels NaN."""
        depth = np.asarray(depth, np.float32)
        if depth.shape != (height, width):
            depth = cv2.resize(depth, (width, height), interpolation=cv2.INTER_CUBIC)
        if self.depth_kind == "metric":
            low, high = float(depth.min()), float(depth.max())  # NaN when any pixel is: the tests below fail
            within = high <= self.max_depth if self.max_depth > 0 else high < np.inf
            if low > 0 and within:
                return DenseMap(depth, self.unit, KIND)  # every pixel valid: these two passes only
            invalid = ~(depth > 0) | ~np.isfinite(depth)
            if self.max_depth > 0:
                invalid |= depth > self.max_depth
            if invalid.any():
                depth = depth.copy() if not depth.flags.writeable else depth
                depth[invalid] = np.nan
        elif not np.isfinite(depth).all():
            depth = np.where(np.isfinite(depth), depth, np.float32(np.nan))
        return DenseMap(depth, self.unit, KIND)

    def infer(self, image_bgr: np.ndarray) -> DenseMap:
        start = time.perf_counter()
        tensor = self.prepare(image_bgr)
        prepared = time.perf_counter()
        depth = self.raw(tensor)
        inferred = time.perf_counter()
        found = self.finish(depth, *image_bgr.shape[:2])
        self.seconds["preprocess"] += prepared - start
        self.seconds["inference"] += inferred - prepared
        self.seconds["postprocess"] += time.perf_counter() - inferred
        return found
