"""Bounds on the sizes a model file states, checked before anything is allocated by them.

A model's shapes and metadata are data from a file: an input side, a window of frames, a count of keypoints or
classes stated there drives allocations (a letterboxed frame, TrackNet's frame ring, a list of names). Each such
size is checked here, where it is read, against a bound that real models stay far within, so that a damaged or
hostile file is refused with an error naming the key, its value and the bound, before it costs gigabytes.
What the user sets has its bounds in the parameter tables (``image_size`` within MAX_INPUT_SIDE, the WIDTHxHEIGHT
sizes within MAX_INPUT_PIXELS, checked when set); a node's ``max_image_pixels`` is the user's to allow.
"""

from __future__ import annotations

import math

from ..parameters import MAX_IMAGE_PIXELS
from ..text import untrusted

# An image input of more pixels than the nodes take from a camera by default (max_image_pixels' default, 8K UHD).
MAX_INPUT_PIXELS = MAX_IMAGE_PIXELS
MAX_INPUT_SIDE = math.isqrt(MAX_INPUT_PIXELS)  # a square input's side within it (image_size): 5760
MAX_BATCH = 1024  # a fixed batch axis (OSNet exports fix 16); the crops of one batch are allocated together
# Frames per TrackNet or InpaintNet window (TrackNetV3: 8 and 16); TrackNet keeps 2 x seq_len frames of up to
# 4 x 288 x 512 floats (64: 300 MB).
MAX_SEQ_LEN = 64
# Frames of TrackNet's background median warm-up (median_warmup): it keeps half of them, full frames (300: 151
# frames, 420 MB at 1280x720); the reference takes its median over a few seconds of video.
MAX_MEDIAN_FRAMES = 300
MAX_KEYPOINTS = 1000  # per object (COCO 17, COCO-WholeBody 133)
KEYPOINT_DIMS = (2, 3)  # x, y (and visibility), as Ultralytics' kpt_shape has them
MAX_CLASSES = 100_000  # LVIS 1203, ImageNet-21k 21841


class BoundError(ValueError):
    """A size a model states that is outside the bound real models stay within."""


def check_count(key: str, value: object, bound: int, minimum: int = 1) -> int:
    """``value`` (an int from ``minimum`` to ``bound``), else a BoundError naming ``key``, the value and the bound."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= bound:
        raise BoundError(
            f"{key} {untrusted(value, 80)} is outside {minimum}..{bound}, the bound vision_factory sets on it; "
            "the model file is damaged or not a model this package runs"
        )
    return value


def check_input_size(key: str, height: object, width: object, fix: str = "") -> None:
    """An image input of ``height`` x ``width`` within MAX_INPUT_PIXELS, else a BoundError naming ``key``."""
    check_count(f"{key} height", height, MAX_INPUT_PIXELS)
    check_count(f"{key} width", width, MAX_INPUT_PIXELS)
    if height * width > MAX_INPUT_PIXELS:
        raise BoundError(
            f"{key} {height}x{width} (height x width) is {height * width} pixels, more than the bound "
            f"{MAX_INPUT_PIXELS} (max_image_pixels' default, 7680x4320); the model file is damaged"
            + (f", or {fix}" if fix else "")
        )
