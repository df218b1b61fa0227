"""vision-factory eval on COCO data whose answers the test knows: AP 1.0 for the truth itself,
and the drop that known box shifts and keypoint offsets must cause."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from support.data import _truth

from vision_factory.cli import main

THRESHOLDS = np.linspace(0.5, 0.95, 10)
# COCO's per-keypoint sigmas (nose, eyes, ears, shoulders, elbows, wrists, hips, knees, ankles).
SIGMAS = np.array([26, 25, 25, 35, 35, 79, 79, 72, 72, 62, 62, 107, 107, 87, 87, 89, 89]) / 1000.0


def _eval(tmp_path, model_type, truth, results):
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    (tmp_path / "results.json").write_text(json.dumps(results))
    result = CliRunner().invoke(
        main,
        ["eval", "--model-type", model_type, "--data", str(tmp_path / "truth.json"),
         "--predictions", str(tmp_path / "results.json"), "--out", str(tmp_path / "out")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads((tmp_path / "out" / "eval.json").read_text())["metrics"]


def test_boxes_equal_to_the_truth_score_one(tmp_path):
    truth = _truth()
    results = [
        {"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": 0.9}
        for a in truth["annotations"]
    ]
    assert _eval(tmp_path, "yolo", truth, results) == {"AP": 1.0, "AP50": 1.0, "AP75": 1.0, "AR100": 1.0}


@pytest.mark.parametrize("iou", [0.62, 0.78, 0.93])
def test_shifted_boxes_lose_exactly_the_thresholds_above_their_iou(tmp_path, iou):
    # A w-wide box moved by dx along x overlaps its truth with IoU (w - dx) / (w + dx).
    truth = _truth()
    shift = 100.0 * (1 - iou) / (1 + iou)
    results = [
        {"image_id": a["image_id"], "category_id": a["category_id"], "score": 0.9,
         "bbox": [a["bbox"][0] + shift, *a["bbox"][1:]]}
        for a in truth["annotations"]
    ]  # fmt: skip
    metrics = _eval(tmp_path, "fasterrcnn", truth, results)
    assert metrics["AP"] == pytest.approx(np.mean(THRESHOLDS <= iou + 1e-9))
    assert metrics["AP50"] == 1.0 and metrics["AP75"] == (1.0 if iou >= 0.75 else 0.0)


def test_a_missed_box_lowers_recall_per_class(tmp_path):
    truth = _truth()
    kept = truth["annotations"][1:]  # the first box (class 1) is missed
    results = [
        {"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": 0.9} for a in kept
    ]
    metrics = _eval(tmp_path, "yolo", truth, results)
    # AR averages per class: class 1 has 3 boxes (one missed: 2/3), class 2 has 2 (2/2).
    assert metrics["AR100"] == pytest.approx((2 / 3 + 1) / 2)


def _oks(offset: float, area: float) -> float:
    """COCO's object keypoint similarity when every keypoint is off by ``offset`` pixels."""
    variances = (2 * SIGMAS) ** 2
    return float(np.mean(np.exp(-(offset**2) / variances / (area + np.spacing(1)) / 2)))


@pytest.mark.parametrize("offset", [0.0, 2.0, 4.0, 8.0])
def test_keypoint_oks_ap(tmp_path, offset):
    truth = _truth(keypoints=True)
    results = []
    for a in truth["annotations"]:
        points = np.array(a["keypoints"], dtype=float).reshape(17, 3)
        points[:, 0] += offset
        results.append(
            {"image_id": a["image_id"], "category_id": 1, "keypoints": points.ravel().tolist(), "score": 0.9}
        )
    for a in truth["annotations"]:
        a["category_id"] = 1
    metrics = _eval(tmp_path, "yolo_pose", truth, results)
    oks = _oks(offset, 100.0 * 100.0)
    assert metrics["AP"] == pytest.approx(np.mean(THRESHOLDS <= oks + 1e-9)), oks
    assert math.isclose(metrics["AP50"], 1.0 if oks >= 0.5 else 0.0)


def test_bad_coco_files_are_clear_errors(tmp_path):
    runner = CliRunner()
    (tmp_path / "truth.json").write_text(json.dumps({"images": []}))
    (tmp_path / "results.json").write_text("[]")
    arguments = ["eval", "--model-type", "yolo", "--data", str(tmp_path / "truth.json"), "--out", str(tmp_path)]
    failed = runner.invoke(main, [*arguments, "--predictions", str(tmp_path / "results.json")])
    assert failed.exit_code == 1 and "is not a COCO annotation file" in failed.output
    (tmp_path / "truth.json").write_text(json.dumps(_truth()))
    (tmp_path / "results.json").write_text(
        json.dumps([{"image_id": 99, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 1}])
    )
    failed = runner.invoke(main, [*arguments, "--predictions", str(tmp_path / "results.json")])
    assert failed.exit_code == 1 and "image ids [99]" in failed.output
    no_predictions = runner.invoke(main, arguments)
    assert no_predictions.exit_code != 0 and "give --predictions" in no_predictions.output


@pytest.mark.parametrize(
    "names, skipped_name",
    [("{0: 'circle', 1: 'square', 2: 'triangle'}", "triangle"), ("", "class_2")],
    ids=["by-name", "by-position"],
)
def test_detections_of_a_class_without_a_category_are_skipped_and_counted(tmp_path, names, skipped_name):
    """A real YOLO model (constant output, run by ONNX Runtime) finds a circle, a square and, scoring
    highest, a triangle on each image; the data set knows only circles and squares. The triangle is
    skipped (AP 1.0): given the last category (square) it would rank first as a false square and
    halve the square's AP (0.75 overall)."""
    import cv2
    from support.models import _constant_model

    output = np.zeros((1, 7, 16), np.float32)  # 4 box values + 3 classes, 16 anchors; input pixels = image pixels
    output[0, :, 0] = [60, 60, 40, 40, 0.9, 0, 0]  # circle
    output[0, :, 1] = [160, 60, 40, 40, 0, 0.6, 0]  # square
    output[0, :, 2] = [160, 160, 40, 40, 0, 0, 0.95]  # triangle
    model = _constant_model(tmp_path / "m.onnx", output, names=names)
    data = tmp_path / "data"
    (data / "images").mkdir(parents=True)
    truth = {
        "images": [{"id": i, "width": 256, "height": 256, "file_name": f"{i}.png"} for i in (1, 2)],
        "annotations": [
            {"id": 2 * i + k, "image_id": i, "category_id": k + 1, "bbox": [40 + 100 * k, 40, 40, 40],
             "area": 1600, "iscrowd": 0}
            for i in (1, 2) for k in (0, 1)
        ],
        "categories": [{"id": 1, "name": "circle"}, {"id": 2, "name": "square"}],
    }  # fmt: skip
    (data / "annotations.json").write_text(json.dumps(truth))
    for image in truth["images"]:
        cv2.imwrite(str(data / "images" / image["file_name"]), np.zeros((256, 256, 3), np.uint8))
    arguments = ["eval", "--model-type", "yolo", "--model", str(model), "--data", str(data), "--out", str(tmp_path)]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 0, result.output + result.stderr
    record = json.loads((tmp_path / "eval.json").read_text())
    assert record["metrics"] == {"AP": 1.0, "AP50": 1.0, "AP75": 1.0, "AR100": 1.0}
    assert record["skipped_detections"] == 2
    predictions = json.loads((tmp_path / "predictions.json").read_text())
    assert sorted(p["category_id"] for p in predictions) == [1, 1, 2, 2]
    assert f"warning: 2 detections skipped, their class has no category in {data}: '{skipped_name}' (id 2): 2" in (
        result.stderr
    )


def test_the_compressed_runs_read_here_are_the_runs_of_the_mask_pycocotools_encoded():
    """coco_masks.rle_counts decodes pycocotools' compressed text (what it checks before pycocotools reads it) to the
    mask's own runs, counted here column by column: masks empty, full, random and of long runs (2048 x 2048)."""
    from pycocotools import mask as coco_mask

    from vision_factory.tools.coco_masks import rle_counts

    rng = np.random.default_rng(0)
    masks = [np.zeros((5, 7), np.uint8), np.ones((5, 7), np.uint8), np.zeros((2048, 2048), np.uint8)]
    masks[2][100:2000, 7:2040] = 1
    masks += [(rng.random(rng.integers(1, 90, 2)) < rng.random()).astype(np.uint8) for _ in range(60)]
    for mask in masks:
        text = coco_mask.encode(np.asfortranarray(mask))["counts"].decode("ascii")
        flat = mask.ravel(order="F")
        changes = np.flatnonzero(np.diff(flat)) + 1
        runs = np.diff(np.concatenate([[0], changes, [flat.size]])).tolist()
        expected = runs if flat[0] == 0 else [0, *runs]  # the first run counts zeros
        assert rle_counts(text, mask.size) == expected
