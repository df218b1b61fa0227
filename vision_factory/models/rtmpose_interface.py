"""What an RTMPose-style SimCC model's interface is, shared by the adapter (models/rtmpose.py) and the rule
that recognises it: one image input, two outputs simcc_x [B, K, W x split] and simcc_y [B, K, H x split]."""

from __future__ import annotations

from ..runtime.runner import TensorInfo, shape_text, tensor_text
from .bounds import MAX_KEYPOINTS, check_count
from .interface import Dim, Interface, Recognition, Rule, batch_ok, count_text, image_details, image_input

SIMCC_NAMES = ("simcc_x", "simcc_y")


def _off_double(size: Dim, reference: Dim) -> float | None:
    """How far size / reference is from 2 (RTMPose's SimCC split ratio); None when past 0.5 or not fixed."""
    if not (isinstance(size, int) and isinstance(reference, int) and reference > 0):
        return None
    off = abs(size / reference - 2)
    return off if off <= 0.5 else None


def simcc_order(lengths: tuple[Dim, Dim], size: tuple[Dim, Dim]) -> tuple[int, int]:
    """Which of two unnamed SimCC outputs of these lengths is x and which y, as (x, y) positions, for an input of
    ``size`` (height, width): the order whose lengths have one split ratio (length / input side); ties, and
    unknown lengths or sizes, keep the given order. The adapter and the recognition rule both pair by this."""
    height, width = (side if isinstance(side, int) and side > 0 else None for side in size)
    first, second = (length if isinstance(length, int) and length > 0 else None for length in lengths)

    def mismatch(x: int | None, y: int | None) -> float:
        return 0.0 if None in (x, y, width, height) else abs(x / width - y / height)

    return (1, 0) if mismatch(second, first) < mismatch(first, second) else (0, 1)


def _simcc_pair(image: TensorInfo, outputs: tuple[TensorInfo, ...]) -> tuple[TensorInfo, TensorInfo] | None:
    """The (x, y) outputs [B, K, Wx] and [B, K, Hy], paired as the adapter pairs them, when Wx and Hy are about
    twice the input's W and H."""
    height, width = image.shape[2:]
    if not all(len(tensor.shape) == 3 and batch_ok(tensor.shape[0]) for tensor in outputs):
        return None
    first, second = simcc_order((outputs[0].shape[2], outputs[1].shape[2]), (height, width))
    x, y = outputs[first], outputs[second]
    if not isinstance(x.shape[1], int) or x.shape[1] != y.shape[1]:
        return None
    if _off_double(x.shape[2], width) is None or _off_double(y.shape[2], height) is None:
        return None
    return x, y


def _rtmpose(model: Interface) -> Recognition | None:
    if len(model.outputs) != 2:
        return None
    image = image_input(model)
    named = {tensor.name.lower(): tensor for tensor in model.outputs}
    if all(name in named for name in SIMCC_NAMES):
        x, y = (named[name] for name in SIMCC_NAMES)
        evidence = f"outputs named {x.name} {shape_text(x.shape)} and {y.name} {shape_text(y.shape)}"
    else:
        pair = _simcc_pair(image, model.outputs) if image is not None else None
        if pair is None:
            return None
        x, y = pair
        evidence = (
            f"outputs {x.name} {shape_text(x.shape)} and {y.name} {shape_text(y.shape)} about twice as long as "
            f"input {image.name} {shape_text(image.shape)} is wide and high"
        )
    keypoints = x.shape[1] if len(x.shape) == 3 and isinstance(x.shape[1], int) else None
    if keypoints is not None:
        check_count(f"the keypoints of output {tensor_text(x)}", keypoints, MAX_KEYPOINTS)
    reason = f"{evidence}: an RTMPose-style SimCC pose model with {count_text(keypoints, 'keypoint', 'keypoints')}"
    details = {
        "keypoints": keypoints,
        "input_size": image_details(image)["input_size"],
        "simcc_x": x.name,
        "simcc_y": y.name,
    }
    return Recognition("rtmpose", reason, details)


RTMPOSE = Rule(
    "rtmpose",
    "an RTMPose SimCC model ([1, 3, H, W] in, simcc_x [1, K, 2W] and simcc_y [1, K, 2H] out)",
    _rtmpose,
)
