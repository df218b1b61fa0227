"""An inference node's inference threads (a part of ros/inference_node.py's InferenceNode): each takes the
cameras' frames in turn (cameras.CameraQueues), up to ``batch_limit`` frames, one per camera, to ``process_batch``
(a node whose model takes a batch runs them in one model run), one frame to ``process``, skipping stale frames
(max_frame_age); with several (inference_workers) each holds the frame lock but while its model runs. The first ends
each camera's stream after ``idle_timeout`` (``on_idle``). Models load through ``load_runner`` (timed by the
monitor), each camera's pipeline on the same runners (``camera_pipelines``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..cameras import inference_workers
from ..runtime.runner import Runner
from ..streaming import frame_header, stale_age_ms, stamp_ns


class NodeWorkers:
    """InferenceNode's inference threads and what they run (``process``, ``process_batch``, ``on_idle``)."""

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

    def finish(self) -> None:
        """Runs at close once every queued item is processed, before the closing lines (e.g. flush a stream)."""
