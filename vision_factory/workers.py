"""A node's inference threads, without ROS (ros/node_workers.py runs them): threads that take the cameras' frames in
turn from a cameras.CameraQueues and hand each batch to the node, and end a camera's stream when its frames stop.

- One thread (the default) takes up to ``batch_limit`` frames, one per camera waiting, and runs them (``run``).
- Several (inference_workers, with several cameras on a backend whose runs may overlap): each *claims* the cameras it
  took, so a camera's frames are run one at a time and in order, and holds the frame lock while it runs a batch
  but for its model runs (``unlocked`` wraps a runner's ``run``): the Python work of the frames one at a time, the
  model runs together.
- The first thread calls ``idle(camera)`` after ``idle_timeout`` seconds without a frame of a camera (once per
  silence, or again after another ``idle_timeout`` while it returns True: the stream only paused), holding the
  camera's claim and the frame lock as a batch would.
- ``between_frames(change)`` runs a change of what the frames run with (a live parameter, a new prompt) before the
  next batch a thread runs, never during one; at once while no thread runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .cameras import CameraQueues

Batch = list[tuple[str, Any]]  # (camera, item) each, one item per camera at most


class InferenceThreads:
    """The threads running a node's frames: ``start`` them (at activate), ``stop`` them (deactivate, shutdown).
    ``batch_limit`` and ``idle_timeout`` are read at each turn, so a node may change them while they run."""

    def __init__(self, queue: CameraQueues, run: Callable[[Batch], None], idle: Callable[[str], Any], name: str):
        """``run(batch)`` runs a batch the threads took; ``idle(camera)`` runs after a camera's silence and returns
        whether to run again after another (True: its stream only paused). Neither may raise (the node reports what
        a frame caused); ``name`` prefixes the threads' names."""
        self.queue, self.name = queue, name
        self._run, self._idle = run, idle
        self.batch_limit = 1
        self.idle_timeout = 0.0  # seconds without a frame of a camera before idle(camera); 0: never
        self._lock = threading.Lock()  # held by a thread on a batch, but while its model runs
        self._holds = threading.local()  # .lock: whether this thread holds _lock
        self._threads: list[threading.Thread] = []
        self._running = False
        self._last: dict[str, float] = {}
        self._changes: list[Callable[[], None]] = []  # between_frames' changes not run yet, in order
        self._changes_lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._running

    @property
    def several(self) -> bool:
        """Whether several threads run (then batches claim their cameras and hold the frame lock)."""
        return len(self._threads) > 1

    def start(self, count: int, cameras: tuple[str, ...]) -> None:
        """Start ``count`` threads over the queue's ``cameras`` (each camera's silence counted from now)."""
        with self._changes_lock:
            self._running = True
        self._last = dict.fromkeys(cameras, time.monotonic())  # per camera: its stream ends on its own
        self._threads = [
            threading.Thread(target=self._work, args=(index,), name=f"{self.name}{index}", daemon=True)
            for index in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the threads (each ends after the batch it is on), waiting up to ``timeout`` seconds for each; the
        changes still waiting run now."""
        with self._changes_lock:
            self._running = False
        self.queue.wake()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=timeout)
        self._threads = []
        self.run_changes()

    def between_frames(self, change: Callable[[], None]) -> None:
        """Run ``change`` before the next batch a thread runs (after the one it is on), or now when none runs."""
        with self._changes_lock:
            if self._running:
                self._changes.append(change)
                return
        change()

    def run_changes(self) -> None:
        """Run the changes waiting (``between_frames``), in the order they came."""
        with self._changes_lock:
            changes, self._changes = self._changes, []
        for change in changes:
            change()

    def unlocked(self, run: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``run`` (a runner's) that gives the frame lock up while it runs, when the calling thread holds it: the
        other threads go on with their frames while this one's model runs."""
        holds, lock = self._holds, self._lock

        def run_unlocked(feeds: Any) -> Any:
            if not getattr(holds, "lock", False):
                return run(feeds)
            lock.release()
            holds.lock = False
            try:
                return run(feeds)
            finally:
                lock.acquire()
                holds.lock = True

        return run_unlocked

    def _work(self, index: int) -> None:
        """A thread: takes the cameras' frames in turn and runs them, one camera at a time (with several threads
        each claims the cameras it took); the first also ends each camera's stream after idle_timeout."""
        last, several = self._last, self.several
        while self._running:
            batch = self.queue.take_batch(self.batch_limit, timeout=0.05, claim=several)
            now = time.monotonic()
            for camera, _ in batch:
                last[camera] = now
            if batch:
                try:
                    with self._locked(several):
                        self.run_changes()
                        self._run(batch)
                finally:
                    if several:
                        self.queue.release(camera for camera, _ in batch)
            if self.idle_timeout > 0 and index == 0:
                for camera, seen in last.items():
                    if now - seen > self.idle_timeout and (not several or self.queue.claim(camera)):
                        last[camera] = float("inf")
                        try:
                            with self._locked(several):
                                if self._idle(camera):  # the stream paused: its idle time starts again
                                    last[camera] = time.monotonic()
                        finally:
                            if several:
                                self.queue.release([camera])

    @contextmanager
    def _locked(self, several: bool) -> Iterator[None]:
        """The frame lock, with several threads (their Python work one at a time, their model runs together)."""
        if not several:
            yield
            return
        with self._lock:
            self._holds.lock = True
            try:
                yield
            finally:
                self._holds.lock = False
