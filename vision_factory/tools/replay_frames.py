"""What replay (tools/replay.py) plays: each camera's frames, one camera's or several. One camera is the bag's image
topic, named "" (the node on its own topics, no ``cameras`` parameter); several are ``--camera NAME=SOURCE`` items
(``parse_cameras``: an image topic of the bag, or another bag), each on the node's NAME/ topics. Their stamps are
read and checked first (one per frame), then the frames are played merged in their recorded time order (the
cameras' order among equal times), read from the bags as they are played (memory stays bounded whatever their
length). Also the inputs a node pairs with its images (the track node's detections), by the frame of their stamp."""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..cameras import camera_names
from ..text import shown_path, untrusted
from .bags import BagError, header_stamp, image_topic, image_topics, read_messages, topics_of_type


@dataclass
class CameraSource:
    """One camera of a replay: its name ("": the one camera of a node without names), the bag and the image topic
    its frames are read from."""

    name: str
    bag: Path
    topic: str | None = None  # None: the bag's one image topic


@dataclass
class CameraFrames:
    """One camera's frames as replay plays them: its image topic and type, each frame's header stamp and bag time
    (ns), and which frame a stamp is (``frame_of``: a live-stamped frame's stamp is added as it is sent)."""

    name: str
    bag: Path
    topic: str
    msgtype: str
    stamps: list[tuple[int, int]]
    times_ns: list[int]
    frame_of: dict = field(default_factory=dict)

    def messages(self) -> Iterator[tuple[int, int, bytes]]:
        """(bag time ns, frame index, CDR bytes) of each of its frames, in bag order."""
        for index, message in enumerate(read_messages(self.bag, self.topic)):
            yield message.timestamp_ns, index, message.data


def parse_cameras(items: Sequence[str], bag: Path) -> list[CameraSource]:
    """``--camera NAME=SOURCE`` items: SOURCE an image topic of ``bag``, else another bag (its one image topic). A
    malformed item, or a SOURCE that is neither, is a ValueError naming it and the form."""
    topics = image_topics(bag) if Path(bag).exists() else {}
    sources = []
    for item in items:
        name, equals, source = item.partition("=")
        if not equals or not name or not source:
            raise ValueError(
                f"--camera {untrusted(item, 200)}: write NAME=TOPIC (an image topic of the bag) or NAME=BAG (another "
                "bag)"
            )
        if source in topics:
            sources.append(CameraSource(name.strip(), Path(bag), source))
        elif Path(source).exists():
            sources.append(CameraSource(name.strip(), Path(source)))
        else:
            shown = untrusted(", ".join(topics), 400) or "none"
            raise ValueError(
                f"--camera {untrusted(item, 200)}: {untrusted(source, 200)} is neither an image topic of "
                f"{shown_path(bag)} (it has {shown}) nor a bag"
            )
    camera_names([source.name for source in sources])  # each a topic name, none twice
    return sources


def read_cameras(sources: Sequence[CameraSource]) -> list[CameraFrames]:
    """Each camera's image topic and its frames' stamps, checked before anything plays: a camera whose frames repeat
    a stamp (its answers could not be told apart), or cameras of raw and compressed images (one node reads one
    input_transport), is a BagError."""
    cameras = []
    for source in sources:
        topic, msgtype = image_topic(source.bag, source.topic)
        stamps, times_ns = [], []
        for index, message in enumerate(read_messages(source.bag, topic)):
            stamps.append(header_stamp(message, source.bag, index))
            times_ns.append(message.timestamp_ns)
        if len(set(stamps)) != len(stamps):
            which = f"of camera {source.name} " if source.name else ""
            raise BagError(
                f"image headers {which}in {shown_path(source.bag)}:{untrusted(topic, 200)} repeat their stamps; "
                "replay needs one stamp per frame"
            )
        frame_of = {stamp: index for index, stamp in enumerate(stamps)}
        cameras.append(CameraFrames(source.name, Path(source.bag), topic, msgtype, stamps, times_ns, frame_of))
    if len({camera.msgtype for camera in cameras}) > 1:
        raise BagError("the cameras' images are raw and compressed: one node reads one input_transport")
    return cameras


def played(cameras: Sequence[CameraFrames]) -> Iterator[tuple[int, int, int, bytes]]:
    """(bag time ns, camera index, frame index, CDR bytes) of every camera's frames, merged in their recorded time
    order (the cameras' order among equal times), each camera's read as it is played."""
    streams = [_numbered(camera, frames) for camera, frames in enumerate(cameras)]
    return heapq.merge(*streams, key=lambda item: item[:3])


def _numbered(camera: int, frames: CameraFrames) -> Iterator[tuple[int, int, int, bytes]]:
    for time_ns, index, data in frames.messages():
        yield time_ns, camera, index, data


def first_images(cameras: Sequence[CameraFrames]) -> list[tuple[CameraFrames, bytes]]:
    """Each camera's first image (a camera without frames: none), for the warm-up."""
    first = []
    for camera in cameras:
        messages = camera.messages()
        item = next(messages, None)
        messages.close()  # the bag closed now
        if item is not None:
            first.append((camera, item[2]))
    return first


def cdr_stamp(data: bytes) -> tuple[int, int]:
    """header.stamp of a CDR-serialised message that starts with a std_msgs/Header."""
    little = data[1] == 1
    return struct.unpack_from("<iI" if little else ">iI", data, 4)


def restamped(data: bytes, stamp_ns: int) -> tuple[bytes, tuple[int, int]]:
    """A CDR-serialised message that starts with a std_msgs/Header, its header.stamp set to ``stamp_ns``."""
    stamp = divmod(stamp_ns, 10**9)
    copy = bytearray(data)
    struct.pack_into("<iI" if data[1] == 1 else ">iI", copy, 4, *stamp)
    return bytes(copy), stamp


def fed_inputs(camera: CameraFrames, node: str, inputs: dict[str, str]) -> dict[str, dict[int, list[bytes]]]:
    """Per input of ``inputs`` (relative topic -> message type: a node's inputs besides the image), the camera's
    bag's messages of its type by the frame whose stamp they carry (a message with no frame of its stamp is not
    played). The bag must hold exactly one topic of each such type."""
    fed = {}
    bag = camera.bag
    for name, msgtype in inputs.items():
        found = topics_of_type(bag, msgtype)
        if len(found) != 1:
            shown = untrusted(", ".join(found), 400)  # topic names from the bag
            which = f"has {len(found)} {msgtype} topics ({shown})" if found else f"has no {msgtype} topic"
            raise BagError(
                f"the {node} node needs its {name} input with the images, by stamp: bag {shown_path(bag)} "
                f"{which}; record one topic of the detections to track beside the images (or replay the detector "
                "itself with tracking on, e.g. --node yolo -p tracking:=true -p model_path:=..., or run vision-factory "
                "track)"
            )
        by_frame: dict[int, list[bytes]] = {}
        for index, message in enumerate(read_messages(bag, found[0])):
            frame = camera.frame_of.get(header_stamp(message, bag, index))
            if frame is not None:
                by_frame.setdefault(frame, []).append(message.data)
        fed[name] = by_frame
    return fed
