"""Instance masks of YOLO segmentation models (YOLOv8/11-seg, YOLO26-seg), decoded as Ultralytics does at the source
frame's size (its ``process_mask_native``, 8.4): each detection's mask logits are its coefficients times the
prototypes ([M, H/4, W/4]); the prototypes are upsampled by f (1, 2 or 4: the smallest factor that puts the input's
letterbox padding on whole pixels), the padding is cut off there (``scale_masks``: the letterboxed content, rounded
as the letterbox rounds it) and the rest resized to the frame, both bilinearly (half-pixel centres, edges clamped:
PyTorch's ``interpolate(bilinear, align_corners=False)``), cropped to the detection's box (pixel columns
x1 <= c < x2, rows y1 <= r < y2) and thresholded at 0 (sigmoid 0.5).

Both resizes are linear along each axis, so each is one small matrix per axis from the prototype cells under a
box to the box's pixels. Memory and time stay bounded by the boxes: only the prototype cells under each box are
multiplied out and only its pixels interpolated and kept (``InstanceMask``), never a frame-sized array per
detection.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..results.masks import InstanceMask, box_span


def _taps(count: int, pixels: np.ndarray, source: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bilinear taps for output ``pixels`` (indices) of ``count`` resized from ``source`` pixels (half-pixel centres,
    the source coordinate clamped at 0, the upper tap at the last pixel): lower tap, upper tap, upper weight."""
    position = (np.asarray(pixels, np.float64) + 0.5) * (source / count) - 0.5
    position = np.maximum(position, 0.0)
    lower = np.minimum(np.floor(position).astype(np.int64), source - 1)
    upper = np.minimum(lower + 1, source - 1)
    return lower, upper, position - lower


@dataclass(frozen=True)
class Resampling:
    """How prototypes of (rows, columns) become a frame of (height, width) as ``process_mask_native`` makes it:
    upsampled by ``factor``, the letterboxed content [top:bottom, left:right] of the upsampled prototypes resized to
    the frame."""

    factor: int
    top: int
    bottom: int
    left: int
    right: int
    rows: int
    columns: int

    def axis(self, count: int, vertical: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ``count`` output pixels along one axis from the prototype cells along it: each pixel a weighted sum
        of ``span`` consecutive cells from its first one: the [pixels, span] weights, and each pixel's first and
        last cell (both ascending)."""
        start, end, cells = (self.top, self.bottom, self.rows) if vertical else (self.left, self.right, self.columns)
        lower, upper, weight = _taps(count, np.arange(count), end - start)  # in the cropped, upsampled prototypes
        samples = np.stack([lower, upper]) + start  # [2, pixels] of the upsampled prototypes
        low, high, inner = _taps(cells * self.factor, samples, cells)  # each from the prototype cells (f = 1: itself)
        high = np.where(inner > 0, high, low)  # an upper cell of weight 0 is not read (f = 1: never)
        first = low.min(axis=0)
        span = int((high.max(axis=0) - first).max()) + 1  # cells a pixel reads: 2 (f = 1), at most 3
        weights = np.zeros((count, span), np.float64)
        pixels = np.arange(count)
        for tap, outer in ((0, 1 - weight), (1, weight)):
            weights[pixels, low[tap] - first] += outer * (1 - inner[tap])  # one entry per pixel and call: no repeats
            weights[pixels, high[tap] - first] += outer * inner[tap]
        return weights.astype(np.float32), first, high.max(axis=0)


def resampling(prototype_shape: tuple[int, int], frame_shape: tuple[int, int]) -> Resampling:
    """The resampling of prototypes of ``prototype_shape`` (rows, columns; the input is 4 times their size) to a
    frame of ``frame_shape`` (height, width), as Ultralytics 8.4's ``process_mask_native`` and ``scale_masks``
    compute it (Python's round, as theirs)."""
    rows, columns = prototype_shape
    height, width = frame_shape
    gain = min(4 * rows / height, 4 * columns / width)
    pad = (4 * rows - max(round(height * gain), 1)) | (4 * columns - max(round(width * gain), 1))
    factor = 4 // math.gcd(4, pad | pad // 2)
    up_rows, up_columns = rows * factor, columns * factor
    if (up_rows, up_columns) == (height, width):
        return Resampling(factor, 0, height, 0, width, rows, columns)
    gain = min(up_rows / height, up_columns / width)
    content_h, content_w = max(round(height * gain), 1), max(round(width * gain), 1)
    top, left = round((up_rows - content_h) / 2 - 0.1), round((up_columns - content_w) / 2 - 0.1)
    return Resampling(factor, top, top + content_h, left, left + content_w, rows, columns)


@functools.lru_cache(maxsize=8)  # a stream's frames keep their size: computed once
def _axes(prototype_shape: tuple[int, int], frame_shape: tuple[int, int]):
    """The vertical and the horizontal ``Resampling.axis`` of prototypes of ``prototype_shape`` to a frame of
    ``frame_shape``, read-only."""
    how = resampling(prototype_shape, frame_shape)
    axes = how.axis(frame_shape[0], vertical=True), how.axis(frame_shape[1], vertical=False)
    for array in (array for axis in axes for array in axis):
        array.flags.writeable = False
    return axes


def instance_masks(
    prototypes: np.ndarray, coefficients: np.ndarray, boxes: np.ndarray, frame_shape: tuple[int, int]
) -> list[InstanceMask | None]:
    """Masks of detections with ``coefficients`` [n, C] and frame-pixel xyxy ``boxes`` [n, 4], from the model's
    ``prototypes`` [C, h, w], on a frame of ``frame_shape`` (height, width); None for a detection whose mask logits
    under its box are not all finite (a damaged model's: no mask is known, where an empty one would be a claim)."""
    height, width = frame_shape
    prototypes = np.asarray(prototypes, np.float32)
    (down_all, top_cell, bottom_cell), (across_all, left_cell, right_cell) = _axes(
        prototypes.shape[1:], (int(height), int(width))
    )
    masks = []
    for coefficient, (x1, y1, x2, y2) in zip(np.asarray(coefficients, np.float32), np.asarray(boxes, np.float64)):
        first_x, last_x = box_span(x1, x2, width)
        first_y, last_y = box_span(y1, y2, height)
        if last_x == first_x or last_y == first_y:
            masks.append(_empty((x1, y1, x2, y2), frame_shape))
            continue
        # Only the prototype cells under the box: their logits, then down and across to the box's pixels.
        row0, row1 = top_cell[first_y], bottom_cell[last_y - 1] + 1
        col0, col1 = left_cell[first_x], right_cell[last_x - 1] + 1
        cells = prototypes[:, row0:row1, col0:col1]
        logits = np.tensordot(coefficient, cells, axes=(0, 0))  # [cell rows, cell columns]
        if not np.isfinite(logits).all():
            masks.append(None)
            continue
        # Gathered taps, not matrix products: threaded BLAS on these small products stalls on a busy machine.
        rows = resample_axis(logits, down_all[first_y:last_y], top_cell[first_y:last_y] - row0, axis=0)
        region = resample_axis(rows, across_all[first_x:last_x], left_cell[first_x:last_x] - col0, axis=1)
        masks.append(InstanceMask(first_x, first_y, region > 0, width, height))
    return masks


def resample_axis(values: np.ndarray, weights: np.ndarray, first: np.ndarray, axis: int) -> np.ndarray:
    """``values`` [rows, columns] resampled along ``axis``: output row (axis 0) or column (axis 1) p is the sum over
    k of weights[p, k] x the row or column first[p] + k (one past the last has weight 0: clamped)."""
    last = values.shape[axis] - 1
    along = (-1, 1) if axis == 0 else (1, -1)  # the weights broadcast along the other axis
    out = np.take(values, first, axis=axis)
    out *= weights[:, 0].reshape(along)
    for k in range(1, weights.shape[1]):
        tap = np.take(values, np.minimum(first + k, last), axis=axis)
        tap *= weights[:, k].reshape(along)
        out += tap
    return out


def _empty(box: Sequence[float], frame_shape: tuple[int, int]) -> InstanceMask:
    height, width = frame_shape
    first_x, last_x = box_span(box[0], box[2], width)
    first_y, last_y = box_span(box[1], box[3], height)
    return InstanceMask(first_x, first_y, np.zeros((last_y - first_y, last_x - first_x), bool), width, height)
