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

Several cameras (``cameras``: names, e.g. [front, left, right]; empty, the default: one camera on today's topics):
the node subscribes ``<camera>/image`` (or image/compressed) for each and publishes each output under
``<camera>/`` (``create_output``: a ros/cameras.py CameraPublisher), with that camera's header. One model, loaded
once: ``camera_pipelines`` builds each camera's own pipeline (its tracker, its TrackNet window) on the same runners.
Each camera keeps its newest queue_size frames, max_frame_age applies to each frame, and the inference thread takes
the cameras in turn (cameras.py's CameraQueues): up to ``batch_limit`` frames, one per camera, go to
``process_batch`` (a node whose model takes a batch runs them in one model run), one frame to ``process``; the
code that runs for a frame is on that frame's camera (``camera``, ``on_camera``). /diagnostics adds one status per
camera and the batch sizes run; ``~/debug/<camera>/pipeline_latency_ms`` and ``frame_age_ms`` per camera.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy, QoSProfile
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Float64

from ..cameras import BatchSizes, CameraQueues, CameraStats, camera_names, camera_topic, inference_workers
from ..families.family import Input, Output
from ..images import ImageFormatError
from ..parameters import Parameter
from ..runtime.runner import Runner
from ..streaming import CLOSING, PAIRING_WINDOW, Pairing, ProblemLog, frame_header, stale_age_ms, stamp_ns
from ..text import untrusted
from . import message_class
from .cameras import CameraPublisher, camera_status, wanted
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
    cameras: tuple[str, ...] = ("",)  # the cameras served (configure): "" is the one camera of today's topics
    batch_limit = 1  # the most frames (one per camera) handed to process_batch at once; subclasses set it

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
        self._queue = CameraQueues()
        self._here = threading.local()  # the camera whose frame the thread is on (on_camera)
        self._running = False
        self._workers: list[threading.Thread] = []  # the inference threads, while active
        self.workers = 1  # inference_workers as configured (one unless several cameras and a concurrent runner)
        self._frame_lock = threading.Lock()  # held by a worker on a frame, but while its model runs
        self._holds = threading.local()  # .lock: whether this thread holds _frame_lock
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
            self.cameras = camera_names(self.values.get("cameras", "")) or ("",)  # a node without: one camera
            self._queue.configure(self.cameras)
            self.workers = self._inference_workers(self.values.get("inference_workers", 1))
            self.camera_stats = {camera: CameraStats() for camera in self.cameras}
            self.batch_sizes = BatchSizes()
            self.max_image_pixels = self.values["max_image_pixels"]
            self.max_frame_age = self.values["max_frame_age"]
            self.lazy = self.values["lazy"]
            self.monitor = Monitor(self, self.values)  # ~/debug/ latency, /diagnostics, the silence warning
            self.camera_debug = self._camera_debug()
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
        self._last_item = dict.fromkeys(self.cameras, time.monotonic())  # per camera: its stream ends on its own
        self._workers = [
            threading.Thread(target=self._work, args=(index,), name=f"{self.get_name()}_inference{index}", daemon=True)
            for index in range(self.workers)
        ]
        for worker in self._workers:
            worker.start()
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
        for camera, item in dropped:
            with self.on_camera(camera):
                self.camera_stats[camera].count("dropped")
                self._survive(self.on_dropped, item)
        if dropped:
            self.get_logger().info(f"deactivated: dropped {len(dropped)} queued frames")
        for camera in self.cameras:  # the streams are over
            with self.on_camera(camera):
                self._survive(self.on_idle)
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
        for publishers in getattr(self, "camera_debug", {}).values():  # ~/debug/<camera>/...
            for publisher in publishers.values():
                self.destroy_publisher(publisher)
        self._outputs, self._listened = [], []
        for name in self._configured or ():
            delattr(self, name)
        self._configured = None
        gc.collect()
        _return_freed_memory()

    def create_output(self, message_type: type, topic: str, qos: Any, listened: bool = True) -> Any:
        """A lifecycle publisher (publishes only while active), destroyed at cleanup; ``listened``: its subscribers
        make a ``lazy`` node listen (not so for latched metadata such as labels). With named cameras, one per camera
        (``<camera>/<topic>``) behind a CameraPublisher that publishes on the camera of the calling thread."""
        publishers = {}
        for camera in self.cameras:
            publisher = self.create_lifecycle_publisher(
                message_type, camera_topic(camera, topic), qos, qos_overriding_options=OUTPUT_QOS_OVERRIDES
            )
            self._outputs.append(publisher)
            if listened:
                self._listened.append(publisher)
            publishers[camera] = publisher
        if not self.multicamera:
            return publishers[""]
        return CameraPublisher(publishers, lambda: getattr(self._here, "camera", None))

    def resolved_outputs(self, topic: str) -> str:
        """The fully qualified name of output ``topic``: each camera's, with named cameras (for the logs)."""
        return ", ".join(self.resolve_topic_name(camera_topic(camera, topic)) for camera in self.cameras)

    @property
    def multicamera(self) -> bool:
        """Whether the node serves named cameras (``cameras``), each on its own topics."""
        return self.cameras != ("",)

    @property
    def camera(self) -> str:
        """The camera whose frame this thread is on (the first camera outside any)."""
        return getattr(self._here, "camera", None) or self.cameras[0]

    @contextmanager
    def on_camera(self, camera: str) -> Iterator[None]:
        """Run the code inside on ``camera``'s frame: its state, its publishers, its counts."""
        before = getattr(self._here, "camera", None)
        self._here.camera = camera
        try:
            yield
        finally:
            self._here.camera = before

    def camera_pipelines(self, make: Callable[[Callable[[str], Runner]], Any]) -> dict[str, Any]:
        """Each camera's own pipeline, ``make(load_runner)``, every camera's on the same runners: a model file loads
        once (its session shared), while what a pipeline keeps of its stream (a tracker, a TrackNet window, a
        median) is each camera's."""
        loaded: dict[str, Runner] = {}

        def load_once(path: str) -> Runner:
            if path not in loaded:
                loaded[path] = self.load_runner(path)
            return loaded[path]

        return {camera: make(load_once if self.multicamera else self.load_runner) for camera in self.cameras}

    def _camera_debug(self) -> dict[str, dict[str, Any]]:
        """``~/debug/<camera>/pipeline_latency_ms`` and ``frame_age_ms`` per named camera (none for one camera)."""
        if not self.multicamera:
            return {}
        return {
            camera: {
                name: self.create_publisher(
                    Float64, f"~/debug/{camera}/{name}", 10, qos_overriding_options=OUTPUT_QOS_OVERRIDES
                )
                for name in ("pipeline_latency_ms", "frame_age_ms")
            }
            for camera in self.cameras
        }

    def _debug(self, camera: str, name: str, value_ms: float) -> None:
        publisher = getattr(self, "camera_debug", {}).get(camera, {}).get(name)
        if publisher is not None and wanted(publisher):
            publisher.publish(Float64(data=value_ms))

    def camera_answered(self, latency_ms: float) -> None:
        """The monitor's hook: an answer for the current camera's frame went out ``latency_ms`` after its stamp."""
        stats = getattr(self, "camera_stats", None)
        if stats is not None:
            stats[self.camera].answer(latency_ms)
            self._debug(self.camera, "pipeline_latency_ms", latency_ms)

    def camera_statuses(self) -> list:
        """/diagnostics: one status per named camera (none for one camera)."""
        if not self.multicamera or getattr(self, "camera_stats", None) is None:
            return []
        silence = float(self.values["silence_timeout"]) if self._inputs else 0.0
        since = getattr(self, "_listening_since", time.monotonic())
        topic = "image" if self.transport == "raw" else "image/compressed"
        return [
            camera_status(
                self.get_name(), camera, self.resolve_topic_name(camera_topic(camera, topic)), stats, silence, since
            )
            for camera, stats in self.camera_stats.items()
        ]

    def monitor_values(self) -> dict[str, str]:
        """The node's status' values besides the monitor's own: with named cameras, them and the batch sizes run."""
        if not self.multicamera or getattr(self, "batch_sizes", None) is None:
            return {}
        return {"cameras": ", ".join(self.cameras), "batch sizes run (frames: runs)": self.batch_sizes.text()}

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
        listened_to = any(publisher.get_subscription_count() > 0 for publisher in self._listened)
        if listened_to and not self._inputs:
            self.get_logger().info("lazy: an output has a subscriber, listening")
            self.listen()
        elif not listened_to and self._inputs:
            self._stop_listening()
            self.get_logger().info("lazy: no output has a subscriber, stopped listening")

    def _stop_listening(self) -> None:
        for subscription in self._inputs:
            self.destroy_subscription(subscription)
        self._inputs = []
        if getattr(self, "monitor", None) is not None:
            self.monitor.unwatch()  # no silence warning while not listening
        for camera, pairs in getattr(self, "_pairs", {}).items():
            with self.on_camera(camera):
                for _ in range(pairs.clear()):  # paired images still waiting for their partner
                    self._unpaired_image()

    def _stop_worker(self) -> None:
        self._running = False
        if self._lazy_timer is not None:
            self.destroy_timer(self._lazy_timer)
            self._lazy_timer = None
        self._queue.wake()
        for worker in self._workers:
            if worker.is_alive():
                worker.join(timeout=5)
        self._workers = []

    def load_runner(self, path: str) -> Runner:
        runner = self.monitor.timed(self.runner_class.load(path, self.runner_settings, self.get_logger()), path)
        if self.workers > 1:  # the other workers go on with their frames while this one's model runs
            timed_run, holds, lock = runner.run, self._holds, self._frame_lock

            def run_unlocked(feeds):
                if not getattr(holds, "lock", False):
                    return timed_run(feeds)
                lock.release()
                holds.lock = False
                try:
                    return timed_run(feeds)
                finally:
                    lock.acquire()
                    holds.lock = True

            runner.run = run_unlocked
        return runner

    def _inference_workers(self, asked: int) -> int:
        """The inference threads to run for inference_workers ``asked`` (cameras.inference_workers' rule)."""
        workers, note = inference_workers(asked, self.cameras if self.multicamera else (), self.runner_class)
        if note:
            self.get_logger().info(note)
        return workers

    def to_bgr(self, msg: Any) -> Any:
        """The BGR frame of an image message: within max_image_pixels, decoder complaints reported by ``warn``."""
        return message_to_bgr(msg, self.max_image_pixels, self.warn)

    def subscribe_images(self, callback: Callable[[Any], None] | None = None) -> str:
        """Subscribe to image (raw) or image/compressed (until deactivated); with named cameras, each camera's
        ``<camera>/image``, its frames handled on that camera (``on_camera``). The topics subscribed."""
        callback = callback or self.enqueue
        if self.transport == "raw":
            # Raw: the serialized bytes, read as an ImageView whose pixels stay in them (messages.image_from_cdr).
            topic, message_type, raw = "image", Image, True
            take = lambda data: self._take_image(data, callback)  # noqa: E731
        else:
            topic, message_type, raw, take = "image/compressed", CompressedImage, False, callback
        self._listening_since = time.monotonic()
        topics = []
        for index, camera in enumerate(self.cameras):
            camera_image = camera_topic(camera, topic)
            # The monitor's silence watch follows the first camera's topic; /diagnostics says each camera's silence.
            watched = self.monitor.watch(camera_image, message_type, self.image_qos, take) if index == 0 else take
            on_camera = self._on_camera_callback(camera, watched) if self.multicamera else watched
            subscription = self.create_subscription(message_type, camera_image, on_camera, self.image_qos, raw=raw)
            self._inputs.append(subscription)
            topics.append(self.resolve_topic_name(camera_image))
        return ", ".join(topics)

    def _on_camera_callback(self, camera: str, callback: Callable[[Any], None]) -> Callable[[Any], None]:
        def on_camera(message: Any) -> None:
            with self.on_camera(camera):
                callback(message)

        return on_camera

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
        self._pairs = {camera: Pairing(PAIRING_WINDOW) for camera in self.cameras}
        self._pairing = partner.topic, what, hint
        images = self.subscribe_images(self._keep_image)
        message_type = message_class(partner.message)
        for camera in self.cameras:
            keep = self._on_camera_callback(camera, self._keep_partner) if self.multicamera else self._keep_partner
            topic = camera_topic(camera, partner.topic)
            self._inputs.append(self.create_subscription(message_type, topic, keep, 10))
        return images

    def _keep_image(self, msg: Any) -> None:
        self._paired(*self._pairs[self.camera].image(msg))

    def _keep_partner(self, msg: Any) -> None:
        self._paired(*self._pairs[self.camera].partner(msg))

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
        camera = self.camera
        stats = self.camera_stats[camera]
        stats.came()
        dropped = self._queue.put(item, camera)
        if dropped is not None:
            self.frames_dropped += 1
            stats.count("dropped")
            self._survive(self.on_dropped, dropped)

    def on_dropped(self, item: Any) -> None:
        """Runs for an item dropped from the full queue (on the receiving thread) or at deactivate (already
        counted)."""

    def process(self, item: Any) -> None:
        raise NotImplementedError

    def process_batch(self, batch: list[tuple[str, Any]]) -> None:
        """The frames of several cameras, (camera, item) each, taken together (at most ``batch_limit``, one per
        camera): a node whose model takes a batch runs them in one model run; by default one after another."""
        for camera, item in batch:
            with self.on_camera(camera):
                self._survive(self.process, item)

    def on_idle(self) -> None:
        """Runs once after ``idle_timeout`` seconds without items."""

    def _work(self, index: int = 0) -> None:
        """An inference thread: takes the cameras' frames in turn and runs them, one camera at a time (with several
        workers each holds the frame lock but while its model runs, and claims the cameras it took); the first
        also ends each camera's stream after idle_timeout."""
        last_item, several = self._last_item, self.workers > 1
        while self._running:
            batch = self._queue.take_batch(self.batch_limit, timeout=0.05, claim=several)
            now = time.monotonic()
            for camera, _ in batch:
                last_item[camera] = now
            if batch:
                try:
                    with self._locked(several):
                        self._run(batch)
                finally:
                    if several:
                        self._queue.release(camera for camera, _ in batch)
            if self.idle_timeout > 0 and index == 0:
                for camera, last in last_item.items():
                    if now - last > self.idle_timeout and (not several or self._queue.claim(camera)):
                        last_item[camera] = float("inf")
                        try:
                            with self._locked(several), self.on_camera(camera):
                                self._survive(self.on_idle)
                        finally:
                            if several:
                                self._queue.release([camera])

    @contextmanager
    def _locked(self, several: bool) -> Iterator[None]:
        """The frame lock, with several workers (their Python work one at a time, their model runs together)."""
        if not several:
            yield
            return
        with self._frame_lock:
            self._holds.lock = True
            try:
                yield
            finally:
                self._holds.lock = False

    def _run(self, batch: list[tuple[str, Any]]) -> None:
        """The frames the inference thread took, (camera, item) each: those not stale to ``process`` (one) or
        ``process_batch`` (several), timed by the monitor."""
        fresh = []
        for camera, item in batch:
            with self.on_camera(camera):
                if not self._stale(item):
                    fresh.append((camera, item))
        if len(fresh) == 1:
            camera, item = fresh[0]
            with self.on_camera(camera):
                self._survive(self.monitor.process, self.process, item)
        elif fresh:
            self._survive(self.monitor.process, self.process_batch, fresh)

    def _stale(self, item: Any) -> bool:
        """Whether ``item`` (of the current camera), about to reach the model, is older than max_frame_age (then
        skipped, counted); its age is noted for the camera's diagnostics."""
        now_ns = self.get_clock().now().nanoseconds
        if self.multicamera:
            age_ms = (now_ns - stamp_ns(frame_header(item))) / 1e6
            self.camera_stats[self.camera].aged(age_ms)
            self._debug(self.camera, "frame_age_ms", age_ms)
        age_ms = stale_age_ms(item, now_ns, self.max_frame_age)
        if age_ms is None:
            return False
        self.camera_stats[self.camera].count("stale")
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
        stats = getattr(self, "camera_stats", None)
        if skipped and stats is not None:
            stats[self.camera].count("skipped")
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
        while batch := self._queue.take_batch(self.batch_limit):  # frames already accepted still get their answer
            self._run(batch)
        self._stop_listening()  # paired images still waiting for their partner are counted
        if self._configured is not None:
            for camera in self.cameras:
                with self.on_camera(camera):
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
        return CLOSING.format(
            frames_in=self.frames_in, dropped=self.frames_dropped, skipped=self.frames_skipped, outputs=outputs
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
    # From here a signal only asks the loop to end: raised inside a callback (a timer's, say), it would be logged
    # as that callback's fatal exception (seen in CI: a traceback on SIGTERM).
    stopping = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda signum, frame: stopping.set())
    try:
        while rclpy.ok() and not node.finalized and not stopping.is_set():  # lifecycle shutdown ends it too
            executor.spin_once(timeout_sec=0.2)  # returns often, so the signal handlers run
    finally:
        if not node.finalized:
            node.trigger_shutdown()  # answers the frames already accepted (close())
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
