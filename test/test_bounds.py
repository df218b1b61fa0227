"""Memory bounded by what the user allowed, not by what a file says: sizes that a model's metadata or shapes, or a
truth file, state are checked against models/bounds.py (and tools/mot.MAX_IDENTITIES) before anything is allocated
by them. Each case is a real file made here, given to the real command; the error names the key, the value and the
bound (it comes from the check, not from a failed allocation)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from support.cli import assert_refused, run_cli
from support.models import onnx_model

from vision_factory.models.bounds import MAX_CLASSES, MAX_INPUT_PIXELS, MAX_KEYPOINTS, MAX_SEQ_LEN
from vision_factory.tools.bags import write_ball_csv, write_image_bag
from vision_factory.tools.mot import MAX_IDENTITIES


@pytest.fixture
def image(tmp_path):
    path = tmp_path / "frame.png"
    cv2.imwrite(str(path), np.full((48, 64, 3), 90, np.uint8))
    return path


def test_a_dynamic_yolo_whose_metadata_imgsz_is_beyond_the_bound_is_refused_unless_the_user_sets_the_size(
    tmp_path, image
):
    side = 6000  # 36 MP, just past the bound (the report's 40000 would allocate 4.8 GB before failing)
    assert side * side > MAX_INPUT_PIXELS
    model = onnx_model(
        tmp_path / "yolo.onnx",
        {"images": [1, 3, "height", "width"]},
        {"output0": [1, 6, 20]},
        {"task": "detect", "imgsz": f"[{side}, {side}]", "names": "{0: 'a', 1: 'b'}"},
    )
    done = run_cli("predict", "--model-type", "yolo", "--model", str(model), str(image), "--format", "json")
    assert_refused(done, "imgsz", f"{side}x{side}", str(side * side), str(MAX_INPUT_PIXELS), "--imgsz")
    # What the user allows is the user's: the same model at a size given on the command line runs.
    done = run_cli("predict", "--model-type", "yolo", "--model", str(model), str(image), "--imgsz", "320")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("inputs", "outputs", "metadata", "named"),
    [
        pytest.param(
            {"x": [1, "channels", 288, 512]},
            {"heatmap": [1, "frames", 288, 512]},
            {"seq_len": "100000000", "bg_mode": "subtract"},
            ("metadata seq_len", "100000000", f"1..{MAX_SEQ_LEN}"),
            id="tracknet metadata seq_len",
        ),
        pytest.param(
            {"coords": [1, "frames", 2], "mask": [1, "frames", 1]},
            {"output": [1, "frames", 2]},
            {"seq_len": "-3"},
            ("metadata seq_len", "-3", f"1..{MAX_SEQ_LEN}"),
            id="inpaintnet metadata seq_len",
        ),
        pytest.param(
            {"images": [1, 3, 640, 640]},
            {"output0": [1, 56 + 3 * 99_984, 8400 * 40]},
            {"task": "pose", "kpt_shape": "[100001, 3]"},
            ("metadata kpt_shape keypoints", "100001", f"1..{MAX_KEYPOINTS}"),
            id="yolo pose kpt_shape",
        ),
        pytest.param(
            {"images": [1, 3, 640, 640]},
            {"output0": [1, 84, 8400]},
            {"task": "detect", "names": repr(["x"] * (MAX_CLASSES + 1))},
            ("metadata names", str(MAX_CLASSES + 1), f"0..{MAX_CLASSES}"),
            id="yolo names",
        ),
        pytest.param(
            {"images": [1, 3, 6000, 6000]},
            {"output0": [1, 84, 8400]},
            {},
            ("input images [1, 3, 6000, 6000]", "36000000 pixels", str(MAX_INPUT_PIXELS)),
            id="yolo fixed input size",
        ),
        pytest.param(
            {"input": [1, 3, 256, 192]},
            {"simcc_x": [1, MAX_KEYPOINTS + 1, 384], "simcc_y": [1, MAX_KEYPOINTS + 1, 512]},
            {},
            ("the keypoints of output simcc_x", str(MAX_KEYPOINTS + 1), f"1..{MAX_KEYPOINTS}"),
            id="rtmpose keypoints",
        ),
        pytest.param(
            {"crops": [100_000, 3, 256, 128]},
            {"features": [100_000, 512]},
            {},
            ("input crops [100000, 3, 256, 128]", "fixed batch 100000", "1..1024"),
            id="reid fixed batch",
        ),
    ],
)
def test_inspect_refuses_a_model_stating_a_size_beyond_the_bound(tmp_path, inputs, outputs, metadata, named):
    model = onnx_model(tmp_path / "model.onnx", inputs, outputs, metadata)
    assert_refused(run_cli("inspect", str(model)), *named)


def test_eval_refuses_a_tracknet_whose_metadata_seq_len_is_beyond_the_bound_before_running_it(tmp_path):
    model = onnx_model(
        tmp_path / "tracknet.onnx",
        {"x": [1, "channels", 288, 512]},
        {"heatmap": [1, "frames", 288, 512]},
        {"seq_len": str(MAX_SEQ_LEN + 1), "bg_mode": ""},  # the report's 1e8 ran 38 s to 3 GB
    )
    bag = write_image_bag(tmp_path / "clip", [np.zeros((288, 512, 3), np.uint8)] * 4)
    truth = write_ball_csv(tmp_path / "truth.csv", [(frame, 0, 0, 0) for frame in range(4)])
    done = run_cli(
        "eval", "--model-type", "tracknet", "--data", str(truth), "--model", str(model), "--source", str(bag),
        "--out", str(tmp_path / "eval"),
    )  # fmt: skip
    assert_refused(done, "metadata seq_len", str(MAX_SEQ_LEN + 1), f"1..{MAX_SEQ_LEN}")


def test_mot_eval_refuses_more_identities_than_the_bound_before_motmetrics_allocates(tmp_path):
    truth_ids, predicted_ids = MAX_IDENTITIES // 2 + 1, MAX_IDENTITIES // 2  # one more than the bound together
    truth, predictions = tmp_path / "gt.txt", tmp_path / "tracks.txt"
    # Each identity a box in its own frame; the predictions' boxes match the truth's (IoU 1).
    truth.write_text("".join(f"{n + 1},{n + 1},10,10,20,40,1,1,1\n" for n in range(truth_ids)))
    predictions.write_text("".join(f"{n + 1},{n + 1},10,10,20,40,0.9,-1,-1,-1\n" for n in range(predicted_ids)))
    done = run_cli(
        "eval", "--model-type", "track", "--data", str(truth), "--predictions", str(predictions),
        "--out", str(tmp_path / "eval"),
    )  # fmt: skip
    total = truth_ids + predicted_ids
    assert_refused(done, f"{truth_ids} + {predicted_ids} = {total} identities", f"bound of {MAX_IDENTITIES}", "GiB")
    assert not (tmp_path / "eval" / "eval.json").exists()


@pytest.mark.parametrize(
    ("size", "metadata", "named"),
    [
        (6000, {}, ("input images [1, 3, 6000, 6000]", "36000000 pixels", str(MAX_INPUT_PIXELS))),
        (
            320,
            {"labels": "\n".join(f"class {n}" for n in range(MAX_CLASSES + 1))},
            ("metadata labels", str(MAX_CLASSES + 1), f"0..{MAX_CLASSES}"),
        ),
    ],
    ids=["fixed input size", "labels"],
)
def test_predict_refuses_a_fasterrcnn_stating_a_size_beyond_the_bound(tmp_path, image, size, metadata, named):
    model = onnx_model(
        tmp_path / "fasterrcnn.onnx",
        {"images": [1, 3, size, size]},
        {"boxes": [1, "detections", 4], "scores": [1, "detections"], "labels": [1, "detections"]},
        metadata,
    )
    done = run_cli("predict", "--model-type", "fasterrcnn", "--model", str(model), str(image))
    assert_refused(done, *named)
