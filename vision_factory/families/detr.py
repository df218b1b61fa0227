"""detr: DETR-family object detection, RT-DETR and D-FINE as Ultralytics, Hugging Face and the RT-DETR repository
export them (models/detr.py), recognised by models/detr_interface.py. No NMS: it has no iou_threshold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models.detr import DetrDetector
from ..models.detr_interface import DETR, SCORE_FUNCTIONS
from ..parameters import Parameter
from ..results import DETECTIONS
from ..results.frame import Detector
from . import tracking
from .detection import CLASSES, CONFIDENCE, IMAGE_SIZE, LABELS, MAX_DETECTIONS, MODEL, load_detector, node, read_labels
from .family import AP_LOST, Family, LoadRunner
from .pipeline import DetectionPipeline

SCORE_FUNCTION = Parameter(
    "score_function",
    "auto",
    "Hugging Face logits + pred_boxes models: sigmoid (RT-DETR, D-FINE), softmax (DETR: a last 'no object' class, "
    "ImageNet-normalised input) or auto: as the model's metadata model_type or its class names say",
    choices=SCORE_FUNCTIONS,
)
PARAMETERS = (MODEL, LABELS, CONFIDENCE, MAX_DETECTIONS, CLASSES, IMAGE_SIZE, SCORE_FUNCTION)
OPTIONS = ("confidence", "max_detections", "classes", "image_size", "names", "score_function")  # DetrDetector's


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> Detector:
    options = {
        "confidence": values["confidence_threshold"],
        "max_detections": values["max_detections"],
        "image_size": values["image_size"],
        "names": read_labels(values["labels_path"]),
        "score_function": values["score_function"],
    }
    return load_detector(FAMILY, values, load_runner, options)


FAMILY = Family(
    name="detr",
    summary="DETR-family object detection (RT-DETR, D-FINE)",
    rule=DETR,
    parameters=(*PARAMETERS, *tracking.PARAMETERS),
    build=build,
    result=DETECTIONS,
    node=node("detections", keypoints=False),
    make=DetrDetector,
    make_pipeline=DetectionPipeline.build,
    accuracy_loss=AP_LOST,
    options=OPTIONS,
)
