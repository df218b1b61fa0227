"""Several cameras on one node, without ROS: the camera names a node takes (its ``cameras`` parameter), the queue
that keeps each camera's newest frames and hands them to the one inference thread in turn, what the node counts per
camera for /diagnostics, and one model run for the frames of several cameras when the model takes a batch.

- ``camera_names``: the ``cameras`` parameter's value (a list, or text "front, left") checked: each a relative ROS
  topic name (``front``, ``rig/left``), none twice, at most ``MAX_CAMERAS``. No name (the default) is one camera on
  today's topics, named "" here.
- ``CameraQueues``: a bounded queue per camera (``size`` each: the node's queue_size, the oldest dropped beyond, as
  streaming.FrameQueue does for one camera), and a scheduler that takes the cameras in turn (round-robin among those
  with a frame waiting), so a 60 Hz camera cannot starve a 5 Hz one; ``take_batch`` takes at most one frame of
  each camera waiting, for one batched model run.
- ``CameraStats``: one camera's counts (in, dropped, stale, skipped, answered), its answers' latency and its frames'
  age at inference, over a time window; and ``BatchSizes``, the batch sizes actually run.
- ``detect_batch``: the detections of several frames (one per camera, each camera's own detector on one shared
  runner) from as few model runs as the model allows: one run of a dynamic batch, runs of a fixed batch padded and
  sliced (runtime/runner.py's ``run_in_chunks``), else one frame after another.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .parameters import MAX_CAMERAS
from .runtime.runner import fixed_dim, run_in_chunks
from .text import untrusted

# A camera's name: a relative ROS topic name of plain tokens (its topics are <name>/image, <name>/detections, ...)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*")
WINDOW_S = 10.0  # the per-camera rate, latency and age are over the last seconds (ros/monitor.py's window)
SAMPLES = 2000  # per camera ring buffer: bounded whatever the frame rate

Item = Any  # what the node queues for a frame (an image message, or a tuple whose first element is one)


def camera_names(value: Any) -> tuple[str, ...]:
    """The ``cameras`` parameter's ``value`` as camera names: a list of names, or text of names separated by commas
    or spaces; "" or [] is () (one camera, today's topics). A name that is no relative topic name, a name given twice,
    or more than MAX_CAMERAS names is a ValueError naming it and the fix."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        names = [name for name in re.split(r"[,\s]+", value.strip().strip("[]")) if name]
    elif isinstance(value, list | tuple) and all(isinstance(name, str) for name in value):
        names = [name.strip() for name in value]
    else:
        raise ValueError(
            f"cameras must be a list of camera names, e.g. [front, left, right], not {untrusted(repr(value), 80)}"
        )
    if len(names) > MAX_CAMERAS:
        raise ValueError(f"cameras names {len(names)} cameras: one node serves at most {MAX_CAMERAS}")
    seen: set[str] = set()
    for name in names:
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"camera name {untrusted(repr(name), 80)} is not a relative ROS topic name (letters, digits and _, "
                "not starting with a digit, parts joined by /): its topics would be <name>/image, <name>/..."
            )
        if name in seen:
            raise ValueError(f"camera {name} is named twice in cameras: give each camera once")
        seen.add(name)
    return tuple(names)


def camera_topic(camera: str, topic: str) -> str:
    """``topic`` of ``camera``: ``front/detections``; the topic itself for the one camera of a node without names."""
    return f"{camera}/{topic}" if camera else topic


class CameraQueues:
    """A bounded queue per camera, shared by the receiving thread(s) and the consuming thread(s). ``put`` keeps each
    camera's newest ``size`` items (the oldest dropped for the new one); ``take`` and ``take_batch`` take the cameras
    in turn, starting after the camera served last, skipping those with nothing waiting. One camera ("") behaves as
    streaming.FrameQueue. Several consumers (inference_workers) ``claim`` the cameras they take: a claimed camera is
    not taken again until ``release``d, so each camera's frames are handled one at a time, in order."""

    def __init__(self, cameras: Sequence[str] = ("",), size: int = 1):
        self.size = size
        self._wake = threading.Condition()
        self.configure(cameras)

    def configure(self, cameras: Sequence[str]) -> None:
        """Serve ``cameras`` (in this order); items still queued are dropped (use ``drain`` first)."""
        with self._wake:
            self.cameras = tuple(cameras) or ("",)
            self._items: dict[str, deque] = {camera: deque() for camera in self.cameras}
            self._next = 0  # the index of the camera whose turn is next
            self._claimed: set[str] = set()  # cameras a consumer is handling (take_batch's claim)

    def __len__(self) -> int:
        return sum(len(items) for items in self._items.values())

    def waiting(self, camera: str) -> int:
        return len(self._items[camera])

    def put(self, item: Item, camera: str = "") -> Item | None:
        """Add ``camera``'s ``item``, waking the consumer; the item of that camera dropped to make room, or None."""
        dropped = None
        with self._wake:
            items = self._items[camera]
            if len(items) >= self.size:
                dropped = items.popleft()
            items.append(item)
            self._wake.notify()
        return dropped

    def take(self, timeout: float = 0.0) -> tuple[str, Item] | None:
        """The oldest item of the next camera in turn that has one, as (camera, item), waiting up to ``timeout``
        seconds when every queue is empty; None when none came."""
        batch = self.take_batch(1, timeout)
        return batch[0] if batch else None

    def take_batch(self, limit: int, timeout: float = 0.0, claim: bool = False) -> list[tuple[str, Item]]:
        """Up to ``limit`` items, the oldest of each camera with one waiting (one per camera), the cameras in turn
        from the next, claimed cameras passed over; waits up to ``timeout`` seconds when none has one. [] when none
        came. ``claim``: the cameras taken are claimed until ``release``."""
        with self._wake:
            if not self._waiting() and timeout > 0:
                self._wake.wait(timeout=timeout)
            taken: list[tuple[str, Item]] = []
            count, start = len(self.cameras), self._next
            for step in range(count):
                if len(taken) >= limit:
                    break
                index = (start + step) % count
                camera = self.cameras[index]
                if self._items[camera] and camera not in self._claimed:
                    taken.append((camera, self._items[camera].popleft()))
                    self._next = (index + 1) % count  # the camera after the one served last goes first next time
            if claim:
                self._claimed.update(camera for camera, _ in taken)
            return taken

    def _waiting(self) -> bool:
        return any(items and camera not in self._claimed for camera, items in self._items.items())

    def claim(self, camera: str) -> bool:
        """Claim ``camera`` (e.g. to end its stream) unless a consumer has; whether it was claimed."""
        with self._wake:
            if camera in self._claimed:
                return False
            self._claimed.add(camera)
            return True

    def release(self, cameras: Iterable[str]) -> None:
        """The consumer is done with ``cameras``: others may take them again."""
        with self._wake:
            self._claimed.difference_update(cameras)
            self._wake.notify_all()

    def drain(self) -> list[tuple[str, Item]]:
        """Remove and return every item as (camera, item), each camera's oldest first, the cameras in turn (the
        consumers are stopped: claims are dropped)."""
        with self._wake:
            self._claimed.clear()
        items = []
        while batch := self.take_batch(len(self.cameras)):
            items += batch
        return items

    def wake(self) -> None:
        """Wake the consumers waiting in ``take`` (e.g. to see that they should stop)."""
        with self._wake:
            self._wake.notify_all()


@dataclass
class CameraStats:
    """One camera's counts since start and, over the last ``WINDOW_S`` seconds, its answers' pipeline latency and
    its frames' age as inference starts (ms). Written by the receiving and inference threads, read by the timer."""

    frames_in: int = 0
    dropped: int = 0  # the oldest of its queue, for a newer frame of the same camera
    stale: int = 0  # older than max_frame_age as inference would start
    skipped: int = 0  # for any problem, stale ones included
    answered: int = 0
    last_frame: float | None = None  # monotonic s of its last frame in
    _latencies: deque = field(default_factory=lambda: deque(maxlen=SAMPLES))  # (monotonic s, ms)
    _ages: deque = field(default_factory=lambda: deque(maxlen=SAMPLES))
    _answers: deque = field(default_factory=lambda: deque(maxlen=SAMPLES))  # monotonic s of each answer
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def came(self, now: float | None = None) -> None:
        with self._lock:
            self.frames_in += 1
            self.last_frame = time.monotonic() if now is None else now

    def count(self, what: str) -> None:
        """Count one frame ``dropped``, ``stale`` or ``skipped``."""
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    def aged(self, age_ms: float, now: float | None = None) -> None:
        """A frame's age (now - its header stamp) as inference starts on it."""
        with self._lock:
            self._ages.append((time.monotonic() if now is None else now, age_ms))

    def answer(self, latency_ms: float, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            self.answered += 1
            self._latencies.append((now, latency_ms))
            self._answers.append(now)

    def values(self, now: float | None = None) -> dict[str, str]:
        """What /diagnostics says of the camera: counts since start; rate, latency and age over the window."""
        now = time.monotonic() if now is None else now
        since = now - WINDOW_S
        with self._lock:
            latencies = [ms for at, ms in self._latencies if at > since]
            ages = [ms for at, ms in self._ages if at > since]
            answers = sum(1 for at in self._answers if at > since)
            values = {
                "frames in": str(self.frames_in),
                "frames answered": str(self.answered),
                "frames dropped": str(self.dropped),
                "frames stale": str(self.stale),
                "frames skipped": str(self.skipped),
            }
            last = self.last_frame
        values["rate (answers/s)"] = f"{answers / WINDOW_S:.2f}"
        for name, samples in (("pipeline latency", latencies), ("frame age at inference", ages)):
            if samples:
                p50, p90, p99 = np.percentile(samples, (50, 90, 99))
                values[f"{name} p50/p90/p99 (ms)"] = f"{p50:.1f} / {p90:.1f} / {p99:.1f}"
        values["last frame (s ago)"] = "never" if last is None else f"{now - last:.1f}"
        return values

    def silent_for(self, since: float, now: float | None = None) -> float:
        """Seconds without a frame, counted from ``since`` (when the node started listening) or the last frame."""
        now = time.monotonic() if now is None else now
        return now - max(since, self.last_frame or since)


class BatchSizes:
    """How many frames each model run of the node took (the batch sizes actually run), counted by size."""

    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self._lock = threading.Lock()

    def ran(self, size: int) -> None:
        with self._lock:
            self.counts[size] += 1

    def text(self) -> str:
        """'1: 40 runs, 3: 12 runs'; 'none yet'."""
        with self._lock:
            counts = sorted(self.counts.items())
        return ", ".join(f"{size}: {runs} run{'s' * (runs != 1)}" for size, runs in counts) or "none yet"


def inference_workers(asked: int, cameras: Sequence[str], runner_class: Any) -> tuple[int, str]:
    """How many inference threads a node runs for its inference_workers ``asked``, serving the named ``cameras``
    (none: one camera) on ``runner_class``, and what to tell the user of it ("" when nothing): several only for
    several cameras (one camera's frames run in order), at most one per camera, and only on a backend whose model
    runs from several threads at once (its ``concurrent_runs``); another backend is refused (ValueError)."""
    if asked <= 1:
        return 1, ""
    if len(cameras) < 2:
        return 1, f"inference_workers {asked}: one camera's frames run one at a time: one worker"
    if not getattr(runner_class, "concurrent_runs", False):
        raise ValueError(
            f"inference_workers {asked}: the {runner_class.backend} backend runs one inference at a time; set "
            "inference_workers to 1 (the onnx and openvino backends run several)"
        )
    workers = min(asked, len(cameras))
    return workers, f"inference_workers {workers}: frames of up to {workers} cameras in the model at once"


def batch_capacity(runner: Any) -> int | None:
    """How many frames one run of ``runner`` takes: None for a dynamic batch (any number), else its first input's
    fixed batch size (1: no batching)."""
    return fixed_dim(runner.inputs[0].shape[0]) if runner.inputs and runner.inputs[0].shape else 1


def batches(detector: Any) -> bool:
    """Whether ``detector`` can run the frames of several cameras in one model run: an adapter of separate steps
    (``preprocess``, ``row`` of a batched output, ``decode``) on a model of a dynamic or fixed batch over 1."""
    if not all(hasattr(detector, step) for step in ("preprocess", "row", "decode", "runner")):
        return False
    return batch_capacity(detector.runner) != 1


def detect_batch(
    detectors: Sequence[Any], frames: Sequence[np.ndarray], ran: Callable[[int], None] | None = None
) -> list[Any]:
    """The detections (a FrameResult) of each of ``frames``, ``detectors[i]`` (each camera's own, on one shared
    runner) detecting ``frames[i]``, in as few model runs as the model takes: frames whose input tensors have one
    shape go into one run of a dynamic batch, or runs of a fixed batch padded with zeros and sliced (one frame too:
    such a model takes no other batch); a detector that does not batch (``batches``) detects one frame after
    another. ``ran(size)``: told the number of frames of each model run."""
    ran = ran or (lambda size: None)
    if not frames:
        return []
    first = detectors[0]
    capacity = batch_capacity(first.runner) if batches(first) else 1
    if capacity == 1 or (len(frames) == 1 and capacity is None):  # a fixed batch over 1 takes even one frame padded
        found = []
        for detector, frame in zip(detectors, frames):
            found.append(detector.detect(frame))
            ran(1)
        return found
    prepared = [detector.preprocess(frame) for detector, frame in zip(detectors, frames)]
    groups: dict[tuple, list[int]] = {}
    for index, (tensor, _) in enumerate(prepared):
        groups.setdefault(tensor.shape, []).append(index)
    found: list[Any] = [None for _ in frames]
    for indices in groups.values():
        tensor = np.concatenate([prepared[index][0] for index in indices])
        outputs = run_in_chunks(first.runner, first.runner.inputs[0].name, tensor, capacity, capacity is not None)
        size = capacity or len(indices)
        for start in range(0, len(indices), size):
            ran(min(size, len(indices) - start))
        for row, index in enumerate(indices):
            detector = detectors[index]
            found[index] = detector.decode(detector.row(outputs, row), prepared[index][1])
    return found


def per_camera(cameras: Iterable[str], make: Callable[[str], Any]) -> dict[str, Any]:
    """``make(camera)`` for each camera: its own state (a tracker, a TrackNet window), by camera."""
    return {camera: make(camera) for camera in cameras}
