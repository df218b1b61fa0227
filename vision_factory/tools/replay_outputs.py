"""What replay makes of what a node published besides its messages: its answers as FrameResults written as its
result kind's file, its own per-frame times (~/debug/, ros/monitor.py) and its last /diagnostics status."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable

import numpy as np

from ..families.detection import MASKS
from ..families.registry import NODE_FAMILIES
from ..results import ResultKind
from ..results.boxes import label_names
from ..results.frame import FrameResult
from ..results.masks import MaskImageError, Masks
from ..ros import message_class
from .bags import read_messages

# The node's own per-frame times it publishes on ~/debug/ (ros/monitor.py), read into ReplayResult.node_times_ms.
# Not its pipeline_latency_ms: that is measured from the image's stamp, a bag's recording time; replay times the
# latency itself, from each frame sent to its answer.
NODE_TIMES = ("processing_time_ms", "preprocess_ms", "inference_ms", "postprocess_ms")
# The node publishes /diagnostics once a second (ros/monitor.py): how long replay waits, once the bag's frames are
# answered, for a status published after that (its counts then include every frame).
DIAGNOSTICS_WAIT_S = 2.5
# A segmentation model's instance label images (families/detection.py's MASKS): recorded with its detections.
MASKS_TOPIC = {MASKS.topic: MASKS.message}
# Once every frame is answered on the main output: how long replay waits for the rest of a frame's outputs (its
# masks, published just after its detections), at most.
OUTPUTS_WAIT_S = 2.0


def masks_recorded(node: str) -> dict[str, str]:
    """MASKS_TOPIC where the ``node`` family's node publishes masks (a segmentation model's), else {}."""
    outputs = NODE_FAMILIES[node].node.outputs if NODE_FAMILIES[node].node else ()
    return MASKS_TOPIC if any(output.topic == MASKS.topic for output in outputs) else {}


def wait_for_outputs(answered, received: dict[str, list], per_frame, main: str, timeout: float = OUTPUTS_WAIT_S):
    """Until each of the ``per_frame`` outputs that came at all has as many messages as the ``main`` output (a
    frame's masks come just after its detections), or ``timeout`` seconds."""
    with answered:
        answered.wait_for(
            lambda: all(not received[name] or len(received[name]) >= len(received[main]) for name in per_frame),
            timeout=timeout,
        )


def mask_images(masks: Iterable[bytes]) -> dict[tuple[int, int], object]:
    """The node's masks label images (``masks``: the CDR bytes of each it published) by their header's stamp."""
    from rclpy.serialization import deserialize_message

    images = {}
    for data in masks:
        msg = deserialize_message(data, message_class(MASKS.message))
        images[(msg.header.stamp.sec, msg.header.stamp.nanosec)] = msg
    return images


def with_mask_image(result: FrameResult, image) -> None:
    """Gives ``result``'s detections their masks from the node's label ``image`` of its frame (results/masks.py's
    from_message); none where it has no detections or the image cannot be read."""
    if image is None or result.boxes is None:
        return
    try:
        result.masks = Masks.from_message(image, result.boxes)
    except MaskImageError:
        return


def collect(values: list[float]) -> Callable[[object], None]:
    return lambda message: values.append(message.data)


def collect_statuses(statuses: list) -> Callable[[object, dict], None]:
    def callback(message, info) -> None:
        gid = (info.get("publisher_gid") or {}).get("data")
        statuses.extend((time.monotonic(), bytes(gid) if gid else None, status) for status in message.status)

    return callback


def node_status(player, namespace: str, output: str, statuses: list) -> dict[str, str]:
    """The last status the node under test (the one publishing ``output`` in ``namespace``) published on
    /diagnostics under its own name, waiting up to DIAGNOSTICS_WAIT_S for one published from now on; {} when it
    publishes none. A status is the node's by its name and, where the middleware tells, its publisher."""
    from ..ros.monitor import INFERENCE_STATUS

    outputs = player.get_publishers_info_by_topic(f"{namespace}/{output}")
    nodes = [info.node_name for info in outputs if info.node_namespace == namespace]
    publishers = [
        info
        for info in player.get_publishers_info_by_topic("/diagnostics")
        if info.node_namespace == namespace and info.node_name in nodes
    ]
    if not publishers:
        return {}
    names = {INFERENCE_STATUS.format(node=info.node_name) for info in publishers}
    gids = {bytes(info.endpoint_gid) for info in publishers}

    def last(since: float):
        for at, gid, status in reversed(list(statuses)):
            if at >= since and status.name in names and (gid is None or gid in gids):
                return status
        return None

    now = time.monotonic()
    while time.monotonic() < now + DIAGNOSTICS_WAIT_S and last(now) is None:
        time.sleep(0.05)
    status = last(now) or last(0.0)
    if status is None:
        return {}
    level = {0: "OK", 1: "WARN", 2: "ERROR", 3: "STALE"}.get(status.level[0] if status.level else 0, "?")
    values = {value.key: value.value for value in status.values}
    return {**values, "name": status.name, "level": level, "message": status.message}


def node_times(node_times: dict[str, list[float]]) -> dict[str, float]:
    """The node's processing time p50/p99 and median stage times (ms) over the frames it timed; {} without any."""
    processing = node_times["processing_time_ms"]
    if not processing:
        return {}
    times = {"frames": float(len(processing))}
    times["processing_p50_ms"], times["processing_p99_ms"] = (float(v) for v in np.percentile(processing, (50, 99)))
    for name in ("preprocess_ms", "inference_ms", "postprocess_ms"):
        if node_times[name]:
            times[name] = float(np.median(node_times[name]))
    return times


def node_results(
    result: ResultKind,
    main_output: str,
    received: dict[str, list[tuple[int, bytes]]],
    types: dict[str, str],
    bag,
    topic,
    frame_of,
    measures: tuple[str, str] = ("", ""),
) -> dict[int, FrameResult]:
    """The node's answers on ``main_output`` (each frame's last, by its stamp) as FrameResults of its ``result``
    kind by frame index, class ids from what it published latched (its class map), a map's kind and unit its
    output's (``measures``); ``received``: what it published on each topic, ``types``: their message types. A
    segmentation model's masks (its ``masks`` label images in ``received``) go with the detections of their stamp."""
    from rclpy.serialization import deserialize_message

    answers, stamps = {}, {}
    for _, data in received[main_output]:
        msg = deserialize_message(data, message_class(types[main_output]))
        stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
        frame = frame_of.get(stamp)
        if frame is not None:
            answers[frame], stamps[frame] = msg, stamp
    names: list[str] = []
    for name, _ in result.latched:
        if name == "labels" and received[name]:
            names = label_names(deserialize_message(received[name][-1][1], message_class(types[name])))
    sizes = frame_sizes(bag, topic, answers)
    found = {
        frame: FrameResult.from_message(result.parts, msg, *sizes.get(frame, (0, 0)), names, measures=measures)
        for frame, msg in answers.items()
    }
    images = mask_images(data for _, data in received.get(MASKS.topic, ()))
    for frame, result in found.items() if images else ():
        with_mask_image(result, images.get(stamps[frame]))
    return found


def frame_sizes(bag, topic: str, frames) -> dict[int, tuple[int, int]]:
    """(width, height) of the bag's image of each of ``frames`` (indices in bag order): a raw image's read from its
    CDR bytes (its pixels are not copied), a compressed one's from its header."""
    from rclpy.serialization import deserialize_message

    from ..images import compressed_header

    sizes = {}
    for index, message in enumerate(read_messages(bag, topic)):
        if index in frames:
            if message.msgtype.endswith("CompressedImage"):
                msg = deserialize_message(message.data, message_class(message.msgtype))
                _, width, height = compressed_header(msg.data)
            else:
                width, height = _image_size(message.data)
            sizes[index] = (int(width), int(height))
    return sizes


def _image_size(data: bytes) -> tuple[int, int]:
    """A CDR-serialised sensor_msgs/Image's (width, height): after its header (stamp, frame_id) come height, width."""
    order = "<" if data[1] == 1 else ">"
    (length,) = struct.unpack_from(f"{order}I", data, 12)  # frame_id's, its NUL included
    offset = 4 + (12 + length + 3) // 4 * 4  # the body (after the 4-byte encapsulation) aligned to 4
    height, width = struct.unpack_from(f"{order}II", data, offset)
    return width, height
