"""The one table of backends: each entry agrees with its runner and template, targets load real runners."""

from __future__ import annotations

import importlib.util

import pytest
from click.testing import CliRunner
from conftest import ROOT

from vision_factory.cli import main
from vision_factory.runtime.backends import BACKENDS, BENCH_TARGETS, load_target, parse_targets, statuses
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


def test_one_size_parser_reads_width_then_height():
    assert parse_size("192x256") == (192, 256) and parse_size("1280X720") == (1280, 720)
    for text in ("192", "192x", "x256", "0x256", "-1x2", "1.5x2", "192x256x3"):
        with pytest.raises(ValueError, match=rf"input_size '{text}' is not WIDTHxHEIGHT, e.g. 192x256"):
            parse_size(text, "input_size", "192x256")
