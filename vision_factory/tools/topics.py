"""`vision-factory node list` and `topic list|echo|hz`: what ``ros2 node list``, ``ros2 topic list -t``,
``ros2 topic echo`` and ``ros2 topic hz`` show, on rclpy alone (the pip route has no ros2cli). echo and hz read
with the QoS the topic's publishers offer (from the graph, as ros2 topic echo chooses it), so that a best-effort
or a transient-local output is received; echo prints a summary line per message of this project's kinds
(message_lines.py), any other type field by field, and with --save writes image topics' frames as PNG (files.py's
safe writes)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from ..files import output_folder, write_bytes
from ..ros import message_class
from ..ros.monitor import IMAGE_TYPES, qos_text
from ..streaming import ProblemLog
from ..text import shown_path, untrusted
from .commands import UsageError
from .message_lines import TRUNCATE_LENGTH, field_lines, summary
from .ros_graph import STEP_S, Graph

Emit = Callable[[str], None]
DEPTH = 10  # echo's and hz's history depth, as ros2 topic echo's
HZ_PERIOD_S = 1.0  # seconds between hz's lines


def node_list(spin_s: float) -> list[str]:
    """The fully qualified names of the nodes seen in ``spin_s`` seconds."""
    with Graph(spin_s) as graph:
        return graph.learn(spin_s, graph.nodes)


def topic_list(spin_s: float) -> list[str]:
    """'NAME [TYPE, ...]' of each topic seen in ``spin_s`` seconds."""
    with Graph(spin_s) as graph:
        return [f"{name} [{', '.join(types)}]" for name, types in graph.learn(spin_s, graph.topics).items()]


def matching_qos(publishers: list[Any], depth: int = DEPTH) -> QoSProfile:
    """A reader's QoS that matches every one of ``publishers`` (the graph's endpoint infos), as ros2 topic echo
    chooses it: reliable only if all of them are, transient local only if all of them are; reliable and volatile
    when none is there yet."""
    qos = QoSProfile(depth=depth)
    if publishers:
        profiles = [publisher.qos_profile for publisher in publishers]
        if any(profile.reliability != ReliabilityPolicy.RELIABLE for profile in profiles):
            qos.reliability = ReliabilityPolicy.BEST_EFFORT
        if all(profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for profile in profiles):
            qos.durability = DurabilityPolicy.TRANSIENT_LOCAL
    return qos


def _message_type(type_name: str) -> type:
    try:
        return message_class(type_name)
    except (ImportError, AttributeError, ValueError):
        package = type_name.split("/")[0]
        fix = "vision-factory install-vision-msgs" if package == "vision_msgs" else f"pip install ros-{package}"
        fix = fix.replace("_", "-") if fix.startswith("pip") else fix
        raise ValueError(
            f"cannot read {untrusted(type_name)}: its Python package {untrusted(package)} is not importable here "
            f"(on the pip route: {fix}; on a ROS distribution: source its setup file)"
        ) from None


def _topic(graph: Graph, given: str, note: Emit) -> tuple[str, str, type]:
    """The topic ``given`` names, its type (the first, when it has several) and that type's class."""
    name, types = graph.find_topic(given)
    if len(types) > 1:
        note(f"warning: {untrusted(name)} has several types ({', '.join(map(untrusted, types))}): reading {types[0]}")
    return name, types[0], _message_type(types[0])


class Reader:
    """A subscription to a topic with the QoS its publishers offer (``matching_qos``), made again when the
    publishers seen change that QoS (``update``, called as the reader spins): a topic found through its subscribers
    alone, or before its publishers were discovered, is read with the defaults until a publisher shows what it
    offers (a best-effort camera's images never reach a reliable reader)."""

    def __init__(self, graph: Graph, name: str, type_name: str, kind: type, callback, note: Emit, raw: bool = False):
        self.graph, self.name, self.type_name, self.kind = graph, name, type_name, kind
        self.callback, self.note, self.raw = callback, note, raw
        self.subscription, self.qos, self.publishers = None, None, -1
        self.update()

    def update(self) -> None:
        publishers = self.graph.node.get_publishers_info_by_topic(self.name)
        if len(publishers) == self.publishers:
            return
        self.publishers = len(publishers)
        qos = matching_qos(publishers)
        if self.qos is not None and (qos.reliability, qos.durability) == (self.qos.reliability, self.qos.durability):
            return
        if self.subscription is not None:
            self.graph.node.destroy_subscription(self.subscription)
        node = self.graph.node
        self.subscription = node.create_subscription(self.kind, self.name, self.callback, qos, raw=self.raw)
        offered = f"as its {len(publishers)} publisher(s) offer" if publishers else "no publisher yet"
        if self.qos is None:
            self.note(f"reading {untrusted(self.name)} ({untrusted(self.type_name)}) with QoS {qos_text(qos)} "
                      f"({offered}); Ctrl-C stops")  # fmt: skip
        else:
            self.note(f"reading {untrusted(self.name)} with QoS {qos_text(qos)} now ({offered})")
        self.qos = qos

    def spin(self) -> None:
        self.graph.spin(STEP_S)
        self.update()


class FrameSaver:
    """echo --save: each image message's frame as DIR/NNNNNN.png (its number in the echo), written through
    files.py (never through a link); a 32FC1 map drawn in colour (results/dense.py's draw). A message that cannot
    be drawn is said once per kind of problem, then counted."""

    def __init__(self, folder: Path, note: Emit):
        self.folder = output_folder(folder, option="--save")
        self.note = note
        self.problems = ProblemLog(0)

    def save(self, message: Any, index: int) -> Path | None:
        from ..ros.messages import message_to_bgr

        try:
            if getattr(message, "encoding", "") == "32FC1":
                from ..results.dense import DenseMap

                picture = DenseMap.from_message(message, "", "").draw()
            else:
                picture = message_to_bgr(message)
        except ValueError as exc:  # images.ImageFormatError and the like: an encoding, a size that cannot be read
            line = self.problems.count(getattr(exc, "kind", "unreadable image"), f"message {index}", str(exc), True)
            if line:
                self.note(f"warning: not saved: {line}")
            return None
        return write_bytes(self.folder / f"{index:06d}.png", _png(picture), option="--save")

    def close(self) -> None:
        line = self.problems.summary(final=True)
        if line:
            self.note(f"warning: messages not saved: {line}")


def _png(picture: np.ndarray) -> bytes:
    ok, encoded = cv2.imencode(".png", np.ascontiguousarray(picture))
    if not ok:
        raise ValueError("OpenCV could not encode the frame as PNG")
    return encoded.tobytes()


def echo(
    topic: str,
    emit: Emit,
    note: Emit,
    timeout: float,
    count: int = 0,
    save: Path | None = None,
    fields: bool = False,
    truncate_length: int = TRUNCATE_LENGTH,
) -> int:
    """Print each message on ``topic`` (waited for up to ``timeout`` s) as it comes: a summary line for this
    project's kinds (``fields``: field by field, as any other type), until ``count`` messages (0: Ctrl-C). With
    ``save``, an image topic's frames are written there as PNG. The number of messages printed."""
    shown, saver = [0], None
    try:
        with Graph(timeout) as graph:
            name, type_name, kind = _topic(graph, topic, note)
            if save is not None and type_name not in IMAGE_TYPES:
                raise UsageError(f"{untrusted(name)} carries {untrusted(type_name)}, not images", "--save")
            saver = FrameSaver(save, note) if save is not None else None

            def received(message: Any) -> None:
                if count and shown[0] >= count:
                    return
                shown[0] += 1
                line = None if fields else summary(type_name, message, name)
                saved = saver.save(message, shown[0]) if saver else None
                if line is None:
                    line = "\n".join([*field_lines(message, truncate_length), "---"])
                emit(line + (f"  -> {shown_path(saved)}" if saved else ""))

            reader = Reader(graph, name, type_name, kind, received, note)
            while not (count and shown[0] >= count):
                reader.spin()
    except KeyboardInterrupt:  # the usual end of an echo without -n
        pass
    finally:
        if saver:
            saver.close()
    return shown[0]


def rate_line(times: deque) -> str:
    """'average rate: R Hz, period min/max/std dev, window N' of the arrival times ``times`` (seconds)."""
    periods = np.diff(np.asarray(times, np.float64))
    if periods.size == 0 or periods.mean() <= 0:
        return f"waiting: {len(times)} message(s) so far, a rate needs two"
    return (
        f"average rate: {1.0 / periods.mean():.3f} Hz  period min {periods.min():.4f} s, max {periods.max():.4f} s, "
        f"std dev {periods.std():.5f} s, window {len(times)}"
    )


def hz(
    topic: str,
    emit: Emit,
    note: Emit,
    timeout: float,
    window: int,
    count: int = 0,
) -> int:
    """The rate of ``topic``'s messages as they arrive here (wall clock), over its last ``window`` messages: a
    line each HZ_PERIOD_S, and at the end; until ``count`` messages came (0: Ctrl-C). The messages counted."""
    times: deque = deque(maxlen=window)
    arrived, said = [0], [0]

    def received(_: bytes) -> None:  # raw: the message is never deserialized
        times.append(time.monotonic())
        arrived[0] += 1

    try:
        with Graph(timeout) as graph:
            reader = Reader(graph, *_topic(graph, topic, note), received, note, raw=True)
            last = time.monotonic()
            while not (count and arrived[0] >= count):
                reader.spin()
                if time.monotonic() - last >= HZ_PERIOD_S:
                    emit(rate_line(times) if arrived[0] > said[0] else "no new messages")
                    said[0], last = arrived[0], time.monotonic()
    except KeyboardInterrupt:  # the usual end of hz without -n
        pass
    if arrived[0] > said[0]:
        emit(rate_line(times))
    return arrived[0]
