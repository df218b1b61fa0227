"""Messages as text for `vision-factory topic echo`, with no ROS import (the messages come in already made): a
summary line per message of the kinds this project's nodes publish (detections, the ball, depth maps, images, point
clouds, class maps, diagnostics, 3D detections, markers), and any message field by field, bounded as ``ros2 topic
echo --truncate-length`` bounds it. Text from a message is escaped and cut (text.untrusted): a class name or a
diagnostic can never start a line of its own or drive the terminal."""

from __future__ import annotations

import array
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..families.depth import METRIC_TOPIC, RELATIVE_TOPIC
from ..results import BALL_TRACK, DENSE_MAP, DETECTIONS
from ..text import untrusted

TRUNCATE_LENGTH = 128  # characters of a text and items of an array shown, as ros2 topic echo's --truncate-length
SHOWN_ITEMS = 10  # detections, classes, statuses named in one summary line
MAX_LINES = 500  # lines of one message shown field by field
LABEL_INFO = dict(DETECTIONS.latched)["labels"]  # vision_msgs/msg/LabelInfo, the detection nodes' class map
COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"
LEVELS = {0: "OK", 1: "WARN", 2: "ERROR", 3: "STALE"}  # diagnostic_msgs/DiagnosticStatus levels
FLOAT32 = 7  # sensor_msgs/PointField datatype of a 4-byte float
DENSE = {METRIC_TOPIC: ("depth", "m"), RELATIVE_TOPIC: ("relative inverse depth", "no unit, larger is nearer")}


def stamp(message: Any) -> str:
    """'SEC.NANOSEC FRAME_ID ' of a message with a header, '' without."""
    header = getattr(message, "header", None)
    if header is None or not hasattr(header, "stamp"):
        return ""
    frame = f" {untrusted(header.frame_id, 100)}" if header.frame_id else ""
    return f"{header.stamp.sec}.{header.stamp.nanosec:09d}{frame}: "


def _some(items: Sequence[str], limit: int = SHOWN_ITEMS) -> str:
    return ", ".join(items[:limit]) + (f", ... {len(items) - limit} more" if len(items) > limit else "")


def _counted(count: int, thing: str) -> str:
    return f"{count} {thing}{'' if count == 1 else 'es' if thing.endswith('s') else 's'}"


def _hypothesis(detection: Any) -> tuple[str, float]:
    """A vision_msgs detection's best class (its first result; this project's nodes put the class name there) and
    score."""
    if not detection.results:
        return "?", float("nan")
    head = detection.results[0].hypothesis
    return untrusted(head.class_id, 60), head.score


def detections(message: Any, topic: str) -> str:
    """vision_msgs/Detection2DArray: how many, each class and score, best first as published."""
    items = [f"{name} {score:.2f}" for name, score in map(_hypothesis, message.detections)]
    return _counted(len(items), "detection") + (f": {_some(items)}" if items else "")


def detections_3d(message: Any, topic: str) -> str:
    """vision_msgs/Detection3DArray: how many, each class, score and centre (metres, in the header's frame)."""
    items = []
    for detection in message.detections:
        name, score = _hypothesis(detection)
        centre = detection.bbox.center.position
        items.append(f"{name} {score:.2f} at ({centre.x:.2f}, {centre.y:.2f}, {centre.z:.2f}) m")
    return _counted(len(items), "detection") + (f": {_some(items)}" if items else "")


def ball(message: Any, topic: str) -> str:
    """geometry_msgs/PointStamped of a ball node: x, y in pixels and whether it was seen (results/ball.py)."""
    from ..results.ball import Ball

    _, visible, x, y = Ball.from_message(message).row(0)
    return f"ball at ({x}, {y})" if visible else f"ball not visible (z {message.point.z:g})"


def label_info(message: Any, topic: str) -> str:
    """vision_msgs/LabelInfo: the class map (id name) and the threshold."""
    names = [f"{entry.class_id} {untrusted(entry.class_name, 60)}" for entry in message.class_map]
    return f"{_counted(len(names), 'class')}: {_some(names, 3 * SHOWN_ITEMS)}; threshold {message.threshold:g}"


def image(message: Any, topic: str) -> str:
    """sensor_msgs/Image: its size and encoding; a 32FC1 map its valid values' range, what it measures and its unit
    (by the topic it is on: the depth node's depth or relative_depth)."""
    text = f"{message.width}x{message.height} {untrusted(message.encoding, 40)}"
    if message.encoding != "32FC1":
        return f"{text}, {len(message.data)} bytes"
    from ..results.dense import DenseMap

    kind, unit = DENSE.get(topic.rsplit("/", 1)[-1], ("values", ""))
    try:
        values = DenseMap.from_message(message, unit, kind).values
    except ValueError as exc:  # data shorter than its size says
        return f"{text}: {untrusted(exc)}"
    valid = values[np.isfinite(values)]
    if not valid.size:
        return f"{text} {kind}: no valid value"
    share = 100.0 * valid.size / values.size
    unit = f" {unit}" if unit == "m" else f" ({unit})" if unit else ""
    return f"{text} {kind} {valid.min():.3g}..{valid.max():.3g}{unit}, {share:.0f} % valid"


def compressed_image(message: Any, topic: str) -> str:
    return f"{untrusted(message.format, 40)}, {len(message.data)} bytes"


def point_cloud(message: Any, topic: str) -> str:
    """sensor_msgs/PointCloud2: its size and fields; with float x, y, z, how many points are finite and z's range."""
    fields = {field.name: field for field in message.fields}
    text = f"{message.width}x{message.height} points, fields {_some([untrusted(name, 20) for name in fields])}"
    if not all(name in fields and fields[name].datatype == FLOAT32 for name in "xyz"):
        return text
    count, step, data = message.width * message.height, message.point_step, bytes(message.data)
    if count == 0 or step == 0 or len(data) < (count - 1) * step + max(fields[n].offset for n in "xyz") + 4:
        return f"{text}; data shorter than {count} points of {step} bytes"
    order = ">" if message.is_bigendian else "<"
    xyz = [np.ndarray((count,), f"{order}f4", data, fields[name].offset, (step,)) for name in "xyz"]
    finite = np.isfinite(xyz[0]) & np.isfinite(xyz[1]) & np.isfinite(xyz[2])
    if not finite.any():
        return f"{text}; no finite point"
    z = xyz[2][finite]
    return f"{text}; {finite.sum()} finite, z {z.min():.3g}..{z.max():.3g}"


def diagnostics(message: Any, topic: str) -> str:
    """diagnostic_msgs/DiagnosticArray: each status' level, name and message, then its keys and values."""
    lines = [_counted(len(message.status), "status")]
    for status in message.status[:SHOWN_ITEMS]:
        level = status.level[0] if isinstance(status.level, bytes | bytearray) else int(status.level)
        values = "; ".join(f"{entry.key}: {entry.value}" for entry in status.values)
        named = f"{LEVELS.get(level, level)} {status.name}: {status.message}"
        lines.append(f"  {untrusted(named, 300)}" + (f" | {untrusted(values, 1500)}" if values else ""))
    if len(message.status) > SHOWN_ITEMS:
        lines.append(f"  ... {len(message.status) - SHOWN_ITEMS} more")
    return "\n".join(lines)


def markers(message: Any, topic: str) -> str:
    """visualization_msgs/MarkerArray: how many markers, in which namespaces."""
    spaces: dict[str, int] = {}
    for marker in message.markers:
        spaces[marker.ns] = spaces.get(marker.ns, 0) + 1
    named = [f"{untrusted(space, 60) or '(no namespace)'} {count}" for space, count in spaces.items()]
    return _counted(len(message.markers), "marker") + (f": {_some(named)}" if named else "")


SUMMARIES: dict[str, Callable[[Any, str], str]] = {
    DETECTIONS.message: detections,
    "vision_msgs/msg/Detection3DArray": detections_3d,
    LABEL_INFO: label_info,
    BALL_TRACK.message: ball,
    DENSE_MAP.message: image,
    COMPRESSED_IMAGE: compressed_image,
    "sensor_msgs/msg/PointCloud2": point_cloud,
    "diagnostic_msgs/msg/DiagnosticArray": diagnostics,
    "visualization_msgs/msg/MarkerArray": markers,
}


def summary(type_name: str, message: Any, topic: str) -> str | None:
    """One line (diagnostics: one per status) for a message of ``type_name`` on ``topic``, headed by its stamp;
    None for a type without a summary (shown field by field)."""
    summarise = SUMMARIES.get(type_name)
    return None if summarise is None else stamp(message) + summarise(message, topic)


# --- any message, field by field --------------------------------------------------------------------------------


def _is_message(value: Any) -> bool:
    return hasattr(type(value), "get_fields_and_field_types")


def _scalar(value: Any, limit: int) -> str:
    if isinstance(value, str):
        return "'" + untrusted(value, limit) + "'"
    if isinstance(value, bytes):  # a byte field
        return str(value[0]) if len(value) == 1 else repr(value[:limit])
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, float | np.floating):
        return repr(float(value))
    return str(value)


def field_lines(message: Any, limit: int = TRUNCATE_LENGTH, max_lines: int = MAX_LINES) -> list[str]:
    """``message`` as YAML-like lines, field by field: texts and arrays cut after ``limit`` characters or items
    (said with '...'), at most ``max_lines`` lines (the rest counted)."""
    lines: list[str] = []
    _fields(message, "", limit, lines)
    if len(lines) > max_lines:
        lines[max_lines:] = [f"... {len(lines) - max_lines} more lines"]
    return lines


def _fields(message: Any, indent: str, limit: int, lines: list[str]) -> None:
    for name in type(message).get_fields_and_field_types():
        if len(lines) > MAX_LINES:  # enough to cut at: stop walking a huge message
            return
        _value(name, getattr(message, name), indent, limit, lines)


def _value(name: str, value: Any, indent: str, limit: int, lines: list[str]) -> None:
    if _is_message(value):
        lines.append(f"{indent}{name}:")
        _fields(value, indent + "  ", limit, lines)
    elif isinstance(value, list | tuple | array.array | np.ndarray) or (isinstance(value, bytes) and len(value) > 1):
        items = list(value[:limit])
        more = ", ..." if len(value) > limit else ""
        if items and _is_message(items[0]):
            lines.append(f"{indent}{name}:")
            for item in items:
                lines.append(f"{indent}-")
                _fields(item, indent + "  ", limit, lines)
            if more:
                lines.append(f"{indent}- ... {len(value) - limit} more")
        else:
            lines.append(f"{indent}{name}: [{', '.join(_scalar(item, limit) for item in items)}{more}]")
    else:
        lines.append(f"{indent}{name}: {_scalar(value, limit)}")
