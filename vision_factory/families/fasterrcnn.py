"""fasterrcnn: detectors with post-processing inside (models/fasterrcnn.py), recognised by
models/fasterrcnn_interface.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models.bounds import MAX_CLASSES
from ..models.fasterrcnn import FasterRCNNDetector
from ..models.fasterrcnn_interface import FASTERRCNN
from ..parameters import Parameter
from ..results import DETECTIONS
from ..results.frame import Detector
from . import tracking
from .detection import (
    CLASSES,
    CONFIDENCE,
    INPUT_SIZE,
    LABELS,
    MAX_DETECTIONS,
    MODEL,
    input_shape,
    load_detector,
    node,
    read_labels,
)
from .family import AP_LOST, Family, LoadRunner
from .pipeline import DetectionPipeline

# Parameters passed to the adapter as they are, under their own names.
AS_IS = (
    Parameter("boxes_output", "", "output holding the boxes; empty: found by name and shape"),
    Parameter("scores_output", "", "output holding the scores; empty: found by name and shape"),
    Parameter("labels_output", "", "output holding the labels; empty: found by name and shape"),
    Parameter("box_units", "auto", "auto, normalized (0..1) or pixels (of the model input)"),
    Parameter("box_format", "xyxy", "xyxy or yxyx (TensorFlow)"),
    Parameter(
        "label_offset",
        1,
        "the label of class 0: 1 when 0 is the background, else 0",
        minimum=-MAX_CLASSES,
        maximum=MAX_CLASSES,
    ),
    Parameter("resize", "", "stretch, letterbox or none; empty: stretch for fixed inputs, none for dynamic"),
)
PARAMETERS = (MODEL, LABELS, CONFIDENCE, MAX_DETECTIONS, CLASSES, *AS_IS, INPUT_SIZE)
OPTIONS = (  # FasterRCNNDetector's
    "confidence",
    "max_detections",
    "classes",
    "names",
    "boxes_output",
    "scores_output",
    "labels_output",
    "box_units",
    "box_format",
    "label_offset",
    "input_size",
    "resize",
    "rgb",
)


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> Detector:
    options = {parameter.name: values[parameter.name] for parameter in AS_IS}
    options |= {"confidence": values["confidence_threshold"], "max_detections": values["max_detections"]}
    options["names"] = read_labels(values["labels_path"])
    options["input_size"] = input_shape(values["input_size"])
    return load_detector(FAMILY, values, load_runner, options)


FAMILY = Family(
    name="fasterrcnn",
    summary="object detection with boxes, scores and labels outputs (FasterRCNN-style)",
    rule=FASTERRCNN,
    parameters=(*PARAMETERS, *tracking.PARAMETERS),
    build=build,
    result=DETECTIONS,
    node=node("detections", keypoints=False),
    make=FasterRCNNDetector,
    make_pipeline=DetectionPipeline.build,
    accuracy_loss=AP_LOST,
    options=OPTIONS,
)
