"""What a new user tripped on (issue 21, item 9): the tools say what they do and do what they say."""

from __future__ import annotations

import json

import cv2
import pytest
from click.testing import CliRunner
from conftest import SHARED

from vision_factory.cli import main
from vision_factory.tools.bags import write_image_bag
from vision_factory.tools.replay import replay

SHAPES_MODEL = SHARED / "models" / "shapes-yolov8n.onnx"
SHAPES_IMAGES = SHARED / "data" / "shapes-val" / "images"
needs_shapes = pytest.mark.skipif(not SHAPES_MODEL.is_file(), reason=f"needs {SHAPES_MODEL}")


@needs_shapes
def test_replay_writes_detections_as_predict_prints_them(tmp_path):
    """replay's detections.json holds, per frame, the record `predict --format json` prints for that image: the same
    keys, the same class ids (from the node's class map, not -1) and names, the same boxes."""
    images = sorted(SHAPES_IMAGES.glob("*.jpg"))[:3]
    printed = CliRunner().invoke(
        main, ["predict", "--model-type", "yolo", "--model", str(SHAPES_MODEL), *map(str, images), "--format", "json"]
    )
    assert printed.exit_code == 0, printed.output
    predicted = [json.loads(line) for line in printed.output.splitlines()]
    assert sum(len(record["detections"]) for record in predicted) >= 3

    bag = write_image_bag(tmp_path / "bag", [cv2.imread(str(image)) for image in images])
    result = replay(bag, tmp_path / "out", node="yolo", params={"model_path": str(SHAPES_MODEL)})
    assert result.missing_frames == [], open(result.node_log).read()
    replayed = json.loads(open(result.detections_json).read())
    assert len(replayed) == len(predicted)
    for frame, (ours, theirs) in enumerate(zip(replayed, predicted)):
        assert ours.keys() == theirs.keys()
        assert (ours["image"], ours["frame"]) == (f"{bag}:{frame}", frame)
        assert (ours["width"], ours["height"]) == (theirs["width"], theirs["height"])
        assert [d.keys() for d in ours["detections"]] == [d.keys() for d in theirs["detections"]]
        assert [d["class_id"] for d in ours["detections"]] == [d["class_id"] for d in theirs["detections"]]
        assert [d["class_name"] for d in ours["detections"]] == [d["class_name"] for d in theirs["detections"]]
        for a, b in zip(ours["detections"], theirs["detections"]):
            assert a["xyxy"] == pytest.approx(b["xyxy"], abs=1e-3)
            assert a["score"] == pytest.approx(b["score"], abs=1e-5)
