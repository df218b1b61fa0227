"""Instance masks of YOLO segmentation models (YOLOv8/11-seg), decoded as Ultralytics does at the source frame's
size (its ``process_mask_native``): each detection's mask logits are its 32 coefficients times the prototypes
([32, H/4, W/4]); the prototypes' letterbox padding is cut off (int-truncated, as ``scale_masks`` does), the rest
resized bilinearly (half-pixel centres, edges clamped: PyTorch's ``interpolate(bilinear, align_corners=False)``)
to the frame, cropped to the detection's box (pixel columns x1 <= c < x2, rows y1 <= r < y2) and thresholded at
0 (sigmoid 0.5).

Memory and time stay bounded by the boxes: only the prototype cells under each box are multiplied out and only its
pixels interpolated and kept (``InstanceMask``), never a frame-sized array per detection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class InstanceMask:
    """One detection's mask at the source frame's size, stored as its box's pixels: ``bits`` [h, w] bool covers
    rows top..top+h and columns left..left+w of a frame of ``height`` x ``width``; every pixel outside is False."""

    left: int
    top: int
    bits: np.ndarray  # [h, w] bool
    width: int  # of the frame
    height: int

    @property
    def area(self) -> int:
        return int(np.count_nonzero(self.bits))

    def full(self) -> np.ndarray:
        """The mask as a frame-sized [height, width] bool array."""
        frame = np.zeros((self.height, self.width), bool)
        self.paint(frame, True)
        return frame

    def paint(self, image: np.ndarray, value) -> None:
        """Sets ``image``'s pixels under the mask (image: [height, width, ...]) to ``value``."""
        h, w = self.bits.shape
        image[self.top : self.top + h, self.left : self.left + w][self.bits] = value


def _weights(count: int, first: int, last: int, source: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bilinear taps for output pixels first..last-1 of ``count`` resized from ``source`` pixels (half-pixel centres,
    the source coordinate clamped at 0, the upper tap at the last pixel): lower tap, upper tap, upper weight."""
    position = (np.arange(first, last, dtype=np.float64) + 0.5) * (source / count) - 0.5
    position = np.maximum(position, 0.0)
    lower = np.minimum(np.floor(position).astype(np.int64), source - 1)
    upper = np.minimum(lower + 1, source - 1)
    return lower, upper, (position - lower).astype(np.float32)


def box_span(low: float, high: float, size: int) -> tuple[int, int]:
    """The pixel indices p with low <= p < high, within 0..size."""
    first = min(max(math.ceil(low), 0), size)
    return first, min(max(math.ceil(high), first), size)


def prototype_window(prototype_shape: tuple[int, int], frame_shape: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of the prototypes that cover the frame, the letterbox padding cut off as
    Ultralytics' ``scale_masks`` cuts it (gain and padding from the prototype and frame sizes, int-truncated)."""
    proto_h, proto_w = prototype_shape
    height, width = frame_shape
    gain = min(proto_h / height, proto_w / width)
    pad_w, pad_h = (proto_w - width * gain) / 2, (proto_h - height * gain) / 2
    return int(pad_h), int(proto_h - pad_h), int(pad_w), int(proto_w - pad_w)


def instance_masks(
    prototypes: np.ndarray, coefficients: np.ndarray, boxes: np.ndarray, frame_shape: tuple[int, int]
) -> list[InstanceMask]:
    """Masks of detections with ``coefficients`` [n, C] and frame-pixel xyxy ``boxes`` [n, 4], from the model's
    ``prototypes`` [C, h, w], on a frame of ``frame_shape`` (height, width)."""
    height, width = frame_shape
    top, bottom, left, right = prototype_window(prototypes.shape[1:], frame_shape)
    window = np.ascontiguousarray(prototypes[:, top:bottom, left:right], dtype=np.float32)
    rows, columns = window.shape[1:]
    if rows < 1 or columns < 1:
        return [_empty(box, frame_shape) for box in boxes]
    masks = []
    for coefficient, (x1, y1, x2, y2) in zip(np.asarray(coefficients, np.float32), np.asarray(boxes, np.float64)):
        first_x, last_x = box_span(x1, x2, width)
        first_y, last_y = box_span(y1, y2, height)
        if last_x == first_x or last_y == first_y:
            masks.append(_empty((x1, y1, x2, y2), frame_shape))
            continue
        top_tap, bottom_tap, down = _weights(height, first_y, last_y, rows)
        left_tap, right_tap, across = _weights(width, first_x, last_x, columns)
        # Only the prototype cells under the box: its logits, then the two taps down and the two across.
        row0, row1 = int(top_tap[0]), int(bottom_tap[-1]) + 1
        col0, col1 = int(left_tap[0]), int(right_tap[-1]) + 1
        cells = window[:, row0:row1, col0:col1]
        logits = np.tensordot(coefficient, cells, axes=(0, 0))  # [cell rows, cell columns]
        down = down[:, None]
        vertical = logits[top_tap - row0] * (1 - down) + logits[bottom_tap - row0] * down
        region = vertical[:, left_tap - col0] * (1 - across) + vertical[:, right_tap - col0] * across
        masks.append(InstanceMask(first_x, first_y, region > 0, width, height))
    return masks


def _empty(box: Sequence[float], frame_shape: tuple[int, int]) -> InstanceMask:
    height, width = frame_shape
    first_x, last_x = box_span(box[0], box[2], width)
    first_y, last_y = box_span(box[1], box[3], height)
    return InstanceMask(first_x, first_y, np.zeros((last_y - first_y, last_x - first_x), bool), width, height)


def mask_iou(a: InstanceMask, b: InstanceMask) -> float:
    """The IoU of two masks of one frame (1.0 when both are empty)."""
    left, top = min(a.left, b.left), min(a.top, b.top)
    right = max(a.left + a.bits.shape[1], b.left + b.bits.shape[1])
    bottom = max(a.top + a.bits.shape[0], b.top + b.bits.shape[0])
    canvas = np.zeros((2, bottom - top, right - left), bool)
    for layer, mask in zip(canvas, (a, b)):
        h, w = mask.bits.shape
        layer[mask.top - top : mask.top - top + h, mask.left - left : mask.left - left + w] = mask.bits
    union = np.count_nonzero(canvas[0] | canvas[1])
    return float(np.count_nonzero(canvas[0] & canvas[1]) / union) if union else 1.0


def labelled(labels: np.ndarray, label: int, box: Sequence[float]) -> InstanceMask:
    """Where ``labels`` (a label image) is ``label`` within ``box`` (xyxy frame pixels), as an InstanceMask."""
    height, width = labels.shape
    first_x, last_x = box_span(box[0], box[2], width)
    first_y, last_y = box_span(box[1], box[3], height)
    return InstanceMask(first_x, first_y, labels[first_y:last_y, first_x:last_x] == label, width, height)


def label_image(masks: Sequence[InstanceMask | None], shape: tuple[int, int], dtype=np.uint16) -> np.ndarray:
    """The instance label image of ``shape`` (height, width): 0 background, k where the k-th mask (1-based) is; where
    masks overlap the earlier one (the higher score) wins."""
    labels = np.zeros(shape, dtype)
    for index in range(len(masks) - 1, -1, -1):  # the earliest painted last
        mask = masks[index]
        if mask is not None:
            mask.paint(labels, index + 1)
    return labels
