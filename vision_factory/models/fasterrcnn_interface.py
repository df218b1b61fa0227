"""What a detector with post-processing inside looks like (separate boxes, scores and labels outputs), shared by
the adapter (models/fasterrcnn.py) and the rule that recognises it: the output names of each role."""

from __future__ import annotations

from ..runtime.runner import TensorInfo, shape_text
from .interface import Interface, Recognition, Rule

# Output names (compared lower-case) of each role, as the common exporters write them.
DETECTION_ROLES = {
    "boxes": {"boxes", "location", "bbox", "bboxes", "detection_boxes"},
    "scores": {"scores", "score", "confidence", "detection_scores"},
    "labels": {"labels", "category", "classes", "class_ids", "detection_classes"},
}
COUNT_NAMES = {"num_detections", "number of detections", "count", "detection_count"}


def _fasterrcnn(model: Interface) -> Recognition | None:
    if len(model.outputs) != 3:
        return None
    found: dict[str, TensorInfo] = {}
    for tensor in model.outputs:
        role = next((role for role, names in DETECTION_ROLES.items() if tensor.name.lower() in names), None)
        if role is None or role in found:
            return None
        found[role] = tensor
    boxes, scores, labels = found["boxes"], found["scores"], found["labels"]
    if not boxes.shape or boxes.shape[-1] != 4:
        return None
    reason = (
        f"outputs {boxes.name} {shape_text(boxes.shape)}, {scores.name} {shape_text(scores.shape)} and "
        f"{labels.name} {shape_text(labels.shape)} are boxes (last dimension 4), scores and labels: a detector "
        "with post-processing inside, like torchvision's Faster R-CNN"
    )
    return Recognition("fasterrcnn", reason, {role: tensor.name for role, tensor in found.items()})


FASTERRCNN = Rule(
    "fasterrcnn",
    "a detector with post-processing inside (boxes [N, 4], scores [N] and labels [N] out)",
    _fasterrcnn,
)
