"""Keypoints: the COCO person keypoints and skeleton, keypoint names for other counts, and their drawing colours."""

from __future__ import annotations

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


LIMB_COLOUR = (255, 160, 0)


KEYPOINT_COLOUR = (0, 0, 255)
