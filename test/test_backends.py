"""The one table of backends: each entry agrees with its runner and template, targets load real runners."""

from __future__ import annotations

import importlib.util

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from conftest import ROOT

from vision_factory.cli import main
from vision_factory.runtime.backends import BACKENDS, BENCH_TARGETS, load_target, parse_targets, statuses
from vision_factory.runtime.runner import PROBE_MODEL
from vision_factory.text import parse_size


def test_each_backend_option_is_a_parameter_of_its_runner_and_its_template_exists():
    for spec in BACKENDS.values():
        runner = spec.runner()
        assert runner.__name__ == spec.runner_class and runner.__module__.endswith(f".{spec.runner_module}")
        assert spec.option in {parameter.name for parameter in runner.PARAMETERS}, spec.name
        assert (ROOT / "templates" / "runners" / spec.template).is_file()
    assert [target.backend.name for target in parse_targets(BENCH_TARGETS)] == [
        name for name, spec in BACKENDS.items() for _ in spec.bench_options
    ]


def test_a_target_sets_its_backends_option_and_loads_a_real_runner(synthetic_models):
    (target,) = parse_targets(" openvino:GPU ")
    assert (target.label, target.backend.name, target.settings) == ("openvino:GPU", "openvino", {"device": "GPU"})
    assert parse_targets("tensorrt")[0].settings == {}
    with pytest.raises(ValueError, match=r"unknown backend 'onnxx' in 'onnxx:cpu': use onnx, openvino, tensorrt"):
        parse_targets("onnx:cpu,onnxx:cpu")
    with pytest.raises(ValueError, match="no backend given"):
        parse_targets(" , ")
    runner = load_target("onnx:cpu", synthetic_models["subtract"])
    assert type(runner) is BACKENDS["onnx"].runner() and "CPUExecutionProvider" in runner.describe()


def test_statuses_follow_the_table_and_a_missing_backend_shows_its_install_hint():
    found = statuses()
    assert [status.name for status in found] == list(BACKENDS)
    for status in found:
        if not status.installed and status.name != "tensorrt":  # tensorrt: its runner's own message
            assert status.notes == [BACKENDS[status.name].install_hint]


@pytest.mark.skipif(importlib.util.find_spec("tensorrt") is not None, reason="TensorRT is installed here")
def test_a_backend_that_cannot_load_is_an_error_message_not_a_traceback(synthetic_models, tmp_path):
    image = tmp_path / "a.png"
    image.write_bytes(b"")
    arguments = ["predict", "--model-type", "yolo", "--model", str(synthetic_models["subtract"]), str(image)]
    result = CliRunner().invoke(main, [*arguments, "--backend", "tensorrt"])
    assert result.exit_code == 1 and "Error: TensorRT is not installed: pip install tensorrt" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_the_probe_model_is_a_valid_identity_model():
    model = onnx.load_from_string(PROBE_MODEL)
    onnx.checker.check_model(model, full_check=True)
    assert [node.op_type for node in model.graph.node] == ["Identity"]
    session = ort.InferenceSession(PROBE_MODEL, providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": np.array([2.5], np.float32)})[0].tolist() == [2.5]


def test_prepare_loads_each_runtime_here_and_names_what_its_settings_ask_that_is_not_here():
    """``Runner.prepare``, what a node does at creation: '' when the settings' provider or device is here, else
    why not; a runtime that is not installed is an error naming its install."""
    onnx_runner, openvino_runner, tensorrt_runner = (BACKENDS[name].runner() for name in BACKENDS)
    assert onnx_runner.prepare({}) == "" and onnx_runner.prepare({"execution_provider": "cpu"}) == ""
    assert "unknown execution provider 'gpu'" in onnx_runner.prepare({"execution_provider": "gpu"})
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        missing = onnx_runner.prepare({"execution_provider": "cuda"})
        assert "CUDAExecutionProvider not available in this ONNX Runtime" in missing and "provider_fallback" in missing
        assert onnx_runner.prepare({"execution_provider": "cuda", "provider_fallback": "cpu"}) == ""
    else:  # onnxruntime-gpu (a lent GPU machine): listed, so nothing to say until a model's session starts
        assert onnx_runner.prepare({"execution_provider": "cuda"}) == ""
    if importlib.util.find_spec("openvino") is None:  # a machine without the test extra (the GPU run carried none)
        with pytest.raises(RuntimeError, match="OpenVINO is not installed: pip install openvino"):
            openvino_runner.prepare({})
    else:
        assert openvino_runner.prepare({"device": "CPU"}) == ""
        assert "OpenVINO device 'NPU.3' is not available here" in openvino_runner.prepare({"device": "NPU.3"})
    if importlib.util.find_spec("tensorrt") is None:
        with pytest.raises(RuntimeError, match="TensorRT is not installed: pip install tensorrt"):
            tensorrt_runner.prepare({})


def test_one_size_parser_reads_width_then_height():
    assert parse_size("192x256") == (192, 256) and parse_size("1280X720") == (1280, 720)
    for text in ("192", "192x", "x256", "0x256", "-1x2", "1.5x2", "192x256x3"):
        with pytest.raises(ValueError, match=rf"input_size '{text}' is not WIDTHxHEIGHT, e.g. 192x256"):
            parse_size(text, "input_size", "192x256")
