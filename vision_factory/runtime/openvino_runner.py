"""OpenVINO behind the Runner interface: openvino.Core reads the ONNX model and compiles it for a device.

Rendered from vision_factory's templates/runners/openvino.py.j2: regenerate rather than edit.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..parameters import MAX_THREADS, Parameter, with_defaults
from ..text import shown_path, untrusted
from .cpu import warn_once
from .runner import (
    PROBE_MODEL,
    Logger,
    ModelInputs,
    TensorInfo,
    check_model_inputs,
    default_cache_dir,
    model_file,
    model_inputs,
)

PERFORMANCE_HINTS = ("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT")
PRECISIONS = ("f32", "bf16", "f16", "")
VIRTUAL_DEVICES = ("AUTO", "MULTI", "HETERO", "BATCH")  # they pick among the real devices themselves

# The model this runner's package was generated for, and its inputs (name, shape; None: a dynamic dimension): a
# model that takes other inputs is refused at load. None: any model of the family.
MODEL_FILE = ""
MODEL_INPUTS: ModelInputs | None = None
# The device a node compiles for, and the inference precision, when its parameters do not set them.
DEVICE = "CPU"
INFERENCE_PRECISION = "f32"


def _openvino():
    try:
        import openvino
    except ImportError as exc:
        raise RuntimeError("OpenVINO is not installed: pip install openvino") from exc
    return openvino


def _dimension(dimension) -> int | None:
    return dimension.get_length() if dimension.is_static else None


def _tensor(port) -> TensorInfo:
    shape = tuple(_dimension(d) for d in port.get_partial_shape())
    return TensorInfo(port.get_any_name(), shape, np.dtype(port.get_element_type().to_dtype()).name)


class OpenVinoRunner:
    """A model compiled by OpenVINO for ``device``, with a compiled-model cache."""

    backend = "openvino"
    concurrent_runs = True  # an infer request per thread (a node's inference_workers; THROUGHPUT runs them at once)
    PARAMETERS = (
        Parameter("device", DEVICE, "OpenVINO device: CPU, GPU, GPU.1, NPU or AUTO", launch_argument=True),
        Parameter("performance_hint", "LATENCY", f"OpenVINO performance hint: {', '.join(PERFORMANCE_HINTS)}"),
        Parameter("cache_dir", "", "compiled-model cache, default $ROS_HOME/<package>/openvino_cache"),
        # OpenVINO runs bf16 by default on CPUs that have it; f32 keeps the model's own accuracy.
        Parameter("inference_precision", INFERENCE_PRECISION, "f32, bf16, f16, or '' for the device's default"),
        Parameter(
            "inference_threads", 0, "CPU inference threads, 0 = OpenVINO decides", minimum=0, maximum=MAX_THREADS
        ),
    )

    def __init__(
        self,
        model_path: str | os.PathLike,
        device: str = DEVICE,
        performance_hint: str = "LATENCY",
        cache_dir: str = "",
        inference_precision: str = INFERENCE_PRECISION,
        inference_threads: int = 0,
        logger: Logger | None = None,
        cpu_kind: str | None = None,
    ):
        ov = _openvino()
        path = model_file(model_path)
        if performance_hint not in PERFORMANCE_HINTS:
            raise ValueError(f"performance_hint '{performance_hint}' is not one of {', '.join(PERFORMANCE_HINTS)}")
        if inference_precision not in PRECISIONS:
            raise ValueError(f"inference_precision '{inference_precision}' is not one of f32, bf16, f16 or ''")
        if inference_threads < 0:
            raise ValueError(f"inference_threads must be >= 0, got {inference_threads}")
        core = ov.Core()
        _check_device(device, core.available_devices)
        cache = cache_dir or str(default_cache_dir("openvino_cache"))
        os.makedirs(cache, exist_ok=True)
        core.set_property({"CACHE_DIR": cache})
        try:
            model = core.read_model(str(path))
        except Exception as exc:  # OpenVINO raises RuntimeError subclasses with the parser's message
            raise ValueError(f"OpenVINO cannot read model {shown_path(path)}: {untrusted(exc, 400)}") from exc
        config: dict[str, Any] = {"PERFORMANCE_HINT": performance_hint}
        if inference_threads:
            config["INFERENCE_NUM_THREADS"] = inference_threads
        if inference_precision:
            config["INFERENCE_PRECISION_HINT"] = inference_precision
        try:
            self.compiled = core.compile_model(model, device, config)
        except Exception as exc:
            raise RuntimeError(f"OpenVINO cannot compile {path.name} for {device}: {untrusted(exc, 400)}") from exc
        self.request = self.compiled.create_infer_request()  # this thread's; each other thread makes its own
        self._requests = threading.local()
        self._requests.request = self.request
        self.device = device
        self.precision = self.compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
        self.version = ov.__version__
        self.inputs = [_tensor(port) for port in model.inputs]
        check_model_inputs(path, model_inputs(self.inputs), MODEL_INPUTS, MODEL_FILE)
        self.outputs = [_tensor(port) for port in model.outputs]
        # ONNX metadata_props arrive in the model's runtime info, under "framework".
        framework = model.get_rt_info()["framework"] if model.has_rt_info(["framework"]) else {}
        self.metadata = {key: value.astype(str) for key, value in framework.items()}
        # an int8 model made for another kind of CPU than ``cpu_kind`` (None: this one), said once per model
        self.cpu_warning = ""
        on_cpu = any(name.startswith("CPU") for name in self.compiled.get_property("EXECUTION_DEVICES"))
        if logger is not None and on_cpu:
            self.cpu_warning = warn_once(str(path), self.metadata, logger, cpu_kind, runtime="OpenVINO")

    @classmethod
    def prepare(cls, settings: Mapping[str, Any]) -> str:
        """OpenVINO's plugins and frontend loaded (a Core compiles PROBE_MODEL for the device, once per device);
        '' when ``settings``' device is here and compiles, else why not."""
        ov = _openvino()
        try:
            device = with_defaults(cls.PARAMETERS, settings, "OpenVINO")["device"]
            _start_device(ov, device)
        except (ValueError, RuntimeError) as problem:
            return str(problem)
        return ""

    @classmethod
    def load(cls, model_path: str | os.PathLike, settings: Mapping[str, Any], logger: Logger) -> OpenVinoRunner:
        return cls(model_path, **with_defaults(cls.PARAMETERS, settings, "OpenVINO"), logger=logger)

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        request = getattr(self._requests, "request", None)
        if request is None:  # a request runs one inference at a time: one per thread that runs the model
            request = self._requests.request = self.compiled.create_infer_request()
        results = request.infer(feeds)  # copies the outputs, so the next run cannot overwrite them
        return [results[port] for port in self.compiled.outputs]

    def describe(self) -> str:
        executing = ", ".join(self.compiled.get_property("EXECUTION_DEVICES"))
        return f"openvino {self.version} on {self.device} (executing on {executing}, {self.precision})"


@functools.cache
def _start_device(ov, device: str) -> None:
    """What OpenVINO loads once per process for ``device`` (the ONNX frontend, the device's plugin and its
    libraries' set-up), loaded by compiling PROBE_MODEL there; a RuntimeError naming the device when it cannot."""
    core = ov.Core()
    _check_device(device, core.available_devices)
    try:
        core.compile_model(core.read_model(PROBE_MODEL, b""), device).create_infer_request()
    except Exception as exc:
        raise RuntimeError(f"OpenVINO cannot compile for {device}: {exc}") from exc


def _check_device(device: str, available: list[str]) -> None:
    """A real device must be present ('GPU' matches GPU.0, GPU.1); virtual ones check their own list."""
    name = device.split(":")[0]
    if name in VIRTUAL_DEVICES:
        return
    if not any(found == name or found.split(".")[0] == name for found in available):
        raise RuntimeError(
            f"OpenVINO device '{device}' is not available here (available: {', '.join(available) or 'none'}); "
            f"set device to one of them, or AUTO"
        )
