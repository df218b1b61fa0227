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
from typing import Any

import numpy as np

# The fix to give for values a model should not give (NaN or infinite boxes, an infinite depth), said where a node
# or a tool leaves them out
MODEL_FIX = "a damaged model, or an FP16 export that overflows (export in FP32)"


@dataclass(frozen=True)
class ResultKind:
    """A family's kind of result: its module under results/, the ROS type of its node's main output, and what the
    tools need to know of it (data, not a family's name)."""

    name: str  # the module under results/: detections, ball, dense
    message: str  # the node's main output's ROS type, e.g. vision_msgs/msg/Detection2DArray
    what: str  # what verify compares, in words: "boxes", "ball positions"
    file: str  # what replay writes of the answers (the module's write_replayed): "detections.json", "ball.csv"
    keypoints: bool = False  # detections carry keypoints (pose families)
    iou_type: str | None = None  # COCO iouType its detections are scored with (bbox, keypoints); None: not COCO
    metrics: tuple[str, ...] = ()  # what `eval` reports (the module's evaluate); (): eval does not score it
    latched: tuple[tuple[str, str], ...] = ()  # (topic, type): what the node publishes once, e.g. its class map
    # Answers come up to a window after their frame, in a stream that a lost frame affects for a window (TrackNet's
    # ball); else each frame is answered alone.
    streamed: bool = False

    def module(self) -> ModuleType:
        """The kind's module (results/<name>.py), imported on first use."""
        return importlib.import_module(f"{__name__}.{self.name}")


@dataclass
class Item:
    """One answer in a frame as verify compares it, whatever the kind (each kind's ``items``): a detection (box,
    then keypoints x, y) or the ball (x, y; score = visibility)."""

    name: str
    score: float
    points: np.ndarray  # x1, y1, x2, y2 [, kx, ky, ...] or x, y
    point_scores: np.ndarray  # keypoint scores ([] without)
    track: str | None = None  # with tracking on: its track ID (Detection2D.id; "": no confirmed track)
    # An instance mask (models/masks.py's InstanceMask), as the node's ~/masks label image shows it: its own pixels
    # but where an earlier detection's mask lies; None: none.
    mask: Any = None


def tool_module(name: str) -> ModuleType:
    """tools/<name>.py, for a kind's metrics entry: imported by name, so that a generated package, which carries its
    result kind's module but no tools, does not carry them."""
    return importlib.import_module(f"{__name__.rpartition('.')[0]}.tools.{name}")


_DETECTIONS = ("vision_msgs/msg/Detection2DArray", "boxes", "detections.json")
_LABELS = (("labels", "vision_msgs/msg/LabelInfo"),)  # the class map, published once (latched)
_COCO = ("AP", "AP50", "AP75")
DETECTIONS = ResultKind("detections", *_DETECTIONS, iou_type="bbox", metrics=(*_COCO, "AR100"), latched=_LABELS)
POSES = ResultKind(
    "detections",
    _DETECTIONS[0],
    "boxes and keypoints",
    _DETECTIONS[2],
    keypoints=True,
    iou_type="keypoints",
    metrics=(*_COCO, "AR20"),
    latched=_LABELS,
)
TRACKS = ResultKind("detections", *_DETECTIONS, latched=_LABELS)  # another node's detections, tracked
BALL_TRACK = ResultKind(
    "ball", "geometry_msgs/msg/PointStamped", "ball positions", "ball.csv", metrics=("F1",), streamed=True
)
DENSE_MAP = ResultKind(
    "dense",
    "sensor_msgs/msg/Image",
    "per-pixel values",
    "dense.json",
    # aligned: after the scale and shift of least squares, as relative models are scored
    metrics=("AbsRel", "RMSE", "delta1", "aligned_AbsRel", "aligned_RMSE", "aligned_delta1"),
)
