"""TrackNet's background median: built as a stream's first frames arrive (``WarmupMedian``, the same as
``np.median`` of them), or given, checked (``median_problem``), and each frame's difference from it, the extra
input channel of the bg modes that need one (``MEDIAN_MODES``); no ROS, no runner."""

from __future__ import annotations

import cv2
import numpy as np

from .tracknet_interface import HEIGHT, WIDTH

MEDIAN_MODES = ("subtract", "subtract_concat", "concat")  # the bg modes that need a background median


def background_difference(frame_bgr: np.ndarray, median_bgr: np.ndarray) -> np.ndarray:
    """Per-pixel sum over channels of |frame - median|, saturated to uint8 (full resolution)."""
    absdiff = cv2.absdiff(frame_bgr, median_bgr)
    # Saturating uint8 adds of non-negative terms: min(min(b + g, 255) + r, 255) is
    # min(b + g + r, 255): exactly clip(sum, 0, 255) without a float pass.
    blue, green, red = cv2.split(absdiff)
    cv2.add(blue, green, dst=blue)
    return cv2.add(blue, red, dst=blue)


def frames_before_stream(bg_mode: str, median_warmup: int) -> int:
    """Frames at the start of a stream that only feed the background-median warm-up (no prediction;
    no median given): all warm-up frames but the last, which completes the median and is the
    stream's first frame."""
    return max(0, median_warmup - 1) if bg_mode in MEDIAN_MODES else 0


class WarmupMedian:
    """The per-pixel median of ``count`` uint8 frames, built as they arrive.

    Exactly ``np.median`` over the frames, cast to uint8: the middle value for an odd count, the
    floor of the mean of the two middle values for an even one. Per pixel it keeps the
    ``count // 2 + 1`` smallest values seen so far, sorted, one plane each: a frame goes in by one
    compare-exchange (``cv2.min``/``cv2.max``) per kept plane, so every frame of the warm-up costs
    about the same few milliseconds, the last one included (no whole-stack sort when the median
    is due), and it holds half of the frames.
    """

    def __init__(self, count: int):
        if count < 1:
            raise ValueError(f"a median needs at least one frame, got {count}")
        self.count = count
        self.seen = 0
        self._kept: list[np.ndarray] = []  # ascending per pixel
        self._spare: list[np.ndarray] = []  # buffers to reuse

    @property
    def shape(self) -> tuple[int, ...] | None:
        return self._kept[0].shape if self._kept else None

    def _buffer(self, like: np.ndarray) -> np.ndarray:
        return self._spare.pop() if self._spare else np.empty(like.shape, np.uint8)

    def add(self, frame: np.ndarray) -> np.ndarray | None:
        """Add a frame (the first sets the shape); the median once ``count`` frames are in, else None."""
        if self.seen >= self.count:
            raise ValueError("the median is complete; reset() for another")
        shape = self.shape
        if shape is not None and frame.shape != shape:
            raise ValueError(
                f"frame size changed during median warm-up ({shape[1]}x{shape[0]} -> "
                f"{frame.shape[1]}x{frame.shape[0]}); reset() for a new stream"
            )
        value = self._buffer(frame)
        np.copyto(value, frame)
        low = self._buffer(frame)
        for index, kept in enumerate(self._kept):  # insert: the smaller stays, the larger moves on
            cv2.min(kept, value, dst=low)
            cv2.max(kept, value, dst=value)
            self._kept[index], low = low, kept
        self._spare.append(low)
        if len(self._kept) < self.count // 2 + 1:
            self._kept.append(value)
        else:
            self._spare.append(value)  # larger than every kept value: never the median
        self.seen += 1
        if self.seen < self.count:
            return None
        middle = self._kept[self.count // 2]
        if self.count % 2:
            median = middle
        else:  # floor((a + b) / 2) without overflow
            below = self._kept[self.count // 2 - 1]
            median = (below >> 1) + (middle >> 1) + (below & middle & 1)
        self._kept, self._spare = [], []
        return median


class MedianSizeMismatch(ValueError):
    """A frame of another size than the background median given for the stream."""

    kind = "frame size differs from the background median"


class MedianMissing(ValueError):
    """A bg mode that needs a background median given neither one nor a warm-up: every frame would be skipped.
    The one check of that rule; callers with other names for the two (the node's parameters) translate it."""

    def __init__(self, bg_mode: str):
        super().__init__(
            f"bg_mode={bg_mode!r} needs a background median: pass median= or median_warmup > 0 (frames of each "
            "stream to build it from)"
        )
        self.bg_mode = bg_mode


def median_problem(median: np.ndarray, bg_mode: str) -> str | None:
    """What is wrong with a background median given for ``bg_mode``, or None when it is usable.

    Usable: HxWx3 RGB uint8 at the frames' resolution (every bg mode; for concat it is resized to
    the model's input as a warm-up median is), or, for concat only, 3x288x512 CHW RGB (uint8, or
    float in [0, 1]).
    """
    median = np.asarray(median)
    if bg_mode == "concat" and median.shape == (3, HEIGHT, WIDTH):
        if median.dtype == np.uint8 or (np.issubdtype(median.dtype, np.floating) and np.isfinite(median).all()):
            return None
        return f"a 3x{HEIGHT}x{WIDTH} median must be uint8 or finite floats, got {median.dtype}"
    if median.ndim != 3 or median.shape[2] != 3 or median.dtype != np.uint8 or median.size == 0:
        forms = "HxWx3 RGB uint8 at frame resolution"
        if bg_mode == "concat":
            forms += f" or 3x{HEIGHT}x{WIDTH} CHW RGB"
        shape = "x".join(str(n) for n in median.shape) or "a scalar"
        return f"a median must be {forms}, got {shape} {median.dtype}"
    return None
