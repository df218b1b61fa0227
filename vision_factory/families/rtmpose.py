"""rtmpose: top-down RTMPose on person boxes (models/rtmpose.py), recognised by models/rtmpose_interface.py.

The people come from a YOLO model (person_detector_path) or from another node's detections
(person_source topic); ``build`` may also be given any family's detector (`predict --detector-type`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models.recognition import load_checked
from ..models.rtmpose import RTMPoseEstimator, TopDownPose
from ..models.rtmpose_interface import RTMPOSE
from ..parameters import FRACTION, LIVE, Parameter
from ..results import POSES
from ..results.frame import Detector
from ..runtime.runner import Runner
from . import yolo
from .detection import (
    IMAGE_SIZE,
    INPUT_SIZE,
    IOU,
    KEYPOINT_THRESHOLD,
    MAX_DETECTIONS,
    MODEL,
    input_shape,
    node,
)
from .family import DETECTIONS_MESSAGE, IMAGE_INPUTS, AccuracyLoss, Family, Input, LoadRunner
from .pipeline import DetectionPipeline
from .prompts import BoxesPrompt

PERSON_SOURCES = ("detector", "topic")
PERSON = "person_class"  # also keeps, of another node's detections (person_source topic), that class's
PARAMETERS = (
    MODEL,
    Parameter(
        "person_source",
        "detector",
        "detector (person_detector_path in this node) or topic (Detection2DArray on person_detections)",
        launch_argument=True,
    ),
    Parameter("person_detector_path", "", "YOLO model finding the people (person_source detector)", True),
    Parameter(PERSON, "", "the detector's person class, name or id; empty: 'person', else every class", applies=LIVE),
    Parameter("labels_path", "", "class names of the person detector, one per line; empty: its metadata"),
    Parameter(
        "confidence_threshold",
        0.25,
        "person detections scoring at or below this are dropped",
        True,
        **FRACTION,
        applies=LIVE,
    ),
    IOU,
    MAX_DETECTIONS,
    IMAGE_SIZE,
    INPUT_SIZE,
    Parameter("score_mode", "min", "keypoint score from the SimCC maxima: min (MMPose) or mean", applies=LIVE),
    KEYPOINT_THRESHOLD,
)
TOP_DOWN = ("person_detector", "person_class")  # TopDownPose's options; the rest go to the estimator
OPTIONS = (
    *TOP_DOWN,
    *("simcc_x_output", "simcc_y_output", "split_ratio", "input_size", "padding", "mean", "std", "score_mode"),
    "keypoint_names",
)  # RTMPoseEstimator's after TOP_DOWN


def make(
    runner: Runner, person_detector: Detector | None = None, person_class: str | int | None = None, **given: Any
) -> TopDownPose:
    return TopDownPose(person_detector, RTMPoseEstimator(runner, **given), person_class)


def build(values: Mapping[str, Any], load_runner: LoadRunner, person_detector: Detector | None = None) -> Detector:
    """The node's detector; ``person_detector`` (any family's) finds the people instead of person_detector_path's."""
    if values["person_source"] not in PERSON_SOURCES:
        raise ValueError(f"person_source must be 'detector' or 'topic', got {values['person_source']!r}")
    if person_detector is None and values["person_source"] == "detector":
        if not values["person_detector_path"]:
            raise ValueError("person_detector_path is empty: set the YOLO person detector, or person_source topic")
        path = values["person_detector_path"]
        runner = load_checked(load_runner, path, "yolo", "person_detector_path", "rtmpose_node's person detector")
        person_detector = yolo.FAMILY.detector(runner, **yolo.options(values))
    return FAMILY.detector(
        load_checked(load_runner, values["model_path"], "rtmpose", "model_path", "rtmpose_node"),
        person_detector=person_detector,
        person_class=values["person_class"],
        score_mode=values["score_mode"],
        input_size=input_shape(values["input_size"]),
    )


FAMILY = Family(
    name="rtmpose",
    summary="top-down RTMPose human pose estimation on person boxes",
    rule=RTMPOSE,
    parameters=PARAMETERS,
    build=build,
    result=POSES,
    node=node(
        "poses",
        keypoints=True,
        tracking=False,
        inputs=(*IMAGE_INPUTS, Input("person_detections", DETECTIONS_MESSAGE, when=("person_source", "topic"))),
        topic_arguments=(
            (
                "person_detections",
                "person_detections_topic",
                "/detections",
                "Detection2DArray of people, read with person_source:=topic",
            ),
        ),
    ),
    runs_on=("person boxes",),  # from its person detector's model, or another node's detections
    # another node's detections (person_source topic), those of person_class, are the people it poses
    prompts=(
        BoxesPrompt(
            "person detections", "posing the people", lambda pose, frame, boxes: pose.pose(frame, boxes), PERSON
        ),
    ),
    make=make,
    make_pipeline=DetectionPipeline.build,
    options=OPTIONS,
    # no data set scores it alone: the largest distance between a keypoint of the two models on the same people
    # (all keypoints, however confident)
    accuracy_loss=AccuracyLoss(
        "largest keypoint difference (px)", 10.0, lambda report: report["outputs"].get("keypoint_delta_max_px", 0.0)
    ),
)
