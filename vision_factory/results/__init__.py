"""Result kinds: what a family's pipeline returns, and everything that depends only on that.

A ``Family`` declares its ``result`` (a ``ResultKind`` below) instead of naming a message type; tools ask the kind,
never the family's name. Each kind has one module here (``kind.module()``) that owns, for that kind: its data,
its ROS message encoding and decoding (message types imported inside the functions: no ROS at import), its file
format (the one writer and reader of the JSON/CSV that predict, replay and verify write), comparison with
tolerances, drawing and its metrics entry:
- ``detections``: boxes, scores, classes, optional keypoints (pose) and track IDs (vision_msgs/Detection2DArray);
- ``ball``: a ball track, x, y and visibility per frame (geometry_msgs/PointStamped, TrackNet's CSV);
- ``dense``: a per-pixel float map with its unit, e.g. depth in metres (sensor_msgs/Image 32FC1).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class ResultKind:
    """A family's kind of result: its module under results/, the ROS type of its node's main output, and what the
    kind needs to know about the family's results (keypoints, the COCO iouType they are scored with)."""

    name: str  # the module under results/: detections, ball, dense
    message: str  # the node's main output's ROS type, e.g. vision_msgs/msg/Detection2DArray
    keypoints: bool = False  # detections carry keypoints (pose families)
    iou_type: str | None = None  # COCO iouType its detections are scored with (bbox, keypoints); None: not COCO

    def module(self) -> ModuleType:
        """The kind's module (results/<name>.py), imported on first use."""
        return importlib.import_module(f"{__name__}.{self.name}")


DETECTIONS = ResultKind("detections", "vision_msgs/msg/Detection2DArray", iou_type="bbox")
POSES = ResultKind("detections", "vision_msgs/msg/Detection2DArray", keypoints=True, iou_type="keypoints")
TRACKS = ResultKind("detections", "vision_msgs/msg/Detection2DArray")  # another node's detections, tracked
BALL_TRACK = ResultKind("ball", "geometry_msgs/msg/PointStamped")
DENSE_MAP = ResultKind("dense", "sensor_msgs/msg/Image")
