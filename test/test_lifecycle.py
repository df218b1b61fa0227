"""Managed (lifecycle) nodes, max_frame_age and lazy: real node processes driven over their lifecycle services
(``<node>/change_state``, ``<node>/get_state``) from a test client, on real DDS, with real models."""

from __future__ import annotations

import gc
import importlib.util
import weakref

import cv2
import onnxruntime as ort
import pytest
from conftest import SHARED
from geometry_msgs.msg import PointStamped
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from support.data import _photo_frames
from support.nodes import closing_counts
from support.results import detections_of
from support.ros_harness import PATIENCE_S, Lifecycle, NodeProcess, Probe
from vision_msgs.msg import Detection2DArray

from vision_factory.families.yolo import FAMILY as YOLO
from vision_factory.families.yolo_pose import FAMILY as YOLO_POSE
from vision_factory.ros.detection_node import DetectionNode
from vision_factory.ros.messages import bgr_to_message
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.runtime.tensorrt_runner import TensorRtRunner
from vision_factory.tools.synthetic import BallClip

POSE_MODEL = SHARED / "models" / "yolo11n-pose.onnx"
POSE_NODE = "vision_factory.yolo_pose_onnx_node"
needs_pose_model = pytest.mark.skipif(
    not POSE_MODEL.is_file(), reason=f"{POSE_MODEL} is not there (shared models, see ../shared/models/README)"
)


def _image(frame, sec: int, nanosec: int = 0) -> Image:
    header = Header(frame_id="camera")
    header.stamp.sec, header.stamp.nanosec = sec, nanosec
    return bgr_to_message(frame, header)


@needs_pose_model
def test_detection_node_walks_its_lifecycle_over_the_services(tmp_path):
    """autostart:=false waits unconfigured; a bad model fails configure and the node stays unconfigured, saying
    why; with the model set, configure -> inactive (no subscription, nothing answered), activate answers,
    deactivate stops, cleanup -> unconfigured, and a second configure + activate answers again."""
    params = {"autostart": "false", "model_path": "/nonexistent/pose.onnx", "qos_reliability": "reliable"}
    node = NodeProcess(tmp_path, params, module=POSE_NODE)
    probe = Probe()
    frame = _photo_frames()[4]  # two people
    try:
        lifecycle = Lifecycle(probe, "/t/yolo_pose")
        poses = probe.subscribe(Detection2DArray, "/t/poses")
        images = probe.publisher(Image, "/t/image")
        listening = lambda: images.get_subscription_count() > 0  # noqa: E731

        assert lifecycle.state() == "unconfigured", node.log()
        assert not lifecycle.set("configure")
        assert lifecycle.state() == "unconfigured" and node.process.poll() is None  # alive, and says why
        assert "cannot configure: model file not found: /nonexistent/pose.onnx" in node.log()

        # Parameters are read at configure: set the model, then configure again.
        parameters = AsyncParameterClient(probe.node, "/t/yolo_pose")
        assert probe.spin_until(lambda: parameters.services_are_ready(), PATIENCE_S)
        assert (
            probe.answer(lambda: parameters.set_parameters([Parameter("model_path", value=str(POSE_MODEL))]))
            .results[0]
            .successful
        )
        assert lifecycle.set("configure") and lifecycle.state() == "inactive", node.log()
        images.publish(_image(frame, 1))
        probe.spin_until(lambda: False, 1.0)
        assert not listening() and not poses  # inactive: no subscription, nothing answered

        assert lifecycle.set("activate") and lifecycle.state() == "active"
        assert probe.spin_until(listening, PATIENCE_S)
        images.publish(_image(frame, 2))
        assert probe.spin_until(lambda: len(poses) == 1, PATIENCE_S), node.log()
        assert len(poses[0].detections) >= 2

        assert lifecycle.set("deactivate") and lifecycle.state() == "inactive"
        assert probe.spin_until(lambda: not listening(), PATIENCE_S)
        images.publish(_image(frame, 3))
        probe.spin_until(lambda: False, 1.0)
        assert len(poses) == 1

        assert lifecycle.set("cleanup") and lifecycle.state() == "unconfigured"
        assert lifecycle.set("configure") and lifecycle.set("activate")
        assert probe.spin_until(listening, PATIENCE_S)
        images.publish(_image(frame, 4))
        assert probe.spin_until(lambda: len(poses) == 2, PATIENCE_S), node.log()
        assert [pose.header.stamp.sec for pose in poses] == [2, 4]
        assert lifecycle.set("shutdown")
        assert node.wait() == 0  # the shutdown transition ends the process
    finally:
        probe.close()
        node.stop()
    assert "Traceback" not in node.log()


@needs_pose_model
def test_shutdown_answers_the_frames_already_accepted(tmp_path):
    params = {"model_path": str(POSE_MODEL), "qos_reliability": "reliable", "qos_depth": "20", "queue_size": "20"}
    node = NodeProcess(tmp_path, params, module=POSE_NODE)
    probe = Probe()
    frame = _photo_frames()[4]
    try:
        lifecycle = Lifecycle(probe, "/t/yolo_pose")
        poses = probe.subscribe(Detection2DArray, "/t/poses")
        images = probe.publisher(Image, "/t/image")
        assert probe.spin_until(lambda: images.get_subscription_count() > 0, PATIENCE_S), node.log()
        assert lifecycle.state() == "active"  # autostart (the default)
        for index in range(12):
            images.publish(_image(frame, 10 + index))
        assert probe.spin_until(lambda: poses, PATIENCE_S), node.log()
        assert lifecycle.set("shutdown")  # while frames wait in the queue
        assert node.wait() == 0
        counts = closing_counts(node.log())
        probe.spin_until(lambda: len(poses) >= counts["outputs"], PATIENCE_S)  # every answer taken here
    finally:
        probe.close()
        node.stop()
    assert counts["dropped"] == counts["skipped"] == 0
    assert len(poses) == counts["outputs"] == counts["frames_in"] > 1, node.log()


def test_tracknet_node_lifecycle_and_its_window_at_deactivate(tmp_path, synthetic_models):
    """TrackNet answers every frame it accepted: at deactivate the pending window is flushed, and frames sent while
    inactive are never taken."""
    params = {"autostart": "false", "model_path": str(synthetic_models[""]), "qos_reliability": "reliable"}
    node = NodeProcess(tmp_path, {**params, "qos_depth": "50", "queue_size": "50", "flush_timeout": "0.0"})
    probe = Probe()
    clip = BallClip(num_frames=12)
    try:
        lifecycle = Lifecycle(probe, "/t/tracknet")
        balls = probe.subscribe(PointStamped, "/t/ball")
        images = probe.publisher(Image, "/t/image")
        assert lifecycle.state() == "unconfigured", node.log()
        assert lifecycle.set("configure") and lifecycle.state() == "inactive"
        for index in range(3):
            images.publish(_image(clip.frame(index), 100 + index))
        probe.spin_until(lambda: False, 1.0)
        assert images.get_subscription_count() == 0 and not balls

        assert lifecycle.set("activate")
        assert probe.spin_until(lambda: images.get_subscription_count() > 0, PATIENCE_S)
        for index in range(clip.num_frames):
            images.publish(_image(clip.frame(index), 200 + index))
            probe.spin_until(lambda: False, 0.05)
        # Windows of 8: the last frames' answers wait for the next frames (flush_timeout 0: never by time).
        assert probe.spin_until(lambda: len(balls) >= clip.num_frames - 7, PATIENCE_S), node.log()
        probe.spin_until(lambda: False, 0.5)
        assert len(balls) < clip.num_frames
        assert lifecycle.set("deactivate")  # the stream ends: every frame accepted is answered
        assert probe.spin_until(lambda: len(balls) == clip.num_frames, PATIENCE_S), node.log()
        assert [ball.header.stamp.sec for ball in balls] == list(range(200, 200 + clip.num_frames))
        assert lifecycle.set("cleanup") and lifecycle.state() == "unconfigured"
    finally:
        probe.close()
        node.stop()
    counts = closing_counts(node.log())
    assert counts["frames_in"] == counts["outputs"] == clip.num_frames and counts["dropped"] == 0, node.log()


@needs_pose_model
def test_frames_older_than_max_frame_age_are_never_inferred(tmp_path):
    params = {"model_path": str(POSE_MODEL), "qos_reliability": "reliable", "max_frame_age": "500"}
    node = NodeProcess(tmp_path, {**params, "queue_size": "10", "qos_depth": "10"}, module=POSE_NODE)
    probe = Probe()
    frame = _photo_frames()[4]
    try:
        poses = probe.subscribe(Detection2DArray, "/t/poses")
        images = probe.publisher(Image, "/t/image")
        assert probe.spin_until(lambda: images.get_subscription_count() > 0, PATIENCE_S), node.log()
        now = lambda: probe.node.get_clock().now().nanoseconds  # noqa: E731
        for _ in range(3):  # 5 s old: stale
            stale = now() - 5 * 10**9
            images.publish(_image(frame, stale // 10**9, stale % 10**9))
        fresh = []
        for _ in range(2):
            stamp = now()
            fresh.append((stamp // 10**9, stamp % 10**9))
            images.publish(_image(frame, *fresh[-1]))
            assert probe.spin_until(lambda: len(poses) == len(fresh), PATIENCE_S), node.log()
        probe.spin_until(lambda: False, 0.5)
    finally:
        probe.close()
        node.stop()
    assert [(pose.header.stamp.sec, pose.header.stamp.nanosec) for pose in poses] == fresh
    log = node.log()
    assert log.count("skipping frame (stale frame)") == 1 and "max_frame_age 500 ms" in log
    assert "stale frame: 3" in log
    assert closing_counts(log) == {"frames_in": 5, "dropped": 0, "skipped": 3, "outputs": 2, "never_arrived": 0}


@needs_pose_model
def test_a_lazy_node_listens_only_while_its_output_is_subscribed(tmp_path):
    params = {"model_path": str(POSE_MODEL), "qos_reliability": "reliable", "lazy": "true"}
    node = NodeProcess(tmp_path, params, module=POSE_NODE)
    probe = Probe()
    frame = _photo_frames()[4]
    try:
        lifecycle = Lifecycle(probe, "/t/yolo_pose")
        images = probe.publisher(Image, "/t/image")
        assert lifecycle.state() == "active", node.log()
        probe.spin_until(lambda: False, 1.5)  # three looks at the outputs' subscribers
        assert probe.node.count_subscribers("/t/image") == 0
        images.publish(_image(frame, 1))

        poses = []
        subscription = probe.node.create_subscription(Detection2DArray, "/t/poses", poses.append, 10)
        assert probe.spin_until(lambda: probe.node.count_subscribers("/t/image") == 1, PATIENCE_S), node.log()
        assert probe.spin_until(lambda: images.get_subscription_count() > 0, PATIENCE_S)
        images.publish(_image(frame, 2))
        assert probe.spin_until(lambda: poses, PATIENCE_S), node.log()
        assert [pose.header.stamp.sec for pose in poses] == [2]

        probe.node.destroy_subscription(subscription)
        assert probe.spin_until(lambda: probe.node.count_subscribers("/t/image") == 0, PATIENCE_S), node.log()
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert "lazy: an output has a subscriber, listening" in log
    assert "lazy: no output has a subscriber, stopped listening" in log


@needs_pose_model
def test_cleanup_releases_the_model():
    """In-process: configure loads the model, cleanup drops every reference to it (its session is freed)."""
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context)
    overrides = [Parameter("autostart", value=False), Parameter("model_path", value=str(POSE_MODEL))]
    node = DetectionNode(OnnxRunner, YOLO_POSE, context=context, parameter_overrides=overrides)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        runner = weakref.ref(node.detector.runner)
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        gc.collect()
        assert runner() is None and not hasattr(node, "detector")
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS  # and loads again
        assert node.detector.runner is not None
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)


class _PreparedRunner(OnnxRunner):
    """The real ONNX Runtime runner; the settings of each ``prepare`` and each model loaded are recorded."""

    prepared: list = []
    loaded: list = []

    @classmethod
    def prepare(cls, settings):
        cls.prepared.append(dict(settings))
        return super().prepare(settings)

    @classmethod
    def load(cls, model_path, *arguments, **options):
        cls.loaded.append(str(model_path))
        return super().load(model_path, *arguments, **options)


@needs_pose_model
def test_the_node_loads_its_runtime_when_made_and_says_then_what_it_cannot_run(capfd):
    """The backend's runtime is part of the unconfigured node: loaded when the node is made, with its start-up
    parameters, before any model; a provider they ask for that is not here is named then, configure still fails
    on it, and a runtime that is not installed stops the node from being made."""
    import rclpy

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("CUDA runs here")
    context = rclpy.Context()
    rclpy.init(context=context)
    _PreparedRunner.prepared, _PreparedRunner.loaded = [], []
    overrides = [
        Parameter("autostart", value=False),
        Parameter("model_path", value=str(POSE_MODEL)),
        Parameter("execution_provider", value="cuda"),
    ]
    node = DetectionNode(_PreparedRunner, YOLO_POSE, context=context, parameter_overrides=overrides)
    try:
        made = capfd.readouterr().err
        assert [settings["execution_provider"] for settings in _PreparedRunner.prepared] == ["cuda"]
        assert _PreparedRunner.loaded == [] and not hasattr(node, "detector")
        assert "configure will fail unless this is mended: execution provider(s) CUDAExecutionProvider" in made
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert "CUDAExecutionProvider not available" in str(node.failure)
        node.set_parameters([Parameter("execution_provider", value="cpu")])
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS, node.failure
        assert _PreparedRunner.loaded == [str(POSE_MODEL)] * 2 and len(_PreparedRunner.prepared) == 1
        if importlib.util.find_spec("tensorrt") is None:
            with pytest.raises(RuntimeError, match="TensorRT is not installed: pip install tensorrt"):
                DetectionNode(TensorRtRunner, YOLO_POSE, context=context, parameter_overrides=overrides[:2])
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)


SHAPES_MODEL = SHARED / "models" / "shapes-yolov8n.onnx"
REID_MODEL = SHARED / "models" / "mobilenetv2-reid-embedder.onnx"


class _WatchedRunner(OnnxRunner):
    """The real ONNX Runtime runner; each one loaded, and its session, is watched by a weak reference."""

    loaded: list = []

    @classmethod
    def load(cls, *arguments, **options):
        runner = super().load(*arguments, **options)
        cls.loaded += [weakref.ref(runner), weakref.ref(runner.session)]
        return runner


@pytest.mark.skipif(
    not (SHAPES_MODEL.is_file() and REID_MODEL.is_file()), reason="shared shapes or re-id model not found"
)
def test_cleanup_lets_go_of_every_model_and_session_and_configures_again():
    """A tracking detector holds two models (the detector, the re-id embedder): after cleanup neither runner nor
    session is alive (nothing of what configure made holds them: the stream, the monitor's timed runner, the
    publishers), and a configure after it loads both again and answers as before. (What this gives back to the
    system is measured by benchmarks/lifecycle_memory.py, not asserted here.)"""
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context)
    overrides = [
        Parameter("autostart", value=False),
        Parameter("model_path", value=str(SHAPES_MODEL)),
        Parameter("tracking", value=True),
        Parameter("reid_model_path", value=str(REID_MODEL)),
    ]
    node = DetectionNode(_WatchedRunner, YOLO, context=context, parameter_overrides=overrides)
    frame = cv2.imread(str(sorted((SHARED / "data" / "shapes-val" / "images").glob("*.jpg"))[0]))
    try:
        _WatchedRunner.loaded = []
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS, node.failure
        first = [(d["class_id"], d["score"]) for d in detections_of(node.detector.detect(frame))]
        assert first and len(_WatchedRunner.loaded) == 4  # two runners and their sessions
        node.tracking.embedder.embed(frame, node.detector.detect(frame).boxes.xyxy)
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        gc.collect()
        assert all(alive() is None for alive in _WatchedRunner.loaded)
        assert not any(hasattr(node, name) for name in ("detector", "tracking", "stream", "monitor"))

        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS, node.failure
        assert [(d["class_id"], d["score"]) for d in detections_of(node.detector.detect(frame))] == first
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)
