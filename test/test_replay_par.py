"""`replay` on par with `verify` (issue 35, finding 4): the node's family recognised from the model file, the node
parameters replay sets itself refused at once naming the option to use, and a segmentation model's masks recorded
(detections.json's COCO RLE, as `predict --format json` writes them) and every file listed in replay.json."""

from __future__ import annotations

import json
import logging

import cv2
import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from conftest import SHARED
from onnx import TensorProto, helper
from support.cli import run_cli

from vision_factory.cli import main
from vision_factory.models.yolo import YoloDetector
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.bags import read_messages, write_image_bag

SHAPES_MODEL = SHARED / "models" / "shapes-yolov8n.onnx"
SHAPES_IMAGES = SHARED / "data" / "shapes-val" / "images"
SEG_MODEL = SHARED / "models" / "shapes-yolov8n-seg.onnx"
SEG_IMAGES = SHARED / "data" / "shapes-seg-val" / "images"
needs_shapes = pytest.mark.skipif(
    not (SHAPES_MODEL.is_file() and SHAPES_IMAGES.is_dir()), reason=f"shared model or data not found under {SHARED}"
)
needs_seg = pytest.mark.skipif(
    not (SEG_MODEL.is_file() and SEG_IMAGES.is_dir()), reason=f"{SEG_MODEL} or {SEG_IMAGES} not found"
)


def _bag(tmp_path, images=SHAPES_IMAGES, count: int = 2):
    frames = [cv2.imread(str(path)) for path in sorted(images.glob("*.jpg"))[:count]]
    return write_image_bag(tmp_path / "bag", frames, fps=10, frame_id="camera")


def _replay(*arguments) -> object:
    """replay refused before anything runs (a unit test: starting the node would fail it, tiers.py's guard)."""
    return CliRunner().invoke(main, ["replay", *map(str, arguments)])


def _replayed(*arguments) -> None:
    """replay run to its end, in a process of its own; exit status 0."""
    done = run_cli("replay", *map(str, arguments))
    assert done.returncode == 0, done.stdout + done.stderr


def _unknown_model(path):
    """An ONNX file no family's rule recognises: one input passed through as its one output."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 7])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 7])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "unknown", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@needs_shapes
def test_replay_without_node_starts_the_family_the_model_file_is(tmp_path):
    """No --node: a YOLO file starts the yolo node (on main, the default tracknet node, which refused the file)."""
    out = tmp_path / "out"
    _replayed(_bag(tmp_path), "--out", out, "-p", f"model_path:={SHAPES_MODEL}")
    assert (out / "yolo_node.log").is_file() and not (out / "tracknet_node.log").exists()
    records = json.loads((out / "detections.json").read_text())
    assert len(records) == 2 and all("detections" in record for record in records)
    assert any(record["detections"] for record in records)
    assert json.loads((out / "replay.json").read_text())["node"] == "yolo"


@needs_shapes
def test_replay_with_a_model_option_is_the_node_model_path(tmp_path):
    """--model FILE, as verify takes it: the node's model_path, its family recognised from it."""
    out = tmp_path / "out"
    _replayed(_bag(tmp_path, count=1), "--out", out, "--model", SHAPES_MODEL)
    assert len(json.loads((out / "detections.json").read_text())) == 1


def test_replay_of_an_unrecognisable_file_names_node_and_the_families(tmp_path):
    model = _unknown_model(tmp_path / "mystery.onnx")
    bag = write_image_bag(tmp_path / "bag", [np.zeros((8, 8, 3), np.uint8)], fps=10)
    result = _replay(bag, "--out", tmp_path / "out", "-p", f"model_path:={model}")
    assert result.exit_code == 2, result.output
    assert "--node" in result.output and "yolo" in result.output and "tracknet" in result.output
    assert "mystery.onnx" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()  # refused before anything ran


def test_replay_without_a_model_or_node_names_both(tmp_path):
    bag = write_image_bag(tmp_path / "bag", [np.zeros((8, 8, 3), np.uint8)], fps=10)
    result = _replay(bag, "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "--node" in result.output and "--model" in result.output
    assert not (tmp_path / "out").exists()


@needs_shapes
def test_a_node_that_contradicts_the_model_file_is_refused_naming_both(tmp_path):
    result = _replay(
        _bag(tmp_path), "--out", tmp_path / "out", "--node", "tracknet", "-p", f"model_path:={SHAPES_MODEL}"
    )
    assert result.exit_code == 2, result.output
    assert "--node tracknet" in result.output and "looks like a yolo model" in result.output
    assert not (tmp_path / "out").exists()  # refused before the node started


@needs_shapes
@pytest.mark.parametrize(
    "param,option",
    [
        ("cameras:=[a, b]", "--camera"),
        ("input_transport:=compressed", "--topic"),
        ("autostart:=false", "replay"),
    ],
)
def test_a_parameter_replay_sets_itself_is_refused_at_once_naming_the_option(tmp_path, param, option):
    """On main, cameras:=[a, b] hung 60 s ('node did not subscribe within 60s'): the node answered on a/ and b/."""
    bag = _bag(tmp_path, count=1)
    result = _replay(bag, "--out", tmp_path / "out", "-p", f"model_path:={SHAPES_MODEL}", "-p", param)
    assert result.exit_code == 2, result.output
    name = param.partition(":=")[0]
    assert f"replay sets {name} itself" in result.output and option in result.output, result.output
    assert not (tmp_path / "out").exists()


@needs_shapes
def test_a_parameter_replay_sets_itself_in_the_params_file_is_refused(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("yolo_node:\n  ros__parameters:\n    cameras: [a, b]\n")
    bag = _bag(tmp_path, count=1)
    result = _replay(bag, "--out", tmp_path / "out", "-p", f"model_path:={SHAPES_MODEL}", "--params-file", config)
    assert result.exit_code == 2, result.output
    assert "replay sets cameras itself" in result.output and "--camera" in result.output
    assert "--params-file" in result.output and not (tmp_path / "out").exists()


@needs_seg
def test_a_segmentation_models_replay_writes_each_detections_mask_as_coco_rle(tmp_path):
    from pycocotools import mask as coco_mask

    out = tmp_path / "out"
    bag = _bag(tmp_path, SEG_IMAGES, count=3)
    _replayed(bag, "--out", out, "--node", "yolo", "-p", f"model_path:={SEG_MODEL}")
    records = json.loads((out / "detections.json").read_text())
    detector = YoloDetector(OnnxRunner.load(SEG_MODEL, {}, logging.getLogger("test")))
    frames = sorted(SEG_IMAGES.glob("*.jpg"))[:3]
    assert len(records) == 3
    for record, path in zip(records, frames):
        expected = detector.detect(cv2.imread(str(path)))
        published = expected.masks.published(expected.boxes)  # as the node's masks label image shows them
        assert len(record["detections"]) == len(expected) > 0
        for written, mask in zip(record["detections"], published.masks):
            rle = written["mask"]
            assert rle["size"] == [record["height"], record["width"]]
            decoded = coco_mask.decode({"size": rle["size"], "counts": rle["counts"].encode()}).astype(bool)
            full = mask.full()
            assert (decoded & full).sum() / (decoded | full).sum() > 0.9
    summary = json.loads((out / "replay.json").read_text())
    assert sorted(summary["files"].values()) == sorted(path.name for path in out.iterdir())
    assert summary["files"]["answers"] == "detections.json"
    assert len(list(read_messages(out / "yolo_outputs", "/masks"))) == 3
