"""ONNX Runtime behind the Runner interface.

Rendered from vision_factory's templates/runners/onnx.py.j2: regenerate rather than edit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from .cpu import warn_once
from .providers import PARAMETERS as PROVIDER_PARAMETERS
from .providers import ProviderConfig, create_session, fell_back, prepare_runtime
from .runner import Logger, TensorInfo

# ONNX element types as numpy names, so every backend describes tensors alike.
_DTYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
}


def _tensor(node_arg) -> TensorInfo:
    return TensorInfo(node_arg.name, tuple(node_arg.shape), _DTYPES.get(node_arg.type, node_arg.type))


class OnnxRunner:
    """An ONNX Runtime session on the providers that ``ProviderConfig`` asks for, checked to really run."""

    backend = "onnx"
    PARAMETERS = PROVIDER_PARAMETERS

    def __init__(
        self, model_path: str | os.PathLike, config: ProviderConfig, logger: Logger, cpu_kind: str | None = None
    ):
        self.session = create_session(model_path, config, logger)
        self.inputs = [_tensor(i) for i in self.session.get_inputs()]
        self.outputs = [_tensor(o) for o in self.session.get_outputs()]
        try:
            self.metadata = dict(self.session.get_modelmeta().custom_metadata_map)
        except UnicodeDecodeError as error:  # ONNX Runtime gives no map at all then
            raise ValueError(
                f"{model_path}: its metadata is not UTF-8 (byte {error.object[error.start : error.end]!r} at "
                f"{error.start}): the file is damaged or its exporter wrote bytes, not text; export the model again, "
                "or rewrite its metadata (onnx.load, fix metadata_props, onnx.save)"
            ) from None
        self._output_names = [o.name for o in self.outputs]
        self.fallback = fell_back(config, self.providers)  # '' unless provider_fallback let it run elsewhere
        # an int8 model made for another kind of CPU than ``cpu_kind`` (None: this one), said once per model
        self.cpu_warning = ""
        if self.providers[0] == "CPUExecutionProvider":
            self.cpu_warning = warn_once(str(model_path), self.metadata, logger, cpu_kind)

    @classmethod
    def prepare(cls, settings: Mapping[str, Any]) -> str:
        return prepare_runtime(settings)

    @classmethod
    def load(cls, model_path: str | os.PathLike, settings: Mapping[str, Any], logger: Logger) -> OnnxRunner:
        return cls(model_path, ProviderConfig.from_settings(settings), logger)

    @property
    def providers(self) -> list[str]:
        """The execution providers that really run, highest priority first."""
        return list(self.session.get_providers())

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(self._output_names, feeds)

    def describe(self) -> str:
        return f"onnxruntime on {', '.join(self.providers)}"
