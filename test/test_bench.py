"""vision-factory bench on this machine's CPU backends: every field, the unavailable ones with a reason."""

from __future__ import annotations

import json
import math

import cv2
import pytest
from click.testing import CliRunner

from vision_factory.cli import main
from vision_factory.tools.replay import ReplayResult

FIELDS = ("load_ms", "first_inference_ms", "p50_ms", "p90_ms", "p99_ms", "mean_ms", "throughput_fps", "peak_rss_mb")


def _bench(tmp_path, model, *arguments):
    result = CliRunner().invoke(main, ["bench", str(model), "--out", str(tmp_path), *arguments])
    assert result.exit_code == 0, result.output
    return result.output, json.loads((tmp_path / "bench.json").read_text())["results"]


def test_bench_every_field_and_unavailable_backends_with_reasons(tmp_path, synthetic_models):
    targets = "onnx:cpu,openvino:CPU,onnx:cuda,openvino:NPU,tensorrt:fp16"
    output, results = _bench(
        tmp_path, synthetic_models["subtract"], "--backends", targets, "--runs", "20", "--model-type", "tracknet"
    )
    by_target = {result["target"]: result for result in results}
    assert list(by_target) == targets.split(",")
    for target in ("onnx:cpu", "openvino:CPU"):
        result = by_target[target]
        assert result["available"] and result["runs_on"]
        assert all(result[name] > 0 for name in FIELDS), result
        assert result["p50_ms"] <= result["p90_ms"] <= result["p99_ms"]
        assert abs(result["throughput_fps"] - 1000 / result["mean_ms"]) < 1e-6
        pipeline = result["pipeline"]
        assert pipeline["frame_size"] == "1280x720"
        assert pipeline["inference_ms"] > 0 and pipeline["preprocess_ms"] > 0 and pipeline["fps"] > 0
    assert "CPUExecutionProvider" in by_target["onnx:cpu"]["runs_on"]
    assert "CPU" in by_target["openvino:CPU"]["runs_on"]
    assert "CUDAExecutionProvider not available" in by_target["onnx:cuda"]["reason"]
    assert "device 'NPU' is not available here" in by_target["openvino:NPU"]["reason"]
    assert not by_target["tensorrt:fp16"]["available"] and by_target["tensorrt:fp16"]["reason"]
    assert "unavailable: execution provider(s) CUDAExecutionProvider" in output
    picture = cv2.imread(str(tmp_path / "bench.png"))
    assert picture is not None and picture.shape[0] > 100 and picture.shape[1] > 100


def test_bench_through_the_nodes(tmp_path, synthetic_models):
    output, results = _bench(
        tmp_path,
        synthetic_models["subtract"],
        "--backends",
        "onnx:cpu,openvino:CPU",
        "--runs",
        "20",
        "--model-type",
        "tracknet",
        "--node",
    )
    for result in results:
        node = result["node"]
        assert node["frames"] == 60 and node["steady_fps"] > 0 and node["replay_fps"] > 0
        assert node["latency_p50_ms"] > 0
        assert abs(node["node_over_session"] - node["steady_fps"] / result["throughput_fps"]) < 1e-9
        # the node's own times (its ~/debug/ topics), this package's node and the generated openvino one alike
        assert 0 < node["node_processing_p50_ms"] <= node["node_processing_p99_ms"]
        assert node["node_inference_ms"] > 0 and node["node_preprocess_ms"] > 0 and node["node_postprocess_ms"] > 0
    assert "openvino:CPU node over DDS: steady" in output
    assert "openvino:CPU node's own times per frame (~/debug/): processing p50" in output
    assert "before the end-of-stream flush" in output and "over the whole replay" in output


def test_steady_rate_leaves_out_the_wait_for_the_held_back_frames():
    """Answers every 10 ms, then the node's seq_len - 1 = 7 held-back ones after its 0.5 s flush wait."""
    answered = [10_000_000 * i for i in range(53)] + [1_020_000_000 + i for i in range(7)]
    replayed = ReplayResult(60, 60, [], 1.05, 60 / 1.05, 0, 0, "", "", "", answered_ns=answered)
    assert replayed.steady_fps(held_back=7) == pytest.approx(100.0)
    assert replayed.steady_fps(held_back=0) == pytest.approx(59 / 1.020000006)  # the wait counted
    replayed.answered_ns = [5]
    assert math.isnan(replayed.steady_fps())  # one answer spans no time


def test_bench_refuses_bad_requests(tmp_path, synthetic_models):
    runner = CliRunner()
    model = str(synthetic_models["subtract"])
    unknown = runner.invoke(main, ["bench", model, "--backends", "coreml", "--out", str(tmp_path)])
    assert unknown.exit_code == 1 and "unknown backend 'coreml'" in unknown.output
    node = runner.invoke(main, ["bench", model, "--node", "--out", str(tmp_path)])
    assert node.exit_code == 1 and "--node needs --model-type (" in node.output
    missing = runner.invoke(main, ["bench", "/missing.onnx", "--out", str(tmp_path)])
    assert missing.exit_code == 1 and "model file not found" in missing.output
