"""Node parameters as data, with no ROS import.

One list per node part (image input, model family, backend) declares the parameters in the
node, writes the config file and the launch arguments, and drives the generator, so the
three can never disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Value = bool | int | float | str

# The camera topic: the launch files' image_topic default, and the image topic of the bags the demo and tools write.
CAMERA_TOPIC = "/camera/image_raw"


@dataclass(frozen=True)
class Parameter:
    name: str
    default: Value
    description: str
    launch_argument: bool = False  # also a launch argument of the generated launch file
    required: bool = False  # the empty default is refused at start-up; no launch default
    dynamic_typing: bool = False  # a string or a list (execution_provider)


MAX_IMAGE_PIXELS = 7680 * 4320  # 8K UHD: larger than any camera frame a node is likely to see

IMAGE_INPUT_PARAMETERS = (
    Parameter(
        "input_transport",
        "raw",
        "raw (sensor_msgs/Image on image) or compressed (CompressedImage on image/compressed)",
        launch_argument=True,
    ),
    Parameter("qos_reliability", "best_effort", "best_effort (cameras) or reliable"),
    Parameter("qos_depth", 5, "subscription history depth"),
    Parameter("queue_size", 4, "frames waiting for inference; the oldest is dropped beyond (families set the default)"),
    Parameter(
        "max_image_pixels",
        MAX_IMAGE_PIXELS,
        "frames of more pixels are refused (compressed: from the header, before decoding); 0: no limit",
    ),
    # Watching the input (ros/monitor.py): the silence warning and /diagnostics.
    Parameter(
        "silence_timeout",
        5.0,
        "seconds without a frame while a publisher is on the image topic before the node warns, once, naming the "
        "likely causes (and /diagnostics says WARN); 0: never",
    ),
    Parameter(
        "drop_warn_fraction",
        0.1,
        "/diagnostics says WARN when more than this fraction of the frames that came in its window were dropped",
    ),
)

# How the node runs: its lifecycle start, stale frames, and listening only while listened to (ros/inference_node.py).
RUNTIME_PARAMETERS = (
    Parameter(
        "autostart",
        True,
        "configure and activate at start; false: wait in 'unconfigured' for lifecycle transitions (ros2 lifecycle)",
        launch_argument=True,
    ),
    Parameter(
        "max_frame_age",
        0,
        "ms: a frame older than this (now - its header stamp) when inference would start is skipped, never "
        "inferred (counted as 'stale frame'); 0: off",
    ),
    Parameter("lazy", False, "subscribe to images only while something subscribes to one of the node's outputs"),
)


def with_defaults(parameters: Iterable[Parameter], values: Mapping[str, Any], owner: str) -> dict[str, Any]:
    """Defaults overlaid with ``values``; a name not in ``parameters`` is an error naming the known ones."""
    known = {parameter.name: parameter.default for parameter in parameters}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"unknown {owner} setting(s) {', '.join(unknown)}: known are {', '.join(known)}")
    return {**known, **values}
