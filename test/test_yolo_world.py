"""YOLO-World and YOLOE against test/data/yolo_world/reference.json (benchmarks/make_yolo_world.py: what Ultralytics
8.4's own ``predict`` returned on the PyTorch models, recorded when the files were made; no PyTorch here):

- an export with its classes baked in (Ultralytics' export after the classes are set) runs as a plain ``yolo`` model
  with Ultralytics' boxes;
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import skimage.data

from vision_factory.models.model_file import recognise, summarize
from vision_factory.models.yolo import YoloDetector
from vision_factory.runtime.onnx_runner import OnnxRunner

DATA = Path(__file__).parent / "data" / "yolo_world"
REFERENCE = json.loads((DATA / "reference.json").read_text())
MODELS = {model["file"]: model for model in REFERENCE["models"]}
BAKED = ("yolov8n-worldv2-baked.onnx", "yoloe-11n-baked.onnx")
PIXELS, SCORE = 2.0, 0.01
LOG = logging.getLogger("test")


@functools.cache
def frame(name: str) -> np.ndarray:
    return np.ascontiguousarray(getattr(skimage.data, name)()[..., ::-1])  # RGB -> BGR, as the maker fed it


@functools.cache
def runner(file: str) -> OnnxRunner:
    path = DATA / file
    recorded = MODELS[file]["sha256"] if file in MODELS else REFERENCE["text_encoder_sha256"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == recorded  # the file the reference was made on
    return OnnxRunner.load(path, {}, LOG)


def same_detections(boxes, case: dict, phrases: list[str] | None = None) -> None:
    """Each of Ultralytics' detections found here with its class, box within PIXELS and score within SCORE, and
    none besides; only a box scoring within SCORE of the threshold may be missing on one side (another CPU's
    rounding may put it across). ``phrases``: the class names the boxes must carry."""
    free = list(range(len(boxes)))
    for row in case["detections"]:
        same = [i for i in free if boxes.class_ids[i] == row["class_id"]]
        distance = [np.abs(boxes.xyxy[i] - row["xyxy"]).max() for i in same]
        if not same or min(distance) > PIXELS:
            assert row["score"] - case["conf"] <= SCORE, f"{case['image']}: missed {row}"
            continue
        i = same[int(np.argmin(distance))]
        free.remove(i)
        assert abs(float(boxes.scores[i]) - row["score"]) <= SCORE, (case["image"], boxes.scores[i], row)
        if phrases is not None:
            assert boxes.labels[i] == phrases[row["class_id"]]
    assert all(boxes.scores[i] - case["conf"] <= SCORE for i in free), f"{case['image']}: extra boxes {free}"
    assert len(case["detections"]) >= 20  # NMS had work to do


@pytest.mark.parametrize("file", BAKED)
def test_an_export_with_its_classes_baked_in_is_a_plain_yolo_model_with_ultralytics_boxes(file):
    """Ultralytics' export of a YOLO-World / YOLOE model after its classes were set (as set_classes leaves them):
    recognised as yolo, its classes the metadata's names, the boxes of Ultralytics' predict on the PyTorch model."""
    model = MODELS[file]
    recognition = recognise(summarize(DATA / file))
    assert (recognition.family, recognition.details["names"]) == ("yolo", model["phrases"])
    for case in model["cases"]:
        found = YoloDetector(runner(file), confidence=case["conf"])(frame(case["image"])).boxes
        same_detections(found, case, model["phrases"])
