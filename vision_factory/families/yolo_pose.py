"""yolo_pose: Ultralytics YOLO-pose (models/yolo.py with pose), recognised by models/yolo_interface.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models.yolo import YoloDetector
from ..models.yolo_interface import YOLO_POSE
from ..results import POSES
from ..results.frame import Detector
from ..runtime.runner import Runner
from . import tracking, yolo
from .detection import KEYPOINT_THRESHOLD, load_detector, node
from .family import AP_LOST, Family, LoadRunner
from .pipeline import DetectionPipeline

PARAMETERS = (*yolo.PARAMETERS, KEYPOINT_THRESHOLD)


def make(runner: Runner, **given: Any) -> YoloDetector:
    return YoloDetector(runner, pose=True, **given)


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> Detector:
    return load_detector(FAMILY, values, load_runner, yolo.options(values))


FAMILY = Family(
    name="yolo_pose",
    summary="YOLO-pose human pose estimation (Ultralytics export)",
    rule=YOLO_POSE,
    parameters=(*PARAMETERS, *tracking.PARAMETERS),
    build=build,
    result=POSES,
    node=node("poses", keypoints=True),
    make=make,
    make_pipeline=DetectionPipeline.build,
    accuracy_loss=AP_LOST,
    options=yolo.OPTIONS,
)
