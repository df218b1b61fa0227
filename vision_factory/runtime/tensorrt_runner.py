"""TensorRT behind the Runner interface: ONNX models built into cached engines, run through cuda-python.

Rendered from vision_factory's templates/runners/tensorrt.py.j2: regenerate rather than edit.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ..parameters import MAX_DEVICE_ID, MAX_MEMORY_MB, Parameter, with_defaults
from ..text import shown_path
from .runner import Logger, ModelInputs, TensorInfo, check_model_inputs, default_cache_dir, fixed_dim, model_file

PRECISIONS = ("fp32", "fp16")
INSTALL_HINT = "pip install tensorrt cuda-python (TensorRT also needs an NVIDIA GPU and its driver)"

# The model this runner's package was generated for, and its inputs (name, shape; None: a dynamic dimension): a
# model that takes other inputs is refused at load. None: any model of the family.
MODEL_FILE = ""
MODEL_INPUTS: ModelInputs | None = None
# The precision engines are built in when the node's precision parameter does not set it.
PRECISION = "fp32"

PARAMETERS = (
    Parameter("precision", PRECISION, "fp32 or fp16", launch_argument=True),
    Parameter("engine_cache_dir", "", "engine cache, default $ROS_HOME/<package>/tensorrt_engines"),
    Parameter("device_id", 0, "CUDA device index", minimum=0, maximum=MAX_DEVICE_ID),
    Parameter("workspace_mb", 1024, "TensorRT builder workspace in MiB", minimum=1, maximum=MAX_MEMORY_MB),
)


def _tensorrt() -> Any:
    try:
        import tensorrt
    except ImportError as exc:
        raise RuntimeError(f"TensorRT is not installed: {INSTALL_HINT}") from exc
    return tensorrt


def _cudart() -> Any:
    try:
        from cuda.bindings import runtime as cudart
    except ImportError:
        try:
            from cuda import cudart  # older cuda-python
        except ImportError as exc:
            raise RuntimeError(f"the CUDA Python bindings are not installed: {INSTALL_HINT}") from exc
    return cudart


@functools.cache
def _trt_logger() -> Any:
    """One TensorRT logger per process: TensorRT complains when builder and runtime get different ones."""
    trt = _tensorrt()
    return trt.Logger(trt.Logger.WARNING)


def _check(result: tuple, call: str) -> Any:
    """The value of a cuda-python call, whose result is a tuple led by an error code."""
    error, *values = result
    if int(error) != 0:
        raise RuntimeError(f"{call} failed: {getattr(error, 'name', error)}")
    return values[0] if values else None


@dataclass(frozen=True)
class EngineOptions:
    """The validated TensorRT settings."""

    precision: str
    cache_dir: Path
    device_id: int
    workspace_mb: int

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> EngineOptions:
        """From values of ``PARAMETERS`` (the node's parameters), defaults for the missing ones."""
        values = with_defaults(PARAMETERS, settings, "TensorRT")
        precision = str(values["precision"]).lower()
        if precision not in PRECISIONS:
            raise ValueError(f"precision '{values['precision']}' is not supported: set it to fp32 or fp16")
        device_id, workspace_mb = int(values["device_id"]), int(values["workspace_mb"])
        if device_id < 0:
            raise ValueError(f"device_id must be >= 0, got {device_id}")
        if workspace_mb <= 0:
            raise ValueError(f"workspace_mb must be > 0, got {workspace_mb}")
        cache_dir = Path(values["engine_cache_dir"] or default_cache_dir("tensorrt_engines"))
        return cls(precision, cache_dir, device_id, workspace_mb)


_KEY_LABELS = {  # how a mismatch is told, e.g. "built for TensorRT 10.0.1, now 10.3.0"
    "tensorrt": "TensorRT",
    "gpu": "GPU",
    "compute_capability": "compute capability",
    "precision": "precision",
}


@dataclass(frozen=True)
class EngineKey:
    """Everything an engine depends on: an engine is only reused when all of it is the same.

    Only the .onnx file is hashed: a model with external weight files is not rebuilt when they alone change.
    """

    onnx_sha256: str
    tensorrt: str
    gpu: str
    compute_capability: str  # "major.minor"
    precision: str

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()

    def mismatches(self, sidecar: Mapping[str, Any]) -> list[str]:
        """How an engine's sidecar differs from this key, e.g. 'built for TensorRT 10.0.1, now 10.3.0'."""
        found = []
        for field in fields(self):
            then, now = sidecar.get(field.name), getattr(self, field.name)
            if then != now and field.name == "onnx_sha256":
                found.append("built from another ONNX file")
            elif then != now:
                found.append(f"built for {_KEY_LABELS[field.name]} {then}, now {now}")
        return found


def cached_engine_problem(engine_path: Path, key: EngineKey) -> str | None:
    """Why the engine at ``engine_path`` must not be used for ``key``, judged by its sidecar; None when it may."""
    sidecar_path = engine_path.with_suffix(".json")
    try:
        sidecar = json.loads(sidecar_path.read_text())
    except (OSError, ValueError):
        return f"its sidecar {sidecar_path.name} is missing or unreadable"
    if not isinstance(sidecar, dict):
        return f"its sidecar {sidecar_path.name} is not a JSON object"
    return "; ".join(key.mismatches(sidecar)) or None


def static_input_shapes(shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Input shapes with a dynamic (-1) batch dimension fixed to 1; any other dynamic dimension is an error."""
    problems = []
    for name, shape in shapes.items():
        axes = [str(axis) for axis, size in enumerate(shape) if axis > 0 and size < 0]
        if axes:
            problems.append(f"input '{name}' {shape} on axis {', '.join(axes)}")
    if problems:
        raise ValueError(
            f"the model has dynamic dimensions ({'; '.join(problems)}) but the TensorRT backend builds static "
            "engines: export the ONNX model with fixed shapes (only a dynamic batch dimension is allowed, built as 1)"
        )
    return {name: (1, *shape[1:]) if shape and shape[0] < 0 else shape for name, shape in shapes.items()}


def _varint(data: memoryview, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def _fields(data: memoryview) -> Iterator[tuple[int, int | memoryview]]:
    """The fields of a protobuf message as (field number, value): a varint's number, a length-delimited field's
    bytes; fixed-size fields are skipped."""
    position = 0
    while position < len(data):
        tag, position = _varint(data, position)
        wire_type = tag & 7
        if wire_type == 0:
            value, position = _varint(data, position)
            yield tag >> 3, value
        elif wire_type == 1:
            position += 8
        elif wire_type == 5:
            position += 4
        elif wire_type == 2:
            size, position = _varint(data, position)
            yield tag >> 3, data[position : position + size]
            position += size
        else:
            raise ValueError(f"unexpected protobuf wire type {wire_type}")


def _length_delimited(data: memoryview) -> Iterator[tuple[int, memoryview]]:
    """The length-delimited fields of a protobuf message as (field number, bytes); other fields are skipped."""
    return ((number, value) for number, value in _fields(data) if isinstance(value, memoryview))


def _text(data: memoryview) -> str:
    return bytes(data).decode(errors="replace")


def _messages(data: memoryview, number: int) -> Iterator[memoryview]:
    """The length-delimited fields ``number`` of a protobuf message (its submessages, strings or bytes)."""
    return (value for field, value in _length_delimited(data) if field == number)


def onnx_model_inputs(model: bytes) -> ModelInputs:
    """The graph's inputs as ONNX Runtime lists them, read from the file's protobuf without the onnx package:
    ModelProto.graph (7)'s GraphProto.input (11) less its initializers (5, named by field 8), each ValueInfoProto's
    name (1) and the dims (1) of its type (2)'s tensor_type (1) shape (2): dim_value (1) when fixed, else None."""
    graph = next(_messages(memoryview(model), 7), memoryview(b""))
    initializers = {_text(name) for tensor in _messages(graph, 5) for name in _messages(tensor, 8)}
    inputs = []
    for info in _messages(graph, 11):
        name = next((_text(value) for value in _messages(info, 1)), "")
        dims = [
            fixed_dim(next((value for field, value in _fields(dim) if field == 1 and isinstance(value, int)), None))
            for kind in _messages(info, 2)
            for tensor in _messages(kind, 1)
            for shape in _messages(tensor, 2)
            for dim in _messages(shape, 1)
        ]
        if name not in initializers:
            inputs.append((name, tuple(dims)))
    return tuple(inputs)


def onnx_metadata(model: bytes) -> dict[str, str]:
    """ModelProto.metadata_props (field 14: key 1, value 2), read from the file's protobuf without the onnx package.

    TensorRT engines do not keep ONNX metadata, so it is read from the model on every load.
    """
    metadata = {}
    for number, entry in _length_delimited(memoryview(model)):
        if number == 14:
            values = {field: bytes(value).decode() for field, value in _length_delimited(entry)}
            metadata[values.get(1, "")] = values.get(2, "")
    return metadata


def _write_atomically(path: Path, data: Any) -> None:
    """Write through a temporary file and a rename, so a crash never leaves half a file at ``path``."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _build(trt: Any, model: Path, options: EngineOptions, logger: Logger) -> Any:
    """A serialized engine for ``model``; raises ValueError for a model TensorRT cannot take."""
    builder = trt.Builder(_trt_logger())
    network = builder.create_network(0)  # explicit batch is the only mode in TensorRT 10
    parser = trt.OnnxParser(network, _trt_logger())
    if not parser.parse_from_file(str(model)):
        errors = "; ".join(str(parser.get_error(index)) for index in range(parser.num_errors))
        raise ValueError(f"TensorRT cannot parse {shown_path(model)}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_mb << 20)
    if options.precision == "fp16":
        config.set_flag(trt.BuilderFlag.FP16)
    shapes = {tensor.name: tuple(tensor.shape) for tensor in map(network.get_input, range(network.num_inputs))}
    fixed = static_input_shapes(shapes)
    if fixed != shapes:  # one profile that pins the dynamic batch dimension to 1
        profile = builder.create_optimization_profile()
        for name, shape in fixed.items():
            if shape != shapes[name]:
                profile.set_shape(name, shape, shape, shape)
        config.add_optimization_profile(profile)
    started = time.monotonic()
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise RuntimeError(f"TensorRT could not build an engine for {shown_path(model)} (see its log above)")
    logger.info(f"built TensorRT engine for {model.name} ({options.precision}) in {time.monotonic() - started:.1f} s")
    return serialized


def _load_or_build(trt: Any, model: Path, key: EngineKey, options: EngineOptions, logger: Logger) -> tuple:
    """(engine path, runtime, engine): the cached engine for ``key``, else a new one, built and cached."""
    engine_path = options.cache_dir / f"{model.stem}-{key.digest()[:16]}.engine"
    runtime = trt.Runtime(_trt_logger())
    if not engine_path.is_file():
        logger.info(f"no cached TensorRT engine for {model.name}: building {engine_path} (this can take minutes)")
    else:
        problem = cached_engine_problem(engine_path, key)
        if problem is None:
            engine = runtime.deserialize_cuda_engine(engine_path.read_bytes())
            if engine is not None:
                logger.info(f"TensorRT engine loaded from {engine_path}")
                return engine_path, runtime, engine
            problem = "TensorRT cannot deserialize it"
        logger.warning(f"stale engine {engine_path}: {problem}; rebuilding")
    serialized = _build(trt, model, options, logger)
    options.cache_dir.mkdir(parents=True, exist_ok=True)
    _write_atomically(engine_path, serialized)  # the engine first: a sidecar vouches for a complete engine
    _write_atomically(engine_path.with_suffix(".json"), json.dumps(asdict(key), indent=2).encode())
    engine = runtime.deserialize_cuda_engine(serialized)
    if engine is None:
        raise RuntimeError(f"TensorRT cannot deserialize the engine it has just built: {engine_path}")
    return engine_path, runtime, engine


def _select_gpu(cudart: Any, device_id: int) -> tuple[str, str]:
    """Make ``device_id`` the current device; its name and compute capability ("major.minor")."""
    error, count = cudart.cudaGetDeviceCount()
    if int(error) != 0 or count == 0:
        raise RuntimeError(f"no usable CUDA device ({getattr(error, 'name', error)}): {INSTALL_HINT}")
    if device_id >= count:
        raise ValueError(f"device_id {device_id} is out of range: this machine has {count} CUDA device(s)")
    _check(cudart.cudaSetDevice(device_id), "cudaSetDevice")
    properties = _check(cudart.cudaGetDeviceProperties(device_id), "cudaGetDeviceProperties")
    name = properties.name
    if isinstance(name, bytes):
        name = name.split(b"\0", 1)[0].decode(errors="replace")
    return str(name), f"{properties.major}.{properties.minor}"


@dataclass(frozen=True)
class _Binding:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    pointer: int  # device memory, allocated once: the engine's shapes are static


class TensorRtRunner:
    """A TensorRT engine built from the ONNX model for this GPU, cached on disk, run on its own CUDA stream.

    Engines are static: a dynamic batch dimension is built as 1, so inputs and outputs keep their shapes
    and device buffers are allocated once.
    """

    backend = "tensorrt"
    PARAMETERS = PARAMETERS

    def __init__(self, model_path: str | os.PathLike, options: EngineOptions, logger: Logger):
        self.options = options
        self.metadata: dict[str, str] = {}
        self.inputs: list[TensorInfo] = []
        self.outputs: list[TensorInfo] = []
        self._cudart: Any = None
        self._runtime: Any = None
        self._engine: Any = None
        self._context: Any = None
        self._stream: Any = None
        self._inputs: list[_Binding] = []
        self._outputs: list[_Binding] = []
        path = model_file(model_path)
        model = path.read_bytes()
        # before TensorRT is needed, and before minutes of building an engine
        check_model_inputs(path, onnx_model_inputs(model), MODEL_INPUTS, MODEL_FILE)
        trt = _tensorrt()
        self._cudart = _cudart()
        try:
            self._open(trt, path, model, logger)
        except BaseException:
            self.close()
            raise

    @classmethod
    def prepare(cls, settings: Mapping[str, Any]) -> str:
        """TensorRT and the CUDA runtime loaded, the logger made, the device made current (its CUDA context:
        once per process); '' when ``settings``' device is here, else why not."""
        _tensorrt()
        _trt_logger()
        cudart = _cudart()
        try:
            _select_gpu(cudart, EngineOptions.from_settings(settings).device_id)
        except (ValueError, RuntimeError) as problem:
            return str(problem)
        return ""

    @classmethod
    def load(cls, model_path: str | os.PathLike, settings: Mapping[str, Any], logger: Logger) -> TensorRtRunner:
        return cls(model_path, EngineOptions.from_settings(settings), logger)

    def _open(self, trt: Any, path: Path, model: bytes, logger: Logger) -> None:
        cudart = self._cudart
        self.gpu, capability = _select_gpu(cudart, self.options.device_id)
        self.key = EngineKey(
            hashlib.sha256(model).hexdigest(), trt.__version__, self.gpu, capability, self.options.precision
        )
        self.engine_path, self._runtime, self._engine = _load_or_build(trt, path, self.key, self.options, logger)
        self.metadata = onnx_metadata(model)
        self._context = self._engine.create_execution_context()
        if self._context is None:
            raise RuntimeError(f"TensorRT could not create an execution context for {self.engine_path}")
        self._stream = _check(cudart.cudaStreamCreate(), "cudaStreamCreate")
        names = [self._engine.get_tensor_name(index) for index in range(self._engine.num_io_tensors)]
        inputs = {name for name in names if self._engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT}
        for name in inputs:
            if -1 in tuple(self._engine.get_tensor_shape(name)):  # the batch dimension the only profile pins
                if not self._context.set_input_shape(name, self._engine.get_tensor_profile_shape(name, 0)[1]):
                    raise RuntimeError(f"TensorRT refused the profile shape of input '{name}'")
        for name in names:
            shape = tuple(self._context.get_tensor_shape(name))
            if -1 in shape:
                raise RuntimeError(f"output '{name}' has a data-dependent shape {shape}: not supported by this backend")
            dtype = np.dtype(trt.nptype(self._engine.get_tensor_dtype(name)))
            pointer = _check(cudart.cudaMalloc(max(math.prod(shape) * dtype.itemsize, 1)), "cudaMalloc")
            binding = _Binding(name, shape, dtype, int(pointer))
            (self._inputs if name in inputs else self._outputs).append(binding)
            if not self._context.set_tensor_address(name, binding.pointer):
                raise RuntimeError(f"TensorRT refused the device address of tensor '{name}'")
        self.inputs = [TensorInfo(b.name, b.shape, b.dtype.name) for b in self._inputs]
        self.outputs = [TensorInfo(b.name, b.shape, b.dtype.name) for b in self._outputs]

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        if self._context is None:
            raise RuntimeError("the TensorRT runner is closed")
        if set(feeds) != {b.name for b in self._inputs}:
            raise ValueError(f"feeds {sorted(feeds)} do not match the inputs {[b.name for b in self._inputs]}")
        arrays = [np.ascontiguousarray(feeds[b.name]) for b in self._inputs]  # alive until the stream is synced
        for binding, array in zip(self._inputs, arrays):
            if array.shape != binding.shape or array.dtype != binding.dtype:
                raise ValueError(
                    f"input '{binding.name}' must be {binding.dtype} {binding.shape}, got {array.dtype} {array.shape}"
                )
        cudart = self._cudart
        _check(cudart.cudaSetDevice(self.options.device_id), "cudaSetDevice")  # run() may come from another thread
        to_device = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
        for binding, array in zip(self._inputs, arrays):
            copy = cudart.cudaMemcpyAsync(binding.pointer, array.ctypes.data, array.nbytes, to_device, self._stream)
            _check(copy, "cudaMemcpyAsync")
        if not self._context.execute_async_v3(int(self._stream)):
            raise RuntimeError("TensorRT could not run the engine (see its log above)")
        results = [np.empty(b.shape, b.dtype) for b in self._outputs]
        to_host = cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
        for binding, result in zip(self._outputs, results):
            copy = cudart.cudaMemcpyAsync(result.ctypes.data, binding.pointer, result.nbytes, to_host, self._stream)
            _check(copy, "cudaMemcpyAsync")
        _check(cudart.cudaStreamSynchronize(self._stream), "cudaStreamSynchronize")
        return results

    def describe(self) -> str:
        return f"TensorRT {self.key.tensorrt} on {self.gpu} ({self.options.precision}, engine {self.engine_path.name})"

    def close(self) -> None:
        """Free the device memory and the stream; the runner cannot run afterwards. Idempotent."""
        cudart, self._cudart = self._cudart, None
        self._context = None  # before the memory it points at
        if cudart is not None:  # teardown: errors are not worth raising here
            for binding in self._inputs + self._outputs:
                cudart.cudaFree(binding.pointer)
            if self._stream is not None:
                cudart.cudaStreamDestroy(self._stream)
        self._inputs, self._outputs, self._stream = [], [], None
        self._engine = self._runtime = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter exit CUDA may be gone already
            self.close()


def build_engine_main(argv: list[str] | None = None) -> int:
    """Build the engine into the cache before deployment (or check the cached one); prints its path.

    Run as ``python -m <package>.runtime.tensorrt_runner --model model.onnx --precision fp16``.
    """
    parser = argparse.ArgumentParser(description="Build the TensorRT engine of an ONNX model into the engine cache.")
    parser.add_argument("--model", required=True, help="ONNX model file")
    for parameter in PARAMETERS:
        option = "--cache-dir" if parameter.name == "engine_cache_dir" else f"--{parameter.name.replace('_', '-')}"
        kind, default = type(parameter.default), parameter.default
        parser.add_argument(option, dest=parameter.name, type=kind, default=default, help=parameter.description)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    settings = {parameter.name: getattr(args, parameter.name) for parameter in PARAMETERS}
    try:
        runner = TensorRtRunner.load(args.model, settings, logging.getLogger(__name__))
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(runner.engine_path)
    runner.close()
    return 0


if __name__ == "__main__":
    sys.exit(build_engine_main())
