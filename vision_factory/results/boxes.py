"""Boxes: their IoU, class-aware NMS and their drawing colours (a box's, a track's, a class's)."""

from __future__ import annotations

import colorsys

import cv2
import numpy as np


def box_iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of one xyxy box with each of ``boxes``."""
    top_left = np.maximum(box[:2], boxes[:, :2])
    bottom_right = np.minimum(box[2:], boxes[:, 2:])
    intersection = np.prod((bottom_right - top_left).clip(0), axis=1)
    areas = np.prod(boxes[:, 2:] - boxes[:, :2], axis=1)
    return intersection / (np.prod(box[2:] - box[:2]) + areas - intersection + 1e-9)


def nms(
    boxes: np.ndarray, scores: np.ndarray, class_ids: np.ndarray, iou_threshold: float, limit: int | None = None
) -> np.ndarray:
    """Indices kept by class-aware greedy NMS, highest score first (ties: lower index first), at most ``limit``.

    The greedy loop runs in OpenCV (``cv2.dnn.NMSBoxes``, "suppress when IoU > threshold"), given
    each box's rank as its score so that its order is exactly ours. Greedy picks never depend on
    lower-scored boxes, so the first ``limit`` picks come from a prefix of the score order: it
    starts at 4 x ``limit`` and is doubled until it yields ``limit`` picks or holds every box,
    which keeps thousands of candidates cheap.
    """
    if not len(boxes):
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(-scores, kind="stable")
    limit = len(order) if limit is None else limit
    # Boxes of different classes never overlap once each class is moved to its own region.
    offset = 2 * (float(np.abs(boxes).max()) + 1)
    shifted = boxes[order].astype(np.float64) + (class_ids[order].astype(np.float64) * offset)[:, None]
    xywh = np.concatenate([shifted[:, :2], shifted[:, 2:] - shifted[:, :2]], axis=1)
    ranks = np.arange(len(order), 0, -1, dtype=np.float32)  # all > 0, distinct, descending
    prefix = max(4 * limit, 1)  # usually enough at once: NMS keeps about a third of a dense detector's boxes
    while True:
        kept = np.asarray(cv2.dnn.NMSBoxes(xywh[:prefix], ranks[:prefix], 0.0, iou_threshold), np.int64)
        if len(kept) >= limit or prefix >= len(order):
            return order[kept.reshape(-1)[:limit]]
        prefix *= 2


BOX_COLOUR = (0, 200, 255)  # BGR


def track_colour(track_id: int) -> tuple[float, float, float]:
    """The colour of a track, RGB in 0..1: a stable function of its ID (hues a golden-ratio step apart), the same
    in the debug image and the track markers."""
    return colorsys.hsv_to_rgb((track_id * 0.6180339887498949) % 1.0, 0.85, 1.0)


def class_colour(class_id: int) -> tuple[int, int, int]:
    """A class's mask colour (BGR), from the same golden-ratio hues as the tracks'."""
    return tuple(int(255 * c) for c in reversed(track_colour(class_id + 1)))
