"""Every answer of the nodes a measure drives, counted: receiving processes that keep up, and the check of their count
against the nodes' own.

A sender that also receives in one thread loses answers as soon as the nodes answer faster than its loop turns
(bench_cameras once counted 52.5 answers/s of four nodes that logged 83/s). Here each ``AnswerReceivers`` group
(e.g. one per node process) is its own process, with its own executor, which subscribes to its topics raw (the
serialized bytes: no message is built) and keeps, per topic, each answer's header stamp and arrival time; the
sender's process only sends. ``checked`` then sets each node's count of what it received against what the node
itself logs it published (its closing line, ``streaming.closing_counts``) and refuses a measure where they differ:
then a figure would rest on answers lost by the measure, not by the node.

Answers are matched to what was sent by header stamp (``Arrival.stamp_ns``); the arrival time is the wall clock
(time.time_ns), the clock the sender stamps with, so arrival - stamp is the answer's latency.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..streaming import closing_counts
from ..text import untrusted
from .replay_frames import cdr_stamp

POLL_S = 0.01  # the receivers' executor wait between looks at their command pipe
START_S = 60.0  # the most a receiving process may take to start and answer


class Arrival(NamedTuple):
    stamp_ns: int  # the answer's header stamp
    arrived_ns: int  # the receiver's wall clock when it came


def _stamp_ns(data: bytes) -> int:
    sec, nanosec = cdr_stamp(data)
    return sec * 1_000_000_000 + nanosec


def _receive(message_type: str, depth: int, topics: list[str]) -> None:
    """A receiving process (``python -m vision_factory.tools.answers TYPE DEPTH TOPIC...``): subscribe to
    ``topics`` (reliable, ``depth``), record each message's stamp and arrival, and answer the parent's commands, one
    a line on stdin, with a JSON line on stdout ("matched": each subscription's publisher count; "stop": the records,
    then exit)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from ..ros import message_class

    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    node = rclpy.create_node("answer_receiver", context=context)
    records: list[list[tuple[int, int]]] = [[] for _ in topics]

    def keep(index: int):
        into = records[index]
        return lambda data: into.append((_stamp_ns(data), time.time_ns()))

    kind = message_class(message_type)
    qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)
    subscriptions = [
        node.create_subscription(kind, topic, keep(index), qos, raw=True) for index, topic in enumerate(topics)
    ]
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    reply = lambda value: print(json.dumps(value), flush=True)  # noqa: E731
    reply("started")
    try:
        while True:
            executor.spin_once(timeout_sec=POLL_S)
            if not select.select([sys.stdin], [], [], 0)[0]:
                continue
            command = sys.stdin.readline().strip()
            if command == "matched":
                reply([subscription.get_publisher_count() for subscription in subscriptions])
            elif command in ("stop", ""):  # "": the parent is gone
                for _ in range(100):  # what is already in the subscriptions' queues
                    executor.spin_once(timeout_sec=0)
                reply(records)
                break
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)


class AnswerReceivers:
    """Receiving processes, one per group of ``groups`` (topics of ``message_type``, e.g. 'vision_msgs/msg/
    Detection2DArray'), started at once; ``stop()`` gives, per group and per topic, every answer that came. Use as a
    context manager, or call ``close()``."""

    def __init__(self, groups: Sequence[Sequence[str]], message_type: str, depth: int = 100):
        self.groups = [list(topics) for topics in groups]
        command = [sys.executable, "-m", __name__, message_type, str(depth)]
        self._processes = [
            subprocess.Popen([*command, *topics], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for topics in self.groups
        ]
        for process, topics in zip(self._processes, self.groups):
            if self._reply(process, START_S) != "started":
                self.close()
                raise RuntimeError(f"the receiver of {', '.join(topics)} did not start within {START_S:.0f} s")

    @staticmethod
    def _reply(process: subprocess.Popen, timeout: float) -> Any:
        if not select.select([process.stdout], [], [], timeout)[0]:
            return None
        line = process.stdout.readline()
        return json.loads(line) if line else None

    def _ask(self, process: subprocess.Popen, command: str) -> Any:
        process.stdin.write(command + "\n")
        process.stdin.flush()
        reply = self._reply(process, START_S)
        if reply is None:
            raise RuntimeError(f"a receiving process did not answer {command!r} (exit status {process.poll()})")
        return reply

    def matched(self) -> bool:
        """Whether every topic of every group has a publisher (the nodes' outputs are discovered)."""
        return all(count > 0 for process in self._processes for count in self._ask(process, "matched"))

    def stop(self) -> list[list[list[Arrival]]]:
        """Stop receiving: every answer that came, per group, per topic, in order of arrival."""
        records = [self._ask(process, "stop") for process in self._processes]
        self.close()
        return [[[Arrival(*pair) for pair in topic] for topic in group] for group in records]

    def close(self) -> None:
        for process in self._processes:
            if process.poll() is None and not process.stdin.closed:
                process.stdin.close()  # an empty line: stop
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
            process.stdout.close()
        self._processes = []

    def __enter__(self) -> AnswerReceivers:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@dataclass
class CountCheck:
    """One node's answers: received by its receiver, and published by its own count (its closing line)."""

    name: str
    received: int
    published: int | None  # None: the node logged no closing counts (it did not stop cleanly)
    frames_in: int | None

    @property
    def agrees(self) -> bool:
        return self.published == self.received

    def text(self) -> str:
        published = "no closing counts logged" if self.published is None else f"published {self.published}"
        return f"{self.name}: received {self.received}, {published} (frames in {self.frames_in})"


def checked(name: str, received: int, log: str) -> CountCheck:
    """``name``'s node: the ``received`` answers against its own closing counts in its ``log``."""
    counts = closing_counts(log)
    if counts is None:
        return CountCheck(name, received, None, None)
    return CountCheck(name, received, counts["outputs"], counts["frames_in"])


def refuse_disagreement(checks: Sequence[CountCheck]) -> None:
    """A RuntimeError naming the nodes whose received answers differ from their own count: the measure lost
    answers (or a node did not stop cleanly), and its figures would not be the nodes'."""
    wrong = [check for check in checks if not check.agrees]
    if wrong:
        raise RuntimeError(
            "answers counted differ from the nodes' own counts, the measure is refused: "
            + "; ".join(untrusted(check.text(), 200) for check in wrong)
        )


if __name__ == "__main__":
    _receive(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
