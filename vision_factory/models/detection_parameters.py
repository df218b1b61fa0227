"""The parameters of the detection and pose nodes, per model family, and the Detector they build."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..parameters import Parameter
from ..runtime.runner import Runner
from ..text import parse_size, untrusted
from .detections import Detector
from .factory import make_detector
from .recognition import load_checked

MODEL = Parameter("model_path", "", "model file (.onnx)", launch_argument=True, required=True)
LABELS = Parameter("labels_path", "", "class names, one per line; empty: the model's metadata")
CONFIDENCE = Parameter("confidence_threshold", 0.25, "detections scoring at or below this are dropped", True)
MAX_DETECTIONS = Parameter("max_detections", 300, "detections per frame at most")
CLASSES = Parameter("classes", "", "class ids or names to keep, comma-separated (0,2 or person,car); empty: all")
IOU = Parameter("iou_threshold", 0.7, "NMS IoU threshold")
IMAGE_SIZE = Parameter("image_size", 0, "input size for models with dynamic input; 0: the model's recorded imgsz")
INPUT_SIZE = Parameter("input_size", "", "WIDTHxHEIGHT fed to a model with dynamic input; empty: its fixed size")
KEYPOINT_THRESHOLD = Parameter("keypoint_threshold", 0.5, "keypoints scoring below this are not drawn (markers)")

YOLO_PARAMETERS = (MODEL, LABELS, CONFIDENCE, IOU, MAX_DETECTIONS, CLASSES, IMAGE_SIZE)
FASTERRCNN_PARAMETERS = (
    MODEL,
    LABELS,
    CONFIDENCE,
    MAX_DETECTIONS,
    CLASSES,
    Parameter("boxes_output", "", "output holding the boxes; empty: found by name and shape"),
    Parameter("scores_output", "", "output holding the scores; empty: found by name and shape"),
    Parameter("labels_output", "", "output holding the labels; empty: found by name and shape"),
    Parameter("box_units", "auto", "auto, normalized (0..1) or pixels (of the model input)"),
    Parameter("box_format", "xyxy", "xyxy or yxyx (TensorFlow)"),
    Parameter("label_offset", 1, "the label of class 0: 1 when 0 is the background, else 0"),
    Parameter("resize", "", "stretch, letterbox or none; empty: stretch for fixed inputs, none for dynamic"),
    INPUT_SIZE,
)
PERSON_SOURCES = ("detector", "topic")
RTMPOSE_PARAMETERS = (
    MODEL,
    Parameter(
        "person_source",
        "detector",
        "detector (person_detector_path in this node) or topic (Detection2DArray on person_detections)",
        launch_argument=True,
    ),
    Parameter("person_detector_path", "", "YOLO model finding the people (person_source detector)", True),
    Parameter("person_class", "", "the detector's person class, name or id; empty: 'person', else every class"),
    Parameter("labels_path", "", "class names of the person detector, one per line; empty: its metadata"),
    Parameter("confidence_threshold", 0.25, "person detections scoring at or below this are dropped", True),
    IOU,
    MAX_DETECTIONS,
    IMAGE_SIZE,
    INPUT_SIZE,
    Parameter("score_mode", "min", "keypoint score from the SimCC maxima: min (MMPose) or mean"),
    KEYPOINT_THRESHOLD,
)

YOLO_POSE_PARAMETERS = (*YOLO_PARAMETERS, KEYPOINT_THRESHOLD)
PARAMETERS: dict[str, tuple[Parameter, ...]] = {
    "yolo": YOLO_PARAMETERS,
    "yolo_pose": YOLO_POSE_PARAMETERS,
    "fasterrcnn": FASTERRCNN_PARAMETERS,
    "rtmpose": RTMPOSE_PARAMETERS,
}


def read_labels(path: str) -> list[str] | None:
    """Class names, one per line (blank lines ignored); None for no file."""
    if not path:
        return None
    try:
        names = [line.strip() for line in Path(path).read_text().splitlines() if line.strip()]
    except OSError as exc:
        raise ValueError(f"labels_path {path}: {exc.strerror}; give a text file with one class name per line") from exc
    if not names:
        raise ValueError(f"labels_path {path} holds no class names: write one per line")
    return names


def parse_classes(text: str, names: Sequence[str]) -> list[int] | None:
    """'0,2' or 'person,car' -> class ids of ``names``; None for ''."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        return None
    ids = []
    for item in items:
        if item.isdigit():
            ids.append(int(item))
        elif item in names:
            ids.append(list(names).index(item))
        else:
            known = untrusted(", ".join(names), 500)  # the names come from the model file
            raise ValueError(
                f"classes: {untrusted(repr(item), 100)} is neither a class id nor one of the model's classes: {known}"
            )
    return ids


def input_shape(text: str) -> tuple[int, int] | None:
    """input_size '192x256' (width x height) as the adapters take it, (height, width); None for ''."""
    if not text:
        return None
    width, height = parse_size(text, "input_size", "192x256")
    return height, width


def _yolo_options(values: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "confidence": values["confidence_threshold"],
        "iou": values["iou_threshold"],
        "max_detections": values["max_detections"],
        "image_size": values["image_size"],
        "names": read_labels(values["labels_path"]),
    }


def detector_from_parameters(
    model_type: str,
    values: Mapping[str, Any],
    load_runner: Callable[[str], Runner],
    person_detector: Detector | None = None,
) -> Detector:
    """The node's Detector from its parameter values; ``load_runner(path)`` loads a model on the node's backend.

    Each model's family is checked as it loads (``load_checked``), before the adapter checks its shapes.
    rtmpose: ``person_detector`` (any family's, e.g. `predict --detector-type`) finds the people
    instead of the YOLO model of person_detector_path.
    """
    if model_type not in PARAMETERS:
        raise ValueError(f"model type {model_type!r} is not one of {', '.join(PARAMETERS)}")
    if model_type == "rtmpose":
        if values["person_source"] not in PERSON_SOURCES:
            raise ValueError(f"person_source must be 'detector' or 'topic', got {values['person_source']!r}")
        if person_detector is None and values["person_source"] == "detector":
            if not values["person_detector_path"]:
                raise ValueError("person_detector_path is empty: set the YOLO person detector, or person_source topic")
            path = values["person_detector_path"]
            runner = load_checked(load_runner, path, "yolo", "person_detector_path", "rtmpose_node's person detector")
            person_detector = make_detector("yolo", runner, **_yolo_options(values))
        return make_detector(
            "rtmpose",
            load_checked(load_runner, values["model_path"], "rtmpose", "model_path", "rtmpose_node"),
            person_detector=person_detector,
            person_class=values["person_class"],
            score_mode=values["score_mode"],
            input_size=input_shape(values["input_size"]),
        )
    if model_type == "fasterrcnn":
        names = ("boxes_output", "scores_output", "labels_output", "box_units", "box_format", "label_offset", "resize")
        options = {name: values[name] for name in names}
        options |= {"confidence": values["confidence_threshold"], "max_detections": values["max_detections"]}
        options["names"] = read_labels(values["labels_path"])
        options["input_size"] = input_shape(values["input_size"])
    else:
        options = _yolo_options(values)
    runner = load_checked(load_runner, values["model_path"], model_type, "model_path", f"{model_type}_node")
    detector = make_detector(model_type, runner, **options)
    classes = parse_classes(values["classes"], detector.names)
    if classes is not None:
        detector = make_detector(model_type, runner, **options, classes=classes)
    return detector
