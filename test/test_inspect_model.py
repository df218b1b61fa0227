"""models.model_file (inspect) on real ONNX files: synthetic ones built here, and the shared Ultralytics models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import SHARED
from onnx import TensorProto, helper
from support.models import build_model

from vision_factory.models.model_file import as_dict, describe, recognise, summarize
from vision_factory.tools.synthetic import build_inpaint_model, build_tracknet_model

SHARED_MODELS = SHARED / "models"


def inspect(path: Path):
    summary = summarize(path)
    return summary, recognise(summary)


@pytest.mark.parametrize("bg_mode", ["", "subtract", "subtract_concat", "concat"])
def test_synthetic_tracknet_every_bg_mode(tmp_path, bg_mode):
    summary, recognition = inspect(build_tracknet_model(tmp_path / "tracknet.onnx", seq_len=8, bg_mode=bg_mode))
    assert recognition.family == "tracknet"
    assert recognition.details == {"seq_len": 8, "bg_mode": bg_mode}
    assert f"bg_mode {bg_mode!r}" in recognition.reason and "metadata agrees" in recognition.reason
    assert summary.inputs[0].dtype == "float32" and summary.outputs[0].shape == (1, 8, 288, 512)
    assert summary.opset == 17 and summary.ir_version == 8 and summary.producer == "vision_factory"
    assert summary.metadata["seq_len"] == "8"


@pytest.mark.parametrize("bg_mode", ["subtract_concat", "concat"])
def test_tracknet_metadata_settles_ambiguous_channels(tmp_path, bg_mode):
    # with 3 frames both modes take 12 channels: 4 x 3 == 3 x (3 + 1)
    _, recognition = inspect(build_tracknet_model(tmp_path / "tracknet.onnx", seq_len=3, bg_mode=bg_mode))
    assert recognition.details == {"seq_len": 3, "bg_mode": bg_mode}


def test_tracknet_without_metadata_says_when_channels_are_ambiguous(tmp_path):
    model = build_model(tmp_path / "t.onnx", {"input": [1, 12, 288, 512]}, {"heatmap": [1, 3, 288, 512]})
    _, recognition = inspect(model)
    assert recognition.family == "tracknet" and recognition.details["seq_len"] == 3
    assert "a guess" in recognition.reason and "both fit" in recognition.reason


def test_tracknet_metadata_disagreeing_with_shapes_is_reported(tmp_path):
    metadata = {"seq_len": "4", "bg_mode": "subtract"}
    model = build_model(tmp_path / "t.onnx", {"input": [1, 24, 288, 512]}, {"heatmap": [1, 8, 288, 512]}, metadata)
    _, recognition = inspect(model)
    assert recognition.family == "tracknet"
    assert recognition.details == {"seq_len": 8, "bg_mode": ""}
    assert "seq_len=4" in recognition.reason and "bg_mode='subtract'" in recognition.reason
    assert "disagrees" in recognition.reason


def test_tracknet_dynamic_frames_take_seq_len_from_metadata(tmp_path):
    model = build_model(
        tmp_path / "t.onnx",
        {"input": ["batch", 5, 288, 512]},
        {"heatmap": ["batch", "frames", 288, 512]},
        {"seq_len": "5"},
    )
    _, recognition = inspect(model)
    assert recognition.family == "tracknet"
    assert recognition.details == {"seq_len": 5, "bg_mode": "subtract"}
    assert "from metadata" in recognition.reason


def test_one_map_of_heatmap_size_is_tracknet_only_when_its_metadata_says_seq_len_1(tmp_path):
    """A per-pixel model (depth, a mask) of TrackNet's size, one 288x512 map out, is no one-frame TrackNet window;
    a TrackNet over one frame tells itself by its seq_len metadata."""
    dense = build_model(tmp_path / "depth.onnx", {"image": [1, 3, 288, 512]}, {"depth": [1, 1, 288, 512]})
    assert inspect(dense)[1].family == "unknown"
    one_frame = build_tracknet_model(tmp_path / "l1.onnx", seq_len=1, bg_mode="")
    assert inspect(one_frame)[1].family == "tracknet" and inspect(one_frame)[1].details["seq_len"] == 1


def test_tracknet_channels_fitting_no_bg_mode(tmp_path):
    model = build_model(tmp_path / "t.onnx", {"input": [1, 5, 288, 512]}, {"heatmap": [1, 3, 288, 512]})
    _, recognition = inspect(model)
    assert recognition.family == "tracknet" and recognition.details == {"seq_len": 3, "bg_mode": None}
    assert "fit no bg_mode" in recognition.reason


def test_synthetic_inpaintnet(tmp_path):
    _, recognition = inspect(build_inpaint_model(tmp_path / "inpaint.onnx", seq_len=16))
    assert recognition.family == "inpaintnet"
    assert recognition.details == {"seq_len": 16, "coords": "coords", "mask": "mask"}
    assert "[1, 16, 2]" in recognition.reason and "(seq_len from metadata)" not in recognition.reason


def test_inpaintnet_inputs_in_any_order(tmp_path):
    model = build_model(tmp_path / "i.onnx", {"m": [1, 8, 1], "c": [1, 8, 2]}, {"out": [1, 8, 2]})
    _, recognition = inspect(model)
    assert recognition.family == "inpaintnet"
    assert recognition.details == {"seq_len": 8, "coords": "c", "mask": "m"}


def test_yolo_with_ultralytics_metadata(tmp_path):
    metadata = {"task": "detect", "names": "{0: 'circle', 1: 'square', 2: 'triangle'}", "imgsz": "[64, 64]"}
    model = build_model(tmp_path / "y.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 7, 84]}, metadata)
    _, recognition = inspect(model)
    assert recognition.family == "yolo"
    assert recognition.details == {
        "classes": 3,
        "names": ["circle", "square", "triangle"],
        "input_size": (64, 64),
        "dynamic_input": False,
        "transposed": False,
    }
    assert "[1, 7, 84]" in recognition.reason and "task 'detect'" in recognition.reason


def test_yolo_transposed_without_metadata(tmp_path):
    model = build_model(tmp_path / "y.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 84, 7]})
    _, recognition = inspect(model)
    assert recognition.family == "yolo"
    assert recognition.details["classes"] == 3 and recognition.details["transposed"] is True
    assert recognition.details["names"] == []


def test_yolo_dynamic_input_and_anchors(tmp_path):
    model = build_model(tmp_path / "y.onnx", {"images": ["b", 3, "h", "w"]}, {"output0": ["b", 22, "anchors"]})
    _, recognition = inspect(model)
    assert recognition.family == "yolo"
    assert recognition.details["classes"] == 18 and recognition.details["dynamic_input"] is True
    assert recognition.details["input_size"] == ("h", "w")


def test_yolo_names_are_parsed_without_running_code(tmp_path):
    metadata = {"names": "__import__('os').remove('nothing')"}
    model = build_model(tmp_path / "y.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 6, 84]}, metadata)
    _, recognition = inspect(model)
    assert recognition.family == "yolo" and recognition.details["names"] == []


def test_yolo_metadata_names_count_mismatch_is_reported(tmp_path):
    metadata = {"names": "{0: 'a', 1: 'b'}"}
    model = build_model(tmp_path / "y.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 7, 84]}, metadata)
    _, recognition = inspect(model)
    assert recognition.family == "yolo" and "metadata names 2 classes" in recognition.reason


def test_yolo_pose_from_shape_alone(tmp_path):
    model = build_model(tmp_path / "p.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 56, 84]})
    _, recognition = inspect(model)
    assert recognition.family == "yolo_pose"
    assert recognition.details["keypoints"] == 17 and recognition.details["classes"] == 1
    assert "56 = 4 box + 1 score + 17 x 3" in recognition.reason


def test_yolo_pose_from_metadata(tmp_path):
    metadata = {"task": "pose", "kpt_shape": "[5, 3]", "names": "{0: 'hand'}"}
    model = build_model(tmp_path / "p.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 84, 20]}, metadata)
    _, recognition = inspect(model)
    assert recognition.family == "yolo_pose"
    assert recognition.details["keypoints"] == 5 and recognition.details["names"] == ["hand"]
    assert recognition.details["transposed"] is True
    assert "kpt_shape [5, 3]" in recognition.reason and "but the output has" not in recognition.reason


def test_56_channels_with_detect_metadata_is_a_detector(tmp_path):
    model = build_model(tmp_path / "y.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 56, 84]}, {"task": "detect"})
    _, recognition = inspect(model)
    assert recognition.family == "yolo" and recognition.details["classes"] == 52


THREE = "{0: 'circle', 1: 'square', 2: 'triangle'}"


@pytest.mark.parametrize(
    "metadata",
    [
        {"task": "detect", "end2end": "True", "names": THREE},  # YOLO26, YOLOv10
        {"task": "detect", "end2end": "False", "names": THREE, "args": "{'nms': True, 'batch': 1}"},  # nms=True
    ],
)
def test_end_to_end_detector_is_recognised_and_says_nms_does_not_apply(tmp_path, metadata):
    model = build_model(tmp_path / "y.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 300, 6]}, metadata)
    _, recognition = inspect(model)
    assert recognition.family == "yolo" and recognition.details["head"] == "end2end"
    assert recognition.details["classes"] == 3
    assert "end-to-end YOLO detector with 3 classes" in recognition.reason
    assert "iou_threshold does not apply" in recognition.reason


def test_end_to_end_pose_model_is_recognised_with_its_keypoints(tmp_path):
    metadata = {"task": "pose", "end2end": "True", "names": "{0: 'person'}", "kpt_shape": "[17, 3]"}
    model = build_model(tmp_path / "p.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 300, 57]}, metadata)
    _, recognition = inspect(model)
    assert recognition.family == "yolo_pose" and recognition.details["head"] == "end2end"
    assert recognition.details["keypoints"] == 17 and recognition.details["keypoint_dims"] == 3
    assert "but the output has" not in recognition.reason and "iou_threshold does not apply" in recognition.reason


def test_end_to_end_segmentation_is_a_yolo_model_with_masks(tmp_path):
    metadata = {"task": "segment", "end2end": "True", "names": THREE}
    outputs = {"output0": [1, 300, 38], "output1": [1, 32, 16, 16]}
    model = build_model(tmp_path / "s.onnx", {"images": [1, 3, 64, 64]}, outputs, metadata)
    _, recognition = inspect(model)
    assert recognition.family == "yolo" and recognition.details["head"] == "end2end"
    assert recognition.details["masks"] == 32 and recognition.details["classes"] == 3
    assert "end-to-end YOLO instance segmentation model with 3 classes" in recognition.reason
    assert "output1 [1, 32, 16, 16]" in recognition.reason and "iou_threshold does not apply" in recognition.reason
    # rows that are not 6 + the prototypes' 32 channels: named as an end-to-end export no family takes
    odd = build_model(tmp_path / "o.onnx", {"images": [1, 3, 64, 64]}, {**outputs, "output0": [1, 300, 40]}, metadata)
    _, recognition = inspect(odd)
    assert recognition.family == "unknown" and "[1, N, 6 + M] and the mask prototypes" in recognition.reason


def test_yolov5_objectness_head_by_its_metadata_names(tmp_path):
    # YOLOv5's export.py writes stride and names, no task: 8 = 4 box + 1 objectness + 3 classes
    metadata = {"stride": "32", "names": THREE}
    model = build_model(tmp_path / "v5.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 252, 8]}, metadata)
    _, recognition = inspect(model)
    assert recognition.family == "yolo" and recognition.details["head"] == "objectness"
    assert recognition.details["classes"] == 3 and "YOLOv5-style detector with 3 classes" in recognition.reason


def test_yolov5_objectness_head_without_metadata_by_three_anchors_per_cell(tmp_path):
    # 64 x 64: 8 x 8 + 4 x 4 + 2 x 2 = 84 cells at strides 8, 16, 32; 3 anchors each: 252 rows of 5 + 80
    model = build_model(tmp_path / "v5.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 252, 85]})
    _, recognition = inspect(model)
    assert recognition.family == "yolo" and recognition.details["head"] == "objectness"
    assert recognition.details["classes"] == 80 and "252 rows = 3 anchors x the grid cells" in recognition.reason
    # the same rows from an anchor-free head (84 = one per cell) stay a raw YOLOv8-style detector
    raw = build_model(tmp_path / "v8.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 84, 85]})
    assert "head" not in inspect(raw)[1].details


def test_fasterrcnn_by_output_names(tmp_path):
    model = build_model(
        tmp_path / "f.onnx",
        {"image": [3, "height", "width"]},
        {"BBoxes": ["n", 4], "Scores": ["n"], "class_ids": ["n"]},
        int_outputs=("class_ids",),
    )
    summary, recognition = inspect(model)
    assert recognition.family == "fasterrcnn"
    assert recognition.details == {"boxes": "BBoxes", "scores": "Scores", "labels": "class_ids"}
    assert summary.outputs[2].dtype == "int64" and summary.outputs[0].shape == ("n", 4)


def test_fasterrcnn_needs_boxes_of_four(tmp_path):
    model = build_model(
        tmp_path / "f.onnx", {"image": [1, 3, 64, 64]}, {"boxes": [10, 5], "scores": [10], "labels": [10]}
    )
    assert inspect(model)[1].family == "unknown"


def test_rtmpose_by_output_names(tmp_path):
    model = build_model(
        tmp_path / "r.onnx", {"input": [1, 3, 256, 192]}, {"simcc_x": [1, 17, 384], "simcc_y": [1, 17, 512]}
    )
    _, recognition = inspect(model)
    assert recognition.family == "rtmpose"
    assert recognition.details == {
        "keypoints": 17,
        "input_size": (256, 192),
        "simcc_x": "simcc_x",
        "simcc_y": "simcc_y",
    }


def test_rtmpose_by_shapes(tmp_path):
    model = build_model(
        tmp_path / "r.onnx", {"input": [1, 3, 256, 192]}, {"out_y": [1, 26, 512], "out_x": [1, 26, 384]}
    )
    _, recognition = inspect(model)
    assert recognition.family == "rtmpose"
    assert recognition.details["keypoints"] == 26
    assert (recognition.details["simcc_x"], recognition.details["simcc_y"]) == ("out_x", "out_y")


def test_unknown_model_lists_what_it_saw(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, tmp_path / "relu.onnx")
    summary, recognition = inspect(tmp_path / "relu.onnx")
    assert recognition.family == "unknown" and recognition.details == {}
    assert "x [1, 10] float32" in recognition.reason and "y [1, 10] float32" in recognition.reason
    assert summary.metadata == {} and summary.producer == ""
    assert "producer: not recorded" in describe(summary, recognition)


def test_corrupt_file_is_a_clear_error(tmp_path):
    path = tmp_path / "corrupt.onnx"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(ValueError, match=r"is not a readable ONNX model: .*truncated download or a PyTorch \.pt file"):
        summarize(path)


def test_empty_file_is_a_clear_error(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="is not a readable ONNX model: it parses but holds no graph"):
        summarize(path)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="model file not found: .*missing.onnx"):
        summarize(tmp_path / "missing.onnx")


def test_describe_and_json(tmp_path):
    metadata = {"task": "detect", "names": "{0: 'ball'}", "args": "x" * 300}
    model = build_model(tmp_path / "y.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 5, 84]}, metadata)
    summary, recognition = inspect(model)
    text = describe(summary, recognition)
    assert text.splitlines()[0] == f"model: {model}"
    assert "IR version 8, opset 18" in text
    assert "images  [1, 3, 64, 64] float32" in text and "output0  [1, 5, 84] float32" in text
    assert max(len(line) for line in text.splitlines() if line.startswith("  args: ")) <= len("  args: ") + 100
    assert text.splitlines()[-1] == f"looks like: yolo — {recognition.reason}"
    data = json.loads(json.dumps(as_dict(summary, recognition)))
    assert data["recognition"]["family"] == "yolo" and data["recognition"]["details"]["input_size"] == [64, 64]
    assert data["inputs"][0] == {"name": "images", "shape": [1, 3, 64, 64], "dtype": "float32"}
    assert data["metadata"]["args"] == "x" * 300


def shared_model(name: str) -> Path:
    path = SHARED_MODELS / name
    if not path.is_file():
        pytest.skip(f"shared model not found at {path}")
    return path


def test_shared_shapes_yolov8n_is_yolo():
    summary, recognition = inspect(shared_model("shapes-yolov8n.onnx"))
    assert recognition.family == "yolo"
    assert recognition.details == {
        "classes": 3,
        "names": ["circle", "square", "triangle"],
        "input_size": (256, 256),
        "dynamic_input": False,
        "transposed": False,
    }
    assert summary.outputs[0].shape == (1, 7, 1344)


def test_shared_yolo11n_pose_is_yolo_pose():
    summary, recognition = inspect(shared_model("yolo11n-pose.onnx"))
    assert recognition.family == "yolo_pose"
    assert recognition.details["keypoints"] == 17 and recognition.details["classes"] == 1
    assert recognition.details["names"] == ["person"] and recognition.details["input_size"] == (640, 640)
    assert summary.outputs[0].shape == (1, 56, 8400) and summary.opset == 18
