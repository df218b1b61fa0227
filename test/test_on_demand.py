"""Probe.answered (test/support/ros_harness.py) over real DDS, against a real yolo node: a test's reader of an
on-demand output (here ~/debug_image, drawn only while the node's writer counts a subscriber, and a ~/debug/
figure) made just before its frame gets that output for the stamp it sent, round after round; an output that
never comes fails naming its topic and showing the node's log. benchmarks/on_demand_race.py counts how often a
frame sent once loses it."""

from __future__ import annotations

import numpy as np
import pytest
from sensor_msgs.msg import Image
from std_msgs.msg import Float64
from support.models import _constant_model
from support.nodes import YOLO, _yolo_output
from support.ros_harness import PATIENCE_S, NodeProcess, Probe, late_node_params, stamped_anew
from vision_msgs.msg import Detection2DArray

SIZE = 256  # the constant model's input: a frame of its size is not scaled
PROCESSING = "/t/yolo/debug/processing_time_ms"  # the node's monitor's, on demand too


def _fresh_readers(probe: Probe, topics: dict[str, type]) -> dict[str, list]:
    """Readers of ``topics`` made now, the probe's earlier ones gone: a reader that came last."""
    for subscription in probe.subscriptions:
        probe.node.destroy_subscription(subscription)
    probe.subscriptions.clear()
    return {topic: probe.subscribe(kind, topic) for topic, kind in topics.items()}


def test_a_reader_made_just_before_the_frame_gets_the_on_demand_output_of_the_stamp_sent(tmp_path):
    model = _constant_model(tmp_path / "m.onnx", _yolo_output())  # one square, centre (100, 100), 50 x 40
    node = NodeProcess(tmp_path, {"model_path": str(model), "qos_reliability": "reliable"}, module=YOLO)
    probe = Probe()
    frame = np.full((SIZE, SIZE, 3), 90, np.uint8)
    try:
        publisher = probe.publisher(Image, "/t/image")
        for round_ in range(3):
            topics = {"/t/detections": Detection2DArray, "/t/debug_image": Image, PROCESSING: Float64}
            answers = _fresh_readers(probe, topics)
            ready = lambda: publisher.get_subscription_count() > 0 and probe.matched()  # noqa: E731
            assert probe.spin_until(ready, PATIENCE_S), node.log()
            send = stamped_anew(publisher, frame, first_sec=1000 * (round_ + 1))
            header, answered = probe.answered(send, answers, node)
            found, drawn, processing = answered.values()
            assert processing.data > 0  # a ~/debug/ figure (no stamp): one that came after a frame was sent
            assert header.stamp.sec >= 1000 * (round_ + 1) and found.header == drawn.header == header
            (item,) = found.detections
            assert item.results[0].hypothesis.class_id == "square"
            centre = item.bbox.center.position
            assert (centre.x, centre.y, item.bbox.size_x, item.bbox.size_y) == pytest.approx((100, 100, 50, 40))
            image = np.frombuffer(bytes(drawn.data), np.uint8).reshape(frame.shape)
            changed = np.nonzero((image != frame).any(axis=2))
            assert changed[0].size > 0  # the box drawn, about its place (its label above it)
            assert 75 - 5 <= changed[1].min() and changed[1].max() <= 125 + 5 + SIZE // 2, changed[1].max()
            assert changed[0].max() <= 120 + 5

        # An output that never comes (a detector has no masks): the failure names it and shows the node's log.
        answers = _fresh_readers(probe, {"/t/detections": Detection2DArray, "/t/masks": Image})
        assert probe.spin_until(probe.matched, PATIENCE_S), node.log()
        with pytest.raises(AssertionError) as failure:
            probe.answered(stamped_anew(publisher, frame, first_sec=9000), answers, node, timeout=8.0)
        assert answers["/t/detections"]  # the frames were answered, on the main output
        message = str(failure.value)
        assert message.startswith("no answer on /t/masks to one of the "), message
        assert "the node's log ends:\n" in message and node.log().splitlines()[-1] in message, message
    finally:
        probe.close()
        node.stop()


def test_an_on_demand_output_kept_for_late_readers_reaches_a_reader_that_came_after_its_frame(tmp_path):
    """A node told to keep its ~/debug_image for late readers (transient local, as replay asks of what it records)
    draws it for every frame, a reader counted or not: a reader made after the frame was answered gets that frame's
    image (on demand alone, the node would never have drawn it: no reader was there)."""
    model = _constant_model(tmp_path / "m.onnx", _yolo_output())
    kept = late_node_params(["/t/detections", "/t/debug_image"])
    node = NodeProcess(tmp_path, {"model_path": str(model), "qos_reliability": "reliable", **kept}, module=YOLO)
    probe = Probe()
    frame = np.full((SIZE, SIZE, 3), 90, np.uint8)
    try:
        answers = probe.subscribe(Detection2DArray, "/t/detections", late=True)
        publisher = probe.publisher(Image, "/t/image")
        ready = lambda: publisher.get_subscription_count() > 0 and probe.matched()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), node.log()
        sent = stamped_anew(publisher, frame, first_sec=500)()  # no reader of the debug image anywhere yet
        assert probe.spin_until(lambda: answers, PATIENCE_S), node.log()
        drawn = probe.subscribe(Image, "/t/debug_image", late=True)
        assert probe.spin_until(lambda: drawn, PATIENCE_S), node.log()
    finally:
        probe.close()
        node.stop()
    assert drawn[0].header == answers[0].header == sent
    image = np.frombuffer(bytes(drawn[0].data), np.uint8).reshape(frame.shape)
    assert (image != frame).any()  # the box drawn
