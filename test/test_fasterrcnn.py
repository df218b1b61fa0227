"""fasterrcnn adapter: a real YOLO wrapped into the boxes/scores/labels layout with ONNX's own
NonMaxSuppression must detect what YoloDetector detects; decoding rules on constant outputs; clear errors.

Why the wrapped model and YoloDetector can be compared exactly: the wrapper's input is the YOLO
model's (256x256), and the adapter fits a frame to it by a plain resize while YoloDetector
letterboxes. So YoloDetector runs on the frame already resized to 256x256 (its letterbox of a
256x256 image is the image itself), and its boxes are scaled back by the resize factors; both then
see the same tensor. With ``resize="letterbox"`` the adapter sees YoloDetector's own tensor and
must agree with it directly.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from conftest import SHARED
from onnx import TensorProto, helper, numpy_helper
from support.data import UNUSUAL_SHAPES
from support.models import SHAPES_MODEL, wrap_yolo
from support.results import detections_of

from vision_factory.cli import main
from vision_factory.families.registry import family
from vision_factory.models.fasterrcnn import FasterRCNNDetector
from vision_factory.models.model_file import recognise, summarize
from vision_factory.models.yolo import YoloDetector
from vision_factory.runtime.onnx_runner import OnnxRunner

SHAPES_IMAGES = SHARED / "data" / "shapes-val" / "images"
LOG = logging.getLogger("test")
needs_shapes = pytest.mark.skipif(
    not (SHAPES_MODEL.exists() and SHAPES_IMAGES.is_dir()), reason=f"shared model or data not found under {SHARED}"
)


def _runner(path: Path) -> OnnxRunner:
    return OnnxRunner.load(path, {}, LOG)


def _frames(count: int = 20) -> list[np.ndarray]:
    """Non-square frames: two validation images side by side, 512x256."""
    images = [cv2.imread(str(path)) for path in sorted(SHAPES_IMAGES.glob("*.jpg"))[: 2 * count]]
    return [np.hstack(images[i : i + 2]) for i in range(0, len(images) - 1, 2)]


def _agree(ours, theirs, box_tolerance: float) -> None:
    assert [d["class_name"] for d in ours] == [d["class_name"] for d in theirs]
    assert np.allclose([d["score"] for d in ours], [d["score"] for d in theirs], atol=1e-4)
    difference = np.abs(np.array([d["xyxy"] for d in ours]) - np.array([d["xyxy"] for d in theirs]))
    assert difference.max(initial=0) < box_tolerance


@needs_shapes
@pytest.mark.parametrize("style", ["tflite", "torchvision"])
def test_wrapped_yolo_detects_what_yolo_detects(tmp_path, style):
    model = wrap_yolo(tmp_path / f"{style}.onnx", style)
    assert recognise(summarize(model)).family == "fasterrcnn"
    detector = FasterRCNNDetector(_runner(model))
    roles = {"tflite": ("location", "score", "category"), "torchvision": ("boxes", "scores", "labels")}[style]
    assert detector.output_names == dict(zip(("boxes", "scores", "labels"), roles))
    assert detector.names == ["circle", "square", "triangle"] and detector.keypoint_names == []
    assert detector.resize == "stretch" and detector.size == (256, 256)
    yolo = YoloDetector(_runner(SHAPES_MODEL))
    compared = 0
    for frame in _frames():
        ours = detections_of(detector.detect(frame))
        theirs = detections_of(yolo.detect(cv2.resize(frame, (256, 256), interpolation=cv2.INTER_LINEAR)))
        for d in theirs:  # 256x256 -> 512x256
            x1, y1, x2, y2 = d["xyxy"]
            d["xyxy"] = (x1 * 2, y1, x2 * 2, y2)
        _agree(ours, theirs, box_tolerance=0.01)
        compared += len(ours)
    assert compared >= 40  # about 3 shapes per validation image


@needs_shapes
def test_letterbox_mode_sees_yolos_own_input(tmp_path):
    detector = FasterRCNNDetector(_runner(wrap_yolo(tmp_path / "m.onnx")), resize="letterbox")
    yolo = YoloDetector(_runner(SHAPES_MODEL))
    compared = 0
    for frame in _frames(10):
        ours, theirs = detections_of(detector.detect(frame)), detections_of(yolo.detect(frame))
        _agree(ours, theirs, box_tolerance=0.01)
        compared += len(ours)
    assert compared >= 20


@needs_shapes
def test_options_filter_what_the_model_returns(tmp_path):
    runner = _runner(wrap_yolo(tmp_path / "m.onnx", confidence=0.05))
    frame = _frames(1)[0]
    everything = detections_of(FasterRCNNDetector(runner, confidence=0.05).detect(frame))
    assert len({d["class_id"] for d in everything}) >= 2
    squares = detections_of(FasterRCNNDetector(runner, confidence=0.05, classes=[1]).detect(frame))
    assert squares == [d for d in everything if d["class_id"] == 1]
    confident = detections_of(FasterRCNNDetector(runner, confidence=0.5).detect(frame))
    assert confident == [d for d in everything if d["score"] > 0.5]
    assert detections_of(FasterRCNNDetector(runner, confidence=0.05, max_detections=2).detect(frame)) == everything[:2]
    assert all(a["score"] >= b["score"] for a, b in zip(everything, everything[1:]))
    named = detections_of(FasterRCNNDetector(runner, names=["o", "#", "^"], box_units="normalized").detect(frame))
    assert [d["class_name"] for d in named] == ["o#^"[d["class_id"]] for d in named]
    # Wrongly read as pixels, the normalised boxes collapse into the top-left corner.
    pixels = FasterRCNNDetector(runner, box_units="pixels").detect(frame)
    assert max(max(d["xyxy"]) for d in detections_of(pixels)) <= 2


def _constant_model(path: Path, outputs: dict[str, np.ndarray], image_shape=(1, 3, 64, 64), metadata=None) -> Path:
    """A model that returns fixed outputs whatever the image."""
    types = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("int64"): TensorProto.INT64}
    graph = helper.make_graph(
        [helper.make_node("Identity", [f"{name}_value"], [name]) for name in outputs],
        "constant",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(image_shape))],
        [helper.make_tensor_value_info(name, types[value.dtype], list(value.shape)) for name, value in outputs.items()],
        [numpy_helper.from_array(value, f"{name}_value") for name, value in outputs.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    helper.set_model_props(model, metadata or {})
    onnx.save(model, path)
    return path


def _tflite_outputs(boxes, scores, labels, count=None) -> dict[str, np.ndarray]:
    outputs = {
        "location": np.array([boxes], np.float32),
        "category": np.array([labels], np.float32),  # TFLite writes classes as floats
        "score": np.array([scores], np.float32),
    }
    if count is not None:
        outputs["number of detections"] = np.array([count], np.float32)
    return outputs


def test_tensorflow_style_yxyx_boxes_float_labels_and_a_count(tmp_path):
    # Rows: y1, x1, y2, x2 normalised; class 0 is labelled 0 here (label_offset 0); the last row is padding.
    outputs = _tflite_outputs(
        [[0.5, 0.25, 1.0, 0.75], [0.0, 0.0, 0.5, 0.5], [0.1, 0.1, 0.2, 0.2]], [0.6, 0.9, 0.99], [2, 0, 1], count=2
    )
    model = _constant_model(tmp_path / "m.onnx", outputs, metadata={"labels": "cat\ndog\nbird\n"})
    detector = FasterRCNNDetector(_runner(model), box_format="yxyx", label_offset=0)
    assert detector.output_names["count"] == "number of detections"
    frame = np.zeros((200, 400, 3), np.uint8)  # stretched to 64x64: normalised is frame-relative
    detections = detections_of(detector.detect(frame))
    found = [(d["class_name"], d["class_id"], round(d["score"], 2)) for d in detections]
    assert found == [("cat", 0, 0.9), ("bird", 2, 0.6)]
    assert np.allclose(detections[0]["xyxy"], [0, 0, 200, 100])
    assert np.allclose(detections[1]["xyxy"], [100, 100, 300, 200])


def test_pixel_boxes_on_a_dynamic_input_feed_the_frame_as_it_is(tmp_path):
    outputs = {
        "boxes": np.array([[10, 20, 110, 220], [-5, 50, 900, 60]], np.float32),
        "labels": np.array([1, 0], np.int64),  # 0: the background, dropped
        "scores": np.array([0.8, 0.9], np.float32),
    }
    model = _constant_model(tmp_path / "m.onnx", outputs, image_shape=[3, "height", "width"])
    detector = FasterRCNNDetector(_runner(model))
    assert detector.resize == "none" and detector.size is None
    (detection,) = detections_of(detector.detect(np.zeros((300, 500, 3), np.uint8)))
    assert tuple(detection["xyxy"]) == (10, 20, 110, 220) and detection["class_name"] == "class_0"
    stretched = FasterRCNNDetector(_runner(model), input_size=(100, 250))  # frame 500x300 -> 250x100
    (detection,) = detections_of(stretched.detect(np.zeros((300, 500, 3), np.uint8)))
    assert np.allclose(detection["xyxy"], [20, 60, 220, 300])  # y2 660 clipped to the frame


def test_factory_builds_each_family_and_refuses_unknown_options(tmp_path):
    outputs = _tflite_outputs([[0.0, 0.0, 1.0, 1.0]], [0.9], [1])
    runner = _runner(_constant_model(tmp_path / "m.onnx", outputs))
    detector = family("fasterrcnn").detector(runner, confidence=0.5, names=None, resize="", iou=None)
    assert isinstance(detector, FasterRCNNDetector) and detector.confidence == 0.5 and detector.resize == "stretch"
    with pytest.raises(ValueError, match=r"fasterrcnn takes no option iou: it takes confidence, max_detections"):
        family("fasterrcnn").detector(runner, iou=0.5)
    with pytest.raises(ValueError, match="tracknet is not a detector"):
        family("tracknet").detector(runner)
    with pytest.raises(ValueError, match="unknown model family 'ssd': choose one of tracknet, yolo, yolo_pose"):
        family("ssd")
    assert "person_detector" in family("rtmpose").options and "image_size" in family("yolo").options


@needs_shapes
def test_a_yolo_model_is_not_a_fasterrcnn_one():
    with pytest.raises(ValueError, match=r"separate outputs for boxes .* this model has 1 output\(s\): output0 \[1, 7"):
        FasterRCNNDetector(_runner(SHAPES_MODEL))


@pytest.mark.parametrize(
    ("outputs", "options", "error"),
    [
        (
            {
                "a": np.zeros((1, 5, 4), np.float32),
                "b": np.zeros((1, 5), np.float32),
                "c": np.zeros((1, 5), np.float32),
            },
            {},
            r"cannot tell which output holds the scores and labels: .* name them with scores_output, labels_output",
        ),
        (
            {
                "boxes": np.zeros((1, 5, 5), np.float32),
                "scores": np.zeros((1, 5), np.float32),
                "labels": np.zeros((1, 5)),
            },
            {},
            r"boxes output boxes \[1, 5, 5\] is not \[B, N, 4\] or \[N, 4\]",
        ),
        (
            {"boxes": np.zeros((5, 4), np.float32), "scores": np.zeros((1, 5), np.float32), "labels": np.zeros(5)},
            {},
            r"output scores \[1, 5\] does not fit boxes boxes \[5, 4\]: scores and labels must be \[N\]",
        ),
        (
            _tflite_outputs([[0, 0, 1, 1]], [0.5], [1]),
            {"boxes_output": "detection_boxes"},
            r"boxes_output 'detection_boxes' is not an output of the model; its outputs are location \[1, 1, 4\]",
        ),
        (
            _tflite_outputs([[0, 0, 1, 1]], [0.5], [1]),
            {"input_size": (32, 32)},
            r"input_size 32x32 \(width x height\) differs from the model's fixed input 64x64",
        ),
        (_tflite_outputs([[0, 0, 1, 1]], [0.5], [1]), {"resize": "crop"}, "resize 'crop' is not one of stretch"),
    ],
)
def test_layout_errors_name_the_problem_and_the_fix(tmp_path, outputs, options, error):
    outputs = {name: value.astype(np.int64 if name == "labels" else value.dtype) for name, value in outputs.items()}
    model = _constant_model(tmp_path / "m.onnx", outputs)
    with pytest.raises(ValueError, match=error):
        FasterRCNNDetector(_runner(model), **options)


def test_dynamic_input_cannot_be_stretched_without_a_size(tmp_path):
    model = _constant_model(tmp_path / "m.onnx", _tflite_outputs([[0, 0, 1, 1]], [0.5], [1]), [1, 3, "h", "w"])
    with pytest.raises(ValueError, match=r"resize 'letterbox' needs an input size, .* set input_size"):
        FasterRCNNDetector(_runner(model), resize="letterbox")


def test_a_model_returning_mismatched_rows_is_a_clear_error(tmp_path):
    outputs = {
        "boxes": np.zeros((1, 3, 4), np.float32),
        "scores": np.zeros((1, 2), np.float32),
        "labels": np.zeros((1, 3), np.int64),
    }
    model = _constant_model(tmp_path / "m.onnx", outputs)
    detector = FasterRCNNDetector(_runner(model))
    with pytest.raises(ValueError, match=r"returned boxes \[3, 4\], scores \[2\] and labels \[3\] .* expected N x 4"):
        detector.detect(np.zeros((64, 64, 3), np.uint8))


@needs_shapes
def test_predict_and_eval_run_a_fasterrcnn_model(tmp_path):
    """On a square frame, stretch and letterbox are the same resize: predict must print YOLO's record."""
    model = wrap_yolo(tmp_path / "m.onnx")
    image = str(sorted(SHAPES_IMAGES.glob("*.jpg"))[1])
    records = {}
    for kind, path in (("fasterrcnn", model), ("yolo", SHAPES_MODEL)):
        result = CliRunner().invoke(
            main, ["predict", "--model-type", kind, "--model", str(path), image, "--format", "json"]
        )
        assert result.exit_code == 0, result.output
        records[kind] = json.loads(result.output)
    assert records["fasterrcnn"]["detections"] and records["fasterrcnn"] == records["yolo"]
    # Over the validation set at confidence 0.001, as `eval` runs a yolo model (AP about 0.45, AP50 0.64).
    low = wrap_yolo(tmp_path / "low.onnx", confidence=0.001)
    arguments = ["eval", "--model-type", "fasterrcnn", "--model", str(low), "--data", str(SHAPES_IMAGES.parent)]
    result = CliRunner().invoke(main, [*arguments, "--out", str(tmp_path / "eval")])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "eval" / "eval.json").read_text())["metrics"]
    assert metrics["AP50"] == pytest.approx(0.64, abs=0.03) and metrics["AP"] == pytest.approx(0.45, abs=0.03), metrics


@needs_shapes
def test_bench_times_the_fasterrcnn_pipeline(tmp_path):
    model = wrap_yolo(tmp_path / "wrapped.onnx")
    arguments = ["bench", str(model), "--backends", "onnx:cpu", "--runs", "10", "--model-type", "fasterrcnn"]
    result = CliRunner().invoke(main, [*arguments, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (record,) = json.loads((tmp_path / "bench.json").read_text())["results"]
    stages = [record["pipeline"][stage] for stage in ("preprocess_ms", "inference_ms", "postprocess_ms")]
    assert all(value > 0 for value in stages)
    assert record["pipeline"]["fps"] == pytest.approx(1000 / sum(stages))


@needs_shapes
def test_compare_a_fasterrcnn_model_with_itself_on_two_backends(tmp_path):
    model = wrap_yolo(tmp_path / "wrapped.onnx")
    data = SHAPES_IMAGES.parent
    arguments = ["compare", "--model-type", "fasterrcnn", "--model", str(model), "--data", str(data)]
    result = CliRunner().invoke(main, [*arguments, "--a", "onnx:cpu", "--b", "openvino:CPU", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (saved,) = tmp_path.glob("compare_shapes-val_wrapped-onnx-cpu_vs_wrapped-openvino-CPU.json")
    report = json.loads(saved.read_text())
    assert report["verdict"] in ("excellent", "good"), report
    assert report["outputs"]["matched"] > 50


@pytest.mark.parametrize(
    "resize,image_shape",
    [("stretch", (1, 3, 64, 64)), ("letterbox", (1, 3, 64, 64)), ("none", (1, 3, "height", "width"))],
)
def test_unusual_frames_are_fitted_and_detected_in_every_resize_mode(tmp_path, resize, image_shape):
    outputs = _tflite_outputs([[0.25, 0.25, 0.75, 0.75]], [0.9], [1])  # normalised: the middle of the input
    model = _constant_model(tmp_path / "m.onnx", outputs, image_shape=image_shape)
    detector = FasterRCNNDetector(_runner(model), resize=resize)
    for height, width in UNUSUAL_SHAPES:
        (found,) = detections_of(detector.detect(np.full((height, width, 3), 60, np.uint8)))
        x1, y1, x2, y2 = found["xyxy"]
        assert 0 <= x1 <= x2 <= width and 0 <= y1 <= y2 <= height, (resize, height, width, found["xyxy"])
