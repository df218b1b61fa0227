"""Execution provider parameters -> ONNX Runtime sessions (real sessions, CPU here)."""

from __future__ import annotations

import logging

import onnxruntime
import pytest

from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.runtime.providers import ProviderConfig, create_session, resolve_provider_names
from vision_factory.runtime.runner import default_cache_dir


def test_aliases_lists_and_full_names():
    assert resolve_provider_names("cpu") == ["CPUExecutionProvider"]
    assert resolve_provider_names("tensorrt, cuda,cpu") == [
        "TensorrtExecutionProvider",
        "CUDAExecutionProvider",
        "CPUExecutionProvider",
    ]
    assert resolve_provider_names(["OpenVINOExecutionProvider", "cpu", "cpu"]) == [
        "OpenVINOExecutionProvider",
        "CPUExecutionProvider",
    ]
    for alias in ("rocm", "dml", "coreml"):
        assert resolve_provider_names(alias)[0].endswith("ExecutionProvider")


def test_unknown_or_empty_provider_names():
    with pytest.raises(ValueError, match="unknown execution provider 'gpu'"):
        resolve_provider_names("gpu")
    with pytest.raises(ValueError, match="empty"):
        resolve_provider_names(" , ")


def test_config_validation():
    with pytest.raises(ValueError, match="provider_fallback"):
        ProviderConfig.create("cpu", fallback="maybe")
    with pytest.raises(ValueError, match="graph_optimization"):
        ProviderConfig.create("cpu", graph_optimization="max")
    with pytest.raises(ValueError, match="device_id"):
        ProviderConfig.create("cpu", device_id=-1)


def test_provider_options(tmp_path, monkeypatch):
    config = ProviderConfig.create("tensorrt,cuda", device_id=1, cuda_mem_limit_mb=512, trt_fp16=True)
    assert config.provider_options("CUDAExecutionProvider") == {"device_id": "1", "gpu_mem_limit": str(512 << 20)}
    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    trt = config.provider_options("TensorrtExecutionProvider")
    assert trt["trt_fp16_enable"] == "True" and trt["device_id"] == "1"
    assert trt["trt_engine_cache_path"] == str(tmp_path / "vision_factory" / "trt_cache")
    assert default_cache_dir("x") == tmp_path / "vision_factory" / "x"


def test_session_reports_what_really_runs(synthetic_models):
    config = ProviderConfig.create("cpu", intra_op_threads=1, graph_optimization="basic")
    runner = OnnxRunner(synthetic_models[""], config, logging.getLogger("test"))
    assert runner.providers == ["CPUExecutionProvider"]
    assert runner.describe() == "onnxruntime on CPUExecutionProvider"
    assert runner.metadata["seq_len"] == "8"
    assert runner.inputs[0].shape == (1, 24, 288, 512)


def test_unavailable_provider_is_a_startup_error_unless_fallback(synthetic_models, caplog):
    # A provider this ONNX Runtime lacks: CUDA where it is CPU-only (CI), ROCm on a CUDA machine (onnxruntime-gpu
    # lists CUDA and runs it there: the first run on a lent GPU failed here when the test asked for CUDA).
    available = onnxruntime.get_available_providers()
    alias, name = next(
        (a, n) for a, n in (("cuda", "CUDA"), ("rocm", "ROCM")) if f"{n}ExecutionProvider" not in available
    )
    with pytest.raises(RuntimeError, match=f"{name}ExecutionProvider not available.*provider_fallback"):
        create_session(synthetic_models[""], ProviderConfig.create(alias))
    session = create_session(synthetic_models[""], ProviderConfig.create(alias, fallback="cpu"))
    assert session.get_providers() == ["CPUExecutionProvider"]
