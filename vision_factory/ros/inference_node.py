"""What every inference node shares: image subscription, a bounded queue drained by one
inference thread, errors reported once instead of per frame, and a run loop that still
publishes pending results on SIGINT/SIGTERM.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import CompressedImage, Image

from ..parameters import IMAGE_INPUT_PARAMETERS, Parameter
from ..runtime.runner import Runner
from ..text import untrusted
from .parameters import declare_parameters, image_input


class InferenceNode(Node):
    """Subclasses implement ``process(item)``; ``enqueue`` hands items to the inference thread."""

    idle_timeout = 0.0  # seconds without items before ``on_idle`` runs once; 0 = never

    def __init__(self, name: str, parameters: tuple[Parameter, ...], runner_class: type[Runner], **kwargs):
        super().__init__(name, **kwargs)
        self.values = declare_parameters(self, (*parameters, *IMAGE_INPUT_PARAMETERS, *runner_class.PARAMETERS))
        self.transport, self.image_qos = image_input(self.values)
        self.runner_settings = {parameter.name: self.values[parameter.name] for parameter in runner_class.PARAMETERS}
        self.queue_size = self.values["queue_size"]
        self.frames_in = self.frames_dropped = self.frames_skipped = 0
        self._reported: set[str] = set()
        self._queue: deque = deque()
        self._wake = threading.Condition()
        self._running = False
        self._worker = threading.Thread(target=self._work, name=f"{name}_inference", daemon=True)

    def load_runner(self, runner_class: type[Runner], path: str) -> Runner:
        return runner_class.load(path, self.runner_settings, self.get_logger())

    def subscribe_images(self, callback: Callable[[Any], None] | None = None) -> str:
        """Subscribe to image (raw) or image/compressed; start the inference thread. The topic subscribed."""
        self._running = True
        self._worker.start()
        topic = "image" if self.transport == "raw" else "image/compressed"
        message_type = Image if self.transport == "raw" else CompressedImage
        self.create_subscription(message_type, topic, callback or self.enqueue, self.image_qos)
        return self.resolve_topic_name(topic)

    def enqueue(self, item: Any) -> None:
        """Hand an item to the inference thread; drop the oldest when the queue is full (``on_dropped``)."""
        dropped = None
        with self._wake:
            self.frames_in += 1
            if len(self._queue) >= self.queue_size:
                dropped = self._queue.popleft()
                self.frames_dropped += 1
            self._queue.append(item)
            self._wake.notify()
        if dropped is not None:
            self._survive(self.on_dropped, dropped)

    def on_dropped(self, item: Any) -> None:
        """Runs, on the receiving thread, for an item dropped from the full queue (already counted)."""

    def process(self, item: Any) -> None:
        raise NotImplementedError

    def on_idle(self) -> None:
        """Runs once after ``idle_timeout`` seconds without items."""

    def _work(self) -> None:
        last_item = time.monotonic()
        while self._running:
            with self._wake:
                if not self._queue:
                    self._wake.wait(timeout=0.05)
                item = self._queue.popleft() if self._queue else None
            if item is not None:
                last_item = time.monotonic()
                self._survive(self.process, item)
            elif self.idle_timeout > 0 and time.monotonic() - last_item > self.idle_timeout:
                last_item = float("inf")
                self._survive(self.on_idle)

    def _survive(self, work: Callable[..., None], *arguments: Any) -> None:
        """Run ``work``; the inference thread must survive anything an item causes (reported once)."""
        try:
            work(*arguments)
        except Exception as exc:
            self.skip_error(exc)

    def skip(self, kind: str, detail: str = "") -> None:
        """Count a skipped frame under ``kind``, a short fixed name for the kind of problem (never text
        from a message); the first of each kind is logged with its ``detail``."""
        self.frames_skipped += 1
        if kind not in self._reported:
            self._reported.add(kind)
            self.get_logger().warning(f"skipping frame ({kind}): {untrusted(detail)} (logged once per kind)")

    def skip_error(self, exc: Exception) -> None:
        """``skip`` for an exception: its ``kind`` when it has one (ImageFormatError), else its type."""
        self.skip(getattr(exc, "kind", type(exc).__name__), str(exc))

    def close(self) -> None:
        """Stop the inference thread, then process what is still queued."""
        self._running = False
        if self._worker.is_alive():
            self._worker.join(timeout=5)
        while self._queue:  # frames already accepted still get their answer
            self._survive(self.process, self._queue.popleft())


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def spin(make_node: Callable[[], InferenceNode], name: str, args: list[str] | None = None) -> int:
    """Run a node until SIGINT/SIGTERM, then ``close()`` it; 2 when it cannot start (the reason is logged)."""
    # Our own signal handling, so that pending results are still published on SIGINT/SIGTERM.
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        node = make_node()
    except (ValueError, RuntimeError, ParameterException) as exc:
        rclpy.logging.get_logger(name).fatal(f"cannot start: {exc}")
        rclpy.try_shutdown()
        return 2
    executor = SingleThreadedExecutor()  # one executor: rclpy.spin_once would re-add the node every call
    executor.add_node(node)
    try:
        while rclpy.ok():
            executor.spin_once(timeout_sec=0.2)  # returns often, so signal handlers run
    except KeyboardInterrupt:
        pass
    finally:
        node.close()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
