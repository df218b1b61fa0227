"""ONNX Runtime behind the Runner interface.

Rendered from vision_factory's templates/runners/onnx.py.j2: regenerate rather than edit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..parameters import with_defaults, with_new_defaults
from ..text import shown_path
from .cpu import warn_once
from .providers import PARAMETERS as PROVIDER_PARAMETERS
from .providers import ProviderConfig, create_session, fell_back, prepare_runtime
from .runner import Logger, ModelInputs, TensorInfo, check_model_inputs, model_inputs

# The model this runner's package was generated for, and its inputs (name, shape; None: a dynamic dimension): a
# model that takes other inputs is refused at load. None: any model of the family.
MODEL_FILE = ""
MODEL_INPUTS: ModelInputs | None = None
# The execution provider(s) a node runs on when its execution_provider parameter is not set.
EXECUTION_PROVIDER = "cpu"
PARAMETERS = with_new_defaults(PROVIDER_PARAMETERS, execution_provider=EXECUTION_PROVIDER)

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
    PARAMETERS = PARAMETERS
    concurrent_runs = True  # one session runs from several threads at once (a node's inference_workers)

    def __init__(
        self, model_path: str | os.PathLike, config: ProviderConfig, logger: Logger, cpu_kind: str | None = None
    ):
        self.session = create_session(model_path, config, logger)
        self.inputs = [_tensor(i) for i in self.session.get_inputs()]
        check_model_inputs(model_path, model_inputs(self.inputs), MODEL_INPUTS, MODEL_FILE)
        self.outputs = [_tensor(o) for o in self.session.get_outputs()]
        try:
            self.metadata = dict(self.session.get_modelmeta().custom_metadata_map)
        except UnicodeDecodeError as error:  # ONNX Runtime gives no map at all then
            raise ValueError(
                f"{shown_path(model_path)}: its metadata is not UTF-8 (byte "
                f"{error.object[error.start : error.end]!r} at {error.start}): the file is damaged or its exporter "
                "wrote bytes, not text; export the model again, or rewrite its metadata (onnx.load, fix "
                "metadata_props, onnx.save)"
            ) from None
        self._output_names = [o.name for o in self.outputs]
        self.fallback = fell_back(config, self.providers)  # '' unless provider_fallback let it run elsewhere
        # an int8 model made for another kind of CPU than ``cpu_kind`` (None: this one), said once per model
        self.cpu_warning = ""
        if self.providers[0] == "CPUExecutionProvider":
            self.cpu_warning = warn_once(str(model_path), self.metadata, logger, cpu_kind)

    @classmethod
    def prepare(cls, settings: Mapping[str, Any]) -> str:
        return prepare_runtime(with_defaults(PARAMETERS, settings, "ONNX Runtime"))

    @classmethod
    def load(cls, model_path: str | os.PathLike, settings: Mapping[str, Any], logger: Logger) -> OnnxRunner:
        config = ProviderConfig.from_settings(with_defaults(PARAMETERS, settings, "ONNX Runtime"))
        return cls(model_path, config, logger)

    @property
    def providers(self) -> list[str]:
        """The execution providers that really run, highest priority first."""
        return list(self.session.get_providers())

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(self._output_names, feeds)

    def describe(self) -> str:
        return f"onnxruntime on {', '.join(self.providers)}"
