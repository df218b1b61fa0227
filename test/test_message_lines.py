"""What `vision-factory topic echo|hz` and `param set` make of what they read, without a running node: summary lines of
real ROS messages (escaped and bounded), any message field by field within its bounds, values read as ROS reads
-p values, names resolved as a user types them, the QoS that matches a topic's publishers, a rate from arrival
times. Over DDS, against a running node: test_node_tools.py."""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point, PointStamped
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.topic_endpoint_info import TopicEndpointInfo
from sensor_msgs.msg import Image, PointCloud2, PointField
from std_msgs.msg import Header, String
from vision_msgs.msg import Detection2D, Detection2DArray, LabelInfo, ObjectHypothesisWithPose, VisionClass

from vision_factory.tools.message_lines import MAX_LINES, field_lines, summary
from vision_factory.tools.params import ros_value, shown_value
from vision_factory.tools.ros_graph import by_closeness, matching
from vision_factory.tools.topics import matching_qos, rate_line

ESC = "\x1b"
HEADER = Header(frame_id="camera")
HEADER.stamp.sec, HEADER.stamp.nanosec = 12, 250


def _detection(name: str, score: float) -> Detection2D:
    hypothesis = ObjectHypothesisWithPose()
    hypothesis.hypothesis.class_id, hypothesis.hypothesis.score = name, score
    return Detection2D(results=[hypothesis])


def test_detections_are_counted_with_each_class_and_score():
    message = Detection2DArray(header=HEADER, detections=[_detection("person", 0.914), _detection("car", 0.5)])
    line = summary("vision_msgs/msg/Detection2DArray", message, "/detections")
    assert line == "12.000000250 camera: 2 detections: person 0.91, car 0.50"
    empty = Detection2DArray(header=HEADER)
    assert summary("vision_msgs/msg/Detection2DArray", empty, "/detections") == "12.000000250 camera: 0 detections"


def test_a_hostile_class_name_or_frame_is_escaped_and_many_detections_stay_one_bounded_line():
    hostile = Header(frame_id=f"cam\n{ESC}[2J")
    names = [f"x{ESC}[31m\nforged line {'y' * 500}"] * 1000
    message = Detection2DArray(header=hostile, detections=[_detection(name, 0.9) for name in names])
    line = summary("vision_msgs/msg/Detection2DArray", message, "/detections")
    assert "\n" not in line and ESC not in line and "\\x1b[31m\\nforged" in line
    assert "1000 detections" in line and ", ... 990 more" in line and len(line) < 1500


def test_the_class_map_ball_and_depth_map_have_their_own_lines():
    labels = LabelInfo(header=HEADER, class_map=[VisionClass(class_id=0, class_name="circle")], threshold=0.25)
    assert summary("vision_msgs/msg/LabelInfo", labels, "/labels").endswith(": 1 class: 0 circle; threshold 0.25")
    seen = PointStamped(header=HEADER, point=Point(x=612.4, y=339.6, z=1.0))
    assert summary("geometry_msgs/msg/PointStamped", seen, "/ball").endswith(": ball at (612, 340)")
    unseen = PointStamped(header=HEADER, point=Point(x=0.0, y=0.0, z=0.0))
    assert summary("geometry_msgs/msg/PointStamped", unseen, "/ball").endswith(": ball not visible (z 0)")

    values = np.array([[1.5, np.nan], [4.25, 2.0]], "<f4")
    depth = Image(header=HEADER, height=2, width=2, encoding="32FC1", step=8, data=values.tobytes())
    assert summary("sensor_msgs/msg/Image", depth, "/cam/depth").endswith(": 2x2 32FC1 depth 1.5..4.25 m, 75 % valid")
    relative = summary("sensor_msgs/msg/Image", depth, "/relative_depth")
    assert relative.endswith("relative inverse depth 1.5..4.25 (no unit, larger is nearer), 75 % valid")
    camera = Image(header=HEADER, height=1, width=2, encoding="bgr8", step=6, data=bytes(6))
    assert summary("sensor_msgs/msg/Image", camera, "/image").endswith(": 2x1 bgr8, 6 bytes")


def test_a_point_cloud_counts_its_finite_points():
    points = np.array([[0, 0, 1.0], [np.nan, np.nan, np.nan], [1, 2, 3.5]], "<f4")
    fields = [PointField(name=name, offset=4 * i, datatype=PointField.FLOAT32, count=1) for i, name in enumerate("xyz")]
    cloud = PointCloud2(header=HEADER, height=1, width=3, fields=fields, point_step=12, row_step=36)
    cloud.data = points.tobytes()
    line = summary("sensor_msgs/msg/PointCloud2", cloud, "/points")
    assert line.endswith(": 3x1 points, fields x, y, z; 2 finite, z 1..3.5")
    cloud.data = points.tobytes()[:20]  # shorter than its size says: said, never read past
    assert "data shorter than 3 points" in summary("sensor_msgs/msg/PointCloud2", cloud, "/points")


def test_diagnostics_show_each_status_level_and_keys():
    status = DiagnosticStatus(level=DiagnosticStatus.WARN, name="yolo: inference", message="dropping")
    status.values = [KeyValue(key="frames in", value="12"), KeyValue(key="rate (answers/s)", value="9.5")]
    line = summary("diagnostic_msgs/msg/DiagnosticArray", DiagnosticArray(header=HEADER, status=[status]), "/d")
    assert line.splitlines() == [
        "12.000000250 camera: 1 status",
        "  WARN yolo: inference: dropping | frames in: 12; rate (answers/s): 9.5",
    ]


def test_any_other_message_is_shown_field_by_field_within_its_bounds():
    assert summary("std_msgs/msg/String", String(data="x"), "/chatter") is None
    lines = field_lines(String(data=f"hello{ESC}[2J\n" + "z" * 300), limit=20)
    assert lines == ["data: 'hello\\x1b[2J\\nzzzzzzzzzz... (290 more characters)'"]
    image = Image(header=HEADER, height=100, width=100, encoding="mono8", step=100, data=bytes(range(100)) * 100)
    lines = field_lines(image, limit=4)
    assert "data: [0, 1, 2, 3, ...]" in lines and "  frame_id: 'came... (2 more characters)'" in lines
    many = Detection2DArray(detections=[_detection(str(i), 0.5) for i in range(2000)])
    lines = field_lines(many, limit=10000)
    assert len(lines) == MAX_LINES + 1 and lines[-1].startswith("... ") and lines[-1].endswith(" more lines")


def test_values_are_read_as_ros_reads_p_values():
    assert ros_value("0.5") == 0.5 and ros_value("5") == 5 and ros_value("true") is True and ros_value("'5'") == "5"
    assert ros_value("abc") == "abc" and math.isnan(ros_value(".nan"))
    assert ros_value("[front, 'left', back]") == ["front", "left", "back"]
    assert (
        ros_value("[1, 2]") == [1, 2]
        and ros_value("[0.5, 1.0]") == [0.5, 1.0]
        and ros_value("['1', '2']") == ["1", "2"]
    )
    with pytest.raises(ValueError, match=r"mixes float and int items: a ROS list holds one type \(write 1.0"):
        ros_value("[1, 2.5]")
    with pytest.raises(ValueError, match="an empty list has no type"):
        ros_value("[]")
    with pytest.raises(ValueError, match="not a list of single values"):
        ros_value("[[1], 2]")
    assert (
        shown_value(["a", f"b{ESC}"]) == "[a, b\\x1b]" and shown_value(True) == "true" and shown_value(0.25) == "0.25"
    )


def test_names_are_taken_with_or_without_slash_and_namespace():
    nodes = ["/t/yolo", "/robot/depth", "/depth", "/a/cam", "/b/cam"]
    assert matching("yolo", nodes, "node") == "/t/yolo"  # the only one of that name, in its namespace
    assert matching("t/yolo", nodes, "node") == "/t/yolo" and matching("/t/yolo", nodes, "node") == "/t/yolo"
    assert matching("/yolo", nodes, "node") is None  # a leading slash: that name only
    assert matching("depth", nodes, "node") == "/depth"  # the root's first
    with pytest.raises(ValueError, match="node cam could be any of /a/cam, /b/cam: give the full name"):
        matching("cam", nodes, "node")
    assert by_closeness("/t/detection", ["/rosout", "/t/detections", "/t/labels"])[0] == "/t/detections"


def _publisher(reliability, durability) -> TopicEndpointInfo:
    return TopicEndpointInfo(qos_profile=QoSProfile(depth=1, reliability=reliability, durability=durability))


def test_a_reader_takes_the_qos_every_publisher_offers():
    reliable, best_effort = ReliabilityPolicy.RELIABLE, ReliabilityPolicy.BEST_EFFORT
    latched, volatile = DurabilityPolicy.TRANSIENT_LOCAL, DurabilityPolicy.VOLATILE
    qos = matching_qos([_publisher(reliable, latched)])
    assert (qos.reliability, qos.durability) == (reliable, latched)
    qos = matching_qos([_publisher(best_effort, volatile)])
    assert (qos.reliability, qos.durability) == (best_effort, volatile)
    qos = matching_qos([_publisher(reliable, latched), _publisher(best_effort, volatile)])
    assert (qos.reliability, qos.durability) == (best_effort, volatile)  # what both offer
    qos = matching_qos([])
    assert (qos.reliability, qos.durability) == (reliable, volatile)


def test_the_rate_is_the_mean_period_over_the_window():
    assert rate_line(deque([0.0, 0.1, 0.3])) == (
        "average rate: 6.667 Hz  period min 0.1000 s, max 0.2000 s, std dev 0.05000 s, window 3"
    )
    assert rate_line(deque([5.0])) == "waiting: 1 message(s) so far, a rate needs two"
