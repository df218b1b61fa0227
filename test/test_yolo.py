"""YOLO adapter: Ultralytics' letterbox to the pixel, class-aware NMS against a plain loop, both output
layouts, and real trained models (COCO AP on their validation set, keypoints on a real photo)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import cv2
import matplotlib.cbook
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SHARED
from support.data import UNUSUAL_SHAPES
from support.models import _constant_model
from support.results import detections_of

from vision_factory.cli import main
from vision_factory.models.geometry import PAD_VALUE, letterbox
from vision_factory.models.yolo import YoloDetector
from vision_factory.results.boxes import nms
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.coco_eval import evaluate_coco
from vision_factory.tools.commands import UsageError
from vision_factory.tools.predict import detector_from_options
from vision_factory.tools.predict import predict as run_predict

SHAPES_MODEL = SHARED / "models" / "shapes-yolov8n.onnx"
SHAPES_DATA = SHARED / "data" / "shapes-val"
POSE_MODEL = SHARED / "models" / "yolo11n-pose.onnx"
PHOTO = Path(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))  # 512x600, one person


def _needs(path: Path):
    return pytest.mark.skipif(not path.exists(), reason=f"shared model or data not found at {path}")


def test_fixed_size_letterbox_matches_ultralytics_arithmetic():
    image = np.full((200, 300, 3), 50, np.uint8)  # h 200, w 300 into 640x640
    tensor, box = letterbox(image, (640, 640), dynamic=False)
    # r = 640/300; resized (640, round(426.67) = 427); leftover 213 -> top round(106.4) = 106, bottom 107.
    assert tensor.shape == (1, 3, 640, 640) and tensor.dtype == np.float32
    assert (box.left, box.top) == (0, 106)
    assert box.scale_x == 640 / 300 and box.scale_y == 427 / 200
    assert np.all(tensor[0, :, :106] == np.float32(PAD_VALUE / 255)) and np.all(
        tensor[0, :, 533:] == np.float32(PAD_VALUE / 255)
    )
    assert np.allclose(tensor[0, :, 106:533], 50 / 255)


def test_dynamic_letterbox_pads_to_the_stride_only():
    tensor, box = letterbox(np.zeros((200, 300, 3), np.uint8), (640, 640), dynamic=True)
    # leftover 213 % 32 = 21 -> top round(10.4) = 10, bottom round(10.6) = 11: 427 + 21 = 448.
    assert tensor.shape == (1, 3, 448, 640) and (box.left, box.top) == (0, 10)


def test_channels_are_rgb_and_points_map_back_with_separate_scales():
    image = np.zeros((100, 100, 3), np.uint8)
    image[..., 0] = 255  # blue in BGR
    tensor, box = letterbox(image, (64, 128), dynamic=False)  # r = 0.64: 64x64, 32 px left and right
    assert tensor[0, 2, 32, 64] == 1.0 and tensor[0, 0, 32, 64] == 0.0  # channel 2 of RGB is blue
    assert np.allclose(box.to_frame(np.array([[32.0, 0.0], [96.0, 64.0], [0.0, 70.0]])), [[0, 0], [100, 100], [0, 100]])


def _reference_nms(boxes, scores, classes, threshold):
    def iou(a, b):
        w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
        h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
        inter = w * h
        return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)

    keep = []
    for i in sorted(range(len(scores)), key=lambda i: -scores[i]):
        if all(classes[i] != classes[k] or iou(boxes[i], boxes[k]) <= threshold for k in keep):
            keep.append(i)
    return keep


@pytest.mark.parametrize("seed", range(5))
def test_nms_equals_a_plain_loop(seed):
    rng = np.random.default_rng(seed)
    corners = rng.uniform(0, 200, (300, 2))
    boxes = np.concatenate([corners, corners + rng.uniform(10, 80, (300, 2))], axis=1)
    scores, classes = rng.permutation(300) / 300.0, rng.integers(0, 3, 300)
    assert nms(boxes, scores, classes, 0.5).tolist() == _reference_nms(boxes, scores, classes, 0.5)


@pytest.mark.parametrize("limit", [1, 7, 50, 100, 1000])
def test_nms_limit_is_the_first_picks_of_the_full_run(limit):
    rng = np.random.default_rng(limit)
    corners = rng.uniform(0, 400, (2000, 2))
    boxes = np.concatenate([corners, corners + rng.uniform(5, 120, (2000, 2))], axis=1)
    scores, classes = rng.random(2000), rng.integers(0, 4, 2000)
    full = _reference_nms(boxes, scores, classes, 0.45)
    assert nms(boxes, scores, classes, 0.45, limit=limit).tolist() == full[:limit]


@pytest.mark.parametrize("transposed", [False, True])
def test_decoding_both_output_layouts(tmp_path, transposed):
    output = np.zeros((1, 6, 100), np.float32)  # 4 box + 2 classes, 100 anchors
    output[0, :, 0] = [100, 100, 50, 40, 0.1, 0.9]  # square at (75, 80)-(125, 120) in input pixels
    output[0, :, 1] = [104, 100, 50, 40, 0.2, 0.8]  # overlaps it: suppressed
    output[0, :, 2] = [104, 100, 50, 40, 0.85, 0.1]  # same place, other class: kept
    output[0, :, 3] = [30, 30, 10, 10, 0.2, 0.1]  # below the confidence threshold
    model = _constant_model(tmp_path / "m.onnx", output.transpose(0, 2, 1) if transposed else output)
    detector = YoloDetector(OnnxRunner.load(model, {}, logging.getLogger("test")))
    detections = detections_of(detector.detect(np.zeros((128, 512, 3), np.uint8)))  # r = 0.5: 256x64, top pad 96
    assert [(d["class_name"], round(d["score"], 2)) for d in detections] == [("square", 0.9), ("circle", 0.85)]
    # x: 75 / 0.5, 125 / 0.5; y: (80 - 96) / 0.5 = -32 clipped to 0, (120 - 96) / 0.5 = 48
    assert np.allclose(detections[0]["xyxy"], [150, 0, 250, 48])


def test_predict_takes_the_nodes_defaults_and_class_names(tmp_path):
    """A dynamic-input model that recorded imgsz 256 runs at 256 unless --imgsz says otherwise, as the
    nodes do (image_size 0), and --classes takes names as the nodes' classes parameter does."""
    output = np.zeros((1, 6, 16), np.float32)  # 4 box + 2 classes, 16 anchors; boxes in input pixels
    output[0, :, 0] = [40, 40, 20, 20, 0.8, 0.0]  # circle
    output[0, :, 1] = [100, 100, 40, 40, 0.0, 0.9]  # square
    model = _constant_model(tmp_path / "m.onnx", output, size=256, dynamic=True)
    image = tmp_path / "black.png"
    cv2.imwrite(str(image), np.zeros((512, 512, 3), np.uint8))  # at 256: scale 0.5, no padding

    def predict(*options: str) -> list[tuple[str, list[float]]]:
        arguments = ["predict", "--model-type", "yolo", "--model", str(model), str(image), "--format", "json"]
        result = CliRunner().invoke(main, [*arguments, *options])
        assert result.exit_code == 0, result.output
        return [(d["class_name"], d["xyxy"]) for d in json.loads(result.output)["detections"]]

    square, circle = ("square", [160.0, 160.0, 240.0, 240.0]), ("circle", [60.0, 60.0, 100.0, 100.0])
    assert predict() == [square, circle]
    assert predict("--classes", "square") == [square]
    assert predict("--classes", "circle,1") == [square, circle]
    assert predict("--classes", "0") == [circle]
    assert predict("--imgsz", "512") == [("square", [80.0, 80.0, 120.0, 120.0]), ("circle", [30.0, 30.0, 50.0, 50.0])]
    assert predict("--conf", "0.85") == [square]
    arguments = ["predict", "--model-type", "yolo", "--model", str(model), str(image)]
    unknown = CliRunner().invoke(main, [*arguments, "--classes", "hexagon"])
    assert unknown.exit_code == 1 and "'hexagon' is neither a class id nor one of the model's classes" in unknown.output
    wrong = CliRunner().invoke(main, [*arguments, "--person-class", "person"])
    assert wrong.exit_code == 2 and "yolo models take no person_class" in wrong.output


def test_predict_runs_without_click_as_the_command_does(tmp_path):
    """tools/predict: the options as node parameters, one record per image and per video frame, drawn with --save."""
    output = np.zeros((1, 6, 16), np.float32)
    output[0, :, 0] = [40, 40, 20, 20, 0.8, 0.0]  # circle
    output[0, :, 1] = [100, 100, 40, 40, 0.0, 0.9]  # square
    model = _constant_model(tmp_path / "m.onnx", output, size=256, dynamic=True)
    image, video = tmp_path / "black.png", tmp_path / "clip.avi"
    cv2.imwrite(str(image), np.zeros((512, 512, 3), np.uint8))
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10, (512, 512))
    for _ in range(2):
        writer.write(np.zeros((512, 512, 3), np.uint8))
    writer.release()
    detector = detector_from_options("yolo", model, "onnx:cpu", {"--classes": "square", "--conf": None})
    found = list(run_predict(detector, [image, video], save=tmp_path / "drawn"))
    assert [f.record["image"] for f in found] == [str(image), f"{video}:0", f"{video}:1"]
    assert all(f.record["detections"] == detections_of(f.result) for f in found)
    assert found[0].record["detections"] == [
        {"xyxy": [160.0, 160.0, 240.0, 240.0], "score": pytest.approx(0.9), "class_id": 1, "class_name": "square"}
    ]
    assert found[0].line() == f"{image}: square 0.90"
    assert sorted(path.name for path in (tmp_path / "drawn").iterdir()) == [
        "black.png", "clip_000000.jpg", "clip_000001.jpg"
    ]  # fmt: skip
    cli = CliRunner().invoke(main, ["predict", "--model-type", "yolo", "--model", str(model), str(image), "--format",
                                    "json", "--classes", "square"])  # fmt: skip
    assert json.loads(cli.output) == found[0].record
    with pytest.raises(UsageError, match="yolo models take no input_size") as wrong:
        detector_from_options("yolo", model, "onnx:cpu", {"--input-size": "64x64"})
    assert wrong.value.option == "--input-size"


@_needs(SHAPES_MODEL)
@_needs(SHAPES_DATA)
def test_shapes_model_reaches_its_validation_ap(tmp_path):
    """Ultralytics measured mAP50 about 0.64 and mAP50-95 about 0.45 for this model on this set."""
    coco = json.loads((SHAPES_DATA / "annotations.json").read_text())
    detector = YoloDetector(OnnxRunner.load(SHAPES_MODEL, {}, logging.getLogger("test")), confidence=0.001)
    category = {c["name"]: c["id"] for c in coco["categories"]}
    results = []
    for image in coco["images"]:
        for d in detections_of(detector.detect(cv2.imread(str(SHAPES_DATA / "images" / image["file_name"])))):
            x1, y1, x2, y2 = d["xyxy"]
            results.append(
                {
                    "image_id": image["id"],
                    "category_id": category[d["class_name"]],
                    "bbox": [x1, y1, x2 - x1, y2 - y1],
                    "score": d["score"],
                }
            )
    (tmp_path / "results.json").write_text(json.dumps(results))
    metrics = evaluate_coco(SHAPES_DATA / "annotations.json", tmp_path / "results.json", "bbox")
    assert metrics["AP50"] == pytest.approx(0.64, abs=0.03) and metrics["AP"] == pytest.approx(0.45, abs=0.03), metrics


@_needs(POSE_MODEL)
def test_pose_model_on_a_real_photo_through_predict(tmp_path):
    result = CliRunner().invoke(
        main,
        [
            "predict",
            "--model-type",
            "yolo_pose",
            "--model",
            str(POSE_MODEL),
            str(PHOTO),
            "--format",
            "json",
            "--save",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert (record["image"], record["width"], record["height"]) == (str(PHOTO), 512, 600)
    (person,) = record["detections"]
    assert person["class_name"] == "person" and person["score"] > 0.5 and len(person["keypoints"]) == 17
    nose, left_eye, right_eye = person["keypoints"][:3]
    x1, y1, x2, y2 = person["xyxy"]
    assert x1 <= nose[0] <= x2 and y1 <= nose[1] <= y2 and min(nose[2], left_eye[2], right_eye[2]) > 0.5
    assert left_eye[1] < nose[1] and right_eye[1] < nose[1] and right_eye[0] < nose[0] < left_eye[0]
    assert cv2.imread(str(tmp_path / PHOTO.name)) is not None


@_needs(SHAPES_MODEL)
@_needs(SHAPES_DATA)
def test_eval_runs_the_model_over_a_coco_folder(tmp_path):
    arguments = ["eval", "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--data", str(SHAPES_DATA)]
    result = CliRunner().invoke(main, [*arguments, "--out", str(tmp_path), "--backend", "openvino:CPU"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "eval.json").read_text())["metrics"]
    assert metrics["AP50"] == pytest.approx(0.64, abs=0.03) and metrics["AP"] == pytest.approx(0.45, abs=0.03)
    assert len(json.loads((tmp_path / "predictions.json").read_text())) > 0


@_needs(SHAPES_MODEL)
@_needs(SHAPES_DATA)
def test_compare_onnx_runtime_and_openvino_on_a_real_detector(tmp_path):
    arguments = ["compare", "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--data", str(SHAPES_DATA)]
    result = CliRunner().invoke(main, [*arguments, "--a", "onnx:cpu", "--b", "openvino:CPU", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (saved,) = tmp_path.glob("compare_shapes-val_shapes-yolov8n-onnx-cpu_vs_shapes-yolov8n-openvino-CPU.json")
    report = json.loads(saved.read_text())
    assert report["verdict"] in ("excellent", "good"), report  # OpenVINO in f32, as the runner defaults
    outputs = report["outputs"]
    assert outputs["matched"] > 50 and outputs["only_in_a"] == outputs["only_in_b"] == 0
    assert outputs["box_delta_max_px"] < 0.5 and outputs["score_delta_max"] < 0.01
    assert "f32" in report["b"]["runs_on"]


def test_openvino_precision_is_a_checked_parameter(tmp_path):
    from vision_factory.runtime.openvino_runner import OpenVinoRunner

    model = _constant_model(tmp_path / "m.onnx", np.zeros((1, 6, 10), np.float32))
    assert "f32" in OpenVinoRunner.load(model, {"inference_precision": "f32"}, None).describe()
    with pytest.raises(ValueError, match="inference_precision 'fp8' is not one of"):
        OpenVinoRunner.load(model, {"inference_precision": "fp8"}, None)


@_needs(SHAPES_MODEL)
def test_bench_times_the_yolo_pipeline(tmp_path):
    arguments = ["bench", str(SHAPES_MODEL), "--backends", "onnx:cpu", "--runs", "10", "--model-type", "yolo"]
    result = CliRunner().invoke(main, [*arguments, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (record,) = json.loads((tmp_path / "bench.json").read_text())["results"]
    pipeline = record["pipeline"]
    assert pipeline["frame_size"] == "1280x720"
    assert all(pipeline[stage] > 0 for stage in ("preprocess_ms", "inference_ms", "postprocess_ms", "fps"))


@pytest.mark.parametrize("dynamic,pose", [(False, False), (True, False), (False, True)])
def test_unusual_frames_are_letterboxed_and_detected(tmp_path, dynamic, pose):
    """1x20000 rounded to 0 rows and failed in the resize; every shape now gets an input and frame boxes."""
    classes = 1 if pose else 2
    output = np.zeros((1, 4 + classes + 51 * pose, 100), np.float32)
    output[0, :5, 0] = [128, 128, 200, 100, 0.9]  # one object in the middle of the input, whatever the frame
    if pose:
        output[0, 5:, 0] = np.tile([128, 128, 0.8], 17)
    names = ["circle", "square"][:classes]
    detector = YoloDetector(
        OnnxRunner.load(_constant_model(tmp_path / "m.onnx", output, dynamic=dynamic), {}, logging.getLogger()),
        pose=pose,
        names=names,
        image_size=256,
    )
    for height, width in UNUSUAL_SHAPES:
        frame = np.full((height, width, 3), 60, np.uint8)
        tensor, box = detector.preprocess(frame)
        rows, columns = tensor.shape[2:]
        assert rows <= 256 and columns <= 256 and (detector.dynamic or (rows, columns) == (256, 256))
        assert not detector.dynamic or (rows % 32, columns % 32) == (0, 0)
        (found,) = detections_of(detector.detect(frame))
        x1, y1, x2, y2 = found["xyxy"]
        assert 0 <= x1 <= x2 <= width and 0 <= y1 <= y2 <= height, (height, width, found["xyxy"])
        if pose:
            assert all(0 <= x <= width and 0 <= y <= height for x, y, _ in found["keypoints"])
