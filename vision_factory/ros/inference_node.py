"""What every inference node shares: image subscription, a bounded queue drained by one
inference thread, problems with frames reported once per kind and counted (the counts logged
every minute while new ones come, and at stop), and a run loop that still publishes pending
results on SIGINT/SIGTERM.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from ..images import ImageFormatError
from ..parameters import IMAGE_INPUT_PARAMETERS, Parameter
from ..runtime.runner import Runner
from ..text import untrusted
from .messages import image_from_cdr, message_to_bgr
from .parameters import declare_parameters, image_input

PAIRING_WINDOW = 30  # images (or their partners) kept while waiting for the partner of the same stamp


def stamp_of(header: Header) -> tuple[int, int]:
    return header.stamp.sec, header.stamp.nanosec


class InferenceNode(Node):
    """Subclasses implement ``process(item)``; ``enqueue`` hands items to the inference thread."""

    idle_timeout = 0.0  # seconds without items before ``on_idle`` runs once; 0 = never
    problems_period = 60.0  # seconds between the logged counts of problems while new ones come

    def __init__(self, name: str, parameters: tuple[Parameter, ...], runner_class: type[Runner], **kwargs):
        super().__init__(name, **kwargs)
        self.values = declare_parameters(self, (*parameters, *IMAGE_INPUT_PARAMETERS, *runner_class.PARAMETERS))
        self.transport, self.image_qos = image_input(self.values)
        self.runner_settings = {parameter.name: self.values[parameter.name] for parameter in runner_class.PARAMETERS}
        self.queue_size = self.values["queue_size"]
        self.max_image_pixels = self.values["max_image_pixels"]
        self.frames_in = self.frames_dropped = self.frames_skipped = 0
        self.outputs = 0  # answers published (subclasses count them)
        self.problems: dict[str, int] = {}  # kind of problem -> frames it happened to, in order of first sight
        self._problems_logged = 0  # of the frames counted in problems, at the last count logged
        self._problems_lock = threading.Lock()  # problems come from the executor and the inference thread
        self.create_timer(self.problems_period, self.log_problems)
        self._queue: deque = deque()
        self._wake = threading.Condition()
        self._running = False
        self._worker = threading.Thread(target=self._work, name=f"{name}_inference", daemon=True)

    def load_runner(self, runner_class: type[Runner], path: str) -> Runner:
        return runner_class.load(path, self.runner_settings, self.get_logger())

    def to_bgr(self, msg: Any) -> Any:
        """The BGR frame of an image message: within max_image_pixels, decoder complaints reported by ``warn``."""
        return message_to_bgr(msg, self.max_image_pixels, self.warn)

    def subscribe_images(self, callback: Callable[[Any], None] | None = None) -> str:
        """Subscribe to image (raw) or image/compressed; start the inference thread. The topic subscribed."""
        self._running = True
        self._worker.start()
        callback = callback or self.enqueue
        if self.transport == "raw":
            # Raw: the serialized bytes, read as an ImageView whose pixels stay in them (messages.image_from_cdr).
            take = lambda data: self._take_image(data, callback)  # noqa: E731
            self.create_subscription(Image, "image", take, self.image_qos, raw=True)
            return self.resolve_topic_name("image")
        self.create_subscription(CompressedImage, "image/compressed", callback, self.image_qos)
        return self.resolve_topic_name("image/compressed")

    def _take_image(self, data: bytes, callback: Callable[[Any], None]) -> None:
        try:
            msg = image_from_cdr(data)
        except ImageFormatError as exc:  # data that ends inside a field: counted and reported, never raised here
            self.frames_in += 1
            self.skip_error(exc)
            return
        callback(msg)

    def subscribe_paired_images(self, message_type: type, topic: str, what: str, hint: str) -> str:
        """Subscribe to the images and to ``topic`` (of ``message_type``, e.g. another node's detections, ``what``
        in words) and enqueue (image, partner) once both of one stamp are in, keeping the newest unpaired of each.
        An image whose partner never comes is refused (counted as "image without ``what``", reported with
        ``hint``, how to fix it). The image topic."""
        self._images: OrderedDict = OrderedDict()
        self._partners: OrderedDict = OrderedDict()
        self._pairing = topic, what, hint
        images = self.subscribe_images(self._keep_image)
        self.create_subscription(message_type, topic, self._keep_partner, 10)
        return images

    def _keep_image(self, msg: Any) -> None:
        self._pair(msg, self._images, self._partners, lambda partner: (msg, partner))

    def _keep_partner(self, msg: Any) -> None:
        self._pair(msg, self._partners, self._images, lambda image: (image, msg))

    def _pair(self, msg: Any, mine: OrderedDict, theirs: OrderedDict, item: Callable[[Any], Any]) -> None:
        stamp = stamp_of(msg.header)
        partner = theirs.pop(stamp, None)
        if partner is not None:
            self.enqueue(item(partner))
            return
        mine[stamp] = msg
        while len(mine) > PAIRING_WINDOW:
            mine.popitem(last=False)
            if mine is self._images:
                self._unpaired_image()

    def _unpaired_image(self) -> None:
        """An image whose partner never came: refused (counted and reported), not lost silently."""
        self.frames_in += 1  # on the executor's thread, as enqueue's count
        topic, what, hint = self._pairing
        self.skip(
            f"image without {what}",
            f"no {topic} message with the image's stamp came among the next {PAIRING_WINDOW} messages; {hint}",
        )

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
        self._problem(kind, "skipping frame", detail, skipped=True)

    def skip_error(self, exc: Exception) -> None:
        """``skip`` for an exception: its ``kind`` when it has one (ImageFormatError), else its type."""
        self.skip(getattr(exc, "kind", None) or _type_name(exc), str(exc))

    def warn(self, kind: str, detail: str = "") -> None:
        """Count a frame that is answered despite a problem (compressed data decoded despite the decoder's
        complaints) under ``kind``; the first of each kind is logged with its ``detail``."""
        self._problem(kind, "frame answered despite a problem", detail, skipped=False)

    def _problem(self, kind: str, what: str, detail: str, skipped: bool) -> None:
        with self._problems_lock:
            first = kind not in self.problems
            self.problems[kind] = self.problems.get(kind, 0) + 1
            self.frames_skipped += skipped
        if first:
            self.get_logger().warning(
                f"{what} ({kind}): {untrusted(detail)} (logged once per kind; counts follow every "
                f"{self.problems_period:g} s while more come, and at stop)"
            )

    def log_problems(self, final: bool = False) -> None:
        """Log the count of each kind of problem: when new ones came since the last count, or ``final``ly."""
        with self._problems_lock:
            counts, total = dict(self.problems), sum(self.problems.values())
            if total == self._problems_logged and not (final and total):
                return
            self._problems_logged = total
        by_kind = ", ".join(f"{kind}: {count}" for kind, count in counts.items())
        self.get_logger().warning(f"frames with problems {'in all' if final else 'so far'}, by kind: {by_kind}")

    def close(self) -> None:
        """Stop the inference thread, then process what is still queued."""
        self._running = False
        if self._worker.is_alive():
            self._worker.join(timeout=5)
        while self._queue:  # frames already accepted still get their answer
            self._survive(self.process, self._queue.popleft())
        for _ in getattr(self, "_images", ()):  # paired images still waiting for their partner at the end
            self._unpaired_image()
        self.finish()
        self.log_problems(final=True)
        self.get_logger().info(self.counts())

    def finish(self) -> None:
        """Runs at close once every queued item is processed, before the closing lines (e.g. flush a stream)."""

    def counts(self, outputs: int | None = None) -> str:
        """The closing line: frames in, dropped, skipped and ``outputs`` (default: ``self.outputs``)."""
        outputs = self.outputs if outputs is None else outputs
        return (
            f"frames in {self.frames_in}, dropped {self.frames_dropped}, skipped {self.frames_skipped}, "
            f"outputs {outputs}"
        )


def _type_name(exc: Exception) -> str:
    """'ValueError', or 'cv2.error' for an exception of a module's own."""
    kind = type(exc)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


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
        # The reason can quote the model file (names, metadata) and parameters: one line, of bounded length.
        rclpy.logging.get_logger(name).fatal(f"cannot start: {untrusted(exc, 2000)}")
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
