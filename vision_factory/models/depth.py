"""Monocular depth (Depth Anything V1/V2, DPT/MiDaS-style, ZoeDepth) as transformers runs it: its image processor's
pre-processing, the model, and post_process_depth_estimation's resize back to the frame (models/depth_interface.py
for the processors and the rule). ZoeDepth's reflection padding is added here and cut off its map here; one pass:
post_process_depth_estimation's optional average with a horizontally flipped frame's map (``outputs_flipped``) is
not made, as it would run the model twice per frame.

Metric maps are metres; a pixel the model gives no finite positive depth for (or, with ``max_depth``, more than
that) is NaN, invalid (REP-118). Relative maps are the model's relative inverse depth as it is (larger is nearer;
scale and shift unknown), never metres.
"""

from __future__ import annotations

import math
import time

import cv2
import numpy as np

from ..results import MODEL_FIX
from ..results.dense import DenseMap
from ..results.frame import FrameResult
from ..runtime.runner import Runner, tensor_text
from ..text import untrusted
from .bounds import MAX_INPUT_PIXELS
from .depth_interface import BILINEAR_CORNERS, Processor
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


def padding(height: int, width: int, processor: Processor) -> tuple[int, int]:
    """The rows and columns ZoeDepthImageProcessor pads a frame with on each side: int(sqrt(side / 2) * 3)."""
    if not processor.pad:
        return 0, 0
    return int(math.sqrt(height / 2) * 3), int(math.sqrt(width / 2) * 3)


def corner_samples(size: int, padded: int, pad: int, frame: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """torch's bilinear with align_corners along one axis, from a ``padded`` axis (``pad`` reflected on each side
    of ``frame``) to ``size``: for each output, its two source indices in the frame and the second one's weight."""
    scale = np.float32((padded - 1) / (size - 1)) if size > 1 else np.float32(0)
    source = np.arange(size, dtype=np.float32) * scale
    low = np.minimum(source.astype(np.int64), padded - 1)
    high = np.minimum(low + 1, padded - 1)
    weight = (source - low).astype(np.float32)
    return reflected(low - pad, frame), reflected(high - pad, frame), weight


def reflected(index: np.ndarray, size: int) -> np.ndarray:
    """Indices outside [0, size) reflected back (no edge repeat: torch's and numpy's reflect)."""
    if size == 1:
        return np.zeros_like(index)
    period = 2 * (size - 1)
    index = np.abs(index) % period
    return np.where(index > size - 1, period - index, index)


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
    """A depth model on a runner: BGR frame in, its FrameResult out: a DenseMap of the frame's size (metres or
    relative)."""

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
        output = runner.outputs[0]
        if any(isinstance(dim, int) and dim < 1 for dim in output.shape):
            raise ValueError(
                f"the depth model's output {tensor_text(output)} is empty: no depth map; the file is damaged or no "
                "depth model"
            )
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
        """The model input's (height, width) for a frame of that size (ZoeDepth's: for the padded frame); a
        ValueError when it has more than MAX_INPUT_PIXELS pixels (an odd frame's aspect ratio, kept)."""
        pad_rows, pad_columns = padding(height, width, self.processor)
        size = self.fixed or resized_size(height + 2 * pad_rows, width + 2 * pad_columns, self.processor)
        if size[0] * size[1] > MAX_INPUT_PIXELS:
            raise ValueError(
                f"the image processor resizes a {width}x{height} frame to {size[1]}x{size[0]}, more than "
                f"{MAX_INPUT_PIXELS} pixels: give a smaller processor_size"
            )
        return size

    def prepare(self, image_bgr: np.ndarray) -> np.ndarray:
        """The model's input tensor [1, 3, h, w] float32 for a BGR frame."""
        if image_bgr.ndim != 3 or image_bgr.shape[2] != 3 or image_bgr.dtype != np.uint8:
            raise ValueError(
                f"a depth model takes 8-bit colour frames, not {image_bgr.dtype} of shape {image_bgr.shape}"
            )
        if self.processor.resample == BILINEAR_CORNERS:  # ZoeDepth's: padded, bilinear (no antialiasing: as cheap
            return self.bilinear_corners(image_bgr)  # computed exactly; resize_filter is for the bicubic ones)
        bgr = resized_colour(image_bgr, self.input_size(*image_bgr.shape[:2]), self.resize)
        tensor = np.empty((1, 3, *bgr.shape[:2]), np.float32)
        for channel, plane in enumerate(cv2.split(bgr)):  # B, G, R: the model's channels 2, 1, 0
            cv2.LUT(plane, self.table[2 - channel], dst=tensor[0, 2 - channel])
        return tensor

    def bilinear_corners(self, image_bgr: np.ndarray) -> np.ndarray:
        """ZoeDepthImageProcessor's input: the frame padded by reflection (when the processor pads), resized by
        torch's bilinear with align_corners (on x / 255: the same as on the normalised values, bilinear being
        linear), normalised. The padding is never made: each sample reads the frame's reflected row and column."""
        height, width = image_bgr.shape[:2]
        pad_rows, pad_columns = padding(height, width, self.processor)
        size = self.input_size(height, width)
        rows = corner_samples(size[0], height + 2 * pad_rows, pad_rows, height)
        columns = corner_samples(size[1], width + 2 * pad_columns, pad_columns, width)
        tensor = np.empty((1, 3, *size), np.float32)
        for channel in range(3):  # BGR's channel 2 - channel is RGB's channel
            plane = image_bgr[:, :, 2 - channel]
            lookup = self.table[channel, :, 0]
            top, bottom = lookup[plane[rows[0]]], lookup[plane[rows[1]]]
            mixed = top + (bottom - top) * rows[2][:, None]
            left, right = mixed[:, columns[0]], mixed[:, columns[1]]
            tensor[0, channel] = left + (right - left) * columns[2]
        return tensor

    def raw(self, tensor: np.ndarray) -> np.ndarray:
        """The model's map [h, w] for an input tensor."""
        output = self.runner.run({self.input.name: tensor})[0]
        if output.ndim not in (3, 4) or output.shape[0] != 1 or (output.ndim == 4 and output.shape[1] != 1):
            shown = tensor_text(self.runner.outputs[0])
            raise ValueError(f"the depth model's output {shown} gave {output.shape}: not one [1, H, W] map")
        if output.size == 0:
            shown = tensor_text(self.runner.outputs[0])
            raise ValueError(f"the depth model's output {shown} gave {output.shape}: an empty map")
        return output.reshape(output.shape[-2:])

    def finish(self, depth: np.ndarray, height: int, width: int) -> DenseMap:
        """The model's map resized to the frame (bicubic, as post_process_depth_estimation; ZoeDepth's to the padded
        frame, the padding then cut off), invalid pixels NaN (values a model should not give: ``out_of_range``)."""
        depth = np.asarray(depth, np.float32)
        pad_rows, pad_columns = padding(height, width, self.processor)
        padded = (height + 2 * pad_rows, width + 2 * pad_columns)
        if depth.shape != padded:
            depth = cv2.resize(depth, padded[::-1], interpolation=cv2.INTER_CUBIC)
        if pad_rows or pad_columns:
            depth = np.ascontiguousarray(depth[pad_rows : pad_rows + height, pad_columns : pad_columns + width])
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

    def out_of_range(self, raw: np.ndarray) -> dict[str, str]:
        """What is wrong with the model's own map (before the resize), as problem-log kind -> detail: a metric map's
        infinite or negative metres (its NaN is the model's "no depth", REP-118's invalid: no problem), a relative
        map's NaN or infinite values; {} for a map without (two passes over the model's map)."""
        low, high = float(raw.min()), float(raw.max())  # NaN when any value is
        if self.depth_kind == "metric":
            if low >= 0 and high < np.inf:
                return {}
            bad, what = np.isinf(raw) | (raw < 0), "infinite or negative"
        else:
            if math.isfinite(low) and math.isfinite(high):
                return {}
            bad, what = ~np.isfinite(raw), "NaN or infinite"
        count = int(np.count_nonzero(bad))
        if not count:
            return {}
        return {
            f"{what} depth from the model": f"{count} of {raw.size} values of the model's {self.depth_kind} map are "
            f"{what}: NaN (invalid) there and where the resize spreads them; {MODEL_FIX}"
        }

    def __call__(self, image_bgr: np.ndarray) -> FrameResult:
        """The frame's result (``infer``): an adapter is a function from a frame to its result."""
        return self.infer(image_bgr)

    def infer(self, image_bgr: np.ndarray) -> FrameResult:
        """The frame's map, and as the result's ``problems`` what is wrong with the model's (``out_of_range``)."""
        start = time.perf_counter()
        tensor = self.prepare(image_bgr)
        prepared = time.perf_counter()
        depth = self.raw(tensor)
        inferred = time.perf_counter()
        problems = self.out_of_range(np.asarray(depth, np.float32))
        found = self.finish(depth, *image_bgr.shape[:2])
        self.seconds["preprocess"] += prepared - start
        self.seconds["inference"] += inferred - prepared
        self.seconds["postprocess"] += time.perf_counter() - inferred
        return FrameResult.of(image_bgr, dense=found, problems=problems)
