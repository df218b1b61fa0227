"""What every inference node shares, as a lifecycle node whose parts are modules of their own: inputs
(node_inputs.py: subscriptions, pairing by stamp, the queue, lazy), inference threads (node_workers.py), outputs
(node_outputs.py: publishers per camera), what it says of its frames (node_diagnostics.py), parameters set while it
runs (node_live.py: live or refused with the reason), a text prompt (node_prompts.py); run by ros/spin.py.

Lifecycle (rclpy.lifecycle; ``ros2 lifecycle set <node> <transition>``):
  __init__    declares the parameters (a parameter of the wrong type stops the process; one the node does not have
              is named in a warning, with the closest it has); loads the backend's runtime (``Runner.prepare``: not
              installed stops the node; a provider or device that is not here is named)
  configure   reads and checks them (each against its valid values: families/*.py, parameters.py), loads the
              model, creates the publishers (``configure()``); a bad model or parameter fails the transition with
              the reason logged, the node stays in 'unconfigured'
  activate    enables the publishers, starts the inference threads and subscribes (``listen()``)
  deactivate  unsubscribes, stops the threads, drops the queued frames (counted; the streams end: ``end_stream``)
  cleanup     forgets what configure made (the model, its session and memory, the publishers); the runtime stays
  shutdown    answers the frames already accepted first (``close()``), then releases
``autostart`` (default true) walks configure and activate at start, as a plain node starts.

Several cameras (``cameras``: names, e.g. [front, left]; empty, the default: one camera, "", on today's topics): each
camera's ``<camera>/image`` in, each output under ``<camera>/``; one model, loaded once, each camera's own pipeline
(its tracker, its TrackNet window) on it (``camera_pipelines``); the camera an argument of every frame's call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import shutil

from rclpy.exceptions import ParameterException
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from ..cameras import BatchSizes, CameraQueues, CameraStats, camera_names
from ..families.prompts import PointsPrompt, TextPrompt
from ..parameters import Parameter
from ..runtime.runner import Runner
from ..streaming import ProblemLog
from ..text import untrusted
from .monitor import Monitor
from .node_diagnostics import NodeDiagnostics, type_name
from .node_inputs import NodeInputs
from .node_live import NodeLive
from .node_outputs import NodeOutputs
from .node_prompts import NodePrompts
from .node_workers import NodeWorkers
from .parameters import check_qos_overrides, declare_parameters, image_input, parameter_values, undeclared_overrides

START_UP_ERRORS = (ValueError, RuntimeError, ParameterException)  # a bad model or parameter: the reason is logged
SUCCESS = TransitionCallbackReturn.SUCCESS
FAILURE = TransitionCallbackReturn.FAILURE  # the transition failed, the node stays where it was
ERROR = TransitionCallbackReturn.ERROR  # an unexpected exception: on_error, then back to unconfigured


class InferenceNode(NodeInputs, NodeWorkers, NodeOutputs, NodeDiagnostics, NodeLive, NodePrompts, LifecycleNode):
    """Subclasses implement ``configure()`` (load the model, create the publishers with ``create_output``),
    ``listen()`` (subscribe with ``subscribe_images`` or ``subscribe_paired_images``) and ``process(camera,
    item)``; ``enqueue(camera, item)`` hands items to the inference threads. An item is an image message, or a tuple
    whose first element is the image message (its header stamp is the frame's age). The camera is an argument
    everywhere ("" for the one camera of a node without ``cameras``): its state, publishers and counts are chosen
    by it."""

    idle_timeout = 0.0  # seconds without items before ``on_idle`` runs (again while it says so); 0 = never
    problems_period = 60.0  # seconds between the logged counts of problems while new ones come
    lazy_period = 0.5  # seconds between looks at the outputs' subscribers, with ``lazy``
    max_frame_age = 0  # ms; parameter values (set at configure) of the same names
    lazy = False
    cameras: tuple[str, ...] = ("",)  # the cameras served (configure): "" is the one camera of today's topics
    batch_limit = 1  # the most frames (one per camera) handed to process_batch at once; subclasses set it

    def __init__(
        self,
        name: str,
        parameters: tuple[Parameter, ...],
        runner_class: type[Runner],
        prompt: TextPrompt | PointsPrompt | None = None,
        **kwargs,
    ):
        """``parameters``: the node's all but the backend's (Family.node_parameters); ``prompt``: the prompt its
        family takes as text (Family.served_prompt), also from ~/set_prompt and ~/prompt (node_prompts.py)."""
        super().__init__(name, **kwargs)
        self.runner_class = runner_class
        self.parameter_list = (*parameters, *runner_class.PARAMETERS)
        self._parameters_by_name = {parameter.name: parameter for parameter in self.parameter_list}
        declare_parameters(self, self.parameter_list)
        # Values given at start-up are checked at configure; those set later as they come (node_live.py).
        self.add_on_set_parameters_callback(self._on_set_parameters)
        unknown = undeclared_overrides(self, (parameter.name for parameter in self.parameter_list))
        if unknown:
            # The command that lists them where the node runs: ros2's, else (the pip route) vision-factory's.
            tool = "vision-factory" if shutil.which("vision-factory") and not shutil.which("ros2") else "ros2"
            self.get_logger().warning(
                f"ignoring parameters {name} does not have: {untrusted(', '.join(unknown), 1000)} "
                f"(`{tool} param list {self.get_fully_qualified_name()}` lists its own)"
            )
        check_qos_overrides(self)  # before the model loads: ROS reads them only as it makes the publishers
        self.autostart = self.get_parameter("autostart").value
        self._prepare_runtime()
        self.frames_in = self.frames_dropped = 0
        self.outputs = 0  # answers published (subclasses count them)
        self._problems = ProblemLog(self.problems_period)  # from the executor and the inference thread
        self.problems = self._problems.counts  # kind of problem -> frames it happened to, in order of first sight
        self.create_timer(self.problems_period, self.log_problems)
        self._queue = CameraQueues()
        self._threads = self._make_threads()  # the inference threads (node_workers.py), running while active
        self.workers = 1  # inference_workers as configured (one unless several cameras and a concurrent runner)
        self._inputs: list = []  # the subscriptions listen() made, while listening
        self._outputs: list = []  # the publishers configure() made
        self._listened: list = []  # those whose subscribers make a lazy node listen
        self._lazy_timer = None
        self._configured: set[str] | None = None  # the attributes configure() set, while configured
        self.failure: Exception | None = None  # why the last configure failed
        self._autostarting = False
        self.finalized = False
        self._closed = False
        if prompt is not None:
            try:
                self.offer_prompt(prompt)
            except RuntimeError:
                self.destroy_node()
                raise
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
            self._next_values = dict(self.values)  # the values live changes start from (node_live.py)
        except Exception as exc:
            # The reason can quote the model file (names, metadata) and parameters: one line, of bounded length.
            expected = isinstance(exc, START_UP_ERRORS)
            # Without its traceback, whose frames would keep what configure had loaded alive.
            self.failure = exc.with_traceback(None) if expected else RuntimeError(f"{type_name(exc)}: {exc}")
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
        self._start_workers()
        self._start_listening()
        return result

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_following()
        self._stop_listening()
        self._stop_worker()
        dropped = self._queue.drain()
        self.frames_dropped += len(dropped)
        for camera, item in dropped:
            self.camera_stats[camera].count("dropped")
            self._survive(camera, self.on_dropped, camera, item)
        if dropped:
            self.get_logger().info(f"deactivated: dropped {len(dropped)} queued frames")
        for camera in self.cameras:  # the streams are over
            self._survive(camera, self.end_stream, camera)
        getattr(self, "_last_items", {}).clear()  # a prompt changed while inactive waits for a new frame
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.close()  # answers the frames already accepted, while the publishers are still enabled
        self._release()
        self.finalized = True
        return super().on_shutdown(state)

    def destroy_node(self) -> None:
        """Stop following and the inference threads first (they hold the node, so its context's DDS participant
        would live on, announcing the node, after a destroy without the shutdown transition: an embedding process's
        or a test's), then destroy it."""
        if hasattr(self, "_threads"):  # not so when its construction failed
            self._stop_following()
            self._stop_worker()
        super().destroy_node()

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_following()
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

    def close(self) -> None:
        """Stop listening and the inference thread, then process what is still queued; log the counts (once)."""
        if self._closed:
            return
        self._closed = True
        self._stop_following()
        self._stop_worker()
        while batch := self._queue.take_batch(self.batch_limit):  # frames already accepted still get their answer
            self._run(batch)
        self._stop_listening()  # paired images still waiting for their partner are counted
        if self._configured is not None:
            for camera in self.cameras:
                self.finish(camera)
        self.log_problems(final=True)
        self.get_logger().info(self.counts())


def _return_freed_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's malloc_trim), so that a model's freed memory shows
    as such; elsewhere nothing (freed memory is reused by the next configure all the same)."""
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
