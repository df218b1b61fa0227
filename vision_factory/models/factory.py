"""A Detector from (model family, runner, options): the one place the CLI and the ROS node build them.

Options are the adapters' keyword arguments (``YoloDetector``, ``FasterRCNNDetector``,
``RTMPoseEstimator`` with ``TopDownPose``'s ``person_detector`` and ``person_class``). An option
that is None or "" keeps the adapter's default, so unset CLI options and empty ROS string
parameters can be passed as they are; a name the family does not take is an error listing those
it does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..runtime.runner import Runner
from .detections import Detector
from .fasterrcnn import FasterRCNNDetector
from .rtmpose import RTMPoseEstimator, TopDownPose
from .yolo import YoloDetector

FAMILIES = ("yolo", "yolo_pose", "fasterrcnn", "rtmpose")
POSE_FAMILIES = ("yolo_pose", "rtmpose")


def output_topic(model_type: str) -> str:
    """The topic a family's node publishes its Detection2DArray on."""
    return "poses" if model_type in POSE_FAMILIES else "detections"


_TOP_DOWN = ("person_detector", "person_class")  # TopDownPose's options; the rest go to the estimator


def _parameters(function: Callable, skip: tuple[str, ...]) -> list[str]:
    return [name for name in inspect.signature(function).parameters if name not in ("self", "runner", *skip)]


def option_names(model_type: str) -> list[str]:
    """The options ``make_detector`` takes for ``model_type``."""
    if model_type in ("yolo", "yolo_pose"):
        return _parameters(YoloDetector.__init__, ("pose",))
    if model_type == "fasterrcnn":
        return _parameters(FasterRCNNDetector.__init__, ())
    if model_type == "rtmpose":
        return [*_TOP_DOWN, *_parameters(RTMPoseEstimator.__init__, ())]
    raise ValueError(f"model type {model_type!r} is not one of {', '.join(FAMILIES)}")


def make_detector(model_type: str, runner: Runner, **options: Any) -> Detector:
    """The ``model_type`` adapter on ``runner``; rtmpose's person boxes come from ``person_detector``."""
    known = option_names(model_type)
    given = {name: value for name, value in options.items() if value is not None and value != ""}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(f"{model_type} takes no option {', '.join(unknown)}: it takes {', '.join(known)}")
    if model_type in ("yolo", "yolo_pose"):
        return YoloDetector(runner, pose=model_type == "yolo_pose", **given)
    if model_type == "fasterrcnn":
        return FasterRCNNDetector(runner, **given)
    top_down = {name: given.pop(name) for name in _TOP_DOWN if name in given}
    return TopDownPose(top_down.get("person_detector"), RTMPoseEstimator(runner, **given), top_down.get("person_class"))
