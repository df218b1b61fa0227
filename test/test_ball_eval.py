"""vision-factory eval and compare for ball tracking: TrackNet's definitions on hand-built CSVs,
and real runs of the tracker on ONNX Runtime and OpenVINO over a bag."""

from __future__ import annotations

import json

import cv2
import pytest
from click.testing import CliRunner

from vision_factory.cli import main
from vision_factory.tools.bags import write_ball_csv, write_image_bag
from vision_factory.tools.compare import describe_comparison, metric_differences, save_comparison, verdict
from vision_factory.tools.synthetic import BallClip

# Frames of 512x288: image pixels are input pixels, so distances are exact.
TRUTH = [(0, 1, 100, 100), (1, 1, 200, 100), (2, 1, 300, 100), (3, 0, 0, 0), (4, 1, 50, 50), (5, 0, 0, 0), (6, 1, 9, 9)]
PREDICTIONS = [
    (0, 1, 104, 100),  # 4 px: TP (the tolerance is inclusive)
    (1, 1, 203, 102),  # 3.6 px: TP
    (2, 1, 305, 100),  # 5 px: FP1
    (3, 1, 10, 10),  # a ball where there is none: FP2
    (4, 0, 0, 0),  # a ball missed: FN
    (5, 0, 0, 0),  # TN
]  # frame 6 has no row: FN, and reported as missing


def _eval(tmp_path, *arguments):
    result = CliRunner().invoke(main, ["eval", "--model-type", "tracknet", "--out", str(tmp_path / "eval"), *arguments])
    return result, tmp_path / "eval"


def _score_csvs(tmp_path, truth, predictions, frame_size: str):
    """eval on two ball CSVs; the metrics and the output folder."""
    write_ball_csv(tmp_path / "truth.csv", truth)
    write_ball_csv(tmp_path / "pred.csv", predictions)
    arguments = ["--data", str(tmp_path / "truth.csv"), "--predictions", str(tmp_path / "pred.csv")]
    result, out = _eval(tmp_path, *arguments, "--frame-size", frame_size)
    assert result.exit_code == 0, result.output
    return json.loads((out / "eval.json").read_text())["metrics"], out


def test_every_case_on_hand_built_csvs(tmp_path):
    metrics, out = _score_csvs(tmp_path, TRUTH, PREDICTIONS, "512x288")
    assert metrics["counts"] == {"TP": 2, "FP1": 1, "FP2": 1, "FN": 2, "TN": 1}
    assert metrics["accuracy"] == pytest.approx(3 / 7)
    assert metrics["precision"] == pytest.approx(2 / 4)
    assert metrics["recall"] == pytest.approx(2 / 4)
    assert metrics["f1"] == pytest.approx(0.5)
    assert metrics["missing_predictions"] == 1
    assert metrics["mean_error_px"] == pytest.approx((4 + (3**2 + 2**2) ** 0.5) / 2)
    assert "| 0.4286 | 0.5000 | 0.5000 | 0.5000 | 2 | 1 | 1 | 2 | 1 |" in (out / "eval.md").read_text()
    assert cv2.imread(str(out / "trajectory.png")) is not None


def test_distances_are_measured_in_512x288(tmp_path):
    # 1280x720 frames: 10 image px across are 4 input px (TP), 12.5 are 5 (FP1).
    truth, predictions = [(0, 1, 100, 100), (1, 1, 100, 100)], [(0, 1, 110, 100), (1, 1, 112.5, 100)]
    metrics, _ = _score_csvs(tmp_path, truth, predictions, "1280x720")
    assert metrics["counts"] == {
        "TP": 1,
        "FP1": 1,
        "FP2": 0,
        "FN": 0,
        "TN": 0,
    }


@pytest.fixture(scope="module")
def rally(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rally")
    clip = BallClip(num_frames=40, width=1280, height=720, seed=4)
    bag = write_image_bag(folder / "bag", clip.frames())
    truth = write_ball_csv(folder / "truth.csv", [(i, t.visibility, t.x, t.y) for i, t in enumerate(clip.truth)])
    return bag, truth, clip


def test_eval_runs_the_tracker_over_a_bag(tmp_path, rally, synthetic_models):
    bag, truth, clip = rally
    result, out = _eval(
        tmp_path, "--data", str(truth), "--model", str(synthetic_models["subtract"]), "--source", str(bag)
    )
    assert result.exit_code == 0, result.output
    record = json.loads((out / "eval.json").read_text())
    counts = record["metrics"]["counts"]
    warmup_balls = sum(t.visibility for t in clip.truth[:9])  # frames that only feed the median see no ball
    assert counts["FP1"] == counts["FP2"] == 0 and counts["FN"] == warmup_balls
    assert counts["TP"] == sum(t.visibility for t in clip.truth[9:])
    assert len(record["pr_curve"]) == 19 and cv2.imread(str(out / "pr_curve.png")) is not None
    assert "CPUExecutionProvider" in record["runs_on"]


def test_compare_onnx_runtime_and_openvino(tmp_path, rally, synthetic_models):
    bag, truth, _ = rally
    result = CliRunner().invoke(
        main,
        ["compare", "--model-type", "tracknet", "--model", str(synthetic_models["subtract"]), "--source", str(bag),
         "--data", str(truth), "--a", "onnx:cpu", "--b", "openvino:CPU", "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (saved,) = tmp_path.glob("compare_bag_tracknet_subtract-onnx-cpu_vs_tracknet_subtract-openvino-CPU.json")
    report = json.loads(saved.read_text())
    assert report["verdict"] in ("excellent", "good")
    assert report["outputs"]["visibility_disagreements"] == 0
    assert report["outputs"]["frames_compared"] == 40 and report["outputs"]["position_diff_max_px"] <= 2
    assert "openvino" in report["b"]["runs_on"] and "onnxruntime" in report["a"]["runs_on"]


def test_verdict_thresholds():
    """Below 0.001 either way excellent, below 0.01 good; beyond, a rise is better and only a drop is a warning."""
    differences = (0.0, 0.0009, -0.0009, 0.001, 0.0099, -0.0099, 0.01, 0.0172, 0.2, -0.01, -0.2)
    assert [verdict(d) for d in differences] == [
        "excellent", "excellent", "excellent", "good", "good", "good",
        "better", "better", "better", "warning", "warning",
    ]  # fmt: skip


def test_an_improvement_is_never_a_warning(tmp_path):
    """Every metric compared is a score: B above A by 0.01 or more is "better" in its row and the overall verdict,
    never a warning (quantize's INT8 shapes model, AP75 +0.0172, was reported as "(warning)"); a drop is a warning
    naming only the metrics that dropped, the rises said beside them."""
    a = {"AP": 0.4454, "AP50": 0.6325, "AP75": 0.5117, "AR100": 0.6785}
    rose = metric_differences(a, {"AP": 0.4539, "AP50": 0.6364, "AP75": 0.5289, "AR100": 0.6913})
    assert {name: row["verdict"] for name, row in rose["metrics"].items()} == {
        "AP": "good", "AP50": "good", "AP75": "better", "AR100": "better",
    }  # fmt: skip
    assert rose["verdict"] == "better: AP75, AR100 higher by 0.01 or more"
    mixed = metric_differences(a, {"AP": 0.4145, "AP50": 0.5917, "AP75": 0.5289, "AR100": 0.6739})
    assert [row["verdict"] for row in mixed["metrics"].values()] == ["warning", "warning", "better", "good"]
    assert mixed["verdict"] == "warning: AP, AP50 lower by 0.01 or more (AP75 higher)"
    assert metric_differences(a, dict(a))["verdict"] == "excellent"
    configurations = ((tmp_path / "a.onnx", "onnx:cpu"), (tmp_path / "b.onnx", "onnx:cpu"))
    report, path = save_comparison(
        configurations, ["A", "B"], ("data", tmp_path / "val"), rose | {"outputs": {}}, tmp_path
    )
    shown = describe_comparison(report, path)
    assert "AP75: A 0.5117, B 0.5289, difference +0.0172 (better)" in shown and "warning" not in shown


def test_bad_inputs_are_clear_errors(tmp_path):
    (tmp_path / "bad.csv").write_text("frame,x\n1,2\n")
    write_ball_csv(tmp_path / "truth.csv", TRUTH)
    result, _ = _eval(tmp_path, "--data", str(tmp_path / "bad.csv"), "--predictions", str(tmp_path / "truth.csv"))
    assert result.exit_code != 0 and "lacks column(s) Frame, Visibility, X, Y" in result.output
    result, _ = _eval(tmp_path, "--data", str(tmp_path / "truth.csv"), "--predictions", str(tmp_path / "truth.csv"))
    assert result.exit_code != 0 and "--frame-size" in result.output
    result, _ = _eval(tmp_path, "--data", str(tmp_path / "truth.csv"))
    assert result.exit_code != 0 and "give --predictions CSV, or --model and --source" in result.output
    arguments = ["--data", str(tmp_path / "truth.csv"), "--predictions", str(tmp_path / "truth.csv")]
    for size, problem in (("1280-720", "is not WIDTHxHEIGHT"), ("32x32", "at least 64x64")):
        result, _ = _eval(tmp_path, *arguments, "--frame-size", size)
        assert result.exit_code == 2 and problem in result.output, result.output
        assert "Invalid value for --frame-size" in result.output and "--size" not in result.output.replace(
            "--frame-size", ""
        )


def test_eval_reads_a_video(tmp_path, rally, synthetic_models):
    _, truth, clip = rally
    video = tmp_path / "rally.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 30, (clip.width, clip.height))
    for frame in clip.frames():
        writer.write(frame)
    writer.release()
    result, out = _eval(
        tmp_path, "--data", str(truth), "--model", str(synthetic_models["subtract"]), "--source", str(video)
    )
    assert result.exit_code == 0, result.output
    record = json.loads((out / "eval.json").read_text())
    assert record["frame_size"] == [1280, 720] and record["metrics"]["frames"] == 40
    assert record["metrics"]["counts"]["TP"] >= sum(t.visibility for t in clip.truth[10:]) - 2
