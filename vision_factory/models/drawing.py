"""Detections drawn on a frame: for annotated images (predict --save) and debug topics."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from .detections import COCO_SKELETON, Detection

BOX_COLOUR = (0, 200, 255)  # BGR
LIMB_COLOUR = (255, 160, 0)
KEYPOINT_COLOUR = (0, 0, 255)


def draw_detections(
    image_bgr: np.ndarray,
    detections: Sequence[Detection],
    skeleton: Sequence[tuple[int, int]] = COCO_SKELETON,
    keypoint_threshold: float = 0.5,
) -> np.ndarray:
    """Boxes with class and score, limbs and keypoints above ``keypoint_threshold``; draws in place."""
    for detection in detections:
        x1, y1, x2, y2 = (int(round(v)) for v in detection.xyxy)
        cv2.rectangle(image_bgr, (x1, y1), (x2, y2), BOX_COLOUR, 2)
        label = f"{detection.class_name} {detection.score:.2f}"
        cv2.putText(image_bgr, label, (x1, max(12, y1 - 4)), cv2.FONT_HERSHEY_SIMPLEX, 0.5, BOX_COLOUR)
        points = [] if detection.keypoints is None else detection.keypoints
        visible = [score > keypoint_threshold for _, _, score in points]
        for a, b in skeleton:
            if a < len(points) and b < len(points) and visible[a] and visible[b]:
                start, end = (int(points[a][0]), int(points[a][1])), (int(points[b][0]), int(points[b][1]))
                cv2.line(image_bgr, start, end, LIMB_COLOUR, 2)
        for (x, y, _), shown in zip(points, visible):
            if shown:
                cv2.circle(image_bgr, (int(x), int(y)), 3, KEYPOINT_COLOUR, -1)
    return image_bgr
