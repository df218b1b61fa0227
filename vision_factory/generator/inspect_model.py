"""Read an ONNX model's interface and recognise which model family it belongs to.

Uses the ``onnx`` package only, never a runtime: inspecting a model must work where it cannot run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from ..models.fasterrcnn import DETECTION_ROLES
from ..models.tracknet_stream import BG_MODES, FEATURE_CHANNELS, HEIGHT, WIDTH
from ..models.yolo import class_names, metadata_literal
from ..runtime.runner import shape_text

Dim = int | str | None  # fixed size, named dynamic size (dim_param), unknown


@dataclass(frozen=True)
class TensorSummary:
    name: str
    shape: tuple[Dim, ...]
    dtype: str  # numpy name, e.g. float32


@dataclass(frozen=True)
class ModelSummary:
    path: str
    inputs: tuple[TensorSummary, ...]
    outputs: tuple[TensorSummary, ...]
    opset: int  # of the default domain; 0 when the model declares none
    ir_version: int
    producer: str
    metadata: dict[str, str]


@dataclass(frozen=True)
class Recognition:
    family: str  # tracknet, inpaintnet, yolo, yolo_pose, fasterrcnn, rtmpose or unknown
    reason: str  # one sentence citing the shapes, names and metadata that decided it
    details: dict[str, object]


def summarize(path: str | Path) -> ModelSummary:
    """The inputs, outputs, opset, producer and metadata of the ONNX model at ``path``."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"model file not found: {path}")
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as error:  # protobuf and onnx raise many kinds for a bad file
        raise ValueError(_unreadable(path, f"{type(error).__name__}: {error}")) from error
    if not model.HasField("graph") or model.ir_version <= 0:
        raise ValueError(_unreadable(path, "it parses but holds no graph"))
    initializers = {tensor.name for tensor in model.graph.initializer}  # listed as inputs before IR 4
    return ModelSummary(
        path=str(path),
        inputs=tuple(_tensor(value) for value in model.graph.input if value.name not in initializers),
        outputs=tuple(_tensor(value) for value in model.graph.output),
        opset=next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), 0),
        ir_version=model.ir_version,
        producer=" ".join(part for part in (model.producer_name, model.producer_version) if part),
        metadata={prop.key: prop.value for prop in model.metadata_props},
    )


def recognise(summary: ModelSummary) -> Recognition:
    """The model family ``summary`` belongs to; the first rule that matches wins."""
    for rule in (_tracknet, _inpaintnet, _yolo_pose, _yolo, _fasterrcnn, _rtmpose):
        recognition = rule(summary)
        if recognition is not None:
            return recognition
    return _unknown(summary)


def require_family(path: str | Path, family: str) -> Recognition:
    """The recognition of the model at ``path``; a ValueError when it looks like another family."""
    recognition = recognise(summarize(path))
    if recognition.family != family:
        raise ValueError(
            f"{path} looks like a {recognition.family} model, not {family}: {recognition.reason}; give a {family} model"
        )
    return recognition


def describe(summary: ModelSummary, recognition: Recognition) -> str:
    """The text ``vision-factory inspect`` prints."""
    lines = [
        f"model: {summary.path}",
        f"producer: {summary.producer or 'not recorded'}",
        f"IR version {summary.ir_version}, opset {summary.opset or 'not declared'}",
    ]
    for title, tensors in (("inputs", summary.inputs), ("outputs", summary.outputs)):
        width = max((len(tensor.name) for tensor in tensors), default=0)
        lines.append(f"{title}:" if tensors else f"{title}: none")
        lines += [f"  {t.name.ljust(width)}  {shape_text(t.shape)} {t.dtype}" for t in tensors]
    lines.append("metadata:" if summary.metadata else "metadata: none")
    lines += [f"  {key}: {_cut(value)}" for key, value in summary.metadata.items()]
    lines.append(f"looks like: {recognition.family} — {recognition.reason}")
    return "\n".join(lines)


def as_dict(summary: ModelSummary, recognition: Recognition) -> dict[str, object]:
    """Summary and recognition as plain JSON-serialisable data."""
    return _plain({**asdict(summary), "recognition": asdict(recognition)})


def _unreadable(path: Path, reason: str) -> str:
    return (
        f"{path} is not a readable ONNX model: {reason}; check the file (a truncated download or a PyTorch .pt file?)"
    )


def _tensor(value: onnx.ValueInfoProto) -> TensorSummary:
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":  # sequence, map, optional: no shape to report
        return TensorSummary(value.name, (), (kind or "undefined").removesuffix("_type"))
    tensor = value.type.tensor_type
    shape = tuple(_dim(dim) for dim in tensor.shape.dim)
    return TensorSummary(value.name, shape, _dtype(tensor.elem_type))


def _dim(dim: onnx.TensorShapeProto.Dimension) -> Dim:
    kind = dim.WhichOneof("value")
    if kind == "dim_value":
        return dim.dim_value
    return dim.dim_param if kind == "dim_param" and dim.dim_param else None


def _dtype(elem_type: int) -> str:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except KeyError:
        return f"onnx type {elem_type}"


def _cut(value: str, limit: int = 100) -> str:
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _plain(value: object) -> object:
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


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


def _tracknet(summary: ModelSummary) -> Recognition | None:
    if len(summary.inputs) != 1 or len(summary.outputs) != 1:
        return None
    x, y = summary.inputs[0].shape, summary.outputs[0].shape
    if len(x) != 4 or len(y) != 4 or x[2:] != (HEIGHT, WIDTH) or y[2:] != (HEIGHT, WIDTH):
        return None
    if not (_batch_ok(x[0]) and _batch_ok(y[0])):
        return None
    channels, frames = x[1], y[1]
    meta_len, meta_mode = _int(summary.metadata.get("seq_len")), summary.metadata.get("bg_mode")
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
    elif "seq_len" in summary.metadata or "bg_mode" in summary.metadata:
        parts.append("and its metadata agrees")
    return Recognition("tracknet", " ".join(parts), {"seq_len": seq_len, "bg_mode": bg_mode})


def _inpaintnet(summary: ModelSummary) -> Recognition | None:
    if len(summary.inputs) != 2 or len(summary.outputs) != 1:
        return None
    by_last_dim = {tensor.shape[-1]: tensor for tensor in summary.inputs if len(tensor.shape) == 3}
    coords, mask, output = by_last_dim.get(2), by_last_dim.get(1), summary.outputs[0]
    if coords is None or mask is None or len(output.shape) != 3 or output.shape[-1] != 2:
        return None
    tensors = (coords, mask, output)
    if not all(_batch_ok(tensor.shape[0]) for tensor in tensors):
        return None
    lengths = {tensor.shape[1] for tensor in tensors if isinstance(tensor.shape[1], int)}
    if len(lengths) > 1:
        return None
    seq_len = next(iter(lengths)) if lengths else _int(summary.metadata.get("seq_len"))
    source = "" if lengths or seq_len is None else " (seq_len from metadata)"
    reason = (
        f"inputs {coords.name} {shape_text(coords.shape)} and {mask.name} {shape_text(mask.shape)} and output "
        f"{output.name} {shape_text(output.shape)} are InpaintNet's ball track, visibility mask and repaired track "
        f"over {seq_len if seq_len is not None else 'a dynamic number of'} frames{source}"
    )
    return Recognition("inpaintnet", reason, {"seq_len": seq_len, "coords": coords.name, "mask": mask.name})


def _image_input(summary: ModelSummary) -> TensorSummary | None:
    """The single [B, 3, H, W] input (B 1 or dynamic), if that is all the model takes."""
    if len(summary.inputs) != 1:
        return None
    shape = summary.inputs[0].shape
    return summary.inputs[0] if len(shape) == 4 and _batch_ok(shape[0]) and shape[1] == 3 else None


def _yolo_output(summary: ModelSummary) -> tuple[int, bool] | None:
    """(channels, transposed) of a single output [1, C, N] or, transposed, [1, N, C], with N > C > 4."""
    if len(summary.outputs) != 1:
        return None
    shape = summary.outputs[0].shape
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


def _image_details(image: TensorSummary | None) -> dict[str, object]:
    if image is None:
        return {"input_size": None, "dynamic_input": None}
    height, width = image.shape[2:]
    return {"input_size": (height, width), "dynamic_input": not (isinstance(height, int) and isinstance(width, int))}


def _yolo_pose(summary: ModelSummary) -> Recognition | None:
    metadata = summary.metadata
    if _end2end(metadata):
        return None
    image, output = _image_input(summary), _yolo_output(summary)
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
    out = summary.outputs[0] if len(summary.outputs) == 1 else None
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
    return Recognition("yolo_pose", reason, details)


def _yolo(summary: ModelSummary) -> Recognition | None:
    metadata = summary.metadata
    if metadata.get("task") not in (None, "detect") or _end2end(metadata):
        return None
    image, output = _image_input(summary), _yolo_output(summary)
    if image is None or output is None:
        return None
    channels, transposed = output
    classes = channels - 4
    names = class_names(metadata)
    out = summary.outputs[0]
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


def _fasterrcnn(summary: ModelSummary) -> Recognition | None:
    if len(summary.outputs) != 3:
        return None
    found: dict[str, TensorSummary] = {}
    for tensor in summary.outputs:
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


def _simcc_pair(image: TensorSummary, outputs: tuple[TensorSummary, ...]) -> tuple[TensorSummary, TensorSummary] | None:
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


def _rtmpose(summary: ModelSummary) -> Recognition | None:
    if len(summary.outputs) != 2:
        return None
    image = _image_input(summary)
    named = {tensor.name.lower(): tensor for tensor in summary.outputs}
    if "simcc_x" in named and "simcc_y" in named:
        x, y = named["simcc_x"], named["simcc_y"]
        evidence = f"outputs named {x.name} {shape_text(x.shape)} and {y.name} {shape_text(y.shape)}"
    else:
        pair = _simcc_pair(image, summary.outputs) if image is not None else None
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


def _unknown(summary: ModelSummary) -> Recognition:
    def listing(tensors: tuple[TensorSummary, ...]) -> str:
        return ", ".join(f"{t.name} {shape_text(t.shape)} {t.dtype}" for t in tensors) or "none"

    reason = f"no known family matches inputs {listing(summary.inputs)} and outputs {listing(summary.outputs)}"
    task = summary.metadata.get("task")
    if _end2end(summary.metadata):
        reason += " (Ultralytics exported it end2end, with NMS inside, which vision_factory does not decode)"
    elif task not in (None, "detect", "pose"):
        reason += f" (Ultralytics metadata task {task!r} is not supported)"
    return Recognition("unknown", reason, {})
