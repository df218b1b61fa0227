"""A model's interface as the recognition rules read it, and the helpers the rules of every family share.

The rules read a Runner's ``inputs``, ``outputs`` (runtime.runner.TensorInfo) and ``metadata``, which
ONNX Runtime, OpenVINO and TensorRT runners all provide, as does an ONNX file read with the onnx
package (models/model_file.py). Each family's rule lives beside its adapter, in the light module of
facts the two share (``*_interface.py``); models/recognition.py asks them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..runtime.runner import TensorInfo, tensor_text
from .bounds import MAX_BATCH, check_count, check_input_size
from .ultralytics import metadata_literal

Dim = int | str | None  # fixed size, named dynamic size, unknown


class ModelInterface(Protocol):
    """What the rules read: a Runner, or inspect's ModelSummary of an ONNX file."""

    inputs: Sequence[TensorInfo]
    outputs: Sequence[TensorInfo]
    metadata: Mapping[str, str]


@dataclass(frozen=True)
class Interface:
    """A model's interface as the rules read it: tuples, and every dynamic dimension a name or None."""

    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    metadata: dict[str, str]

    @classmethod
    def of(cls, model: ModelInterface) -> Interface:
        def tensor(info: TensorInfo) -> TensorInfo:
            shape = tuple(None if isinstance(dim, int) and dim < 0 else dim for dim in info.shape)  # TensorRT's -1
            return TensorInfo(info.name, shape, info.dtype)

        return cls(tuple(map(tensor, model.inputs)), tuple(map(tensor, model.outputs)), dict(model.metadata))


@dataclass(frozen=True)
class Recognition:
    family: str  # tracknet, inpaintnet, yolo, yolo_pose, fasterrcnn, rtmpose, reid or unknown
    reason: str  # one sentence citing the shapes, names and metadata that decided it
    details: dict[str, object]
    also: tuple[str, ...] = field(default=())  # other families the same interface fits as well


@dataclass(frozen=True)
class Rule:
    """How one family's models are recognised, and what its adapter needs (for errors)."""

    family: str
    needs: str  # what a model of the family looks like, e.g. "a YOLO detector ([1, 3, H, W] in, ...)"
    recognise: Callable[[Interface], Recognition | None]  # None: not this family


def int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def batch_ok(dim: Dim) -> bool:
    return dim == 1 or not isinstance(dim, int)


def count_text(count: int | None, singular: str, plural: str) -> str:
    if count is None:
        return f"an unknown number of {plural}"
    return f"{count} {singular if count == 1 else plural}"


def image_input(model: Interface) -> TensorInfo | None:
    """The single [B, 3, H, W] input (B 1 or dynamic), if that is all the model takes."""
    if len(model.inputs) != 1:
        return None
    shape = model.inputs[0].shape
    return model.inputs[0] if len(shape) == 4 and batch_ok(shape[0]) and shape[1] == 3 else None


def check_image_input(image: TensorInfo) -> None:
    """A BoundError when the fixed batch or height x width of an image input [B, C, H, W] is past the bounds
    (models/bounds.py): the adapters allocate a batch of inputs that size."""
    batch, _, height, width = image.shape
    key = f"input {tensor_text(image)}"
    if isinstance(batch, int):
        check_count(f"{key}: the fixed batch", batch, MAX_BATCH)
    if isinstance(height, int) and isinstance(width, int):
        check_input_size(f"{key}: the fixed size", height, width)


def image_details(image: TensorInfo | None) -> dict[str, object]:
    if image is None:
        return {"input_size": None, "dynamic_input": None}
    check_image_input(image)
    height, width = image.shape[2:]
    return {"input_size": (height, width), "dynamic_input": not (isinstance(height, int) and isinstance(width, int))}


def end2end(metadata: Mapping[str, str]) -> bool:
    """Whether Ultralytics exported the model end-to-end: an NMS-free head (YOLO26, YOLOv10: ``end2end`` True) or
    NMS inside the graph (``nms=True``, recorded in ``args``); its rows are final detections, [1, N, 6 + extra]."""
    if metadata.get("end2end", "").lower() == "true":
        return True
    args = metadata_literal(metadata, "args")
    return isinstance(args, dict) and args.get("nms") is True
