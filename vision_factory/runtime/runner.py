"""The one interface every backend implements, and its ONNX Runtime implementation."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .providers import ProviderConfig, create_session

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int | str | None, ...]  # str/None for dynamic dimensions
    dtype: str


class Runner(Protocol):
    """Load a model, run it, say what it runs on."""

    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    metadata: dict[str, str]

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]: ...

    def describe(self) -> str: ...


class OnnxRunner:
    """ONNX Runtime session behind the Runner interface."""

    backend = "onnx"

    def __init__(self, model_path: str | os.PathLike, config: ProviderConfig, logger=log):
        self.session = create_session(model_path, config, logger)
        self.inputs = [TensorInfo(i.name, tuple(i.shape), i.type) for i in self.session.get_inputs()]
        self.outputs = [TensorInfo(o.name, tuple(o.shape), o.type) for o in self.session.get_outputs()]
        self.metadata = dict(self.session.get_modelmeta().custom_metadata_map)
        self._output_names = [o.name for o in self.outputs]

    @property
    def providers(self) -> list[str]:
        """The execution providers that really run, highest priority first."""
        return list(self.session.get_providers())

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(self._output_names, feeds)

    def describe(self) -> str:
        return f"onnxruntime on {', '.join(self.providers)}"
