"""What every inference node shares: the managed (lifecycle) node's transitions, image subscription, a bounded
queue drained by one inference thread, problems with frames reported once per kind and counted (the counts logged
every minute while new ones come, and at stop), and a run loop that still publishes pending results on
SIGINT/SIGTERM.

Lifecycle (rclpy.lifecycle; ``ros2 lifecycle set <node> <transition>``):
  __init__    declares the parameters (a parameter of the wrong type stops the process; one the node does not have
              is named in a warning, with the closest it has); a value set later that is not valid for its
              parameter (e.g. a NaN or negative threshold) is refused, the reason naming its valid values; loads
              the backend's runtime (``Runner.prepare``: not installed stops the node; a provider or device
              that is not here is named)
  configure   reads and checks them (each against its valid values: families/*.py, parameters.py), loads the
              model, creates the publishers (``configure()``); a bad model or parameter fails the transition with
              the reason logged, the node stays in 'unconfigured'
  activate    enables the publishers, starts the inference thread and subscribes (``listen()``; with ``lazy``
              only while something subscribes to an output)
  deactivate  unsubscribes, stops the inference thread, drops the queued frames (counted as dropped; the
              stream ends: ``on_idle``), disables the publishers
  cleanup     forgets what configure made (the model, its session and memory, the publishers); the runtime stays
  shutdown    answers the frames already accepted first (``close()``), then releases
``autostart`` (default true) walks configure and activate at start, as a plain node starts.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy, QoSProfile
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import CompressedImage, Image

from ..families.family import Input, Output
from ..images import ImageFormatError
from ..parameters import Parameter
from ..runtime.runner import Runner
from ..streaming import PAIRING_WINDOW, FrameQueue, Pairing, ProblemLog, stale_age_ms
from ..text import untrusted
from . import message_class
from .messages import image_from_cdr, message_to_bgr
from .monitor import Monitor
from .parameters import (
    OUTPUT_QOS_OVERRIDES,
    declare_parameters,
    image_input,
    parameter_values,
    refuse_invalid,
    undeclared_overrides,
)

try:  # rclpy's C++ executor (Jazzy and later): 0.3-0.6 ms less CPU per frame (benchmarks/README.md)
    from rclpy.experimental import EventsExecutor as _Executor
except ImportError:  # older rclpy
    _Executor = SingleThreadedExecutor

START_UP_ERRORS = (ValueError, RuntimeError, ParameterException)  # a bad model or parameter: the reason is logged
SUCCESS = TransitionCallbackReturn.SUCCESS
FAILURE = TransitionCallbackReturn.FAILURE  # the transition failed, the node stays where it was
ERROR = TransitionCallbackReturn.ERROR  # an unexpected exception: on_error, then back to unconfigured


class InferenceNode(LifecycleNode):
    """Subclasses implement ``configure()`` (load the model, create the publishers with ``create_output``),
    ``listen()`` (subscribe with ``subscribe_images`` or ``subscribe_paired_images``) and ``process(item)``;
    ``enqueue`` hands items to the inference thread. An item is an image message, or a tuple whose first element
    is the image message (its header stamp is the frame's age)."""

    idle_timeout = 0.0  # seconds without items before ``on_idle`` runs once; 0 = never
    problems_period = 60.0  # seconds between the logged counts of problems while new ones come
    lazy_period = 0.5  # seconds between looks at the outputs' subscribers, with ``lazy``
    max_frame_age = 0  # ms; parameter values (set at configure) of the same names
    lazy = False

    def __init__(self, name: str, parameters: tuple[Parameter, ...], runner_class: type[Runner], **kwargs):
        """``parameters``: the node's all but the backend's (Family.node_parameters)."""
        super().__init__(name, **kwargs)
        self.runner_class = runner_class
        self.parameter_list = (*parameters, *runner_class.PARAMETERS)
        declare_parameters(self, self.parameter_list)
        # Values given at start-up are checked at configure; those set later, here, as they come.
        self.add_on_set_parameters_callback(refuse_invalid(self.parameter_list))
        unknown = undeclared_overrides(self, (parameter.name for parameter in self.parameter_list))
        if unknown:
            self.get_logger().warning(
                f"ignoring parameters {name} does not have: {untrusted(', '.join(unknown), 1000)} "
                "(`ros2 param list` on the running node lists its own)"
            )
        self.autostart = self.get_parameter("autostart").value
        self._prepare_runtime()
        self.frames_in = self.frames_dropped = 0
        self.outputs = 0  # answers published (subclasses count them)
        self._problems = ProblemLog(self.problems_period)  # from the executor and the inference thread
        self.problems = self._problems.counts  # kind of problem -> frames it happened to, in order of first sight
        self.create_timer(self.problems_period, self.log_problems)
        self._queue = FrameQueue()
        self._running = False
        self._worker: threading.Thread | None = None
        self._inputs: list = []  # the subscriptions listen() made, while listening
        self._outputs: list = []  # the publishers configure() made
        self._listened: list = []  # those whose subscribers make a lazy node listen
        self._lazy_timer = None
        self._configured: set[str] | None = None  # the attributes configure() set, while configured
        self.failure: Exception | None = None  # why the last configure failed
        self._autostarting = False
        self.finalized = False
        self._closed = False
        if self.autostart:
            self.start()

    # -- what subclasses implement --

    def configure(self) -> None:
        """Load the model from ``self.values`` and create the publishers (``create_output``); raise ValueError
        (or RuntimeError) naming the problem and the fix for a bad model or parameter."""

    def listen(self) -> None:
        """Subscribe to the inputs (``subscribe_images`` or ``subscribe_paired_images``)."""
        self.subscribe_images()

    # -- lifecycle --

    def start(self) -> None:
        """autostart: configure and activate, as a plain node starts (subclasses set what configure needs before
        calling InferenceNode.__init__). Raises why it failed (the node is destroyed), as a constructor would."""
        self._autostarting = True
        try:
            started = self.trigger_configure() == SUCCESS and self.trigger_activate() == SUCCESS
        finally:
            self._autostarting = False
        if not started:
            self.destroy_node()
            raise self.failure or RuntimeError("the configure or activate transition failed")

    def _prepare_runtime(self) -> None:
        """Load the backend's runtime and its process-wide state (``Runner.prepare``): part of the unconfigured
        node, so that configure loads the model alone and cleanup gives back what it took. A runtime that is
        not installed stops the node here (RuntimeError); a provider or device its start-up parameters ask for
        that is not here is said now (with autostart, configure says it next, as its failure)."""
        settings = {p.name: self.get_parameter(p.name).value for p in self.runner_class.PARAMETERS}
        try:
            problem = self.runner_class.prepare(settings)
        except RuntimeError:
            self.destroy_node()
            raise
        if problem and not self.autostart:
            self.get_logger().warning(f"configure will fail unless this is mended: {untrusted(problem, 2000)}")

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        before = set(vars(self))
        try:
            self.values = parameter_values(self, self.parameter_list)
            self.transport, self.image_qos = image_input(self.values)
            self.runner_settings = {p.name: self.values[p.name] for p in self.runner_class.PARAMETERS}
            self.queue_size = self._queue.size = self.values["queue_size"]
            self.max_image_pixels = self.values["max_image_pixels"]
            self.max_frame_age = self.values["max_frame_age"]
            self.lazy = self.values["lazy"]
            self.monitor = Monitor(self, self.values)  # ~/debug/ latency, /diagnostics, the silence warning
            self.configure()
        except Exception as exc:
            # The reason can quote the model file (names, metadata) and parameters: one line, of bounded length.
            expected = isinstance(exc, START_UP_ERRORS)
            # Without its traceback, whose frames would keep what configure had loaded alive.
            self.failure = exc.with_traceback(None) if expected else RuntimeError(f"{_type_name(exc)}: {exc}")
            self._configured = set(vars(self)) - before
            self._release()
            if not self._autostarting:
                reason = untrusted(self.failure, 2000)  # can quote the model file (names, metadata): one bounded line
                self.get_logger().error(f"cannot configure: {reason} (the node stays unconfigured)")
            return FAILURE if expected else ERROR
        self._configured = set(vars(self)) - before
        return SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        result = super().on_activate(state)  # enables the lifecycle publishers
        self._running = True
        self._worker = threading.Thread(target=self._work, name=f"{self.get_name()}_inference", daemon=True)
        self._worker.start()
        if self.lazy:
            self._lazy_timer = self.create_timer(self.lazy_period, self._follow_subscribers)
            self.get_logger().info("lazy: listening only while something subscribes to an output")
            self._follow_subscribers()
        else:
            self.listen()
        return result

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_listening()
        self._stop_worker()
        dropped = self._queue.drain()
        self.frames_dropped += len(dropped)
        for item in dropped:
            self._survive(self.on_dropped, item)
        if dropped:
            self.get_logger().info(f"deactivated: dropped {len(dropped)} queued frames")
        self._survive(self.on_idle)  # the stream is over
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.close()  # answers the frames already accepted, while the publishers are still enabled
        self._release()
        self.finalized = True
        return super().on_shutdown(state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_listening()
        self._stop_worker()
        self._release()
        return super().on_error(state)  # back to unconfigured

    def _release(self) -> None:
        """Forget what configure made: its publishers, and every attribute it set (the model and its session), so
        their memory goes back."""
        for publisher in self._outputs:
            self.destroy_lifecycle_publisher(publisher)
        if getattr(self, "monitor", None) is not None:
            self.monitor.destroy()
        self._outputs, self._listened = [], []
        for name in self._configured or ():
            delattr(self, name)
        self._configured = None
        gc.collect()
        _return_freed_memory()

    def create_output(self, message_type: type, topic: str, qos: Any, listened: bool = True) -> Any:
        """A lifecycle publisher (publishes only while active), destroyed at cleanup; ``listened``: its subscribers
        make a ``lazy`` node listen (not so for latched metadata such as labels)."""
        publisher = self.create_lifecycle_publisher(
            message_type, topic, qos, qos_overriding_options=OUTPUT_QOS_OVERRIDES
        )
        self._outputs.append(publisher)
        if listened:
            self._listened.append(publisher)
        return publisher

    def create_outputs(self, outputs: tuple[Output, ...]) -> dict[str, Any]:
        """The publishers of a node's output table (Family.node.outputs: the table `vision-factory models` and the
        generated README describe), by topic; one whose ``when`` parameter is off is not created."""
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        publishers = {}
        for output in outputs:
            if output.published(self.values):
                qos = latched if output.latched else output.depth
                kind = message_class(output.message)
                publishers[output.topic] = self.create_output(kind, output.topic, qos, output.listened)
        return publishers

    def _follow_subscribers(self) -> None:
        """lazy: listen while an output has a subscriber, stop when none has."""
        wanted = any(publisher.get_subscription_count() > 0 for publisher in self._listened)
        if wanted and not self._inputs:
            self.get_logger().info("lazy: an output has a subscriber, listening")
            self.listen()
        elif not wanted and self._inputs:
            self._stop_listening()
            self.get_logger().info("lazy: no output has a subscriber, stopped listening")

    def _stop_listening(self) -> None:
        for subscription in self._inputs:
            self.destroy_subscription(subscription)
        self._inputs = []
        if getattr(self, "monitor", None) is not None:
            self.monitor.unwatch()  # no silence warning while not listening
        pairs = getattr(self, "_pairs", None)
        for _ in range(pairs.clear() if pairs else 0):  # paired images still waiting for their partner
            self._unpaired_image()

    def _stop_worker(self) -> None:
        self._running = False
        if self._lazy_timer is not None:
            self.destroy_timer(self._lazy_timer)
            self._lazy_timer = None
        if self._worker is not None and self._worker.is_alive():
            self._queue.wake()
            self._worker.join(timeout=5)
        self._worker = None

    def load_runner(self, path: str) -> Runner:
        return self.monitor.timed(self.runner_class.load(path, self.runner_settings, self.get_logger()), path)

    def to_bgr(self, msg: Any) -> Any:
        """The BGR frame of an image message: within max_image_pixels, decoder complaints reported by ``warn``."""
        return message_to_bgr(msg, self.max_image_pixels, self.warn)

    def subscribe_images(self, callback: Callable[[Any], None] | None = None) -> str:
        """Subscribe to image (raw) or image/compressed (until deactivated). The topic subscribed."""
        callback = callback or self.enqueue
        if self.transport == "raw":
            # Raw: the serialized bytes, read as an ImageView whose pixels stay in them (messages.image_from_cdr).
            topic, message_type, raw = "image", Image, True
            take = lambda data: self._take_image(data, callback)  # noqa: E731
        else:
            topic, message_type, raw, take = "image/compressed", CompressedImage, False, callback
        watched = self.monitor.watch(topic, message_type, self.image_qos, take)  # arrivals, for the silence watch
        self._inputs.append(self.create_subscription(message_type, topic, watched, self.image_qos, raw=raw))
        return self.resolve_topic_name(topic)

    def _take_image(self, data: bytes, callback: Callable[[Any], None]) -> None:
        try:
            msg = image_from_cdr(data)
        except ImageFormatError as exc:  # data that ends inside a field: counted and reported, never raised here
            self.frames_in += 1
            self.skip_error(exc)
            return
        callback(msg)

    def subscribe_paired_images(self, partner: Input, what: str, hint: str) -> str:
        """Subscribe to the images and to the input ``partner`` (its family's table, families/family.py: e.g.
        another node's detections, ``what`` in words) and enqueue (image, partner) once both of one stamp are in,
        keeping the newest unpaired of each. An image whose partner never comes is refused (counted as "image
        without ``what``", reported with ``hint``, how to fix it). The image topic."""
        self._pairs = Pairing(PAIRING_WINDOW)
        self._pairing = partner.topic, what, hint
        images = self.subscribe_images(self._keep_image)
        message_type = message_class(partner.message)
        self._inputs.append(self.create_subscription(message_type, partner.topic, self._keep_partner, 10))
        return images

    def _keep_image(self, msg: Any) -> None:
        self._paired(*self._pairs.image(msg))

    def _keep_partner(self, msg: Any) -> None:
        self._paired(*self._pairs.partner(msg))

    def _paired(self, pair: tuple | None, unpaired: int) -> None:
        if pair is not None:
            self.enqueue(pair)
        for _ in range(unpaired):
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
        self.frames_in += 1
        dropped = self._queue.put(item)
        if dropped is not None:
            self.frames_dropped += 1
            self._survive(self.on_dropped, dropped)

    def on_dropped(self, item: Any) -> None:
        """Runs for an item dropped from the full queue (on the receiving thread) or at deactivate (already
        counted)."""

    def process(self, item: Any) -> None:
        raise NotImplementedError

    def on_idle(self) -> None:
        """Runs once after ``idle_timeout`` seconds without items."""

    def _work(self) -> None:
        last_item = time.monotonic()
        while self._running:
            item = self._queue.take(timeout=0.05)
            if item is not None:
                last_item = time.monotonic()
                if not self._stale(item):
                    self._survive(self.monitor.process, self.process, item)
            elif self.idle_timeout > 0 and time.monotonic() - last_item > self.idle_timeout:
                last_item = float("inf")
                self._survive(self.on_idle)

    def _stale(self, item: Any) -> bool:
        """Whether ``item``, about to reach the model, is older than max_frame_age (then skipped, counted)."""
        age_ms = stale_age_ms(item, self.get_clock().now().nanoseconds, self.max_frame_age)
        if age_ms is None:
            return False
        self.skip(
            "stale frame",
            f"the frame is {age_ms:.0f} ms old (now - its header stamp) as inference would start, over "
            f"max_frame_age {self.max_frame_age} ms: the node falls behind the camera (a faster model or "
            "backend, or a lower camera rate), or the clocks differ (use_sim_time:=true for bags)",
        )
        return True

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
        first = self._problems.count(kind, what, untrusted(detail), skipped)
        if first is not None:
            self.get_logger().warning(first)

    def log_problems(self, final: bool = False) -> None:
        """Log the count of each kind of problem: when new ones came since the last count, or ``final``ly."""
        summary = self._problems.summary(final)
        if summary is not None:
            self.get_logger().warning(summary)

    def close(self) -> None:
        """Stop listening and the inference thread, then process what is still queued; log the counts (once)."""
        if self._closed:
            return
        self._closed = True
        self._stop_worker()
        while (item := self._queue.take()) is not None:  # frames already accepted still get their answer
            if not self._stale(item):
                self._survive(self.monitor.process, self.process, item)
        self._stop_listening()  # paired images still waiting for their partner are counted
        if self._configured is not None:
            self.finish()
        self.log_problems(final=True)
        self.get_logger().info(self.counts())

    @property
    def frames_skipped(self) -> int:
        """Frames skipped for a problem (counted by ``skip``)."""
        return self._problems.skipped

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


def _return_freed_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's malloc_trim), so that a model's freed memory shows
    as such; elsewhere nothing (freed memory is reused by the next configure all the same)."""
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def spin(make_node: Callable[[], InferenceNode], name: str, args: list[str] | None = None) -> int:
    """Run a node until SIGINT/SIGTERM or its shutdown transition, then shut it down (pending frames answered);
    2 when it cannot start (the reason is logged). With autostart it is configured and activated first."""
    # Our own signal handling, so that pending results are still published on SIGINT/SIGTERM.
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        node = make_node()  # with autostart, configured and activated (or raises why not)
    except START_UP_ERRORS as exc:
        # The reason can quote the model file (names, metadata) and parameters: one line, of bounded length.
        rclpy.logging.get_logger(name).fatal(f"cannot start: {untrusted(exc, 2000)}")
        rclpy.try_shutdown()
        return 2
    executor = _Executor()  # one executor: rclpy.spin_once would re-add the node every call
    executor.add_node(node)
    try:
        while rclpy.ok() and not node.finalized:  # ros2 lifecycle set <node> shutdown ends the process too
            executor.spin_once(timeout_sec=0.2)  # returns often, so signal handlers run
    except KeyboardInterrupt:
        pass
    finally:
        if not node.finalized:
            node.trigger_shutdown()  # answers the frames already accepted (close())
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
