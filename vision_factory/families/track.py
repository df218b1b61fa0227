"""track: the standalone tracker node (ros/track_node.py) for detections from any other node.

No model of its own but the optional re-identification model (families/reid.py, through families/tracking.py's
parameters); its build returns the Tracking. Tracking is always on here, so it has no ``tracking`` parameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models.tracker import Tracking
from ..results import TRACKS
from . import tracking
from .detection import ROS_DEPENDENCIES, TRACK_MARKERS
from .family import (
    DEBUG_IMAGE,
    DETECTIONS_MESSAGE,
    IMAGE_INPUTS,
    Family,
    Input,
    LoadRunner,
    NodeWiring,
    Output,
)

PARAMETERS = tuple(parameter for parameter in tracking.PARAMETERS if parameter.name not in tracking.NODE_ONLY)


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> Tracking:
    tracker = tracking.build({**values, "tracking": True}, load_runner)
    assert tracker is not None
    return tracker


FAMILY = Family(
    name="track",
    summary="multi-object tracking with optional re-identification of another node's detections",
    rule=None,
    parameters=PARAMETERS,
    build=build,
    result=TRACKS,
    node=NodeWiring(
        "track_node",
        inputs=(*IMAGE_INPUTS, Input("detections", DETECTIONS_MESSAGE, ", paired with the image of the same stamp")),
        outputs=(
            Output(
                "tracks",
                DETECTIONS_MESSAGE,
                ": the detections as they came, Detection2D.id the track ID or empty",
                depth=10,
            ),
            TRACK_MARKERS,
            DEBUG_IMAGE,
        ),
        ros_dependencies=ROS_DEPENDENCIES,
        topic_arguments=(("detections", "detections_topic", "/detections", "Detection2DArray to track"),),
        usage_arguments=("detections_topic:=/detector/detections", "reid_model_path:=/models/reid.onnx"),
    ),
    runs_on=("another node's detections",),
    queue_size=4,  # the tracker follows motion frame to frame: a bounded queue, not only the newest
)
