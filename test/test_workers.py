"""A node's inference threads without ROS (vision_factory/workers.py): the cameras' frames taken in turn and each
camera's in order, several threads never on one camera at once while their model runs overlap, a camera's stream
ended once per silence. Real threads on a real CameraQueues; each wait is bounded only to fail rather than hang."""

from __future__ import annotations

import threading
import time

from vision_factory.cameras import CameraQueues
from vision_factory.workers import InferenceThreads

WAIT_S = 60.0  # a bound to fail on, never a measure


def _wait(condition) -> bool:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_one_thread_runs_every_frame_of_each_camera_in_order_in_batches_of_one_per_camera():
    queue = CameraQueues(("front", "left"), size=10)
    ran: list = []
    threads = InferenceThreads(queue, ran.append, lambda camera: None, "test")
    threads.batch_limit = 2
    for index in range(3):  # before the threads start: the cameras' frames wait together
        queue.put(("front", index), "front")
        queue.put(("left", index), "left")
    threads.start(1, queue.cameras)
    try:
        assert _wait(lambda: sum(len(batch) for batch in ran) == 6)
    finally:
        threads.stop()
    assert not threads.running
    assert all(len({camera for camera, _ in batch}) == len(batch) <= 2 for batch in ran)  # one frame per camera
    for camera in ("front", "left"):
        assert [item for batch in ran for cam, item in batch if cam == camera] == [(camera, i) for i in range(3)]


def test_several_threads_never_run_one_cameras_frames_at_once_but_their_model_runs_overlap():
    """Two threads, two cameras: each camera's frames one at a time and in order (claims), while a frame of each
    camera is inside its model run together (the frame lock given up by ``unlocked``): a barrier of two that only
    two overlapping model runs can pass."""
    queue = CameraQueues(("a", "b"), size=10)
    both_in_model = threading.Barrier(2, timeout=WAIT_S)
    busy: set = set()
    overlapped: list = []
    order: dict = {"a": [], "b": []}
    guard = threading.Lock()

    def model(feeds):
        camera, index = feeds
        if index == 0:
            both_in_model.wait()  # raises BrokenBarrierError (the frame is then not counted) unless both are here
            overlapped.append(camera)
        return feeds

    def run(batch):
        for camera, item in batch:
            with guard:
                assert camera not in busy, f"camera {camera} run by two threads at once"
                busy.add(camera)
            try:
                run_model(item)
                order[camera].append(item[1])
            finally:
                with guard:
                    busy.discard(camera)

    threads = InferenceThreads(queue, run, lambda camera: None, "test")
    run_model = threads.unlocked(model)  # as the node wraps its runner's run with several threads
    for index in range(4):
        queue.put(("a", index), "a")
        queue.put(("b", index), "b")
    threads.start(2, queue.cameras)
    try:
        assert _wait(lambda: len(order["a"]) == len(order["b"]) == 4), order
    finally:
        threads.stop()
    assert sorted(overlapped) == ["a", "b"]
    assert order == {"a": [0, 1, 2, 3], "b": [0, 1, 2, 3]}


def test_a_cameras_stream_ends_once_per_silence_and_again_after_new_frames():
    queue = CameraQueues(("front", "left"), size=4)
    ended: list = []
    threads = InferenceThreads(queue, lambda batch: None, ended.append, "test")
    threads.idle_timeout = 0.05
    threads.start(1, queue.cameras)
    try:
        assert _wait(lambda: sorted(ended) == ["front", "left"])
        time.sleep(0.3)  # more silence ends nothing more
        assert sorted(ended) == ["front", "left"]
        queue.put("frame", "left")
        assert _wait(lambda: ended.count("left") == 2)
    finally:
        threads.stop()
    assert ended.count("front") == 1


def test_outside_a_batch_unlocked_runs_the_model_as_it_is():
    threads = InferenceThreads(CameraQueues(), lambda batch: None, lambda camera: None, "test")
    assert threads.unlocked(lambda feeds: feeds * 2)(21) == 42  # no lock held: nothing to give up
