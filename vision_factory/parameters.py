"""Node parameters as data, with no ROS import.

One list per node part (image input, model family, backend) declares the parameters in the
node, writes the config file and the launch arguments, and drives the generator, so the
three can never disagree.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .text import parse_size

Value = bool | int | float | str

# The camera topic: the launch files' image_topic default, and the image topic of the bags the demo and tools write.
CAMERA_TOPIC = "/camera/image_raw"
QOS_OVERRIDES = "qos_overrides."  # ROS's parameters for a publisher's QoS: qos_overrides./TOPIC.publisher.POLICY
# When a parameter's value takes effect on a node (Parameter.applies):
LIVE = "live"  # set on a running node, it applies from the next frame (thresholds, classes, prompts)
CONFIGURE = "configure"  # read at configure: set while the node is unconfigured; refused, with why, while configured
START = "start"  # read when the node starts: read-only afterwards (ROS refuses any change)
APPLIES = (LIVE, CONFIGURE, START)


@dataclass(frozen=True)
class Parameter:
    """A node parameter. A number's valid values are ``minimum``..``maximum`` (either may be None: no bound), and
    never NaN or infinite; a text's are ``choices`` when given, and a size's (``max_pixels``: a text WIDTHxHEIGHT,
    or empty) those of at most that many pixels. ``check`` refuses any other value, naming the parameter, the value
    and what is valid: the node at set time and at configure, and the tools that pass -p. ``applies`` says when a
    node takes a new value: LIVE, CONFIGURE (the default) or START."""

    name: str
    default: Value
    description: str
    launch_argument: bool = False  # also a launch argument of the generated launch file
    required: bool = False  # the empty default is refused at start-up; no launch default
    dynamic_typing: bool = False  # a string or a list (execution_provider)
    minimum: int | float | None = None
    maximum: int | float | None = None
    choices: tuple[str, ...] = ()
    max_pixels: int = 0  # a size WIDTHxHEIGHT (or empty) of at most this many pixels; 0: not a size
    applies: str = CONFIGURE  # LIVE, CONFIGURE or START: when a node takes a value set while it runs

    def __post_init__(self) -> None:
        if self.applies not in APPLIES:
            raise ValueError(f"parameter {self.name}: applies must be one of {', '.join(APPLIES)}")

    @property
    def live(self) -> bool:
        """Whether a value set on a running node applies from its next frame."""
        return self.applies == LIVE

    @property
    def kind(self) -> str:
        """What the value is, in words: 'true or false', 'an integer', 'a finite number', 'text'."""
        if self.dynamic_typing:
            return "text or a list"
        if isinstance(self.default, bool):
            return "true or false"
        return {int: "an integer", float: "a finite number"}.get(type(self.default), "text")

    @property
    def valid(self) -> str:
        """The valid values, in words, e.g. 'a finite number in 0..1', 'an integer >= 1', 'one of raw, compressed'."""
        if self.choices:
            return f"one of {', '.join(repr(choice) for choice in self.choices)}"
        if self.max_pixels:
            return f"WIDTHxHEIGHT of at most {self.max_pixels} pixels, or empty"
        low, high = (_shown(bound) for bound in (self.minimum, self.maximum))
        if low is not None and high is not None:
            return f"{self.kind} in {low}..{high}"
        if low is not None:
            return f"{self.kind} >= {low}"
        if high is not None:
            return f"{self.kind} <= {high}"
        return self.kind

    def check(self, value: Any) -> Any:
        """``value`` when it is valid for this parameter, else ValueError naming the parameter, the value and the
        valid values (NaN and infinities are never valid)."""
        if self.dynamic_typing:
            return value
        expected = type(self.default)
        if expected is bool:
            valid = isinstance(value, bool)
        elif expected is int:
            valid = isinstance(value, int) and not isinstance(value, bool)
        elif expected is float:
            valid = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        else:  # text; a path given as one (os.PathLike) is taken as its text
            valid = isinstance(value, str | os.PathLike)
        if valid and expected in (int, float):
            valid = (self.minimum is None or value >= self.minimum) and (self.maximum is None or value <= self.maximum)
        if valid and self.choices:
            valid = value in self.choices
        if valid and self.max_pixels and value:
            valid = _pixels(str(value)) <= self.max_pixels
        if not valid:
            raise ValueError(self._refusal(value))
        return value

    def _refusal(self, value: Any) -> str:
        shown = repr(value) if isinstance(value, str) else str(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        return f"{self.name} must be {self.valid}, not {shown}"

    def from_text(self, text: str) -> Any:
        """The value of ``-p NAME:=TEXT`` as ROS reads it (rcl's YAML scalars: quoted text stays text; true/false,
        yes/no, on/off; integers; numbers, .nan and .inf), checked (``check``). A number where an integer is
        wanted, an integer where a floating-point number is (ROS refuses it: write 1.0), or text where a number
        is: ValueError naming the parameter and what it takes."""
        if self.dynamic_typing or not isinstance(text, str):  # a value already typed: checked as it is
            return self.check(text)
        value = ros_scalar(text)
        if isinstance(self.default, float) and isinstance(value, int) and not isinstance(value, bool):
            raise ValueError(self.type_refusal(value))
        if isinstance(self.default, str) and not isinstance(value, str):
            value = text  # the tools pass text parameters quoted (``ros_text``), as the text given
        return self.check(value)

    def type_refusal(self, value: Any) -> str:
        """Why ROS refuses ``value`` (of another type than the default's) for this parameter, and the fix."""
        if isinstance(self.default, float) and isinstance(value, int) and not isinstance(value, bool):
            return (
                f"{self.name} {value} is an integer to ROS, and the parameter a floating-point number: write "
                f"{value}.0 (it takes {self.valid})"
            )
        return self._refusal(value)


def _shown(bound: int | float | None) -> str | None:
    """A bound as the valid values say it: an integer in full (1048576, not 1.04858e+06), a float short."""
    return None if bound is None else str(bound) if isinstance(bound, int) else f"{bound:g}"


def _pixels(text: str) -> float:
    """The pixels of a size WIDTHxHEIGHT; infinite when ``text`` is no such size."""
    try:
        width, height = parse_size(text)
    except ValueError:
        return math.inf
    return width * height


# rcl's YAML scalars (rcl_yaml_param_parser), as a -p value is read.
_TRUE = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}
_FALSE = {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}
_SPECIAL_FLOATS = {".nan": math.nan, ".NaN": math.nan, ".NAN": math.nan, ".inf": math.inf, ".Inf": math.inf}
_SPECIAL_FLOATS |= {".INF": math.inf, "-.inf": -math.inf, "-.Inf": -math.inf, "-.INF": -math.inf}
_INTEGER = re.compile(r"\s*[-+]?(0[xX][0-9a-fA-F]+|[0-9]+)")
_NUMBER = re.compile(r"\s*[-+]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|nan|inf|infinity)", re.IGNORECASE)


def ros_scalar(text: str) -> Value:
    """A ``-p NAME:=TEXT`` value as rcl reads it: quoted text is text; true/false (and yes/no, on/off) a bool;
    an integer; a number (also .nan, .inf); anything else text."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    if _INTEGER.fullmatch(text):
        return int(text.strip(), 0) if "x" in text.lower() else int(text)
    if text in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[text]
    if _NUMBER.fullmatch(text):
        return float(text)
    return text


def ros_text(value: Value) -> str:
    """``value`` as a -p value that ROS reads back as it is: text quoted (so that '0' or 'true' stay text)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def closest(name: str, known: Iterable[str]) -> str:
    """' (did you mean X?)' for the known name closest to a misspelt ``name``; '' when none is close."""
    found = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {found[0]}?)" if found else ""


def checked_values(parameters: Iterable[Parameter], texts: Mapping[str, str], owner: str) -> dict[str, Any]:
    """``-p`` texts (NAME: TEXT) read as ROS reads them and checked against ``parameters``: a name not among them
    (with the closest one) or a value not valid for its parameter is a ValueError naming it."""
    by_name = {parameter.name: parameter for parameter in parameters}
    values = {}
    for name, text in texts.items():
        if name not in by_name:
            raise ValueError(f"{owner} has no parameter {name}{closest(name, by_name)}")
        values[name] = by_name[name].from_text(text)
    return values


MAX_IMAGE_PIXELS = 7680 * 4320  # 8K UHD: larger than any camera frame a node is likely to see
# The most frames a subscription's history or the inference queue holds: each can be a full frame in memory, and
# DDS takes a QoS depth up to 2^31 - 1 only.
MAX_QUEUE = 10000
# The most cameras one node serves (its cameras parameter, cameras.py): each holds up to queue_size frames, and has
# its own publishers and stream state.
MAX_CAMERAS = 64
# The most threads a backend may be asked for (ONNX Runtime starts as many as asked: 10000 took minutes to stop).
MAX_THREADS = 256
# The most detections one frame's answer holds (max_detections): each is a Detection2D in its message.
MAX_DETECTIONS_PER_FRAME = 10_000
# The most frames a tracker keeps a lost track for (track_buffer, track_reentry_buffer), and positions a trajectory
# keeps (trajectory_length): 5.5 minutes at 30 fps; the tracks and positions kept grow with it.
MAX_HISTORY_FRAMES = 10_000
# The most MiB a backend may be given as a memory limit or workspace (ONNX Runtime's CUDA arena, TensorRT's): 1 TiB.
MAX_MEMORY_MB = 1 << 20
MAX_DEVICE_ID = 1023  # a GPU's index (device_id): no machine has more
FRACTION = {"minimum": 0.0, "maximum": 1.0}  # scores, IoU, fractions
TRANSPORTS = ("raw", "compressed")
RELIABILITIES = ("best_effort", "reliable")

IMAGE_INPUT_PARAMETERS = (
    Parameter(
        "input_transport",
        "raw",
        "raw (sensor_msgs/Image on image) or compressed (CompressedImage on image/compressed)",
        launch_argument=True,
        choices=TRANSPORTS,
    ),
    Parameter("qos_reliability", "best_effort", "best_effort (cameras) or reliable", choices=RELIABILITIES),
    Parameter(
        "cameras",
        "",
        "camera names, e.g. [front, left, right]: one model answers each camera's <camera>/image on <camera>/ "
        "topics; empty: one camera, on image",
        dynamic_typing=True,
    ),
    Parameter(
        "inference_workers",
        1,
        "with cameras: how many frames, each of another camera, may be in the model at once (onnx, openvino; "
        "each camera's frames stay in order): where one run leaves CPU cores idle, several fill them (set "
        "intra_op_threads so that workers x threads is about the cores)",
        minimum=1,
        maximum=MAX_CAMERAS,
    ),
    Parameter("qos_depth", 5, "subscription history depth", minimum=1, maximum=MAX_QUEUE),
    Parameter(
        "queue_size",
        4,
        "frames waiting for inference; the oldest is dropped beyond (families set the default)",
        minimum=1,
        maximum=MAX_QUEUE,
    ),
    Parameter(
        "max_image_pixels",
        MAX_IMAGE_PIXELS,
        "frames of more pixels are refused (compressed: from the header, before decoding); 0: no limit",
        minimum=0,
        applies=LIVE,
    ),
    # Watching the input (ros/monitor.py): the silence warning and /diagnostics.
    Parameter(
        "silence_timeout",
        5.0,
        "seconds without a frame while a publisher is on the image topic before the node warns, once, naming the "
        "likely causes (and /diagnostics says WARN); 0: never",
        minimum=0.0,
    ),
    Parameter(
        "drop_warn_fraction",
        0.1,
        "/diagnostics says WARN when more than this fraction of the frames that came in its window were dropped",
        **FRACTION,
    ),
)

# How the node runs: its lifecycle start, stale frames, and listening only while listened to (ros/inference_node.py).
RUNTIME_PARAMETERS = (
    Parameter(
        "autostart",
        True,
        "configure and activate at start; false: wait in 'unconfigured' for lifecycle transitions (ros2 lifecycle)",
        launch_argument=True,
        applies=START,
    ),
    Parameter(
        "max_frame_age",
        0,
        "ms: a frame older than this (now - its header stamp) when inference would start is skipped, never "
        "inferred (counted as 'stale frame'); 0: off",
        minimum=0,
        applies=LIVE,
    ),
    Parameter("lazy", False, "subscribe to images only while something subscribes to one of the node's outputs"),
)


def with_new_defaults(parameters: Iterable[Parameter], **defaults: Value) -> tuple[Parameter, ...]:
    """``parameters`` with the defaults ``defaults`` gives by name (a generated package's runner: its own)."""
    parameters = tuple(parameters)
    unknown = sorted(set(defaults) - {parameter.name for parameter in parameters})
    if unknown:
        raise ValueError(f"no parameter {', '.join(unknown)} to give a default")
    return tuple(replace(p, default=defaults[p.name]) if p.name in defaults else p for p in parameters)


def with_defaults(parameters: Iterable[Parameter], values: Mapping[str, Any], owner: str) -> dict[str, Any]:
    """Defaults overlaid with ``values``; a name not in ``parameters`` is an error naming the known ones, a value
    not valid for its parameter (``Parameter.check``) one naming the parameter, the value and the valid values:
    the tools (predict, track, quantize, verify) and the runners take their settings through here."""
    by_name = {parameter.name: parameter for parameter in parameters}
    unknown = sorted(set(values) - set(by_name))
    if unknown:
        raise ValueError(f"unknown {owner} setting(s) {', '.join(unknown)}: known are {', '.join(by_name)}")
    for name, value in values.items():
        by_name[name].check(value)
    return {**{name: parameter.default for name, parameter in by_name.items()}, **values}


def kept_for_late_readers(topics: Iterable[str], depth: int) -> dict[str, Value]:
    """The start-up parameters (ROS's QoS overrides, which every output of these nodes takes) that make a node keep
    the last ``depth`` messages of each of ``topics`` (fully qualified) for a reader that matches late (transient
    local): discovery is not symmetric, so a node's writer can learn of a reader after that reader has seen the
    writer, and a volatile writer drops what it sends meanwhile. The readers must ask for transient local too."""
    overrides = {}
    for topic in topics:
        overrides[f"{QOS_OVERRIDES}{topic}.publisher.durability"] = "transient_local"
        overrides[f"{QOS_OVERRIDES}{topic}.publisher.depth"] = depth
    return overrides
