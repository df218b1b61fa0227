"""yolo: Ultralytics YOLO object detection and instance segmentation (models/yolo.py), recognised by
models/yolo_interface.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models.yolo import YoloDetector
from ..models.yolo_interface import YOLO
from ..results import DETECTIONS
from ..results.frame import Detector
from ..runtime.runner import Runner
from . import tracking
from .detection import (
    CLASSES,
    CONFIDENCE,
    IMAGE_SIZE,
    IOU,
    LABELS,
    MASK_ENCODING,
    MAX_DETECTIONS,
    MODEL,
    load_detector,
    node,
    read_labels,
)
from .family import AP_LOST, Family, LoadRunner
from .pipeline import DetectionPipeline

PARAMETERS = (MODEL, LABELS, CONFIDENCE, IOU, MAX_DETECTIONS, CLASSES, IMAGE_SIZE)
OPTIONS = ("confidence", "iou", "max_detections", "classes", "image_size", "names")  # YoloDetector's, but pose


def options(values: Mapping[str, Any]) -> dict[str, Any]:
    """YoloDetector's options from a node's parameter values (also rtmpose's person detector)."""
    return {
        "confidence": values["confidence_threshold"],
        "iou": values["iou_threshold"],
        "max_detections": values["max_detections"],
        "image_size": values["image_size"],
        "names": read_labels(values["labels_path"]),
    }


def make(runner: Runner, **given: Any) -> YoloDetector:
    return YoloDetector(runner, pose=False, **given)


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> Detector:
    return load_detector(FAMILY, values, load_runner, options(values))


FAMILY = Family(
    name="yolo",
    summary="YOLO object detection (Ultralytics export)",
    rule=YOLO,
    parameters=(*PARAMETERS, MASK_ENCODING, *tracking.PARAMETERS),  # mask_encoding: segmentation models' masks
    build=build,
    result=DETECTIONS,
    node=node("detections", keypoints=False, masks=True),
    make=make,
    make_pipeline=DetectionPipeline.build,
    accuracy_loss=AP_LOST,
    options=OPTIONS,
)
