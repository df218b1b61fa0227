"""ONNX Runtime execution providers: one place that turns parameters into a session.

ONNX Runtime silently falls back to CPU when a provider cannot be created (and
``onnxruntime-gpu`` lists CUDA even on machines without a GPU), so the providers
that really run are read back from the session and checked against the request.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..parameters import MAX_DEVICE_ID, MAX_MEMORY_MB, MAX_THREADS, Parameter, with_defaults
from ..text import shown_path, untrusted
from .runner import PROBE_MODEL, default_cache_dir, model_file

PROVIDER_ALIASES: dict[str, str] = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "trt": "TensorrtExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "dml": "DmlExecutionProvider",
    "directml": "DmlExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
}
# Providers an ONNX Runtime build lists that do not run the model on this machine, and why: never offered as a
# place to run (`backends`, the available providers an error names).
REMOTE_PROVIDERS = {"AzureExecutionProvider": "it sends the inputs to a model served on Azure, not run here"}
DEFAULT_PROVIDER = "cpu"  # what a node runs on unless told (a generated package's runner may state another)
FALLBACK_POLICIES = ("error", "cpu")
GRAPH_OPTIMIZATION_LEVELS = ("disable", "basic", "extended", "all")

log = logging.getLogger(__name__)


def _ort():
    try:
        import onnxruntime
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "ONNX Runtime is not installed: pip install onnxruntime (or onnxruntime-gpu for CUDA/TensorRT; never both)"
        ) from exc
    return onnxruntime


def local_providers() -> list[str]:
    """The providers this ONNX Runtime lists as available, less REMOTE_PROVIDERS, in its order."""
    return [name for name in _ort().get_available_providers() if name not in REMOTE_PROVIDERS]


class ProviderUnavailable(RuntimeError):
    """A requested execution provider that cannot run here. ``problem`` says which and why; the message adds the
    node's fix (its provider_fallback parameter); a tool whose options differ gives its own fix after ``problem``."""

    def __init__(self, problem: str, node_fix: str):
        super().__init__(f"{problem}; {node_fix}")
        self.problem = problem


def resolve_provider_names(spec: str | Sequence[str]) -> list[str]:
    """Turn ``"cuda,cpu"``, ``["tensorrt", "cuda"]`` or full names into ORT provider names.

    Raises ValueError for a name that is neither an alias nor a provider ONNX Runtime knows
    (whether it is available in this install is checked when the session is created).
    """
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    names = [item.strip() for item in items if item and item.strip()]
    if not names:
        raise ValueError("execution_provider is empty: give e.g. 'cpu', 'cuda' or 'cuda,cpu'")
    known = set(_ort().get_all_providers())
    resolved: list[str] = []
    for name in names:
        full = PROVIDER_ALIASES.get(name.lower(), name)
        if full not in known and name.lower() not in PROVIDER_ALIASES:
            aliases = ", ".join(sorted(PROVIDER_ALIASES))
            raise ValueError(
                f"unknown execution provider '{name}': use one of {aliases} or a full ONNX Runtime provider name"
            )
        if full not in resolved:
            resolved.append(full)
    return resolved


def device_to_providers(device: str | None) -> list[str]:
    """Map the TrackNetV3-style ``device`` argument to providers: 'cuda' prefers CUDA."""
    if device is None or str(device).lower().startswith("cpu"):
        return ["CPUExecutionProvider"]
    if str(device).lower().startswith("cuda"):
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return resolve_provider_names(str(device))


PARAMETERS = (
    Parameter(
        "execution_provider",
        DEFAULT_PROVIDER,
        "ONNX Runtime provider(s): cpu, cuda, tensorrt, openvino, rocm, dml, coreml; a list: tensorrt,cuda,cpu",
        launch_argument=True,
        dynamic_typing=True,
    ),
    Parameter("provider_fallback", "error", f"when a requested provider cannot run: {' or '.join(FALLBACK_POLICIES)}"),
    Parameter("device_id", 0, "GPU index for CUDA / TensorRT / ROCm / DirectML", minimum=0, maximum=MAX_DEVICE_ID),
    Parameter("cuda_mem_limit_mb", 0, "CUDA arena limit in MiB, 0 = none", minimum=0, maximum=MAX_MEMORY_MB),
    Parameter("trt_cache_dir", "", "TensorRT provider engine cache, default $ROS_HOME/<package>/trt_cache"),
    Parameter("trt_fp16", False, "let the TensorRT provider build fp16 engines"),
    Parameter(
        "intra_op_threads",
        0,
        f"threads inside an operator, 0 = ONNX Runtime decides; at most {MAX_THREADS}",
        minimum=0,
        maximum=MAX_THREADS,
    ),
    Parameter(
        "inter_op_threads",
        0,
        f"threads across operators, 0 = ONNX Runtime decides; at most {MAX_THREADS}",
        minimum=0,
        maximum=MAX_THREADS,
    ),
    Parameter("graph_optimization", "all", f"graph optimisation level: {', '.join(GRAPH_OPTIMIZATION_LEVELS)}"),
)


@dataclass(frozen=True)
class ProviderConfig:
    """Everything that decides which providers run a model, and how."""

    providers: tuple[str, ...] = ("CPUExecutionProvider",)
    fallback: str = "error"  # "error": fail at start-up; "cpu": log and run on CPU
    device_id: int = 0
    cuda_mem_limit_mb: int = 0  # 0: no limit
    trt_cache_dir: str = ""  # "" -> $ROS_HOME/<package>/trt_cache, <package> the name of the package running it
    trt_fp16: bool = False
    intra_op_threads: int = 0  # 0: ONNX Runtime decides
    inter_op_threads: int = 0
    graph_optimization: str = "all"

    @classmethod
    def create(cls, execution_provider: str | Sequence[str] = DEFAULT_PROVIDER, **options) -> ProviderConfig:
        config = cls(providers=tuple(resolve_provider_names(execution_provider)), **options)
        config.validate()
        return config

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> ProviderConfig:
        """From values of ``PARAMETERS`` (the node's parameters), defaults for the missing ones."""
        values = with_defaults(PARAMETERS, settings, "ONNX Runtime")
        return cls.create(
            values["execution_provider"],
            fallback=values["provider_fallback"],
            device_id=values["device_id"],
            cuda_mem_limit_mb=values["cuda_mem_limit_mb"],
            trt_cache_dir=values["trt_cache_dir"],
            trt_fp16=values["trt_fp16"],
            intra_op_threads=values["intra_op_threads"],
            inter_op_threads=values["inter_op_threads"],
            graph_optimization=values["graph_optimization"],
        )

    def validate(self) -> None:
        if self.fallback not in FALLBACK_POLICIES:
            raise ValueError(f"provider_fallback '{self.fallback}' is not one of {', '.join(FALLBACK_POLICIES)}")
        if self.graph_optimization not in GRAPH_OPTIMIZATION_LEVELS:
            raise ValueError(
                f"graph_optimization '{self.graph_optimization}' is not one of {', '.join(GRAPH_OPTIMIZATION_LEVELS)}"
            )
        checked = {parameter.name: parameter for parameter in PARAMETERS}  # their valid values
        for field in ("device_id", "cuda_mem_limit_mb", "intra_op_threads", "inter_op_threads"):
            checked[field].check(getattr(self, field))

    def provider_options(self, name: str) -> dict[str, str]:
        if name == "CUDAExecutionProvider":
            options = {"device_id": str(self.device_id)}
            if self.cuda_mem_limit_mb:
                options["gpu_mem_limit"] = str(self.cuda_mem_limit_mb * 1024 * 1024)
            return options
        if name == "TensorrtExecutionProvider":
            cache = Path(self.trt_cache_dir or default_cache_dir("trt_cache"))
            return {
                "device_id": str(self.device_id),
                "trt_fp16_enable": str(self.trt_fp16),
                "trt_engine_cache_enable": "True",
                "trt_engine_cache_path": str(cache),
                "trt_timing_cache_enable": "True",
                "trt_timing_cache_path": str(cache),
            }
        if name in ("ROCMExecutionProvider", "MIGraphXExecutionProvider", "DmlExecutionProvider"):
            return {"device_id": str(self.device_id)}
        return {}


def _session_options(config: ProviderConfig):
    ort = _ort()
    options = ort.SessionOptions()
    options.intra_op_num_threads = config.intra_op_threads
    options.inter_op_num_threads = config.inter_op_threads
    options.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[config.graph_optimization]
    # Spinning idle threads burn a whole core between frames of a live stream.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # ORT's own fallback warnings are replaced by our check
    return options


def _usable(wanted: Sequence[str], fallback: str) -> list[str]:
    """Those of the ``wanted`` providers this ONNX Runtime has, in order; a ProviderUnavailable when one is missing
    and ``fallback`` is "error", a RuntimeError when none is there."""
    available = set(local_providers())
    missing = [name for name in wanted if name not in available]
    if missing and fallback == "error":
        raise ProviderUnavailable(
            f"execution provider(s) {', '.join(missing)} not available in this ONNX Runtime "
            f"(available: {', '.join(sorted(available))})",
            "install the matching onnxruntime package or set provider_fallback to 'cpu' to run on CPU instead",
        )
    usable = [name for name in wanted if name in available]
    if not usable:
        raise RuntimeError(f"no usable execution provider among {', '.join(wanted)}")
    return usable


@functools.cache
def _start_runtime() -> None:
    """ONNX Runtime's process-wide state, made once: the environment, the operator schemas, the CPU provider's
    kernel registry and its math library's set-up, which the first session creates and no session's end frees;
    a session of PROBE_MODEL on one thread makes them and goes."""
    ort = _ort()
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(PROBE_MODEL, options, providers=["CPUExecutionProvider"])
        session.run(None, {"x": np.zeros(1, np.float32)})
    except Exception as exc:  # a broken install: ORT raises its own types
        raise RuntimeError(f"ONNX Runtime {ort.__version__} cannot run a one-node model: {exc}") from exc


def prepare_runtime(settings: Mapping[str, Any]) -> str:
    """``Runner.prepare`` for ONNX Runtime: its process-wide state made (RuntimeError when it is not installed);
    '' when the providers ``settings`` ask for are in this ONNX Runtime (or may fall back), else why not. Whether
    a GPU provider really starts is only known when a model's session is created (configure)."""
    _start_runtime()
    try:
        values = with_defaults(PARAMETERS, settings, "ONNX Runtime")
        wanted = resolve_provider_names(values["execution_provider"])
        fallback = values["provider_fallback"]
        _usable([*wanted, *(["CPUExecutionProvider"] if fallback == "cpu" else [])], fallback)
    except (ValueError, RuntimeError) as problem:
        return str(problem)
    return ""


def create_session(model_path: str | os.PathLike, config: ProviderConfig, logger=log):
    """Create an InferenceSession and check that the requested providers really run.

    Raises ValueError for a missing or unloadable model, RuntimeError when the first
    requested provider cannot run and ``config.fallback`` is "error".
    """
    ort = _ort()
    path = model_file(model_path)
    wanted = list(config.providers)
    if config.fallback == "cpu" and "CPUExecutionProvider" not in wanted:
        wanted.append("CPUExecutionProvider")
    if "TensorrtExecutionProvider" in wanted:
        Path(config.provider_options("TensorrtExecutionProvider")["trt_engine_cache_path"]).mkdir(
            parents=True, exist_ok=True
        )
    usable = _usable(wanted, config.fallback)
    try:
        session = ort.InferenceSession(
            str(path),
            sess_options=_session_options(config),
            providers=[(name, config.provider_options(name)) for name in usable],
        )
    except Exception as exc:  # ORT raises several types for bad files
        if _is_provider_failure(exc):
            raise RuntimeError(
                f"could not create an ONNX Runtime session for {shown_path(path)}: {untrusted(exc, 400)}"
            ) from exc
        raise ValueError(f"ONNX Runtime cannot load model {shown_path(path)}: {untrusted(exc, 400)}") from exc
    running = session.get_providers()
    message = fell_back(config, running)
    if message:
        if config.fallback == "error":
            raise ProviderUnavailable(message, "check the driver/CUDA install or set provider_fallback to 'cpu'")
        logger.warning(message + "; falling back as provider_fallback='cpu' allows")
    logger.info(f"ONNX Runtime {ort.__version__} running {path.name} on {', '.join(running)}")
    return session


def fell_back(config: ProviderConfig, running: Sequence[str]) -> str:
    """'' when the first requested provider runs; else what was requested and what runs instead."""
    wanted = config.providers[0]
    if running and running[0] == wanted:
        return ""
    return f"requested execution provider {wanted} did not start (running: {', '.join(running)})"


def _is_provider_failure(exc: Exception) -> bool:
    text = str(exc)
    return any(word in text for word in ("ExecutionProvider", "CUDA", "cudnn", "TensorRT"))
