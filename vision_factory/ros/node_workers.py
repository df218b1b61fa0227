"""An inference node's inference threads (a part of ros/inference_node.py's InferenceNode), run by the ROS-free
workers.InferenceThreads: they take the cameras' frames in turn (cameras.CameraQueues), up to ``batch_limit``
frames, one per camera, to ``process_batch`` (a node whose model takes a batch runs them in one model run), one
frame to ``process(camera, item)``, skipping stale frames (max_frame_age); with several (inference_workers) each
holds the frame lock but while its model runs. The first calls ``on_idle(camera)`` after ``idle_timeout`` without
a frame of a camera (again while it says its stream only paused). Models load through ``load_runner`` (timed by
the monitor), once per file however many cameras' pipelines use them (``camera_pipelines``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..cameras import inference_workers
from ..runtime.runner import Runner
from ..streaming import frame_header, stale_age_ms, stamp_ns
from ..workers import InferenceThreads


class NodeWorkers:
    """InferenceNode's inference threads and what they run (``process``, ``process_batch``, ``on_idle``)."""

    def _make_threads(self) -> InferenceThreads:
        """The node's inference threads (started at activate), on its queue."""
        idle = lambda camera: self._survive(camera, self.on_idle, camera)  # noqa: E731
        return InferenceThreads(self._queue, self._run, idle, f"{self.get_name()}_inference")

    def _start_workers(self) -> None:
        self._threads.batch_limit, self._threads.idle_timeout = self.batch_limit, self.idle_timeout
        self._threads.start(self.workers, self.cameras)

    def _stop_worker(self) -> None:
        self._threads.stop()

    def camera_pipelines(self, make: Callable[[Callable[[str], Runner]], Any]) -> dict[str, Any]:
        """Each camera's own pipeline, ``make(load_runner)``, every camera's on the same runners: a model file loads
        once (its session shared), while what a pipeline keeps of its stream (a tracker, a TrackNet window, a
        median) is each camera's."""
        return {camera: make(self.load_runner) for camera in self.cameras}

    def load_runner(self, path: str) -> Runner:
        """The runner of model file ``path`` on the node's backend, loaded once while configured (timed by the
        monitor; with several workers its runs give the frame lock up)."""
        loaded = self.__dict__.setdefault("_runners", {})  # forgotten at cleanup, as every attribute configure set
        if path not in loaded:
            runner = self.monitor.timed(self.runner_class.load(path, self.runner_settings, self.get_logger()), path)
            if self.workers > 1:  # the other workers go on with their frames while this one's model runs
                runner.run = self._threads.unlocked(runner.run)
            loaded[path] = runner
        return loaded[path]

    def _inference_workers(self, asked: int) -> int:
        """The inference threads to run for inference_workers ``asked`` (cameras.inference_workers' rule)."""
        workers, note = inference_workers(asked, self.cameras if self.multicamera else (), self.runner_class)
        if note:
            self.get_logger().info(note)
        return workers

    def process(self, camera: str, item: Any) -> None:
        """Answer ``item`` (an image message, or a tuple whose first element is one) of ``camera``."""
        raise NotImplementedError

    def process_batch(self, batch: list[tuple[str, Any]]) -> None:
        """The frames of several cameras, (camera, item) each, taken together (at most ``batch_limit``, one per
        camera): a node whose model takes a batch runs them in one model run; by default one after another."""
        for camera, item in batch:
            self._survive(camera, self.process, camera, item)

    def on_idle(self, camera: str) -> bool:
        """Runs after ``idle_timeout`` seconds without items of ``camera``; True: run it again after another
        ``idle_timeout`` without items (the stream only paused), False: not before the next item."""
        return False

    def end_stream(self, camera: str) -> None:
        """``camera``'s stream is over (deactivate): by default what ``on_idle`` does."""
        self.on_idle(camera)

    def _run(self, batch: list[tuple[str, Any]]) -> None:
        """The frames an inference thread took, (camera, item) each: those not stale to ``process`` (one) or
        ``process_batch`` (several), timed by the monitor."""
        fresh = [(camera, item) for camera, item in batch if not self._stale(camera, item)]
        if len(fresh) == 1:
            camera, item = fresh[0]
            self._survive(camera, self.monitor.process, self.process, camera, item)
        elif fresh:
            self._survive(None, self.monitor.process, self.process_batch, fresh)

    def _stale(self, camera: str, item: Any) -> bool:
        """Whether ``camera``'s ``item``, about to reach the model, is older than max_frame_age (then skipped,
        counted); its age is noted for the camera's diagnostics."""
        now_ns = self.get_clock().now().nanoseconds
        if self.multicamera:
            age_ms = (now_ns - stamp_ns(frame_header(item))) / 1e6
            self.camera_stats[camera].aged(age_ms)
            self._debug(camera, "frame_age_ms", age_ms)
        age_ms = stale_age_ms(item, now_ns, self.max_frame_age)
        if age_ms is None:
            return False
        self.camera_stats[camera].count("stale")
        self.skip(
            "stale frame",
            f"the frame is {age_ms:.0f} ms old (now - its header stamp) as inference would start, over "
            f"max_frame_age {self.max_frame_age} ms: the node falls behind the camera (a faster model or "
            "backend, or a lower camera rate), or the clocks differ (use_sim_time:=true for bags)",
            camera,
        )
        return True

    def _survive(self, camera: str | None, work: Callable[..., Any], *arguments: Any) -> Any:
        """Run ``work`` for a frame of ``camera`` (None: of several) and return what it returns (None when it
        raised); the inference thread must survive anything an item causes (reported once)."""
        try:
            return work(*arguments)
        except Exception as exc:
            self.skip_error(exc, camera)
            return None

    def finish(self, camera: str) -> None:
        """Runs at close once every queued item is processed, before the closing lines (e.g. flush ``camera``'s
        stream)."""
