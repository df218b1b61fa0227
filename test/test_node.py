"""The tracknet node over real DDS: rosbag replay against ground truth, parity with the core
module, bad frames, compressed input and start-up errors."""

from __future__ import annotations

import pytest
from conftest import ROOT
from geometry_msgs.msg import PointStamped
from ros_harness import NodeProcess, Probe
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

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
    rows = read_ball_csv(result.ball_csv)
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
    expected = [(p["Frame"], p["Visibility"], float(p["X"]), float(p["Y"])) for _, p in outputs]
    assert read_ball_csv(result.ball_csv) == expected


def _publish(probe: Probe, publisher, messages, outputs: list, expected: int, timeout: float = 20) -> None:
    assert probe.spin_until(lambda: publisher.get_subscription_count() > 0, 30), "node never subscribed"
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
