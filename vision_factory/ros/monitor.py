"""What a running inference node says about itself: live latency on ``~/debug/``, ``/diagnostics`` once a
second, and a warning when a camera is on the image topic but no frame arrives.

``~/debug/`` (std_msgs/Float64, milliseconds; published only while something subscribes to that topic):
  processing_time_ms    the inference thread's time on one frame: from taking it off the queue until it is done
                        with it (its answer and the markers and debug image after it published), plus pre-processing
                        done for it on the receiving thread (TrackNet); perf_counter, a monotonic clock
  pipeline_latency_ms   at each answer published: now minus the image's header stamp, on the node's ROS clock (the
                        stamp's): transport, queue and processing up to the answer. Not comparable with the
                        processing time: another clock, and the work after the answer is in one and not the other
  preprocess_ms         the frame's time before its first model run (image conversion, resizing, tensors)
  inference_ms          the time inside the model runs for the frame (every runner the node loaded)
  postprocess_ms        the rest: decoding, tracking, between and after the runs, publishing
A frame that is skipped has no values; a frame no model ran on (TrackNet's median warm-up) has only
pre-processing. std_msgs has no stamped scalar: each value is published as its frame's answer goes out.

``/diagnostics`` (diagnostic_msgs/DiagnosticArray), one DiagnosticStatus named "<node name>: inference":
counts since start, the rate and latency percentiles over the last ``WINDOW_S`` seconds, the model and what
really runs it; OK, WARN (drops over ``drop_warn_fraction`` of the window's frames, a requested execution
provider that fell back, silence) or ERROR (every frame of the window skipped), with the reason.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.event_handler import SubscriptionEventCallbacks, UnsupportedEventTypeError
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSCompatibility, QoSProfile, ReliabilityPolicy, qos_check_compatible
from std_msgs.msg import Float64, Header

from ..text import untrusted
from .cameras import wanted
from .parameters import OUTPUT_QOS_OVERRIDES
from .transport import advice, receive_limit

WINDOW_S = 10.0  # the diagnostics' window: rate, drops, skips and percentiles over the last seconds
SAMPLES = 2000  # per ring buffer (latency, processing time): bounded whatever the frame rate
DIAGNOSTICS_PERIOD_S = 1.0
DEBUG_TOPICS = ("processing_time_ms", "pipeline_latency_ms", "preprocess_ms", "inference_ms", "postprocess_ms")
INFERENCE_STATUS = "{node}: inference"  # the name of the node's DiagnosticStatus, by the node's name
# The status' keys of its counts since start (read by tools: replay, verify).
FRAMES_IN, ANSWERED, DROPPED, SKIPPED = "frames in", "frames answered", "frames dropped", "frames skipped"
NEVER_ARRIVED = "frames that never arrived"  # sent by the publishers and lost on the way, since start
IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
# With no publisher on its image topic: the image topics others publish that the warning names, at most.
NAMED_TOPICS = 8
LOSS_MIN = 5  # frames that never arrived in the window before the loss watch warns (one or two is noise)


def qos_text(qos: QoSProfile) -> str:
    """'best_effort, volatile, keep_last 5': what decides whether a publisher and a subscription match (history
    only when known: the graph does not tell a remote publisher's)."""
    text = f"{qos.reliability.name.lower()}, {qos.durability.name.lower()}"
    if qos.history in (HistoryPolicy.KEEP_LAST, HistoryPolicy.KEEP_ALL):
        text += f", {qos.history.name.lower()}" + (f" {qos.depth}" if qos.history == HistoryPolicy.KEEP_LAST else "")
    return text


def age_s(node: Node, header: Header) -> float:
    """Seconds from ``header``'s stamp to now on ``node``'s clock (the bag's with use_sim_time)."""
    stamp = header.stamp
    return (node.get_clock().now().nanoseconds - stamp.sec * 1_000_000_000 - stamp.nanosec) / 1e9


class _FrameClock:
    """One frame's times on the inference thread (perf_counter seconds)."""

    __slots__ = ("start", "first_run", "inference", "received")

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.first_run: float | None = None
        self.inference = 0.0
        self.received = 0.0  # pre-processing done for the frame on the receiving thread


class Monitor:
    """Created by the node with its parameter values; ``timed`` wraps each runner the node loads, ``process``
    each frame's processing, ``answered`` each answer published, ``watch`` the image subscription."""

    def __init__(self, node: Node, values: dict[str, Any]):
        self.node = node
        self.silence_timeout = float(values["silence_timeout"])
        self.drop_warn_fraction = float(values["drop_warn_fraction"])
        if self.silence_timeout < 0:
            raise ValueError(f"silence_timeout must be >= 0 (0: never warn), got {self.silence_timeout}")
        if not 0 <= self.drop_warn_fraction <= 1:
            raise ValueError(f"drop_warn_fraction must be within 0..1, got {self.drop_warn_fraction}")
        self.model_path = str(values.get("model_path", ""))
        self.debug = {
            name: node.create_publisher(Float64, f"~/debug/{name}", 10, qos_overriding_options=OUTPUT_QOS_OVERRIDES)
            for name in DEBUG_TOPICS
        }
        self.diagnostics = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        # (model path, what runs it, its fallback or "") per model loaded, in order; no reference to the runner,
        # so releasing a model frees it
        self.models: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()  # the ring buffers: written by the inference thread, read by the timer
        self._latencies: deque[tuple[float, float]] = deque(maxlen=SAMPLES)  # (monotonic s, ms)
        self._processing: deque[tuple[float, float]] = deque(maxlen=SAMPLES)
        # (monotonic s, in, answered, dropped, skipped) at each status, from the node's start (nothing yet)
        self._counts: deque[tuple[float, int, int, int, int]] = deque([(time.monotonic(), 0, 0, 0, 0)])
        self._frame = threading.local()  # .clock: the _FrameClock of the frame this thread is processing
        self.topic: str | None = None  # the image topic once subscribed
        self.message_type = ""  # its type, e.g. sensor_msgs/msg/Image
        self.qos: QoSProfile | None = None  # the subscription's
        self._last_frame = time.monotonic()
        self._arrivals = 0  # frames that came on the topic since it was watched (for the silence's diagnosis)
        self._waiting_since: float | None = None  # since when a publisher is there and no frame came
        self.silence = ""  # the reason while silent past silence_timeout, logged once until frames come
        self._unpublished = False  # the silence is "no publisher here, images elsewhere": said once, until one comes
        # Frames the image topics' publishers sent that never arrived (the subscriptions' message-lost events, from
        # the DDS reader: a gap in a publisher's sequence numbers, a frame whose fragments did not all come).
        self.never_arrived = 0
        self._loss_counts: deque[tuple[float, int, int]] = deque([(time.monotonic(), 0, 0)])  # (s, in, never)
        self.frame_bytes = 0  # the largest image message that came on the watched topic (bytes)
        self.losing = ""  # the reason while frames go missing on the way (diagnostics' WARN)
        self._loss_said = False  # logged once, until a window without losses
        self._timer = node.create_timer(DIAGNOSTICS_PERIOD_S, self.tick)

    # --- hooks called by the node ---

    def timed(self, runner: Any, path: str) -> Any:
        """``runner`` with its ``run`` timed into the current frame's inference time; remembered for diagnostics."""
        run, instance = type(runner).run, weakref.ref(runner)  # no cycle: dropping the runner frees it at once

        def timed_run(feeds):
            start = time.perf_counter()
            try:
                return run(instance(), feeds)
            finally:
                self._ran(start, time.perf_counter())

        runner.run = timed_run
        fallback = getattr(runner, "fallback", "")  # only runners that can fall back have it (onnx)
        self.models.append((str(path), runner.describe(), fallback))
        return runner

    def destroy(self) -> None:
        """The node released what configure made (lifecycle cleanup): the monitor's publishers and timer go too."""
        self.node.destroy_timer(self._timer)
        for publisher in (*self.debug.values(), self.diagnostics):
            self.node.destroy_publisher(publisher)
        self.models = []

    def watch(self, topic: str, message_type: type, qos: QoSProfile, callback: Callable[[Any], None]):
        """The image subscription's callback, noting each arrival (and the frame's size) for the silence watch."""
        self.topic = self.node.resolve_topic_name(topic)
        self.message_type = _type_name(message_type)
        self.qos = qos
        self._last_frame = time.monotonic()

        def arrived(msg: Any) -> None:
            self._last_frame = time.monotonic()
            self._arrivals += 1
            size = len(msg) if isinstance(msg, bytes) else len(getattr(msg, "data", b""))  # raw: the serialized bytes
            self.frame_bytes = max(self.frame_bytes, size)
            callback(msg)

        return arrived

    def subscribe(self, message_type: type, topic: str, callback: Callable[[Any], None], qos: QoSProfile, raw: bool):
        """An image subscription of the node whose frames that never arrived are counted (``never_arrived``); where
        the RMW has no message-lost event, a plain one."""
        events = SubscriptionEventCallbacks(message_lost=self._lost)
        try:
            return self.node.create_subscription(message_type, topic, callback, qos, raw=raw, event_callbacks=events)
        except UnsupportedEventTypeError:
            return self.node.create_subscription(message_type, topic, callback, qos, raw=raw)

    def _lost(self, info: Any) -> None:
        self.never_arrived += info.total_count_change

    def unwatch(self) -> None:
        """The image subscription is gone (e.g. a deactivated node): no silence watch until ``watch`` again."""
        self.topic, self.silence, self._waiting_since, self._unpublished = None, "", None, False

    def process(self, work: Callable[..., None], *arguments: Any) -> None:
        """``work(*arguments)`` (a frame's) timed by stage; the times recorded and published unless the frame was
        skipped."""
        clock = _FrameClock()
        skipped = self.node.frames_skipped
        self._frame.clock = clock
        try:
            work(*arguments)
        finally:
            self._frame.clock = None
        end = time.perf_counter()
        if self.node.frames_skipped != skipped:
            return
        first_run = end if clock.first_run is None else clock.first_run
        preprocess = first_run - clock.start + clock.received
        total = end - clock.start + clock.received
        with self._lock:
            self._processing.append((time.monotonic(), 1000 * total))
        self._publish("processing_time_ms", total)
        self._publish("preprocess_ms", preprocess)
        self._publish("inference_ms", clock.inference)
        self._publish("postprocess_ms", end - first_run - clock.inference)

    def received(self, seconds: float) -> None:
        """Pre-processing the current frame had on the receiving thread (TrackNet), counted as its own."""
        clock = getattr(self._frame, "clock", None)
        if clock is not None:
            clock.received += seconds

    def answered(self, header: Header, camera: str) -> None:
        """An answer for the frame of ``header`` (of ``camera``) was just published: its pipeline latency."""
        latency = age_s(self.node, header)
        with self._lock:
            self._latencies.append((time.monotonic(), 1000 * latency))
        self._publish("pipeline_latency_ms", latency)
        camera_answered = getattr(self.node, "camera_answered", None)  # a node of several cameras counts each's
        if camera_answered is not None:
            camera_answered(camera, 1000 * latency)

    # --- inside ---

    def _ran(self, start: float, end: float) -> None:
        clock = getattr(self._frame, "clock", None)  # None: a run outside a frame, or on another thread
        if clock is None:
            return
        if clock.first_run is None:
            clock.first_run = start
        clock.inference += end - start

    def _publish(self, name: str, seconds: float) -> None:
        """A ~/debug/ figure, while its writer counts a reader, or always where it is kept for late readers
        (transient local, as replay asks): discovery is not symmetric, so the writer may learn of a reader only
        after the frames that reader waits for (a replay or a test lost a first frame's figures so)."""
        publisher = self.debug[name]
        if wanted(publisher):
            publisher.publish(Float64(data=1000 * seconds))

    def tick(self) -> None:
        """Once a second: the silence and loss watches, then /diagnostics."""
        self.watch_silence()
        self.watch_losses()
        cameras = getattr(self.node, "camera_statuses", list)()  # one status per camera of a multi-camera node
        self.diagnostics.publish(
            DiagnosticArray(header=Header(stamp=self.node.get_clock().now().to_msg()), status=[self.status(), *cameras])
        )

    def watch_silence(self) -> None:
        """Warn once when a publisher is on the image topic but no frame came for silence_timeout seconds."""
        if self.topic is None or self.silence_timeout <= 0:
            return
        now = time.monotonic()
        publishers = self.node.get_publishers_info_by_topic(self.topic)
        if not publishers:  # nobody to hear from: not silence, unless images are published on other topics
            self._waiting_since = None
            self._watch_unpublished(now)
            return
        if self._unpublished:  # a publisher came: the silence watch starts afresh
            self._unpublished, self.silence = False, ""
        if self._waiting_since is None:  # a publisher just came: it gets the whole timeout
            self._waiting_since = now
        if now - max(self._waiting_since, self._last_frame) < self.silence_timeout:
            self.silence = ""  # frames come (again): the next silence is logged again
            return
        if not self.silence:
            self.silence = self.silence_reason(publishers)
            self.node.get_logger().warning(self.silence + " (logged once, until frames come)")

    def _watch_unpublished(self, now: float) -> None:
        """Warn once when no one published on the image topic for silence_timeout seconds while other image topics
        have publishers (a remap left out or mistyped): the warning names them."""
        if self._unpublished:
            return
        self.silence = ""
        if now - self._last_frame < self.silence_timeout:
            return
        elsewhere = self.published_image_topics()
        if not elsewhere:
            return
        self._unpublished = True
        self.silence = self.unpublished_reason(elsewhere)
        self.node.get_logger().warning(self.silence + " (logged once, until a publisher comes)")

    def published_image_topics(self) -> list[tuple[str, str]]:
        """(topic, type) of each image topic (IMAGE_TYPES) another node publishes on, sorted."""
        me = (self.node.get_namespace().rstrip("/"), self.node.get_name())
        found = []
        for topic, types in self.node.get_topic_names_and_types():
            kind = next((name for name in types if name in IMAGE_TYPES), None)
            if kind is None or topic == self.topic:
                continue
            publishers = self.node.get_publishers_info_by_topic(topic)
            if any((p.node_namespace.rstrip("/"), p.node_name) != me for p in publishers):
                found.append((topic, kind))
        return sorted(found)

    def unpublished_reason(self, elsewhere: list[tuple[str, str]]) -> str:
        """No publisher on the image topic while ``elsewhere`` (topic, type) has some: which, and the remap."""
        named = ", ".join(
            f"{untrusted(topic, 200)} ({kind.rsplit('/', 1)[-1]})" for topic, kind in elsewhere[:NAMED_TOPICS]
        )
        more = f" and {len(elsewhere) - NAMED_TOPICS} more" if len(elsewhere) > NAMED_TOPICS else ""
        relative = "image/compressed" if self.topic.endswith("/compressed") else "image"  # as subscribe_images
        return (
            f"no publisher on {self.topic} ({self.message_type.rsplit('/', 1)[-1]}) for {self.silence_timeout:g} s, "
            f"while image topics have publishers: {named}{more}; remap this node's input to one of them "
            f"(--ros-args -r {relative}:=TOPIC; a CompressedImage topic needs -p input_transport:=compressed)"
        )

    def silence_reason(self, publishers: list) -> str:
        """Why no frame comes from ``publishers``: the QoS or type mismatches found, else the likely causes."""
        count = len(publishers)
        text = f"no frame on {self.topic} for {self.silence_timeout:g} s although {count} publisher{'s' * (count > 1)} "
        text += f"{'are' if count > 1 else 'is'} on it"
        mismatches = []
        for publisher in publishers:
            who = untrusted(f"{publisher.node_namespace.rstrip('/')}/{publisher.node_name}", 200)
            if publisher.topic_type != self.message_type:
                mismatches.append(
                    f"{who} publishes {untrusted(publisher.topic_type, 100)}, this node subscribes {self.message_type}"
                    " (set input_transport, or remap image/compressed)"
                )
                continue
            compatibility, reason = qos_check_compatible(publisher.qos_profile, self.qos)
            if compatibility == QoSCompatibility.ERROR:
                reliability = publisher.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
                fix = "qos_reliability:=best_effort (it takes both)" if reliability else "the publisher's QoS"
                mismatches.append(
                    f"QoS mismatch: {who} publishes with {qos_text(publisher.qos_profile)}, this node subscribes "
                    f"with {qos_text(self.qos)} ({reason.removeprefix('ERROR: ').rstrip(';')}); fix: {fix}"
                )
        if mismatches:
            return f"{text}: {'; '.join(mismatches)}"
        if self._arrivals:  # frames did come: not a transport that never delivers
            return f"{text}. {self._seen()}"
        if self.never_arrived:  # sent, and lost on the way: said, not guessed
            return f"{text}: {self._lost_text(0, self.never_arrived, 'since it started')}"
        likely = f"{self._qos_cause(publishers)}; or frames lost on the way: {self._transport_cause()}"
        return f"{text}. Likely causes: {likely}"

    def _seen(self) -> str:
        """What the node saw of the frames that came before a silence: how many, when, and what became of them."""
        node = self.node
        ago = time.monotonic() - self._last_frame
        came = self._arrivals
        text = f"{came} frame{'s' * (came != 1)} came before (the last {ago:.1f} s ago), so frames do reach this node"
        skipped = node.frames_skipped
        if skipped:
            kinds = ", ".join(f"{untrusted(kind, 100)}: {count}" for kind, count in dict(node.problems).items())
            every = "every one" if skipped >= node.frames_in else f"{skipped} of {node.frames_in}"
            text += (
                f"; {every} skipped, by kind: {kinds} (the first of each kind is logged above with its reason and fix)"
            )
        waiting = getattr(node, "waiting_for", None)  # what the node's stream still waits for (TrackNet)
        reason = waiting() if waiting is not None else ""
        if reason:
            text += f"; {reason}"
        if self.never_arrived:
            return f"{text}; {self._lost_text(node.frames_in, self.never_arrived, 'since it started')}"
        # Frames of this size came whole and none was reported lost: the transport carries them (a transport that
        # loses them, as a 512 KB shared-memory segment loses larger frames, loses them all: silence_reason's case).
        return f"{text}. The publisher paused or stopped sending (the end of a bag or a stream)"

    def _transport_cause(self) -> str:
        """Where frames from this topic's publishers get lost on the way, and the fixes (transport.advice)."""
        reliable = []
        if self.qos is not None and self.qos.reliability == ReliabilityPolicy.BEST_EFFORT and self.topic:
            for publisher in self.node.get_publishers_info_by_topic(self.topic):
                if publisher.qos_profile.reliability == ReliabilityPolicy.RELIABLE:
                    reliable.append(untrusted(f"{publisher.node_namespace.rstrip('/')}/{publisher.node_name}", 100))
        return untrusted(advice(self.frame_bytes, reliable, os.environ, receive_limit()), 2000)

    def watch_losses(self) -> None:
        """Warn once when more than drop_warn_fraction of the frames publishers sent in the window (at least
        LOSS_MIN) never arrived; said again only after a window in which none went missing."""
        now = time.monotonic()
        self._loss_counts.append((now, self.node.frames_in, self.never_arrived))
        while len(self._loss_counts) > 2 and self._loss_counts[1][0] <= now - WINDOW_S:
            self._loss_counts.popleft()
        arrived, lost = self.node.frames_in - self._loss_counts[0][1], self.never_arrived - self._loss_counts[0][2]
        if lost < LOSS_MIN or lost <= self.drop_warn_fraction * (arrived + lost):
            self.losing = ""
            if lost == 0:
                self._loss_said = False
            return
        span = f"in the last {min(now - self._loss_counts[0][0], WINDOW_S):.0f} s"
        self.losing = self._lost_text(arrived, lost, span)
        if not self._loss_said:
            self._loss_said = True
            self.node.get_logger().warning(self.losing + " (logged once, until frames come whole again)")

    def _lost_text(self, arrived: int, lost: int, when: str) -> str:
        """'N of the M frames ... never reached this node ...': the losses ``when``, where, and the fix."""
        topics = (
            f"{self.topic} and the other cameras' topics" if getattr(self.node, "multicamera", False) else self.topic
        )
        return (
            f"{lost} of the {arrived + lost} frames publishers sent on {topics} {when} never reached this node (its "
            f"DDS reader counted them lost: missing from a publisher's sequence, or their fragments never all came): "
            f"lost in transport, not by the camera; {self._transport_cause()}"
        )

    def _qos_cause(self, publishers: list) -> str:
        offered = "; ".join(f"{untrusted(p.node_name, 100)}: {qos_text(p.qos_profile)}" for p in publishers[:3])
        return (
            f"a publisher that sends nothing yet (a camera waiting for a trigger; QoS as seen: publishers {offered}, "
            f"this node {qos_text(self.qos)})"
        )

    def status(self) -> DiagnosticStatus:
        """The node's DiagnosticStatus now (also updates the window of counts)."""
        node, now = self.node, time.monotonic()
        counts = (now, node.frames_in, node.outputs, node.frames_dropped, node.frames_skipped)
        self._counts.append(counts)
        while len(self._counts) > 2 and self._counts[1][0] <= now - WINDOW_S:
            self._counts.popleft()
        first = self._counts[0]
        span = max(now - first[0], 1e-9)
        came, answered, dropped, skipped = (now_count - then for now_count, then in zip(counts[1:], first[1:]))
        with self._lock:
            latencies = [ms for at, ms in self._latencies if at > now - WINDOW_S]
            processing = [ms for at, ms in self._processing if at > now - WINDOW_S]
        values = {
            FRAMES_IN: node.frames_in,
            ANSWERED: node.outputs,
            DROPPED: node.frames_dropped,
            SKIPPED: node.frames_skipped,
            NEVER_ARRIVED: self.never_arrived,
        }
        for kind, count in dict(node.problems).items():
            values[f"problem: {kind}"] = count
        values["window (s)"] = f"{span:.1f}"
        values["rate (answers/s)"] = f"{answered / span:.2f}"
        for name, samples in (("pipeline latency", latencies), ("processing time", processing)):
            if samples:
                p50, p90, p99 = np.percentile(samples, (50, 90, 99))
                values[f"{name} p50/p90/p99 (ms)"] = f"{p50:.1f} / {p90:.1f} / {p99:.1f}"
        values.update(getattr(self.node, "monitor_values", dict)())  # the cameras and batch sizes run, with several
        values["model"] = self.model_path
        more = getattr(node, "status_values", None)  # the node's own (a tracker's thresholds), when it has some
        if more is not None:
            values.update(more())
        for path, runs_on, _ in self.models:
            values[f"runs {os.path.basename(path)} on"] = runs_on
        level, message = self._level(came, dropped, skipped)
        main = next((runs_on for path, runs_on, _ in self.models if path == self.model_path), None)
        main = main or (self.models[0][1] if self.models else None)
        return DiagnosticStatus(
            level=level,
            name=INFERENCE_STATUS.format(node=node.get_name()),
            message=message,
            hardware_id=f"{os.path.basename(self.model_path)} on {main}" if main else self.model_path,
            values=[KeyValue(key=key, value=untrusted(value, 500)) for key, value in values.items()],
        )

    def _level(self, came: int, dropped: int, skipped: int) -> tuple[bytes, str]:
        """ERROR / WARN / OK and the reason, from the window's counts and the node's state."""
        errors, warnings = [], []
        if skipped and skipped + dropped >= came:
            kinds = ", ".join(f"{untrusted(kind, 100)}: {count}" for kind, count in dict(self.node.problems).items())
            errors.append(
                f"every frame of the last {WINDOW_S:g} s was skipped ({skipped}): see the node's log for the reason "
                f"and fix of each kind (skipped since start, by kind: {kinds})"
            )
        if came and dropped > self.drop_warn_fraction * came:
            warnings.append(
                f"{dropped} of {came} frames of the last {WINDOW_S:g} s dropped (over drop_warn_fraction "
                f"{self.drop_warn_fraction:g}): the node is slower than the camera; lower the rate or use a faster "
                f"execution_provider"
            )
        for path, _, fallback in self.models:
            if fallback:
                warnings.append(f"{os.path.basename(path)}: {fallback}")
        if self.losing:
            warnings.append(self.losing)
        if self.silence:
            warnings.append(self.silence)
        if errors:
            return DiagnosticStatus.ERROR, "; ".join(errors + warnings)
        if warnings:
            return DiagnosticStatus.WARN, "; ".join(warnings)
        if self.topic is not None and came == 0:
            return DiagnosticStatus.OK, f"waiting for frames on {self.topic}"
        return DiagnosticStatus.OK, "answering"


def _type_name(message_type: type) -> str:
    """sensor_msgs.msg.Image -> 'sensor_msgs/msg/Image', as the ROS graph names types."""
    package = message_type.__module__.split(".")[0]
    return f"{package}/msg/{message_type.__name__}"
