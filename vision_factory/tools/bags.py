"""rosbag2 files (sqlite3 or mcap) read and written with ``rosbags``, no ROS needed."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..images import bgr_to_image_fields, compressed_to_bgr, image_to_bgr
from ..parameters import CAMERA_TOPIC
from ..results.ball import read_ball_csv, write_ball_csv  # noqa: F401  (moved there: the ball kind's CSV)
from ..text import shown_path, untrusted

IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
STORAGES = ("mcap", "sqlite3")


class BagError(ValueError):
    """A bag that cannot be used: missing, malformed, or without the expected topic."""


@functools.cache
def _typestore():
    """Kilted's standard types, plus vision_msgs (not among them) from this package's definitions."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    from ..share import share_path

    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for path in sorted(share_path("interfaces", "vision_msgs", "msg").glob("*.msg")):
        types.update(get_types_from_msg(path.read_text(), f"vision_msgs/msg/{path.stem}"))
    store.register(types)
    return store


@dataclass(frozen=True)
class RawMessage:
    topic: str
    msgtype: str
    timestamp_ns: int
    data: bytes  # CDR, as ROS 2 serialises it


def write_image_bag(
    path: str | Path,
    frames: Iterable[np.ndarray],
    topic: str = CAMERA_TOPIC,
    fps: float = 30.0,
    frame_id: str = "camera",
    encoding: str = "bgr8",
    storage: str = "mcap",
    start_ns: int = 1_700_000_000_000_000_000,
    compressed: str = "",
) -> Path:
    """Write BGR frames as sensor_msgs/Image in ``encoding``, or with ``compressed`` ("jpeg" or "png") as
    sensor_msgs/CompressedImage of that format, stamped (header and bag time) at ``fps``."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = _typestore()
    msgtype = IMAGE_TYPES[1] if compressed else IMAGE_TYPES[0]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    plugin = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}[storage]
    path = Path(path)
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        connection = writer.add_connection(topic, msgtype, typestore=store)
        for index, frame in enumerate(frames):
            stamp_ns = start_ns + round(index * 1e9 / fps)
            header = Header(stamp=Time(sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9), frame_id=frame_id)
            message = _image_message(store, header, frame, encoding, compressed)
            writer.write(connection, stamp_ns, store.serialize_cdr(message, msgtype))
    return path


def _image_message(store, header, frame: np.ndarray, encoding: str, compressed: str):
    if compressed:
        import cv2

        ok, data = cv2.imencode({"jpeg": ".jpg", "png": ".png"}[compressed], frame)
        if not ok:
            raise ValueError(f"cannot encode a {frame.shape} frame as {compressed}")
        return store.types[IMAGE_TYPES[1]](header=header, format=compressed, data=np.asarray(data, np.uint8).ravel())
    width, height, enc, step, data = bgr_to_image_fields(frame, encoding)
    return store.types[IMAGE_TYPES[0]](
        header=header,
        height=height,
        width=width,
        encoding=enc,
        is_bigendian=0,
        step=step,
        data=np.frombuffer(data, np.uint8),
    )


def image_topics(path: str | Path) -> dict[str, str]:
    """topic -> message type of every image topic in the bag."""
    with _open(path) as reader:
        return {c.topic: c.msgtype for c in reader.connections if c.msgtype in IMAGE_TYPES}


def topics_of_type(path: str | Path, msgtype: str) -> list[str]:
    """The bag's topics of message type ``msgtype`` (e.g. vision_msgs/msg/Detection2DArray), sorted."""
    with _open(path) as reader:
        return sorted({c.topic for c in reader.connections if c.msgtype == msgtype})


def read_messages(path: str | Path, topic: str) -> Iterator[RawMessage]:
    """The raw messages of one topic in bag time order. A bag that gives fewer messages than its metadata (or its
    mcap summary) counts for the topic is damaged: a BagError after the last message read says how many."""
    with _open(path) as reader:
        connections = [c for c in reader.connections if c.topic == topic]
        if not connections:
            topics = untrusted(", ".join(sorted({c.topic for c in reader.connections})) or "none", 400)
            raise BagError(f"bag {shown_path(path)} has no topic {untrusted(topic, 200)} (topics: {topics})")
        listed, read = sum(connection.msgcount for connection in connections), 0
        try:
            for connection, timestamp, data in reader.messages(connections=connections):
                read += 1
                yield RawMessage(connection.topic, connection.msgtype, timestamp, bytes(data))
        except Exception as exc:  # rosbags raises several types for damaged storage
            raise BagError(
                f"bag {shown_path(path)} is damaged while reading {untrusted(topic, 200)}: {untrusted(exc, 400)}"
            ) from exc
        if read < listed:  # a record whose length is damaged ends its chunk early, and rosbags says nothing
            raise BagError(
                f"bag {shown_path(path)} is damaged: it gave {read} of the {listed} messages its index lists on "
                f"{untrusted(topic, 200)}; "
                "re-record it, or recover what is left (e.g. `mcap recover`) into a new bag"
            )


def decode(raw: RawMessage, path: str | Path, index: int | None = None) -> Any:
    """The message ``raw`` holds, deserialised as the type its topic declares; a BagError naming the topic, the
    declared type and the fix when its bytes are not that type (rosbags raises SerdeError, struct.error and
    others)."""
    try:
        return _typestore().deserialize_cdr(raw.data, raw.msgtype)
    except Exception as exc:
        which = f"message {index + 1}" if index is not None else "a message"
        raise BagError(
            f"bag {shown_path(path)}: {which} on {untrusted(raw.topic)} is not the {untrusted(raw.msgtype)} the "
            f"topic declares ({type(exc).__name__}: {untrusted(exc)}); the bag's topic type is wrong or its data "
            "damaged: record the topic again with its real type, or pick another topic with --topic"
        ) from exc


def header_stamp(raw: RawMessage, path: str | Path, index: int | None = None) -> tuple[int, int]:
    """(sec, nanosec) of the header of ``raw``, a message that has one (decoded as its topic declares)."""
    stamp = decode(raw, path, index).header.stamp
    return stamp.sec, stamp.nanosec


def image_topic(path: str | Path, topic: str | None = None) -> tuple[str, str]:
    """(topic, message type) of the bag's image topic: ``topic``, or the only one it has."""
    topics = image_topics(path)
    if topic is None:
        if len(topics) != 1:
            raise BagError(
                f"bag {shown_path(path)} has {len(topics)} image topics "
                f"({untrusted(', '.join(topics), 400) or 'none'}); "
                "pick one with --topic"
            )
        topic = next(iter(topics))
    elif topic not in topics:
        shown = untrusted(", ".join(topics), 400) or "none"
        raise BagError(f"bag {shown_path(path)} has no image topic {untrusted(topic, 200)} (image topics: {shown})")
    return topic, topics[topic]


def read_frames(path: str | Path, topic: str | None = None) -> Iterator[np.ndarray]:
    """BGR frames of the bag's image topic (the only one, or ``topic``), in bag time order."""
    for _, frame in read_framed(path, topic):
        yield frame


def read_framed(path: str | Path, topic: str | None = None) -> Iterator[tuple[str, np.ndarray]]:
    """(header.frame_id, BGR frame) of each image of the bag's image topic, in bag time order."""
    topic, _ = image_topic(path, topic)
    for index, raw in enumerate(read_messages(path, topic)):
        msg = decode(raw, path, index)
        if raw.msgtype.endswith("CompressedImage"):
            yield msg.header.frame_id, compressed_to_bgr(msg.data)
        else:
            frame = image_to_bgr(msg.width, msg.height, msg.encoding, msg.step, msg.data, bool(msg.is_bigendian))
            yield msg.header.frame_id, frame


class _open:
    """AnyReader with errors turned into BagError naming the bag and the fix."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __enter__(self):
        from rosbags.highlevel import AnyReader

        if not self.path.exists():
            raise BagError(f"bag not found: {shown_path(self.path)}")
        try:
            self.reader = AnyReader([self.path], default_typestore=_typestore())
            self.reader.open()
        except Exception as exc:
            raise BagError(
                f"cannot read bag {shown_path(self.path)}: {untrusted(exc, 400)}; give a rosbag2 folder "
                "(metadata.yaml with .mcap or .db3 files) or a single .mcap file"
            ) from exc
        return self.reader

    def __exit__(self, *exc_info) -> None:
        self.reader.close()


def write_messages(path: str | Path, messages: Iterable[RawMessage], storage: str = "mcap") -> Path:
    """Write raw CDR messages (already serialised) into a new bag."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = _typestore()
    plugin = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}[storage]
    path = Path(path)
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        connections = {}
        for message in messages:
            if message.topic not in connections:
                connections[message.topic] = writer.add_connection(message.topic, message.msgtype, typestore=store)
            writer.write(connections[message.topic], message.timestamp_ns, message.data)
    return path
