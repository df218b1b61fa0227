"""Live latency (~/debug/), /diagnostics and the silence warning, from real nodes over real DDS (ros/monitor.py):
one mechanism in InferenceNode, checked on a detection node and on the tracknet node."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import time

import numpy as np
import onnx
import onnxruntime
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PointStamped
from onnx import TensorProto, helper, numpy_helper
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from sensor_msgs.msg import Image
from std_msgs.msg import Float64, Header
from support import camera_process
from support.models import _constant_model
from support.nodes import YOLO, _latest, _yolo_output, closing_counts
from support.ros_harness import LATE, PATIENCE_S, RELIABLE, NodeProcess, Probe, late_node_params
from vision_msgs.msg import Detection2DArray

from vision_factory.ros.messages import bgr_to_message
from vision_factory.ros.monitor import DEBUG_TOPICS
from vision_factory.share import share_path
from vision_factory.tools.bags import write_image_bag
from vision_factory.tools.replay import replay
from vision_factory.tools.synthetic import BallClip


def _slow_model(path) -> str:
    """A YOLO-shaped model whose answer is constant but that first runs a large convolution (tens of ms)."""
    weights = np.random.default_rng(0).random((64, 3, 7, 7)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["images", "w"], ["features"], pads=[3, 3, 3, 3]),
            helper.make_node("ReduceMean", ["features"], ["mean"], keepdims=0),
            helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
            helper.make_node("Add", ["value", "nothing"], ["output0"]),
        ],
        "slow",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 640, 640])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 6, 100])],
        [
            numpy_helper.from_array(weights, "w"),
            numpy_helper.from_array(np.zeros((), np.float32), "zero"),
            numpy_helper.from_array(_yolo_output(), "value"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    helper.set_model_props(model, {"names": "{0: 'circle', 1: 'square'}"})
    onnx.save(model, path)
    return str(path)


def _frame(probe: Probe, index: int, size=(96, 128)) -> Image:
    """A frame stamped now (the probe's clock), as a camera stamps it."""
    image = np.full((*size, 3), 40 + index, np.uint8)
    return bgr_to_message(image, Header(stamp=probe.node.get_clock().now().to_msg(), frame_id="camera"))


def _values(status: DiagnosticStatus) -> dict[str, str]:
    return {item.key: item.value for item in status.values}


def _wait_matched(probe: Probe, subscriptions: list, publisher, node: NodeProcess) -> None:
    """Until the node's topics match ours (it is started and subscribed), or it has exited."""

    def matched() -> bool:
        ready = all(subscription.get_publisher_count() > 0 for subscription in subscriptions)
        return ready and publisher.get_subscription_count() > 0

    assert probe.spin_until(lambda: matched() or node.process.poll() is not None, PATIENCE_S)
    assert matched(), f"the node's topics never matched:\n{node.log()}"


def _subscribe(
    probe: Probe, msg_type, topic: str, subscriptions: list, arrivals: list | None = None, qos=RELIABLE
) -> list:
    """Like ``probe.subscribe``, keeping the subscription (for ``_wait_matched``); ``arrivals``: for each message,
    (the ROS clock's now in ns, perf_counter) as it arrived."""
    messages = probe.received.setdefault(topic, [])

    def arrived(message) -> None:
        if arrivals is not None:
            arrivals.append((probe.node.get_clock().now().nanoseconds, time.perf_counter()))
        messages.append(message)

    subscriptions.append(probe.node.create_subscription(msg_type, topic, arrived, qos))
    return messages


def _subscribe_debug(probe: Probe, namespace: str, node_name: str) -> tuple[dict[str, list], list, dict[str, list]]:
    """The node's ~/debug/ topics: their messages, the subscriptions and each message's arrival times."""
    subscriptions: list = []
    arrivals: dict[str, list] = {name: [] for name in DEBUG_TOPICS}
    topics = {name: f"{namespace}/{node_name}/debug/{name}" for name in DEBUG_TOPICS}
    debug = {
        name: _subscribe(probe, Float64, topic, subscriptions, arrivals[name], LATE) for name, topic in topics.items()
    }
    return debug, subscriptions, arrivals


def _kept(namespace: str, node_name: str, *outputs: str) -> dict[str, str]:
    """The node parameters that keep its ~/debug/ times and ``outputs`` (under ``namespace``) for the probe's LATE
    readers: a test that waits for each answer before the next frame waits forever on a lost one."""
    topics = [f"{namespace}/{node_name}/debug/{name}" for name in DEBUG_TOPICS]
    return late_node_params([*topics, *(f"{namespace}/{output}" for output in outputs)])


def _play_one_at_a_time(probe: Probe, publisher, count: int, debug: dict, answers: list) -> list[tuple[int, float]]:
    """``count`` frames, each sent once the node published the answer and every stage time of the one before;
    for each, (its stamp in ns on the ROS clock, perf_counter) as it was published."""
    sent = []
    for index in range(count):
        frame = _frame(probe, index)
        sent.append((Time.from_msg(frame.header.stamp).nanoseconds, time.perf_counter()))
        publisher.publish(frame)

        def answered(i=index) -> bool:
            return len(answers) > i and all(len(series) > i for series in debug.values())

        assert probe.spin_until(answered, PATIENCE_S), {name: len(series) for name, series in debug.items()}
    return sent


def _assert_stage_times(debug: dict, arrivals: dict, sent: list) -> None:
    """Each frame's stage times add up to its processing time, and each figure lies within what the probe saw on
    the figure's own clock: the pipeline latency (the ROS clock, the stamp's) within the frame's stamp and the
    latency's arrival here; the processing time (perf_counter, monotonic) within the frame's publishing and the
    processing time's arrival here. The two figures are not compared with each other: the node works on after its
    answer goes out (markers, debug image), and they are read on different clocks."""
    values = {name: [message.data for message in messages] for name, messages in debug.items()}
    assert all(len(series) == len(sent) for series in values.values()), {k: len(v) for k, v in values.items()}
    for frame, (stamp_ns, sent_s) in enumerate(sent):
        processing, latency = values["processing_time_ms"][frame], values["pipeline_latency_ms"][frame]
        pre, inference, post = (values[name][frame] for name in ("preprocess_ms", "inference_ms", "postprocess_ms"))
        assert processing > 0 and pre > 0 and inference > 0 and post > 0
        assert pre + inference + post == pytest.approx(processing, rel=1e-6)
        latency_seen_ms = (arrivals["pipeline_latency_ms"][frame][0] - stamp_ns) / 1e6
        assert 0 < latency <= latency_seen_ms, (frame, latency, latency_seen_ms)
        processing_seen_ms = 1000 * (arrivals["processing_time_ms"][frame][1] - sent_s)
        assert processing <= processing_seen_ms, (frame, processing, processing_seen_ms)


def test_a_detection_node_publishes_its_stage_times_and_diagnostics(tmp_path):
    model = _constant_model(tmp_path / "m.onnx", _yolo_output())
    params = {"model_path": str(model), "qos_reliability": "reliable", **_kept("/t", "yolo", "detections")}
    node = NodeProcess(tmp_path, params, module=YOLO)
    probe = Probe()
    try:
        debug, subscriptions, arrivals = _subscribe_debug(probe, "/t", "yolo")
        answers = probe.subscribe(Detection2DArray, "/t/detections", late=True)
        diagnostics = _subscribe(probe, DiagnosticArray, "/diagnostics", subscriptions)
        publisher = probe.publisher(Image, "/t/image")
        _wait_matched(probe, subscriptions, publisher, node)
        sent = _play_one_at_a_time(probe, publisher, 5, debug, answers)
        _assert_stage_times(debug, arrivals, sent)

        def reported(frames_in: int):
            status = _latest(diagnostics, "yolo: inference")
            return status is not None and _values(status)["frames in"] == str(frames_in)

        assert probe.spin_until(lambda: reported(5), PATIENCE_S), "no /diagnostics with the 5 frames"
        status = _latest(diagnostics, "yolo: inference")
        values = _values(status)
        assert status.level == DiagnosticStatus.OK, status.message
        assert (values["frames answered"], values["frames dropped"], values["frames skipped"]) == ("5", "0", "0")
        assert "CPUExecutionProvider" in values["runs m.onnx on"] and "CPUExecutionProvider" in status.hardware_id
        assert values["model"] == str(model) and status.hardware_id.startswith("m.onnx on ")
        assert "pipeline latency p50/p90/p99 (ms)" in values and float(values["rate (answers/s)"]) > 0
        # Published again and again (once a second: its period is a figure of benchmarks/monitor_latency.py),
        # each stamped later than the one before.
        count = len(diagnostics)
        assert probe.spin_until(lambda: len(diagnostics) >= count + 2, PATIENCE_S)
        times = [Time.from_msg(array.header.stamp).nanoseconds for array in diagnostics]
        assert all(earlier < later for earlier, later in zip(times, times[1:]))

        # A bad frame: skipped, counted by kind, no stage times for it.
        bad = Image(header=Header(frame_id="bad"), width=4, height=4, encoding="32FC1", step=16, data=bytes(64))
        publisher.publish(bad)
        assert probe.spin_until(lambda: reported(6), PATIENCE_S)
        values = _values(_latest(diagnostics, "yolo: inference"))
        assert values["frames skipped"] == "1" and values["problem: unsupported encoding"] == "1"
        assert values["frames answered"] == "5" and len(debug["processing_time_ms"]) == 5
    finally:
        probe.close()
        node.stop()


def test_stage_times_kept_for_late_readers_are_kept_for_a_reader_that_came_after_the_frame(tmp_path):
    """The ~/debug/ figures are published only while a reader is counted, but those a node keeps for late readers
    (transient local: replay and these tests ask for it) always: a reader the node's writer learns of after the
    frame (discovery is not symmetric) still gets the frame's figures."""
    model = _constant_model(tmp_path / "m.onnx", _yolo_output())
    params = {"model_path": str(model), "qos_reliability": "reliable", **_kept("/t", "yolo", "detections")}
    node = NodeProcess(tmp_path, params, module=YOLO)
    probe = Probe()
    try:
        answers = probe.subscribe(Detection2DArray, "/t/detections", late=True)
        publisher = probe.publisher(Image, "/t/image")
        ready = lambda: publisher.get_subscription_count() > 0 and probe.matched()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), node.log()
        publisher.publish(_frame(probe, 0))  # no reader of the node's ~/debug/ topics anywhere yet
        assert probe.spin_until(lambda: answers, PATIENCE_S), node.log()
        debug, subscriptions, _ = _subscribe_debug(probe, "/t", "yolo")
        assert probe.spin_until(lambda: all(debug.values()), PATIENCE_S), {k: len(v) for k, v in debug.items()}
        probe.spin_until(lambda: False, 0.5)
    finally:
        probe.close()
        node.stop()
    values = {name: [message.data for message in messages] for name, messages in debug.items()}
    assert all(len(series) == 1 for series in values.values()), values  # the one frame's
    stages = sum(values[name][0] for name in ("preprocess_ms", "inference_ms", "postprocess_ms"))
    assert stages == pytest.approx(values["processing_time_ms"][0], rel=1e-6) and stages > 0


def test_a_node_that_works_on_after_its_answer_times_that_work_but_not_in_its_latency(tmp_path):
    # As a loaded machine does to any node (its thread descheduled right after the answer), or a debug image being
    # drawn: the work after the answer is the node's processing time, not the answer's latency.
    script = tmp_path / "busy_after_answer.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            import time
            from vision_factory.ros.detection_node import DetectionNode

            process = DetectionNode.process
            DetectionNode.process = lambda self, camera, item: (process(self, camera, item), time.sleep(0.3))
            from vision_factory.yolo_onnx_node import main

            sys.exit(main())
            """
        )
    )
    model = _constant_model(tmp_path / "m.onnx", _yolo_output())
    params = {"model_path": str(model), "qos_reliability": "reliable", **_kept("/t", "yolo", "detections")}
    node = NodeProcess(tmp_path, params, executable=[sys.executable, str(script)])
    probe = Probe()
    try:
        debug, subscriptions, arrivals = _subscribe_debug(probe, "/t", "yolo")
        answers = probe.subscribe(Detection2DArray, "/t/detections", late=True)
        publisher = probe.publisher(Image, "/t/image")
        _wait_matched(probe, subscriptions, publisher, node)
        sent = _play_one_at_a_time(probe, publisher, 3, debug, answers)
    finally:
        probe.close()
        node.stop()
    _assert_stage_times(debug, arrivals, sent)
    assert all(message.data >= 300 for message in debug["processing_time_ms"])  # the 0.3 s after the answer
    assert all(message.data >= 300 for message in debug["postprocess_ms"])


def test_diagnostics_warn_on_drops_and_err_when_every_frame_is_skipped(tmp_path):
    model = _slow_model(tmp_path / "slow.onnx")
    # drop_warn_fraction 0: any frame dropped is a warning (how many a burst loses depends on the machine's load)
    params = {"model_path": model, "qos_reliability": "reliable", "qos_depth": "50", "queue_size": "1"}
    node = NodeProcess(tmp_path, {**params, "drop_warn_fraction": "0.0"}, module=YOLO)
    probe = Probe()
    try:
        subscriptions: list = []
        diagnostics = _subscribe(probe, DiagnosticArray, "/diagnostics", subscriptions)
        publisher = probe.publisher(Image, "/t/image")
        _wait_matched(probe, subscriptions, publisher, node)
        for index in range(40):  # in a burst: the node keeps one frame waiting, the others are dropped
            publisher.publish(_frame(probe, index, (32, 32)))

        def latest():
            return _latest(diagnostics, "yolo: inference")

        assert probe.spin_until(lambda: latest() and _values(latest())["frames in"] == "40", PATIENCE_S)
        status = latest()
        dropped = int(_values(status)["frames dropped"])
        assert dropped > 0, _values(status)  # 40 frames at once, one kept waiting while the model runs
        assert status.level == DiagnosticStatus.WARN and f"{dropped} of 40 frames" in status.message
        assert "drop_warn_fraction" in status.message

        def count(key: str) -> int:
            return int(_values(latest())[key])

        # Every frame taken care of, then bad ones, one by one (each counted before the next: none dropped), until
        # the 40 frames have left the 10 s window: only skipped frames remain in it, ERROR, with the count of the
        # skipped frames in the window. The window starts at the newest once-a-second count snapshot at least 10 s
        # old; a late timer tick makes it pass several snapshots at once, so the count is 1 to those sent.
        assert probe.spin_until(lambda: count("frames answered") + count("frames dropped") == 40, PATIENCE_S)
        bad = Image(header=Header(frame_id="bad"), width=4, height=4, encoding="32FC1", step=16, data=bytes(64))

        def errors() -> list[DiagnosticStatus]:
            statuses = [status for array in diagnostics for status in array.status if status.name == "yolo: inference"]
            return [status for status in statuses if status.level == DiagnosticStatus.ERROR]

        sent = 0
        while not errors():
            assert sent < 100, latest().message  # 100 statuses (about as many seconds) with no good frame in
            publisher.publish(bad)
            sent += 1
            assert probe.spin_until(lambda n=sent: count("frames skipped") == n, PATIENCE_S)
        for status in errors():
            found = re.search(r"every frame of the last 10 s was skipped \((\d+)\): see the node's log", status.message)
            assert found and 1 <= int(found[1]) <= sent, status.message
            assert "(skipped since start, by kind: unsupported encoding: " in status.message  # what it saw
    finally:
        probe.close()
        node.stop()


def test_a_provider_that_fell_back_is_a_warning(tmp_path):
    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("CUDA runs here: nothing falls back")
    model = _constant_model(tmp_path / "m.onnx", _yolo_output())
    params = {"model_path": str(model), "execution_provider": "cuda", "provider_fallback": "cpu"}
    node = NodeProcess(tmp_path, params, module=YOLO)
    probe = Probe()
    try:
        diagnostics = probe.subscribe(DiagnosticArray, "/diagnostics")
        assert probe.spin_until(lambda: _latest(diagnostics, "yolo: inference") is not None, PATIENCE_S), node.log()
        status = _latest(diagnostics, "yolo: inference")
        assert status.level == DiagnosticStatus.WARN
        assert "m.onnx: requested execution provider CUDAExecutionProvider did not start" in status.message
        assert "running: CPUExecutionProvider" in status.message
    finally:
        probe.close()
        node.stop()


def test_silence_from_a_qos_mismatch_names_both_sides_qos(tmp_path):
    model = _constant_model(tmp_path / "m.onnx", _yolo_output())
    params = {"model_path": str(model), "qos_reliability": "reliable", "silence_timeout": "1.0"}
    node = NodeProcess(tmp_path, params, module=YOLO)
    probe = Probe()
    camera_qos = QoSProfile(depth=3, reliability=ReliabilityPolicy.BEST_EFFORT)  # as camera drivers publish
    try:
        diagnostics = probe.subscribe(DiagnosticArray, "/diagnostics")
        answers = probe.subscribe(Detection2DArray, "/t/detections")
        camera = probe.node.create_publisher(Image, "/t/image", camera_qos)
        assert probe.spin_until(lambda: probe.node.count_subscribers("/t/image") > 0, PATIENCE_S), node.log()
        for index in range(30):  # 3 s of a 10 Hz camera: none can arrive
            camera.publish(_frame(probe, index))
            probe.spin_until(lambda: False, 0.1)

        def warned() -> bool:
            status = _latest(diagnostics, "yolo: inference")
            return status is not None and "QoS mismatch" in status.message

        assert probe.spin_until(warned, PATIENCE_S), node.log()
        assert answers == []
        status = _latest(diagnostics, "yolo: inference")
        assert status.level == DiagnosticStatus.WARN
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert log.count("no frame on /t/image") == 1, log  # once
    line = next(line for line in log.splitlines() if "no frame on /t/image" in line)
    assert "QoS mismatch: /probe publishes with best_effort, volatile, this node subscribes" in line
    assert "this node subscribes with reliable, volatile, keep_last 5 (Best effort publisher and reliable" in line
    assert "fix: qos_reliability:=best_effort" in line


def test_silence_from_a_matched_publisher_warns_once_per_silence(tmp_path):
    model = _constant_model(tmp_path / "m.onnx", _yolo_output())
    node = NodeProcess(tmp_path, {"model_path": str(model), "silence_timeout": "1.0"}, module=YOLO)
    probe = Probe()

    def said() -> int:
        return node.log().count("no frame on /t/image")

    def statuses() -> int:  # the node's once-a-second ticks: each one watches the silence
        return sum(status.name == "yolo: inference" for array in diagnostics for status in array.status)

    def said_once_more(times: int) -> None:
        """Said ``times`` in all, and not again over three more ticks of the same silence."""
        assert probe.spin_until(lambda: said() >= times, PATIENCE_S), node.log()
        ticks = statuses()
        assert probe.spin_until(lambda: statuses() >= ticks + 3, PATIENCE_S)
        assert said() == times, node.log()

    try:
        diagnostics = probe.subscribe(DiagnosticArray, "/diagnostics")
        answers = probe.subscribe(Detection2DArray, "/t/detections")
        publisher = probe.publisher(Image, "/t/image")
        assert probe.spin_until(lambda: publisher.get_subscription_count() > 0, PATIENCE_S), node.log()
        said_once_more(1)  # a matched publisher that sends nothing
        for index in range(3):  # frames again: the watch re-arms
            publisher.publish(_frame(probe, index))
            assert probe.spin_until(lambda i=index: len(answers) > i, PATIENCE_S)
        said_once_more(2)  # silent again: said again, once
    finally:
        probe.close()
        node.stop()
    lines = [line for line in node.log().splitlines() if "no frame on /t/image" in line]
    assert len(lines) == 2, node.log()
    assert "although 1 publisher is on it. Likely causes: a publisher that sends nothing yet" in lines[0]
    assert "QoS as seen: publishers probe: reliable, volatile, this node best_effort, volatile, keep_last 5" in lines[0]
    # The transport this node runs on (the tests' shared-memory profile) and the fixes.
    assert "or frames lost on the way: this node runs with FASTDDS_DEFAULT_PROFILES_FILE=" in lines[0]
    assert "start this node with FASTDDS_DEFAULT_PROFILES_FILE unset" in lines[0]
    assert "/probe offers reliable delivery, which repairs lost fragments: -p qos_reliability:=reliable" in lines[0]
    # The profile's own path, as this install has it (a pip-only machine has no `ros2 pkg prefix`).
    shared_memory = share_path("config", "fastdds_shm.xml")
    assert f"export FASTDDS_DEFAULT_PROFILES_FILE={shared_memory} in the publisher's shell and in this" in lines[0]
    assert "pkg prefix" not in node.log()
    # The second silence follows small frames that came and were answered: said so, not blamed on the transport.
    assert "3 frames came before (the last " in lines[1] and "Fast DDS" not in lines[1]


def test_frames_lost_on_the_way_are_counted_and_the_warning_names_the_transport(tmp_path):
    """A node on the shared-memory profile (what the launch files set) and a camera on Fast DDS defaults in another
    process: its 1920x1080 frames go through the camera's 512 KB shared-memory segment and nearly all are lost
    (issue 31). The node counts them (its DDS reader's message-lost events) and says so once: lost in transport,
    not by the camera, the transport it runs on and the fixes; /diagnostics and its closing line count them."""
    model = _constant_model(tmp_path / "m.onnx", _yolo_output())
    shared_memory = str(share_path("config", "fastdds_shm.xml"))
    node = NodeProcess(
        tmp_path, {"model_path": str(model)}, module=YOLO, env={"FASTDDS_DEFAULT_PROFILES_FILE": shared_memory}
    )
    probe = Probe()
    try:
        diagnostics = probe.subscribe(DiagnosticArray, "/diagnostics")
        sent = camera_process.send("/t/image", 1920, 1080, rate=10, count=60)

        def counted() -> bool:
            status = _latest(diagnostics, "yolo: inference")
            return status is not None and int(_values(status)["frames that never arrived"]) > 0

        assert probe.spin_until(counted, PATIENCE_S), node.log_tail()
    finally:
        probe.close()
        node.stop()
    lines = [line for line in node.log().splitlines() if "until frames come whole again" in line]
    assert len(lines) == 1, node.log()  # once (the silence that follows says it too, once)
    counts = closing_counts(node.log())
    assert counts["never_arrived"] > 0 and counts["frames_in"] + counts["never_arrived"] <= sent, node.log_tail()
    line = lines[0]
    assert "frames publishers sent on /t/image in the last" in line and "lost in transport, not by the camera" in line
    assert (
        f"this node runs with FASTDDS_DEFAULT_PROFILES_FILE={shared_memory}: a publisher on Fast DDS defaults" in line
    )
    # The frames' size once one came, else "camera-sized".
    assert re.search(
        r"sends (frames of 5\.9 MiB|camera-sized frames) through its own 512 KB shared-memory segment", line
    )
    assert "start this node with FASTDDS_DEFAULT_PROFILES_FILE unset" in line
    assert "/camera offers reliable delivery, which repairs lost fragments: -p qos_reliability:=reliable" in line
    assert "paused or stopped" not in node.log()


def test_the_tracknet_node_publishes_its_stage_times_and_diagnostics(tmp_path, synthetic_models):
    params = {
        "model_path": str(synthetic_models[""]),
        "bg_mode": "''",  # the empty string, as YAML
        "seq_len": "8",
        "qos_reliability": "reliable",
        "queue_size": "50",
        "flush_timeout": "0.5",
        **_kept("/t", "tracknet", "ball"),
    }
    node = NodeProcess(tmp_path, params)
    probe = Probe()
    frames = list(BallClip(num_frames=12, width=320, height=180, seed=3).frames())
    try:
        debug, subscriptions, _ = _subscribe_debug(probe, "/t", "tracknet")
        balls = probe.subscribe(PointStamped, "/t/ball", late=True)
        diagnostics = _subscribe(probe, DiagnosticArray, "/diagnostics", subscriptions)
        publisher = probe.publisher(Image, "/t/image")
        _wait_matched(probe, subscriptions, publisher, node)
        for frame in frames:
            publisher.publish(bgr_to_message(frame, Header(stamp=probe.node.get_clock().now().to_msg())))
            probe.spin_until(lambda: False, 0.03)
        assert probe.spin_until(lambda: len(balls) == 12 and len(debug["pipeline_latency_ms"]) == 12, PATIENCE_S)

        def reported() -> bool:
            status = _latest(diagnostics, "tracknet: inference")
            return status is not None and _values(status)["frames answered"] == "12"

        assert probe.spin_until(reported, PATIENCE_S)
    finally:
        probe.close()
        node.stop()
    values = {name: [message.data for message in messages] for name, messages in debug.items()}
    assert len(values["processing_time_ms"]) == 12 and all(value > 0 for value in values["processing_time_ms"])
    assert all(len(values[name]) == 12 for name in ("preprocess_ms", "inference_ms", "postprocess_ms"))
    # The model runs once the window of 8 is full: inference time from the 8th frame on, none before.
    assert all(value == 0 for value in values["inference_ms"][:7]) and all(v > 0 for v in values["inference_ms"][7:])
    latencies = values["pipeline_latency_ms"]  # answers come seq_len - 1 frames later, the last 7 at the flush
    assert all(latency > 0 for latency in latencies) and max(latencies) >= 500  # the flush waited 0.5 s
    status = _latest(diagnostics, "tracknet: inference")
    found = _values(status)
    assert found["frames in"] == "12" and found["frames skipped"] == "0"
    assert "onnxruntime on CPUExecutionProvider" in found["runs tracknet_rgb.onnx on"]


def test_replay_records_the_nodes_own_times(tmp_path, synthetic_models):
    frames = list(BallClip(num_frames=16, width=320, height=180, seed=5).frames())
    bag = write_image_bag(tmp_path / "clip", frames)
    result = replay(bag, tmp_path / "out", params={"model_path": str(synthetic_models[""]), "bg_mode": ""})
    times = result.node_times_ms
    assert times["frames"] == 16  # every frame timed by the node itself
    assert 0 < times["processing_p50_ms"] <= times["processing_p99_ms"] and times["preprocess_ms"] > 0
    assert times["inference_ms"] > 0  # the median frame: after the window of 8 filled
    assert json.loads((tmp_path / "out" / "replay.json").read_text())["node_times_ms"] == times
