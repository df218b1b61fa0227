"""What every detector produces, whatever its model family: detections with optional keypoints,
class-aware NMS, and the COCO person keypoints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import cv2
import numpy as np

# COCO's 17 person keypoints, in the order every COCO-trained pose model outputs them.
COCO_KEYPOINTS = (
    "nose",
    "left_eye",
    "right_eye",
    "left_ear",
    "right_ear",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
    "left_hip",
    "right_hip",
    "left_knee",
    "right_knee",
    "left_ankle",
    "right_ankle",
)
# Limbs as pairs of keypoint indices (COCO's skeleton, 0-based).
COCO_SKELETON = (
    (15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6), (5, 7),
    (6, 8), (7, 9), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6),
)  # fmt: skip


def keypoint_names(count: int) -> list[str]:
    """COCO's names for 17 keypoints, kp_0, kp_1, ... for any other count."""
    return list(COCO_KEYPOINTS) if count == len(COCO_KEYPOINTS) else [f"kp_{i}" for i in range(count)]


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


@dataclass
class Detection:
    xyxy: tuple[float, float, float, float]  # frame pixels
    score: float
    class_id: int
    class_name: str
    keypoints: Sequence[Sequence[float]] | None = None  # (x, y, confidence) per keypoint; may be a [K, 3] array

    def as_dict(self) -> dict:
        record = {"xyxy": list(self.xyxy), "score": self.score, "class_id": self.class_id}
        record["class_name"] = self.class_name
        if self.keypoints is not None:
            record["keypoints"] = np.asarray(self.keypoints, dtype=np.float64).tolist()
        return record


def frame_record(image: str, frame: int, width: int, height: int, detections: Sequence[Detection]) -> dict:
    """One frame's detections as the tools write them (``predict --format json``: one record per line;
    ``replay``'s detections.json: a list of them): the image (a file, or PATH:FRAME of a video or a bag), the
    frame's index in its video or bag (0 for an image file), its size, and each detection's ``as_dict``."""
    return {
        "image": image,
        "frame": int(frame),
        "width": int(width),
        "height": int(height),
        "detections": [detection.as_dict() for detection in detections],
    }


class Detector(Protocol):
    """A model family's adapter: BGR frame in, detections in frame pixels out."""

    names: list[str]  # class names by class id
    keypoint_names: list[str]  # [] for plain detectors

    def detect(self, image_bgr: np.ndarray) -> list[Detection]: ...
