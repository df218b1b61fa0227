"""The one interface every backend implements, and what all backends share."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from ..parameters import Parameter
from ..text import shown_path, untrusted

Logger = logging.Logger | Any  # a logging.Logger or an rclpy logger: both have info/warning

# A one-node ONNX model, y = Identity(x) for float[1] (IR 8, opset 13), serialized: what a runtime is started
# with before any model of the user's (``Runner.prepare``), and what finds the providers that really run.
PROBE_MODEL = (
    b'\x08\x08:;\n\x10\n\x01x\x12\x01y"\x08Identity\x12\x05probeZ\x0f\n\x01x\x12\n\n\x08\x08\x01\x12\x04\n\x02\x08\x01'
    b"b\x0f\n\x01y\x12\n\n\x08\x08\x01\x12\x04\n\x02\x08\x01B\x04\n\x00\x10\r"
)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int | str | None, ...]  # str/None for dynamic dimensions
    dtype: str  # numpy name: float32, float16, int64, ...


def fixed_dim(dim: object) -> int | None:
    """A dimension's size when it is fixed, None when dynamic."""
    return dim if isinstance(dim, int) and dim > 0 else None


def shape_text(shape: Sequence[int | str | None]) -> str:
    """[1, 3, ?, ?] style: unknown dimensions as ?, named ones by name."""
    return "[" + ", ".join("?" if dim is None else str(dim) for dim in shape) + "]"


def tensor_text(tensor: TensorInfo) -> str:
    """'images [1, 3, 640, 640]' for error messages."""
    return f"{untrusted(tensor.name, 100)} {shape_text(tensor.shape)}"  # names come from the model file


def tensors_text(tensors: Sequence[TensorInfo]) -> str:
    """'images [1, 3, 640, 640] float32, ...' for error messages; 'none' for no tensor."""
    return ", ".join(f"{tensor_text(t)} {t.dtype}" for t in tensors) or "none"


# The inputs of the model a generated package was made for, as its runner states them: (name, shape) each, a
# dynamic dimension None. None: any model (vision_factory's own runners; a package generated without --model-file).
ModelInputs = tuple[tuple[str, tuple[int | None, ...]], ...]


def model_inputs(tensors: Sequence[TensorInfo]) -> ModelInputs:
    """``tensors`` as ModelInputs: every dimension that is not fixed (a name, None, TensorRT's -1) None."""
    return tuple((tensor.name, tuple(fixed_dim(dim) for dim in tensor.shape)) for tensor in tensors)


def check_model_inputs(
    model_path: str | os.PathLike, have: ModelInputs, expected: ModelInputs | None, generated_from: str
) -> None:
    """Refuse the model at ``model_path``, of inputs ``have``, unless they are ``expected``, those of
    ``generated_from`` (the model file the package was generated for): another name, rank or fixed size, or a
    dynamic dimension where that model's was fixed, is refused. A dimension dynamic in ``expected`` takes any size.
    Nothing is checked when ``expected`` is None, nor for a model with none of ``expected``'s input names: another
    model of the node, loaded by the same runner (TrackNet's InpaintNet, SAM's decoder, rtmpose's person detector),
    whose family is checked when it is loaded."""
    if expected is None or not {name for name, _ in have} & {name for name, _ in expected}:
        return
    fits = len(have) == len(expected) and all(
        name == want_name
        and len(shape) == len(want_shape)
        and all(w is None or w == d for d, w in zip(shape, want_shape))
        for (name, shape), (want_name, want_shape) in zip(have, expected)
    )
    if not fits:
        path = untrusted(str(model_path), 200)
        raise ValueError(
            f"model {path} takes {_inputs_text(have)}, but this package was generated for a model that takes "
            f"{_inputs_text(expected)} ({untrusted(generated_from, 100)}): regenerate the package for this model "
            f"(vision-factory generate ... --model-file {path}), or give it a model of that input"
        )


def _inputs_text(inputs: ModelInputs) -> str:
    """'images [1, 3, 640, 640]' for each input, names escaped (they come from model files)."""
    return ", ".join(f"{untrusted(name, 100)} {shape_text(shape)}" for name, shape in inputs) or "none"


class Runner(Protocol):
    """Load a model, run it, say what it runs on."""

    backend: ClassVar[str]
    PARAMETERS: ClassVar[tuple[Parameter, ...]]  # the backend's node parameters
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    metadata: dict[str, str]

    @classmethod
    def prepare(cls, settings: Mapping[str, Any]) -> str:
        """Load the backend's runtime and create its process-wide state (its environment, kernel registries,
        plugins: what stays for the life of the process) with no model of the user's, once per process; a node
        does it at creation, so that configure loads only the model and cleanup gives back what it took.
        Raises RuntimeError naming the install when the runtime is not installed. Returns '' when ``settings``
        (values for some of ``PARAMETERS``) ask for what runs here, else why not (a provider, a device)."""
        ...

    @classmethod
    def load(cls, model_path: str | os.PathLike, settings: Mapping[str, Any], logger: Logger) -> Runner:
        """A ready runner; ``settings`` holds values for (some of) ``PARAMETERS``."""
        ...

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Outputs in the model's output order."""
        ...

    def describe(self) -> str:
        """What really runs the model (runtime, version, device)."""
        ...


def model_file(model_path: str | os.PathLike) -> Path:
    """The model path, checked to be a file."""
    path = Path(model_path)
    if path.is_dir():  # a model folder (Florence-2's export) is its family's to open, graph by graph
        raise ValueError(f"{shown_path(path)} is a folder, not a model file: give the model file (.onnx) itself")
    if not path.is_file():
        raise ValueError(f"model file not found: {shown_path(path)}")
    return path


def default_cache_dir(kind: str) -> Path:
    """Caches live under $ROS_HOME/<package>/<kind> (ROS_HOME defaults to ~/.ros), never /tmp."""
    ros_home = os.environ.get("ROS_HOME") or os.path.join(os.path.expanduser("~"), ".ros")
    return Path(ros_home) / __package__.split(".")[0] / kind


def run_in_chunks(
    runner: Runner, input_name: str, tensor: np.ndarray, chunk: int | None, pad: bool
) -> list[np.ndarray]:
    """Every output of ``runner`` for the N > 0 rows of ``tensor`` [N, ...], fed as ``input_name``: in one run
    (``chunk`` None), else in runs of at most ``chunk`` rows. ``pad`` (a model exported with a fixed batch of
    ``chunk``): a shorter last run is padded with zero rows and every output sliced back, so each output has
    N rows in ``tensor``'s order."""
    size = chunk or len(tensor)
    parts: list[list[np.ndarray]] = []
    for start in range(0, len(tensor), size):
        part = tensor[start : start + size]
        if pad and len(part) < size:
            part = np.concatenate([part, np.zeros((size - len(part), *part.shape[1:]), part.dtype)])
        outputs = [np.asarray(output) for output in runner.run({input_name: part})]
        parts.append([output[: len(tensor) - start] if output.ndim else output for output in outputs])
    return parts[0] if len(parts) == 1 else [np.concatenate(outputs) for outputs in zip(*parts)]
