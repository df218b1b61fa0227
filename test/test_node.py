"""The tracknet node over real DDS: rosbag replay against ground truth, parity with the core
module, bad frames, compressed input and start-up errors."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT
from geometry_msgs.msg import PointStamped
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header
from support.ros_harness import PATIENCE_S, NodeProcess, Probe

from vision_factory.models.ball_stream import BallStream
from vision_factory.models.tracknet import TrackNetModuleONNX
from vision_factory.ros.messages import bgr_to_message
from vision_factory.tools.bags import read_ball_csv, read_messages, write_image_bag
from vision_factory.tools.replay import replay
from vision_factory.tools.synthetic import BallClip

PARAMS_FILE = ROOT / "config" / "tracknet_onnx.yaml"
WARMUP = 8


@pytest.fixture(scope="module")
def clip():
    return BallClip(num_frames=48, width=640, height=360, seed=11)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_replay_through_node_matches_truth(tmp_path, clip, synthetic_models, storage):
    bag = write_image_bag(tmp_path / "clip", clip.frames(), topic="/camera/image_raw", storage=storage)
    params = {"model_path": str(synthetic_models["subtract"]), "bg_mode": "subtract", "median_warmup": str(WARMUP)}
    result = replay(bag, tmp_path / "out", params=params, params_file=PARAMS_FILE, storage=storage)
    assert result.frames_sent == result.outputs == clip.num_frames and result.missing_frames == []
    rows = read_ball_csv(result.answers)
    assert [row[0] for row in rows] == list(range(clip.num_frames))
    for frame, visibility, x, y in rows[WARMUP - 1 :]:  # the last warm-up frame is tracked too
        truth = clip.truth[frame]
        assert visibility == truth.visibility, (frame, truth)
        if truth.visibility:
            assert abs(x - truth.x) <= 4 and abs(y - truth.y) <= 4, (frame, x, y, truth)
    # Every output is stamped with the header of the frame it belongs to.
    store = get_typestore(Stores.ROS2_KILTED)
    stamps_in = [store.deserialize_cdr(m.data, m.msgtype).header for m in read_messages(bag, "/camera/image_raw")]
    stamps_out = [store.deserialize_cdr(m.data, m.msgtype).header for m in read_messages(result.output_bag, "/ball")]
    assert sorted((h.stamp.sec, h.stamp.nanosec) for h in stamps_out) == [
        (h.stamp.sec, h.stamp.nanosec) for h in stamps_in
    ]
    assert {h.frame_id for h in stamps_out} == {"camera"}


def test_node_outputs_equal_the_core_module(tmp_path, clip, synthetic_models):
    bag = write_image_bag(tmp_path / "clip", clip.frames())
    params = {"model_path": str(synthetic_models[""]), "bg_mode": "", "heatmap_threshold": "0.0"}
    result = replay(bag, tmp_path / "out", params=params)
    stream = BallStream(TrackNetModuleONNX(synthetic_models[""], 8, ""))
    outputs = [o for i, f in enumerate(clip.frames()) for o in stream.push(f, i)] + stream.flush()
    expected = [(frame, int(r.ball.visible), float(r.ball.x), float(r.ball.y)) for frame, r in outputs]
    assert read_ball_csv(result.answers) == expected


def _publish(probe: Probe, publisher, messages, outputs: list, expected: int, timeout: float = PATIENCE_S) -> None:
    assert probe.spin_until(lambda: publisher.get_subscription_count() > 0, PATIENCE_S), "node never subscribed"
    for message in messages:
        publisher.publish(message)
        probe.spin_until(lambda: False, 0.02)
    assert probe.spin_until(lambda: len(outputs) >= expected, timeout), f"got {len(outputs)} of {expected}"


def test_bad_frames_are_logged_once_and_skipped(tmp_path, clip, synthetic_models):
    node = NodeProcess(
        tmp_path,
        {
            "model_path": str(synthetic_models[""]),
            "qos_reliability": "reliable",
            "qos_depth": "50",
            "queue_size": "50",
            "flush_timeout": "0.3",
            "inpaint_model_path": str(synthetic_models["inpaint"]),
        },
    )
    probe = Probe()
    try:
        probe.spin_until(lambda: False, 1.0)  # idle past flush_timeout before the first frame
        outputs = probe.subscribe(PointStamped, "/t/ball")
        publisher = probe.publisher(Image, "/t/image")
        bad = Image(header=Header(frame_id="bad"), width=4, height=4, encoding="32FC1", step=16, data=bytes(64))
        short = Image(
            header=Header(frame_id="short"), width=640, height=360, encoding="bgr8", step=1920, data=bytes(10)
        )
        good = []
        for i in range(12):
            header = Header(frame_id="camera")
            header.stamp.sec = 100 + i
            good.append(bgr_to_message(clip.frame(i), header))
        _publish(probe, publisher, [bad, bad, short, *good[:6], bad, *good[6:]], outputs, expected=12)
        assert sorted(m.header.stamp.sec for m in outputs) == list(range(100, 112))
        assert node.process.poll() is None, "node must keep running"
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert log.count("unsupported image encoding '32FC1'") == 1
    assert log.count("expected step x height") == 1
    assert "skipped 4" in log


def test_compressed_input(tmp_path, clip, synthetic_models):
    import cv2

    node = NodeProcess(
        tmp_path,
        {
            "model_path": str(synthetic_models[""]),
            "input_transport": "compressed",
            "qos_reliability": "reliable",
            "qos_depth": "50",
            "queue_size": "50",
            "flush_timeout": "0.3",
        },
    )
    probe = Probe()
    try:
        outputs = probe.subscribe(PointStamped, "/t/ball")
        publisher = probe.publisher(CompressedImage, "/t/image/compressed")
        messages = []
        for i in range(10):
            header = Header(frame_id="camera")
            header.stamp.sec = i + 1
            messages.append(
                CompressedImage(header=header, format="png", data=cv2.imencode(".png", clip.frame(i))[1].tobytes())
            )
        _publish(probe, publisher, messages, outputs, expected=10)
    finally:
        probe.close()
        node.stop()
    by_frame = {m.header.stamp.sec - 1: m.point for m in outputs}
    for frame, point in by_frame.items():
        truth = clip.truth[frame]
        assert point.z == float(truth.visibility)
        if truth.visibility:
            assert abs(point.x - truth.x) <= 4 and abs(point.y - truth.y) <= 4


@pytest.mark.parametrize(
    "params,message",
    [
        ({}, "model_path is empty"),
        ({"model_path": "/nonexistent/tracknet.onnx"}, "model file not found: /nonexistent/tracknet.onnx"),
        ({"qos_reliability": "sometimes"}, "qos_reliability must be"),
        ({"execution_provider": "cuda"}, "CUDAExecutionProvider not available"),
        ({"seq_len": "4"}, "seq_len='8' but seq_len=4"),
        ({"seq_len": "8.0"}, "seq_len"),
    ],
)
def test_start_up_errors_are_clear(tmp_path, synthetic_models, params, message):
    params = {"model_path": str(synthetic_models[""]), **params} if "model_path" not in params and params else params
    node = NodeProcess(tmp_path, params)
    assert node.wait() == 2
    node.stop()
    assert message in node.log()
    assert "Traceback" not in node.log()


def _frames(clip: BallClip, first_stamp: int, count: int | None = None) -> list[Image]:
    messages = []
    for i in range(clip.num_frames if count is None else count):
        header = Header(frame_id="camera")
        header.stamp.sec = first_stamp + i
        messages.append(bgr_to_message(clip.frame(i), header))
    return messages


def _answers(outputs: list) -> list[tuple]:
    return sorted((m.header.stamp.sec, m.point.x, m.point.y, m.point.z) for m in outputs)


@pytest.mark.parametrize(
    "seq_len,stream_a,stream_b",
    [
        (8, BallClip(3, 640, 360, seed=2), BallClip(20, 320, 180, seed=3)),  # A ends inside the warm-up
        (1, BallClip(10, 640, 360, seed=2), BallClip(12, 640, 360, seed=3)),  # nothing pending after A
    ],
    ids=["cut-in-warm-up", "seq_len-1"],
)
def test_a_stream_after_idle_gets_a_fresh_nodes_answers(tmp_path, synthetic_models, seq_len, stream_a, stream_b):
    """Stream A, more than flush_timeout without frames, stream B: B's answers are a fresh node's."""
    from vision_factory.tools.synthetic import build_tracknet_model

    model = synthetic_models["subtract"] if seq_len == 8 else build_tracknet_model(tmp_path / "l1.onnx", 1, "subtract")
    params = {
        "model_path": str(model),
        "seq_len": str(seq_len),
        "bg_mode": "subtract",
        "median_warmup": "6",
        "heatmap_threshold": "0.0",
        "qos_reliability": "reliable",
        "qos_depth": "50",
        "queue_size": "50",
        # Long enough that a stall of the loaded machine mid-stream is not taken for the end of the stream.
        "flush_timeout": "1.0",
    }
    (tmp_path / "used").mkdir()
    (tmp_path / "fresh").mkdir()
    used = NodeProcess(tmp_path / "used", params, namespace="/used")
    fresh = NodeProcess(tmp_path / "fresh", params, namespace="/fresh")
    probe = Probe()
    try:
        used_out = probe.subscribe(PointStamped, "/used/ball")
        fresh_out = probe.subscribe(PointStamped, "/fresh/ball")
        to_used = probe.publisher(Image, "/used/image")
        to_fresh = probe.publisher(Image, "/fresh/image")
        assert probe.spin_until(lambda: to_fresh.get_subscription_count() > 0, PATIENCE_S), (
            "fresh node never subscribed"
        )
        _publish(probe, to_used, _frames(stream_a, 100), used_out, expected=stream_a.num_frames)
        probe.spin_until(lambda: False, 2.5)  # > flush_timeout without frames: stream A is over
        del used_out[:]
        stream = _frames(stream_b, 500)
        _publish(probe, to_used, stream, used_out, expected=len(stream))
        _publish(probe, to_fresh, stream, fresh_out, expected=len(stream))
        probe.spin_until(lambda: False, 0.5)  # nothing more comes
    finally:
        probe.close()
        used.stop()
        fresh.stop()
    assert _answers(used_out) == _answers(fresh_out)
    assert [answer[0] for answer in _answers(used_out)] == list(range(500, 500 + len(stream)))
    assert sum(answer[3] for answer in _answers(used_out)) > 0  # the ball was tracked
    assert "skipping" not in used.log()


def test_no_frame_lost_at_camera_rate(tmp_path, synthetic_models):
    """1280x720 at 15 fps through a 24-frame median warm-up, default queue_size: every frame answered once."""
    node = NodeProcess(
        tmp_path,
        {
            "model_path": str(synthetic_models["subtract"]),
            "bg_mode": "subtract",
            "median_warmup": "24",
            "qos_reliability": "reliable",
            "qos_depth": "50",
            "flush_timeout": "0.3",
        },
    )
    probe = Probe()
    messages = _frames(BallClip(36, 1280, 720, seed=4), 1)
    try:
        outputs = probe.subscribe(PointStamped, "/t/ball")
        publisher = probe.publisher(Image, "/t/image")
        assert probe.spin_until(lambda: publisher.get_subscription_count() > 0, PATIENCE_S), "node never subscribed"
        waiting = list(messages)
        timer = probe.node.create_timer(1 / 15, lambda: waiting and publisher.publish(waiting.pop(0)))
        probe.spin_until(lambda: len(outputs) >= len(messages), PATIENCE_S)
        probe.node.destroy_timer(timer)
        probe.spin_until(lambda: False, 0.5)
    finally:
        probe.close()
        node.stop()
    assert sorted(m.header.stamp.sec for m in outputs) == list(range(1, 37)), node.log()
    assert "frames in 36, dropped 0, skipped 0, outputs 36" in node.log()


def test_dropped_frames_are_still_answered(tmp_path):
    """queue_size 1 and a burst: frames are dropped, yet each gets exactly one ball message (z = 0)."""
    from vision_factory.tools.synthetic import build_tracknet_model

    model = build_tracknet_model(tmp_path / "slow.onnx", 8, "", backbone_width=2)  # ~15 ms per frame
    node = NodeProcess(
        tmp_path,
        {"model_path": str(model), "qos_reliability": "reliable", "qos_depth": "50", "queue_size": "1"},
    )
    probe = Probe()
    messages = _frames(BallClip(30, 640, 360, seed=5), 1)
    try:
        outputs = probe.subscribe(PointStamped, "/t/ball")
        publisher = probe.publisher(Image, "/t/image")
        assert probe.spin_until(lambda: publisher.get_subscription_count() > 0, PATIENCE_S), "node never subscribed"
        for message in messages:  # a burst, no pause
            publisher.publish(message)
        probe.spin_until(lambda: len(outputs) >= len(messages), PATIENCE_S)
        probe.spin_until(lambda: False, 0.5)
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert sorted(m.header.stamp.sec for m in outputs) == list(range(1, 31)), log
    dropped = int(re.search(r"frames in 30, dropped (\d+), skipped 0, outputs 30", log).group(1))
    assert dropped > 0, log
    assert sum(m.point.z == 0.0 for m in outputs) >= dropped


@pytest.mark.parametrize(
    "file,problem",
    [
        ("missing.npy", "no such file"),
        ("gray.npy", "a median must be HxWx3 RGB uint8 at frame resolution, got 180x320 uint8"),
        ("broken.png", "not a readable image file"),
    ],
)
def test_median_path_problems_stop_the_node(tmp_path, synthetic_models, file, problem):
    import numpy as np

    np.save(tmp_path / "gray.npy", np.zeros((180, 320), np.uint8))
    (tmp_path / "broken.png").write_bytes(b"\x89PNG but no more")
    params = {"model_path": str(synthetic_models["subtract"]), "bg_mode": "subtract"}
    node = NodeProcess(tmp_path, {**params, "median_path": str(tmp_path / file)})
    assert node.wait() == 2
    node.stop()
    assert f"median_path {tmp_path / file}: {problem}" in node.log()
    assert "Traceback" not in node.log()


def test_frames_of_another_size_than_the_median_are_skipped(tmp_path, synthetic_models):
    import cv2

    clip = BallClip(8, 320, 180, seed=6)
    cv2.imwrite(str(tmp_path / "median.png"), BallClip(1, 640, 360).background)
    node = NodeProcess(
        tmp_path,
        {
            "model_path": str(synthetic_models["subtract"]),
            "bg_mode": "subtract",
            "median_path": str(tmp_path / "median.png"),
            "qos_reliability": "reliable",
            "qos_depth": "50",
            "queue_size": "50",
        },
    )
    probe = Probe()
    try:
        outputs = probe.subscribe(PointStamped, "/t/ball")
        publisher = probe.publisher(Image, "/t/image")
        _publish(probe, publisher, _frames(clip, 1), outputs, expected=0)
        probe.spin_until(lambda: False, 1.0)
        assert node.process.poll() is None, "node must keep running"
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert outputs == []
    assert log.count("skipping frame (frame size differs from the background median)") == 1, log  # logged once
    assert "frame is 320x180 but the background median is 640x360" in log and "skipped 8" in log
    assert "frame size differs from the background median: 8" in log  # and counted at stop
