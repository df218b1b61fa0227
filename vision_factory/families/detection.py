"""What the detection and pose families share: parameters, class names and ids, input sizes, and the build."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..models.bounds import MAX_INPUT_PIXELS, MAX_INPUT_SIDE
from ..models.recognition import load_checked
from ..parameters import FRACTION, LIVE, MAX_DETECTIONS_PER_FRAME, Parameter
from ..results.frame import Detector
from ..text import parse_size, untrusted
from .family import (
    DEBUG_IMAGE,
    DETECTIONS_MESSAGE,
    IMAGE_INPUTS,
    MARKERS_MESSAGE,
    NODE_ROS_DEPENDENCIES,
    Family,
    Input,
    LoadRunner,
    NodeWiring,
    Output,
)

MAX_LABELS_BYTES = 1 << 20  # a labels file larger than 1 MiB is no list of class names

MODEL = Parameter("model_path", "", "model file (.onnx)", launch_argument=True, required=True)
LABELS = Parameter("labels_path", "", "class names, one per line; empty: the model's metadata")
CONFIDENCE = Parameter(
    "confidence_threshold", 0.25, "detections scoring at or below this are dropped", True, **FRACTION, applies=LIVE
)
MAX_DETECTIONS = Parameter(
    "max_detections", 300, "detections per frame at most", minimum=1, maximum=MAX_DETECTIONS_PER_FRAME, applies=LIVE
)
CLASSES = Parameter(
    "classes", "", "class ids or names to keep, comma-separated (0,2 or person,car); empty: all", applies=LIVE
)
IOU = Parameter("iou_threshold", 0.7, "NMS IoU threshold", **FRACTION, applies=LIVE)
IMAGE_SIZE = Parameter(
    "image_size",
    0,
    "input size for models with dynamic input; 0: the model's recorded imgsz",
    minimum=0,
    maximum=MAX_INPUT_SIDE,
)
INPUT_SIZE = Parameter(
    "input_size",
    "",
    "WIDTHxHEIGHT fed to a model with dynamic input; empty: its fixed size",
    max_pixels=MAX_INPUT_PIXELS,
)
MASK_ENCODINGS = ("mono16", "mono8")
MASK_ENCODING = Parameter(
    "mask_encoding",
    "mono16",
    "masks label image encoding: mono16, or mono8 (labels only the first 255 detections)",
    choices=MASK_ENCODINGS,
    applies=LIVE,
)
KEYPOINT_THRESHOLD = Parameter(
    "keypoint_threshold", 0.5, "keypoints scoring below this are not drawn (markers)", **FRACTION, applies=LIVE
)

ROS_DEPENDENCIES = NODE_ROS_DEPENDENCIES
NODE_MODULE = "detection_node"


# Each track's recent path (results/boxes.py's track_markers): the track node's and a tracking detector's.
TRACK_MARKERS = Output("track_markers", MARKERS_MESSAGE, ", each track's recent path", on_demand=True)
# A segmentation model's instance masks (results/masks.py's Masks.to_message): one label image per frame.
MASK_LABELS = ", segmentation models: instance labels (0 none, k the k-th detection of the same stamp)"
MASKS = Output("masks", "sensor_msgs/msg/Image", MASK_LABELS, on_demand=True)


def node(
    topic: str,
    keypoints: bool,
    tracking: bool = True,
    inputs: tuple[Input, ...] = IMAGE_INPUTS,
    topic_arguments: tuple[tuple[str, str, str, str], ...] = (),
    masks: bool = False,
) -> NodeWiring:
    """A detection node (ros/detection_node.py) publishing its detections on ``topic``; ``keypoints``: with pose
    markers; ``tracking``: it has the tracking parameters (families/tracking.py), and track markers with them on;
    ``masks``: a segmentation model's instance label image."""
    outputs = (
        Output(topic, DETECTIONS_MESSAGE, ", one per frame, stamped with its header", depth=10),
        Output("labels", "vision_msgs/msg/LabelInfo", ": the class map", latched=True, listened=False),
        *((Output("pose_markers", MARKERS_MESSAGE, " skeleton", on_demand=True),) if keypoints else ()),
        *((replace(TRACK_MARKERS, when="tracking"),) if tracking else ()),
        *((MASKS,) if masks else ()),
        DEBUG_IMAGE,
    )
    return NodeWiring(NODE_MODULE, inputs, outputs, ROS_DEPENDENCIES, topic_arguments)


def read_labels(path: str) -> list[str] | None:
    """Class names, one per line (blank lines ignored); None for no file. Only a regular file of UTF-8 text of at
    most MAX_LABELS_BYTES is read (a device such as /dev/zero, or a FIFO, would be read forever)."""
    if not path:
        return None
    shown = untrusted(path, 200)
    fix = "give a text file with one class name per line"
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO's open would wait for a writer
        with os.fdopen(descriptor, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise ValueError(f"labels_path {shown} is not a regular file: {fix}")
            data = file.read(MAX_LABELS_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"labels_path {shown}: {exc.strerror}; {fix}") from None
    if len(data) > MAX_LABELS_BYTES:
        raise ValueError(f"labels_path {shown} is larger than {MAX_LABELS_BYTES} bytes, no list of class names: {fix}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"labels_path {shown} is not UTF-8 text: {fix}") from None
    names = [line.strip() for line in text.splitlines() if line.strip()]
    if not names:
        raise ValueError(f"labels_path {shown} holds no class names: write one per line")
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


def load_detector(
    family: Family, values: Mapping[str, Any], load_runner: LoadRunner, options: Mapping[str, Any]
) -> Detector:
    """The ``build`` of a one-model family (yolo, yolo_pose, fasterrcnn): its model loaded (family checked as it
    loads, before the adapter checks its shapes), ``Family.detector`` on it with the adapter ``options``, keeping
    the classes of the ``classes`` parameter."""
    runner = load_checked(load_runner, values["model_path"], family.name, "model_path", family.executable)
    detector = family.detector(runner, **options)
    detector.keep_classes(parse_classes(values["classes"], detector.names))
    return detector
