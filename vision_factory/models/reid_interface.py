"""What a re-identification embedding model's interface is, shared by the adapter (models/reid.py) and the rule
that recognises it: one image input [B, 3, H, W] (person or object crops) and one output [B, D], one feature per
crop, D between EMBEDDING_DIMS. B may be fixed (OSNet exports often fix 16) or dynamic; the output's B is the
input's. Ultralytics exports (a ``task`` in the metadata: a classifier [1, 1000] looks the same) are not claimed.
"""

from __future__ import annotations

from ..runtime.runner import TensorInfo, shape_text
from .interface import Interface, Recognition, Rule, check_image_input

EMBEDDING_DIMS = (32, 4096)  # DeepSORT's 128, OSNet's 512, MobileNetV2's 1280, ResNet-50's 2048 all lie within
NEEDS = "a re-identification embedding model ([B, 3, H, W] crops in, one [B, D] feature per crop out)"


def embedding_dim(output: TensorInfo) -> int | None:
    """D of an output [B, D] whose D is fixed and within EMBEDDING_DIMS; None otherwise."""
    if len(output.shape) != 2:
        return None
    dim = output.shape[1]
    return dim if isinstance(dim, int) and EMBEDDING_DIMS[0] <= dim <= EMBEDDING_DIMS[1] else None


def _reid(model: Interface) -> Recognition | None:
    if len(model.inputs) != 1 or len(model.outputs) != 1 or "task" in model.metadata:
        return None
    image, output = model.inputs[0], model.outputs[0]
    if len(image.shape) != 4 or image.shape[1] != 3:
        return None
    dim = embedding_dim(output)
    batch = image.shape[0] if isinstance(image.shape[0], int) else None
    if dim is None or (batch is not None and isinstance(output.shape[0], int) and output.shape[0] != batch):
        return None
    check_image_input(image)
    height, width = image.shape[2:]
    reason = (
        f"image input {image.name} {shape_text(image.shape)} and one output {output.name} {shape_text(output.shape)}: "
        f"a re-identification embedding model, one {dim}-d feature per crop"
        + (f" (fixed batch {batch})" if batch is not None else "")
    )
    details = {"embedding_dim": dim, "input_size": (height, width), "batch": batch}
    return Recognition("reid", reason, details)


REID = Rule("reid", NEEDS, _reid)
