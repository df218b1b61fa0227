"""Which model family a model belongs to, from its interface alone: the one set of rules.

``vision-factory inspect`` prints what these rules find in an ONNX file, and every node checks
its models with them at start-up, on whatever backend loaded them: the rules read a Runner's
``inputs``, ``outputs`` (runtime.runner.TensorInfo) and ``metadata``, which ONNX Runtime,
OpenVINO and TensorRT runners all provide, as does an ONNX file read with the onnx package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..runtime.runner import Runner, TensorInfo, shape_text, tensor_text
from ..text import untrusted
from .fasterrcnn import DETECTION_ROLES
from .tracknet_stream import BG_MODES, FEATURE_CHANNELS, HEIGHT, WIDTH
from .yolo import class_names, metadata_literal

Dim = int | str | None  # fixed size, named dynamic size, unknown

# What each family's adapter takes, for errors that say what a node needs.
NEEDS = {
    "tracknet": f"a TrackNet model ([1, C, {HEIGHT}, {WIDTH}] in, [1, L, {HEIGHT}, {WIDTH}] out)",
    "inpaintnet": "an InpaintNet model (coords [1, L, 2] and mask [1, L, 1] in, [1, L, 2] out)",
    "yolo": "a YOLO detector ([1, 3, H, W] in, [1, 4 + classes, N] out)",
    "yolo_pose": "a YOLO pose model ([1, 3, H, W] in, [1, 4 + classes + keypoints x 3, N] out, e.g. [1, 56, 8400])",
    "fasterrcnn": "a detector with post-processing inside (boxes [N, 4], scores [N] and labels [N] out)",
    "rtmpose": "an RTMPose SimCC model ([1, 3, H, W] in, simcc_x [1, K, 2W] and simcc_y [1, K, 2H] out)",
}
FAMILIES = tuple(NEEDS)


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
    family: str  # tracknet, inpaintnet, yolo, yolo_pose, fasterrcnn, rtmpose or unknown
    reason: str  # one sentence citing the shapes, names and metadata that decided it
    details: dict[str, object]
    also: tuple[str, ...] = field(default=())  # other families the same interface fits as well


def recognise(model: ModelInterface) -> Recognition:
    """The model family ``model`` belongs to; the first rule that matches wins."""
    interface = Interface.of(model)
    for rule in (_tracknet, _inpaintnet, _yolo_pose, _yolo, _fasterrcnn, _rtmpose):
        recognition = rule(interface)
        if recognition is not None:
            return recognition
    return _unknown(interface)


class WrongFamily(ValueError):
    """A model that looks like another family than the one it is given for."""


def fits(recognition: Recognition, family: str) -> bool:
    """Whether a model recognised so can be used as ``family``."""
    return family == recognition.family or family in recognition.also


def needs(family: str) -> str:
    """What a ``family`` model looks like, for errors."""
    if family not in NEEDS:
        raise ValueError(f"unknown model family '{family}': choose one of {', '.join(FAMILIES)}")
    return NEEDS[family]


def mismatch(recognition: Recognition, family: str, outputs: Sequence[TensorInfo], source: str, user: str) -> str:
    """Why a model recognised so is not a ``family`` model: what it looks like, its outputs, and what ``user`` needs.

    ``source`` names the model (e.g. "model_path x.onnx"), ``user`` what takes it (e.g. "tracknet_node").
    """
    seen = untrusted(", ".join(map(tensor_text, outputs)) or "none")
    found = recognition.family
    article = "an" if found in ("inpaintnet", "rtmpose", "unknown") else "a"  # as they are said
    return (
        f"{source} looks like {article} {found} model (output{'s' if len(outputs) != 1 else ''} {seen}); "
        f"{user} needs {needs(family)}. What decided it: {untrusted(recognition.reason, 400)}"
    )


def load_checked(load_runner: Callable[[str], Runner], path: str, family: str, parameter: str, user: str) -> Runner:
    """``load_runner(path)``, refused (WrongFamily) when it looks like another family; ``parameter`` names the path."""
    runner = load_runner(path)
    require_family(runner, family, f"{parameter} {untrusted(path)}", user)
    return runner


def require_family(model: ModelInterface, family: str, source: str, user: str) -> Recognition:
    """The recognition of ``model``; WrongFamily when it looks like another known family than ``family``.

    A model no rule recognises passes: the adapter's own checks then say precisely what does not fit.
    Nodes call this once a model is loaded, before the adapter checks its shapes, so that a model of
    another family is named as such rather than reported as a puzzling shape.
    """
    needs(family)
    recognition = recognise(model)
    if recognition.family != "unknown" and not fits(recognition, family):
        raise WrongFamily(mismatch(recognition, family, model.outputs, source, user))
    return recognition


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _batch_ok(dim: Dim) -> bool:
    return dim == 1 or not isinstance(dim, int)


def _count(count: int | None, singular: str, plural: str) -> str:
    if count is None:
        return f"an unknown number of {plural}"
    return f"{count} {singular if count == 1 else plural}"


# TrackNet: input channels for seq_len L frames, and what they hold, per bg_mode.
_CHANNEL_FORMULA = {"": "3 x {L}", "subtract": "1 x {L}", "subtract_concat": "4 x {L}", "concat": "3 x ({L} + 1)"}
_BG_MEANING = {
    "": "RGB frames only",
    "subtract": "one background-difference channel per frame",
    "subtract_concat": "RGB plus a background-difference channel per frame",
    "concat": "a background image followed by the RGB frames",
}


def _tracknet_channels(bg_mode: str, seq_len: int) -> int:
    return FEATURE_CHANNELS[bg_mode] * seq_len + (3 if bg_mode == "concat" else 0)


def _tracknet(model: Interface) -> Recognition | None:
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        return None
    x, y = model.inputs[0].shape, model.outputs[0].shape
    if len(x) != 4 or len(y) != 4 or x[2:] != (HEIGHT, WIDTH) or y[2:] != (HEIGHT, WIDTH):
        return None
    if not (_batch_ok(x[0]) and _batch_ok(y[0])):
        return None
    channels, frames = x[1], y[1]
    meta_len, meta_mode = _int(model.metadata.get("seq_len")), model.metadata.get("bg_mode")
    seen = f"one input {shape_text(x)} and one output {shape_text(y)} of {HEIGHT}x{WIDTH} heatmaps"
    seq_len = frames if isinstance(frames, int) else meta_len
    if seq_len is None:
        reason = f"{seen}, but the number of frames is dynamic and there is no seq_len metadata to tell it"
        return Recognition("tracknet", reason, {"seq_len": None, "bg_mode": meta_mode})
    parts = [f"{seen}: TrackNet over {_count(seq_len, 'frame', 'frames')}"]
    if not isinstance(frames, int):
        parts.append(f"(seq_len {seq_len} from metadata, the output's frame axis is dynamic)")
    conflicts = []
    if isinstance(frames, int) and meta_len is not None and meta_len != frames:
        conflicts.append(f"seq_len={meta_len}")
    if not isinstance(channels, int):
        bg_mode = meta_mode if meta_mode in BG_MODES else None
        parts.append(
            f"with dynamic input channels, so bg_mode {bg_mode!r} comes from metadata"
            if bg_mode is not None
            else "with dynamic input channels and no bg_mode metadata, so bg_mode is unknown"
        )
    else:
        fits = [mode for mode in BG_MODES if _tracknet_channels(mode, seq_len) == channels]
        bg_mode = meta_mode if meta_mode in fits else (fits[0] if fits else None)
        if bg_mode is None:
            expected = ", ".join(f"{_tracknet_channels(mode, seq_len)} ({mode!r})" for mode in BG_MODES)
            parts.append(f"but its {channels} input channels fit no bg_mode (expected {expected})")
        else:
            formula = _CHANNEL_FORMULA[bg_mode].format(L=seq_len)
            parts.append(
                f"whose {channels} = {formula} input channels mean bg_mode {bg_mode!r} ({_BG_MEANING[bg_mode]})"
            )
        if len(fits) > 1 and meta_mode not in fits:
            parts.append(
                f"(a guess: {' and '.join(map(repr, fits))} both fit and no bg_mode metadata tells them apart)"
            )
        if meta_mode is not None and meta_mode not in fits:
            conflicts.append(f"bg_mode={meta_mode!r}")
    if conflicts:
        parts.append(
            f"while its metadata says {' and '.join(conflicts)}, which disagrees with the shapes (the shapes win)"
        )
    elif "seq_len" in model.metadata or "bg_mode" in model.metadata:
        parts.append("and its metadata agrees")
    return Recognition("tracknet", " ".join(parts), {"seq_len": seq_len, "bg_mode": bg_mode})


def _inpaintnet(model: Interface) -> Recognition | None:
    if len(model.inputs) != 2 or len(model.outputs) != 1:
        return None
    by_last_dim = {tensor.shape[-1]: tensor for tensor in model.inputs if len(tensor.shape) == 3}
    coords, mask, output = by_last_dim.get(2), by_last_dim.get(1), model.outputs[0]
    if coords is None or mask is None or len(output.shape) != 3 or output.shape[-1] != 2:
        return None
    tensors = (coords, mask, output)
    if not all(_batch_ok(tensor.shape[0]) for tensor in tensors):
        return None
    lengths = {tensor.shape[1] for tensor in tensors if isinstance(tensor.shape[1], int)}
    if len(lengths) > 1:
        return None
    seq_len = next(iter(lengths)) if lengths else _int(model.metadata.get("seq_len"))
    source = "" if lengths or seq_len is None else " (seq_len from metadata)"
    reason = (
        f"inputs {coords.name} {shape_text(coords.shape)} and {mask.name} {shape_text(mask.shape)} and output "
        f"{output.name} {shape_text(output.shape)} are InpaintNet's ball track, visibility mask and repaired track "
        f"over {seq_len if seq_len is not None else 'a dynamic number of'} frames{source}"
    )
    return Recognition("inpaintnet", reason, {"seq_len": seq_len, "coords": coords.name, "mask": mask.name})


def _image_input(model: Interface) -> TensorInfo | None:
    """The single [B, 3, H, W] input (B 1 or dynamic), if that is all the model takes."""
    if len(model.inputs) != 1:
        return None
    shape = model.inputs[0].shape
    return model.inputs[0] if len(shape) == 4 and _batch_ok(shape[0]) and shape[1] == 3 else None


def _yolo_output(model: Interface) -> tuple[int, bool] | None:
    """(channels, transposed) of a single output [1, C, N] or, transposed, [1, N, C], with N > C > 4."""
    if len(model.outputs) != 1:
        return None
    shape = model.outputs[0].shape
    if len(shape) != 3 or not _batch_ok(shape[0]):
        return None
    first, second = shape[1], shape[2]
    if isinstance(first, int) and first > 4 and (not isinstance(second, int) or second > first):
        return first, False
    if isinstance(second, int) and second > 4 and (not isinstance(first, int) or first > second):
        return second, True
    return None


def _end2end(metadata: dict[str, str]) -> bool:
    return metadata.get("end2end", "").lower() == "true"


def _image_details(image: TensorInfo | None) -> dict[str, object]:
    if image is None:
        return {"input_size": None, "dynamic_input": None}
    height, width = image.shape[2:]
    return {"input_size": (height, width), "dynamic_input": not (isinstance(height, int) and isinstance(width, int))}


def _yolo_pose(model: Interface) -> Recognition | None:
    metadata = model.metadata
    if _end2end(metadata):
        return None
    image, output = _image_input(model), _yolo_output(model)
    names = class_names(metadata)
    kpt_shape = metadata_literal(metadata, "kpt_shape")
    if not (isinstance(kpt_shape, list | tuple) and len(kpt_shape) == 2 and all(isinstance(n, int) for n in kpt_shape)):
        kpt_shape = None
    by_metadata = metadata.get("task") == "pose" or kpt_shape is not None
    by_shape = (
        "task" not in metadata and len(names) <= 1 and image is not None and output is not None and output[0] == 56
    )
    if not (by_metadata or by_shape):
        return None
    classes = len(names) or 1
    out = model.outputs[0] if len(model.outputs) == 1 else None
    if kpt_shape is not None:
        keypoints, keypoint_dims = kpt_shape
    elif output is not None and (output[0] - 4 - classes) > 0 and (output[0] - 4 - classes) % 3 == 0:
        keypoints, keypoint_dims = (output[0] - 4 - classes) // 3, 3
    else:
        keypoints, keypoint_dims = None, None
    if by_metadata:
        evidence = []
        if "task" in metadata:
            evidence.append(f"task {metadata['task']!r}")
        if kpt_shape is not None:
            evidence.append(f"kpt_shape {metadata['kpt_shape']}")
        reason = f"Ultralytics metadata {' and '.join(evidence)}"
        if out is not None:
            reason += f" and output {out.name} {shape_text(out.shape)}"
    else:
        reason = (
            f"its single output {out.name} {shape_text(out.shape)} has 56 = 4 box + 1 score + 17 x 3 keypoint channels "
            "(no Ultralytics metadata; a 52-class detector would look the same)"
        )
    counts = f"{_count(keypoints, 'keypoint', 'keypoints')} and {_count(classes, 'class', 'classes')}"
    reason += f": a YOLO pose model with {counts}"
    if output is not None and keypoints is not None and output[0] != 4 + classes + keypoints * keypoint_dims:
        expected = f"4 + {classes} + {keypoints} x {keypoint_dims}"
        reason += f", but the output has {output[0]} channels, not {expected}"
    details: dict[str, object] = {
        "keypoints": keypoints,
        "keypoint_dims": keypoint_dims,
        "classes": classes,
        "names": names,
        **_image_details(image),
        "transposed": output[1] if output is not None else None,
    }
    return Recognition("yolo_pose", reason, details, () if by_metadata else ("yolo",))


def _yolo(model: Interface) -> Recognition | None:
    metadata = model.metadata
    if metadata.get("task") not in (None, "detect") or _end2end(metadata):
        return None
    image, output = _image_input(model), _yolo_output(model)
    if image is None or output is None:
        return None
    channels, transposed = output
    classes = channels - 4
    names = class_names(metadata)
    out = model.outputs[0]
    layout = "[1, N, 4 + classes]" if transposed else "[1, 4 + classes, N]"
    reason = (
        f"one image input {image.name} {shape_text(image.shape)} and one output {out.name} {shape_text(out.shape)}, "
        f"read as {layout} with {channels} = 4 box + {classes} class channels: a YOLO detector "
        f"with {_count(classes, 'class', 'classes')}"
    )
    if metadata.get("task") == "detect":
        reason += ", confirmed by Ultralytics metadata task 'detect'"
    if names and len(names) != classes:
        reason += f", but its metadata names {_count(len(names), 'class', 'classes')}"
    details: dict[str, object] = {"classes": classes, "names": names, **_image_details(image), "transposed": transposed}
    return Recognition("yolo", reason, details)


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


def _off_double(size: Dim, reference: Dim) -> float | None:
    """How far size / reference is from 2 (RTMPose's SimCC split ratio); None when past 0.5 or not fixed."""
    if not (isinstance(size, int) and isinstance(reference, int) and reference > 0):
        return None
    off = abs(size / reference - 2)
    return off if off <= 0.5 else None


def _simcc_pair(image: TensorInfo, outputs: tuple[TensorInfo, ...]) -> tuple[TensorInfo, TensorInfo] | None:
    """The (x, y) outputs [B, K, Wx] and [B, K, Hy] with Wx, Hy about twice the input's W, H; the closer order wins."""
    height, width = image.shape[2:]
    first, second = outputs
    best, best_off = None, None
    for x, y in ((first, second), (second, first)):
        if len(x.shape) != 3 or len(y.shape) != 3 or not (_batch_ok(x.shape[0]) and _batch_ok(y.shape[0])):
            continue
        if not isinstance(x.shape[1], int) or x.shape[1] != y.shape[1]:
            continue
        off_x, off_y = _off_double(x.shape[2], width), _off_double(y.shape[2], height)
        if off_x is not None and off_y is not None and (best_off is None or off_x + off_y < best_off):
            best, best_off = (x, y), off_x + off_y
    return best


def _rtmpose(model: Interface) -> Recognition | None:
    if len(model.outputs) != 2:
        return None
    image = _image_input(model)
    named = {tensor.name.lower(): tensor for tensor in model.outputs}
    if "simcc_x" in named and "simcc_y" in named:
        x, y = named["simcc_x"], named["simcc_y"]
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
    reason = f"{evidence}: an RTMPose-style SimCC pose model with {_count(keypoints, 'keypoint', 'keypoints')}"
    details = {
        "keypoints": keypoints,
        "input_size": _image_details(image)["input_size"],
        "simcc_x": x.name,
        "simcc_y": y.name,
    }
    return Recognition("rtmpose", reason, details)


def _unknown(model: Interface) -> Recognition:
    def listing(tensors: tuple[TensorInfo, ...]) -> str:
        return ", ".join(f"{t.name} {shape_text(t.shape)} {t.dtype}" for t in tensors) or "none"

    reason = f"no known family matches inputs {listing(model.inputs)} and outputs {listing(model.outputs)}"
    task = model.metadata.get("task")
    if _end2end(model.metadata):
        reason += " (Ultralytics exported it end2end, with NMS inside, which vision_factory does not decode)"
    elif task not in (None, "detect", "pose"):
        reason += f" (Ultralytics metadata task {task!r} is not supported)"
    return Recognition("unknown", reason, {})
