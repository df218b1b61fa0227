"""yolo_cls: Ultralytics YOLO image classification (models/yolo_cls.py), recognised by models/yolo_interface.py
(metadata task classify). Its result is each frame's best classes (results/classes.py), published as
vision_msgs/Classification by the detection node."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models.bounds import MAX_CLASSES
from ..models.yolo_cls import YoloClassifier
from ..models.yolo_interface import YOLO_CLS
from ..parameters import LIVE, Parameter
from ..results import CLASSIFICATION
from ..results.classes import TOP
from ..results.frame import Detector
from ..runtime.runner import Runner
from .detection import CLASSES, IMAGE_SIZE, LABELS, MODEL, NODE_MODULE, ROS_DEPENDENCIES, load_detector, read_labels
from .family import DEBUG_IMAGE, IMAGE_INPUTS, Family, LoadRunner, NodeWiring, Output
from .pipeline import DetectionPipeline

TOP_K = Parameter(
    "top_k", TOP, "classes listed per frame, best first (Ultralytics' top5)", minimum=1, maximum=MAX_CLASSES,
    applies=LIVE,
)  # fmt: skip
PARAMETERS = (MODEL, LABELS, TOP_K, CLASSES, IMAGE_SIZE)
OPTIONS = ("top", "image_size", "names")  # YoloClassifier's

NODE = NodeWiring(
    NODE_MODULE,
    IMAGE_INPUTS,
    (
        Output("classification", CLASSIFICATION.message, ", each frame's best classes, best first", depth=10),
        Output("labels", "vision_msgs/msg/LabelInfo", ": the class map", latched=True, listened=False),
        DEBUG_IMAGE,
    ),
    ROS_DEPENDENCIES,
)


def options(values: Mapping[str, Any]) -> dict[str, Any]:
    """YoloClassifier's options from a node's parameter values."""
    return {"top": values["top_k"], "image_size": values["image_size"], "names": read_labels(values["labels_path"])}


def make(runner: Runner, **given: Any) -> YoloClassifier:
    return YoloClassifier(runner, **given)


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> Detector:
    return load_detector(FAMILY, values, load_runner, options(values))


FAMILY = Family(
    name="yolo_cls",
    summary="YOLO image classification (Ultralytics export)",
    rule=YOLO_CLS,
    parameters=PARAMETERS,
    build=build,
    result=CLASSIFICATION,
    node=NODE,
    make=make,
    make_pipeline=DetectionPipeline.build,
    options=OPTIONS,
)
