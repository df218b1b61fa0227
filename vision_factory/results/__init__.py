"""Results: what a family's pipeline returns for each frame (frame.py's FrameResult), its typed parts (boxes.py,
keypoints.py, masks.py, ball.py, dense.py, text.py, classes.py: each a ``Part``, part.py) and everything that
depends only on them: their file records, their ROS messages (message types imported inside the functions: no ROS
at import), their comparison with tolerances, their drawing and their metrics (coco.py; ball.py's and dense.py's
own). The bottom of the core: it imports nothing of models/, families/, ros/ or tools/.

A ``Family`` declares its ``result`` (a ``ResultKind`` below): the parts its pipeline produces and its node's main
message; tools ask the kind, never the family's name.
"""

from __future__ import annotations

from dataclasses import dataclass

# The fix to give for values a model should not give (NaN or infinite boxes, an infinite depth), said where a node
# or a tool leaves them out
MODEL_FIX = "a damaged model, or an FP16 export that overflows (export in FP32)"


@dataclass(frozen=True)
class ResultKind:
    """A family's kind of result: the parts of its FrameResults (the first is the one whose message the node
    publishes, e.g. boxes: a Detection2DArray), the ROS type of its node's main output, and what the tools need to
    know of it (data, not a family's name)."""

    name: str  # detections, ball, dense: which of tools/evaluation.py's scores it
    parts: tuple[str, ...]  # its FrameResults' parts (FrameResult fields), the main one first
    message: str  # the node's main output's ROS type, e.g. vision_msgs/msg/Detection2DArray
    what: str  # what verify compares, in words: "boxes", "ball positions"
    file: str  # what replay writes of the answers (results/frame.py's write_results): "detections.json", "ball.csv"
    iou_type: str | None = None  # COCO iouType its detections are scored with (bbox, keypoints); None: not COCO
    metrics: tuple[str, ...] = ()  # what `eval` reports; (): eval does not score it
    latched: tuple[tuple[str, str], ...] = ()  # (topic, type): what the node publishes once, e.g. its class map
    # Answers come up to a window after their frame, in a stream that a lost frame affects for a window (TrackNet's
    # ball); else each frame is answered alone.
    streamed: bool = False

    @property
    def keypoints(self) -> bool:
        """Whether its detections carry keypoints (pose families)."""
        return "keypoints" in self.parts


_DETECTIONS = ("vision_msgs/msg/Detection2DArray", "boxes", "detections.json")
_LABELS = (("labels", "vision_msgs/msg/LabelInfo"),)  # the class map, published once (latched)
_COCO = ("AP", "AP50", "AP75")
# masks: a segmentation model's instance masks
DETECTIONS = ResultKind(
    "detections", ("boxes", "masks"), *_DETECTIONS, iou_type="bbox", metrics=(*_COCO, "AR100"), latched=_LABELS
)
POSES = ResultKind(
    "detections",
    ("boxes", "keypoints", "masks"),
    _DETECTIONS[0],
    "boxes and keypoints",
    _DETECTIONS[2],
    iou_type="keypoints",
    metrics=(*_COCO, "AR20"),
    latched=_LABELS,
)
TRACKS = ResultKind("detections", ("boxes",), *_DETECTIONS, latched=_LABELS)  # another node's detections, tracked
BALL_TRACK = ResultKind(
    "ball", ("ball",), "geometry_msgs/msg/PointStamped", "ball positions", "ball.csv", metrics=("F1",), streamed=True
)
DENSE_MAP = ResultKind(
    "dense",
    ("dense",),
    "sensor_msgs/msg/Image",
    "per-pixel values",
    "dense.json",
    # aligned: after the scale and shift of least squares, as relative models are scored
    metrics=("AbsRel", "RMSE", "delta1", "aligned_AbsRel", "aligned_RMSE", "aligned_delta1"),
)
# an image classifier's best classes (results/classes.py): a vision_msgs/Classification per frame, the class map latched
CLASSIFICATION = ResultKind(
    "classification",
    ("classes",),
    "vision_msgs/msg/Classification",
    "classes and scores",
    "classes.json",
    latched=_LABELS,
)
