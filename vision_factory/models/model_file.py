"""An ONNX model file's interface, read without a runtime, and the family it looks like: ``vision-factory inspect``,
and the tools' check of a model file before they run it.

Uses the ``onnx`` package only, never a runtime: inspecting a model must work where it cannot run.
The recognition rules are the nodes' own (models/recognition.py), so inspect and a node never disagree.
No node imports this module (generated packages do not need the onnx package).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from ..runtime.runner import TensorInfo, shape_text
from ..text import shown_path, untrusted
from .recognition import Recognition, fits, mismatch, needs, recognise
from .ultralytics import unsupported_task

__all__ = ["ModelSummary", "Recognition", "as_dict", "describe", "recognise", "require_file_family", "summarize"]


@dataclass(frozen=True)
class ModelSummary:
    path: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    opset: int  # of the default domain; 0 when the model declares none
    ir_version: int
    producer: str
    metadata: dict[str, str]


def folder_model(path: Path) -> Path:
    """The file a model folder is recognised by: a Florence-2 export folder's vision encoder (its graphs run
    together: models/florence2_interface.py); any other path as it is."""
    if not path.is_dir():
        return path
    from .florence2_interface import VISION, find_export

    try:
        return find_export(path).graphs[VISION]
    except ValueError as exc:
        raise ValueError(f"{shown_path(path)} is a folder, not a model file, nor a model folder: {exc}") from None


def summarize(path: str | Path) -> ModelSummary:
    """The inputs, outputs, opset, producer and metadata of the ONNX model at ``path`` (or of an OpenVINO IR
    .xml, as `quantize --backend openvino` writes it: read with OpenVINO, the one reader of IR)."""
    path = folder_model(Path(path))
    if not path.is_file():
        raise ValueError(f"model file not found: {shown_path(path)}")
    if path.suffix.lower() == ".xml":
        return _summarize_ir(path)
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as error:  # protobuf and onnx raise many kinds for a bad file
        raise ValueError(_unreadable(path, f"{type(error).__name__}: {error}")) from error
    if not model.HasField("graph") or model.ir_version <= 0:
        raise ValueError(_unreadable(path, "it parses but holds no graph"))
    initializers = {_text(tensor.name) for tensor in model.graph.initializer}  # listed as inputs before IR 4
    return ModelSummary(
        path=str(path),
        inputs=tuple(_tensor(value) for value in model.graph.input if _text(value.name) not in initializers),
        outputs=tuple(_tensor(value) for value in model.graph.output),
        opset=next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), 0),
        ir_version=model.ir_version,
        producer=" ".join(_text(part) for part in (model.producer_name, model.producer_version) if part),
        metadata={_text(prop.key): _text(prop.value) for prop in model.metadata_props},
    )


def _text(value: str | bytes) -> str:
    """A metadata key or value as text: protobuf gives the bytes of one that is not UTF-8, shown here with each
    byte that is not as a \\xNN escape (and a note that says so), so that inspect reports it rather than failing."""
    if isinstance(value, str):
        return value
    return value.decode("utf-8", "backslashreplace") + " (not UTF-8: the file's metadata is damaged)"


def _summarize_ir(path: Path) -> ModelSummary:
    """An OpenVINO IR's interface; its metadata is the ONNX metadata it keeps in its runtime info ("framework")."""
    try:
        import openvino as ov

        from ..runtime.openvino_runner import _tensor
    except ImportError:
        raise ValueError(
            f"{shown_path(path)} is an OpenVINO IR: reading it needs OpenVINO (pip install openvino)"
        ) from None
    try:
        model = ov.Core().read_model(str(path))
    except Exception as error:  # OpenVINO raises RuntimeError subclasses with the parser's message
        raise ValueError(f"{shown_path(path)} is not a readable OpenVINO IR: {error}") from error
    framework = model.get_rt_info()["framework"] if model.has_rt_info(["framework"]) else {}
    return ModelSummary(
        path=str(path),
        inputs=tuple(_tensor(port) for port in model.inputs),
        outputs=tuple(_tensor(port) for port in model.outputs),
        opset=0,
        ir_version=int(_ir_version(path)),
        producer=f"OpenVINO IR (read by OpenVINO {ov.__version__})",
        metadata={key: value.astype(str) for key, value in framework.items()},
    )


def _ir_version(path: Path) -> str:
    """The IR version an OpenVINO .xml declares on its root element ("0" when it declares none)."""
    from xml.etree.ElementTree import iterparse

    for _, element in iterparse(path, events=("start",)):
        version = element.get("version", "0")
        return version if version.isdigit() else "0"
    return "0"


def require_file_family(path: str | Path, family: str, user: str = "this command") -> Recognition:
    """The recognition of the model at ``path``; a ValueError when it looks like another family, or like none."""
    needed = needs(family)
    summary = summarize(path)
    recognition = recognise(summary)
    if recognition.family == "unknown":
        unsupported = unsupported_task(summary.metadata)
        if unsupported:  # the line the node and predict give (recognition.py's require_family)
            raise ValueError(f"{shown_path(path)}: {unsupported}")
        raise ValueError(f"{shown_path(path)}: {untrusted(recognition.reason, 400)}; {user} needs {needed}")
    if not fits(recognition, family):
        raise ValueError(mismatch(recognition, family, summary.outputs, str(path), user))
    return recognition


def describe(summary: ModelSummary, recognition: Recognition) -> str:
    """The text ``vision-factory inspect`` prints: what the file says (names, dimensions, metadata, the reasons
    quoting them) escaped, one line each (text.untrusted), so a file cannot move the cursor or forge a line."""
    lines = [
        f"model: {untrusted(summary.path, 400)}",
        f"producer: {untrusted(summary.producer) or 'not recorded'}",
        f"IR version {summary.ir_version}, opset {summary.opset or 'not declared'}",
    ]
    for title, tensors in (("inputs", summary.inputs), ("outputs", summary.outputs)):
        names = [untrusted(tensor.name, 100) for tensor in tensors]
        width = max(map(len, names), default=0)
        lines.append(f"{title}:" if tensors else f"{title}: none")
        lines += [
            f"  {name.ljust(width)}  {untrusted(shape_text(t.shape))} {untrusted(t.dtype)}"
            for name, t in zip(names, tensors)
        ]
    lines.append("metadata:" if summary.metadata else "metadata: none")
    lines += [f"  {untrusted(key, 100)}: {_cut(value)}" for key, value in summary.metadata.items()]
    lines.append(f"looks like: {recognition.family} — {untrusted(recognition.reason, 400)}")
    return "\n".join(lines)


def as_dict(summary: ModelSummary, recognition: Recognition) -> dict[str, object]:
    """Summary and recognition as plain JSON-serialisable data."""
    return _plain({**asdict(summary), "recognition": asdict(recognition)})


def _unreadable(path: Path, reason: str) -> str:
    return (
        f"{shown_path(path)} is not a readable ONNX model: {reason}; check the file (a truncated download or a "
        "PyTorch .pt file?)"
    )


def _tensor(value: onnx.ValueInfoProto) -> TensorInfo:
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":  # sequence, map, optional: no shape to report
        return TensorInfo(_text(value.name), (), (kind or "undefined").removesuffix("_type"))
    tensor = value.type.tensor_type
    shape = tuple(_dim(dim) for dim in tensor.shape.dim)
    return TensorInfo(_text(value.name), shape, _dtype(tensor.elem_type))


def _dim(dim: onnx.TensorShapeProto.Dimension) -> int | str | None:
    kind = dim.WhichOneof("value")
    if kind == "dim_value":
        return dim.dim_value
    return _text(dim.dim_param) if kind == "dim_param" and dim.dim_param else None


def _dtype(elem_type: int) -> str:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except KeyError:
        return f"onnx type {elem_type}"


def _cut(value: str, limit: int = 100) -> str:
    """A metadata value on one line: runs of white space as one space, escaped (text.untrusted), and cut to
    ``limit`` characters."""
    value = untrusted(" ".join(value.split()), limit)
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _plain(value: object) -> object:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
