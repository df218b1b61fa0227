"""Start the real node as its own process and talk to it over real DDS from the test."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Any

import rclpy
from builtin_interfaces.msg import Time
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Header

from vision_factory.cameras import camera_names, camera_topic
from vision_factory.parameters import kept_for_late_readers
from vision_factory.ros.messages import bgr_to_message

RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
# A reader that also gets what a node published before its writer learnt of the reader (discovery is not symmetric:
# the reader can match first, and a volatile writer drops what it sends meanwhile; CI lost answers so). The node
# must offer it on that topic: late_node_params.
LATE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
# How long a test waits for what a node does in its own time (start, topics matched, an answer, a status): a wait
# ends as soon as its condition holds, so the bound only says when to give up; on a loaded machine a node takes
# tens of seconds to start. A test asserts what happens, never how soon.
PATIENCE_S = 120.0
# Node parameters for a test that needs every frame answered (replay, verify): a queue deep enough that a loaded
# machine never drops one (a node's default keeps only the newest frame, or tracknet's 4).
KEEP_EVERY_FRAME = {"queue_size": "32"}
# How long Probe.answered waits for the answers to one frame before it sends the frame again, stamped anew.
AGAIN_S = 5.0


def late_node_params(topics) -> dict[str, str]:
    """The node parameters that make its outputs on ``topics`` (fully qualified) keep their messages for a LATE
    reader."""
    return {name: str(value) for name, value in kept_for_late_readers(topics, LATE.depth).items()}


def _main_outputs() -> tuple[str, ...]:
    """Every node family's outputs that answer each frame whether or not anyone listens (not latched, not computed
    only on demand), relative to the node's namespace. An on-demand output is published only once the node's writer
    has seen a reader, which no reader can see: a test of one sends again until it is answered."""
    from vision_factory.families.registry import NODE_FAMILIES

    topics = set()
    for spec in NODE_FAMILIES.values():
        for output in spec.node.outputs:
            if not (output.latched or output.on_demand or output.topic.startswith("~")):
                topics.add(output.topic)
    return tuple(sorted(topics))


def _served_outputs(cameras) -> tuple[str, ...]:
    """The main outputs (``_main_outputs``) a node publishes with its ``cameras`` parameter: each camera's
    (<camera>/<topic>), or the one camera's; none of a value the node refuses (its test reads the refusal)."""
    try:
        names = camera_names(cameras)
    except ValueError:
        return ()
    return tuple(camera_topic(camera, topic) for camera in names or ("",) for topic in _main_outputs())


_STARTED: list = []  # weak references to every NodeProcess started: a Probe reads their main outputs LATE


class NodeProcess:
    """A node (default: tracknet_node) in a subprocess under a private namespace; its log goes to a file. Its main
    output (each camera's, with ``cameras``) keeps its answers for a LATE reader (late_node_params), and a Probe
    subscribes to it so while it runs:
    a test that counts answers loses none to discovery's asymmetry (CI lost a burst's answers so)."""

    def __init__(
        self,
        log_dir: Path,
        params: dict[str, str],
        params_file: Path | None = None,
        namespace: str = "/t",
        module: str = "vision_factory.tracknet_onnx_node",
        executable: list[str] | None = None,
        env: dict[str, str | None] | None = None,
    ):
        self.namespace = namespace
        self.log_path = log_dir / "node.log"
        """``executable``: the command that starts the node instead of ``module`` (e.g. a generated package's);
        ``env``: variables set for its process over the test's (e.g. another ROS_DOMAIN_ID), None: unset."""
        self.late_topics = {f"{namespace.rstrip('/')}/{topic}" for topic in _served_outputs(params.get("cameras"))}
        params = {**late_node_params(sorted(self.late_topics)), **params}
        _STARTED.append(weakref.ref(self))
        command = [*(executable or [sys.executable, "-m", module]), "--ros-args", "-r", f"__ns:={namespace}"]
        if params_file:
            command += ["--params-file", str(params_file)]
        for key, value in params.items():
            command += ["-p", f"{key}:={value}"]
        self._log = self.log_path.open("w")
        environment = {k: v for k, v in {**os.environ, **env}.items() if v is not None} if env else None
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=environment)

    def log(self) -> str:
        return self.log_path.read_text()

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the node's log (for a failure's message)."""
        return "\n".join(self.log().splitlines()[-lines:])

    def wait(self, timeout: float = 20) -> int:
        return self.process.wait(timeout=timeout)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        code = self.process.wait(timeout=15)
        self._log.close()
        return code


def stamped_anew(publisher, frame, frame_id: str = "camera", first_sec: int = 1):
    """A ``send`` for Probe.answered: each call publishes the BGR ``frame`` on ``publisher``, stamped a second after
    the call before (from ``first_sec``), and returns its header."""
    seconds = itertools.count(first_sec)

    def send() -> Header:
        header = Header(stamp=Time(sec=next(seconds), nanosec=250), frame_id=frame_id)
        publisher.publish(bgr_to_message(frame, header))
        return header

    return send


def stamp_of(message):
    """A message's stamp: its header's, or a MarkerArray's first marker's; None for one without (Float64)."""
    if hasattr(message, "header"):
        return message.header.stamp
    markers = getattr(message, "markers", None)
    return markers[0].header.stamp if markers else None


def _answer(messages: list, stamp, since: int):
    """The first of ``messages`` of ``stamp``, or without a stamp and at ``since`` or after (None if none)."""
    for index, message in enumerate(messages):
        own = stamp_of(message)
        if (own == stamp) if own is not None else index >= since:
            return message
    return None


def _keeps_for_late_readers(node: NodeProcess | None, topic: str) -> bool:
    return node is not None and node.process.poll() is None and topic in node.late_topics


class Probe:
    """A test-side rclpy node with its own context: publishes frames, collects outputs."""

    def __init__(self, name: str = "probe", domain_id: int | None = None):
        """``domain_id``: the ROS domain it joins (the test run's, ROS_DOMAIN_ID, when None)."""
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = Node(name, context=self.context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.received: dict[str, list] = {}
        self.subscriptions: list = []

    def subscribe(self, msg_type, topic: str, late: bool | None = None) -> list:
        """The messages on ``topic``, as they come; ``late``: the node's earlier ones too (LATE); by default so where
        a running NodeProcess keeps them for late readers (its main output), else not (a volatile publisher
        matches no LATE reader)."""
        if late is None:
            late = any(_keeps_for_late_readers(reference(), topic) for reference in _STARTED)
        messages = self.received.setdefault(topic, [])
        qos = LATE if late else RELIABLE
        self.subscriptions.append(self.node.create_subscription(msg_type, topic, messages.append, qos))
        return messages

    def matched(self) -> bool:
        """Whether every subscription of this probe has matched a publisher: an answer published before its reader
        matched is lost (volatile topics), which a loaded machine's slower discovery made happen in CI."""
        return all(subscription.get_publisher_count() > 0 for subscription in self.subscriptions)

    def publisher(self, msg_type, topic: str):
        return self.node.create_publisher(msg_type, topic, RELIABLE)

    def spin_until(self, condition, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return True
            self.executor.spin_once(timeout_sec=0.05)
        return condition()

    def answer(self, ask, timeout: float = PATIENCE_S, again_s: float = 5.0):
        """The result of ``ask()`` (a service call returning its future, one that changes nothing if made twice),
        asked again every ``again_s`` without an answer: a reply written before the server's reply writer matched
        our reader is lost (a race of DDS services, seen in CI: no answer in 120 s)."""
        deadline, future = time.monotonic() + timeout, None
        while future is None or not future.done():
            assert time.monotonic() < deadline, "the service never answered"
            future = ask()
            self.spin_until(future.done, again_s)
        return future.result()

    def answered(
        self, send, answers: dict[str, list], node: NodeProcess | None = None, timeout: float = PATIENCE_S
    ) -> tuple[Any, dict[str, Any]]:
        """The answers on every topic of ``answers`` (topic: the list ``subscribe`` returned) to one frame: ``send()``
        publishes the frame (its inputs), stamped anew at each call (stamped_anew), and returns the header (or stamp)
        it sent; it is called again every AGAIN_S until, for one of the stamps sent, each list holds a message of
        that stamp (a message without a stamp, such as a ~/debug/ Float64, counts for every frame sent before it
        came). That header, and by topic the first message of its stamp; the node's log tail on failure.

        Needed wherever a test waits for an on-demand output (Output.on_demand: masks, markers, debug_image,
        points): the node computes it only while its writer counts a subscriber, and discovery is not symmetric,
        so our reader can match the node's writer before that writer has learnt of our reader; a frame the node
        handles meanwhile gets no such answer, which no QoS keeps (nothing was published). A frame sent once can so
        be answered on the main output alone (CI hung on a generated package's ~/masks)."""
        deadline, sent, result = time.monotonic() + timeout, [], []

        def found() -> bool:  # the answers of the earliest stamp sent that every topic answered, into result
            for header, counts in sent:
                stamp = getattr(header, "stamp", header)
                of_stamp = [_answer(messages, stamp, count) for messages, count in zip(answers.values(), counts)]
                if all(message is not None for message in of_stamp):
                    result[:] = [header, dict(zip(answers, of_stamp))]
                    return True
            return False

        while True:
            if node is not None and node.process.poll() is not None:
                raise AssertionError(
                    f"the node exited ({node.process.returncode}) before answering:\n{node.log_tail()}"
                )
            counts = [len(messages) for messages in answers.values()]
            sent.append((send(), counts))
            if self.spin_until(found, max(0.0, min(AGAIN_S, deadline - time.monotonic()))):
                return result[0], result[1]
            if time.monotonic() >= deadline:
                missing = [
                    topic
                    for index, (topic, messages) in enumerate(answers.items())
                    if all(
                        _answer(messages, getattr(header, "stamp", header), counts[index]) is None
                        for header, counts in sent
                    )
                ]
                raise AssertionError(
                    f"no answer on {', '.join(missing) or 'each of ' + ', '.join(answers)} to one of the {len(sent)}"
                    f" frames sent (each stamped anew, {AGAIN_S:g} s apart) in {timeout:g} s"
                    + (f"; the node's log ends:\n{node.log_tail()}" if node is not None else "")
                )

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


class Lifecycle:
    """A test client of a lifecycle node's services (``<node>/change_state``, ``<node>/get_state``), as
    ``ros2 lifecycle`` is, on the probe's node."""

    def __init__(self, probe: Probe, node: str):
        self.probe = probe
        self.change = probe.node.create_client(ChangeState, f"{node}/change_state")
        self.get = probe.node.create_client(GetState, f"{node}/get_state")

    def _call(self, client, request, timeout: float = PATIENCE_S):
        if not client.service_is_ready():
            assert self.probe.spin_until(client.service_is_ready, timeout), f"{client.srv_name} is not offered"
            # The server's reply writer may match the client's reader a moment after the request side does:
            # a request sent at once can be answered into the void.
            self.probe.spin_until(lambda: False, 0.5)
        future = client.call_async(request)
        assert self.probe.spin_until(future.done, timeout), f"{client.srv_name} did not answer"
        return future.result()

    def state(self) -> str:
        """The node's state: unconfigured, inactive, active or finalized."""
        return self._call(self.get, GetState.Request()).current_state.label

    def set(self, transition: str) -> bool:
        """Trigger ``transition`` (configure, activate, deactivate, cleanup, shutdown); whether it succeeded."""
        request = ChangeState.Request()
        request.transition.label = transition
        return self._call(self.change, request).success
