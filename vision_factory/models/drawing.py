"""Detections drawn on a frame: for annotated images (predict --save) and debug topics."""

from __future__ import annotations

import colorsys
from collections.abc import Sequence

import cv2
import numpy as np

from .detections import COCO_SKELETON, Detection

BOX_COLOUR = (0, 200, 255)  # BGR
LIMB_COLOUR = (255, 160, 0)
KEYPOINT_COLOUR = (0, 0, 255)


def track_colour(track_id: int) -> tuple[float, float, float]:
    """The colour of a track, RGB in 0..1: a stable function of its ID (hues a golden-ratio step apart), the same
    in the debug image and the track markers."""
    return colorsys.hsv_to_rgb((track_id * 0.6180339887498949) % 1.0, 0.85, 1.0)


def draw_detections(
    image_bgr: np.ndarray,
    detections: Sequence[Detection],
    skeleton: Sequence[tuple[int, int]] = COCO_SKELETON,
    keypoint_threshold: float = 0.5,
    track_ids: Sequence[int | None] | None = None,
) -> np.ndarray:
    """Boxes with class and score, limbs and keypoints above ``keypoint_threshold``; draws in place. With
    ``track_ids`` (one per detection, None: no track) a tracked box is drawn in its track's colour, labelled
    with its ID ("#7 person 0.91")."""
    for index, detection in enumerate(detections):
        x1, y1, x2, y2 = (int(round(v)) for v in detection.xyxy)
        track = None if track_ids is None else track_ids[index]
        colour = BOX_COLOUR if track is None else tuple(int(255 * c) for c in reversed(track_colour(track)))
        cv2.rectangle(image_bgr, (x1, y1), (x2, y2), colour, 2)
        label = f"{detection.class_name} {detection.score:.2f}"
        if track is not None:
            label = f"#{track} {label}"
        cv2.putText(image_bgr, label, (x1, max(12, y1 - 4)), cv2.FONT_HERSHEY_SIMPLEX, 0.5, colour)
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
