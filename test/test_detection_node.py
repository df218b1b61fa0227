"""Detection and pose nodes over real DDS: bags replayed through each family's node, the messages
checked against the core adapters (what `predict` runs) on the same frames."""

from __future__ import annotations

import json
import logging

import cv2
import numpy as np
import pytest
from conftest import pypi_model
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from support.data import _photo_frames, _red_spots
from support.models import spot_finder, wrap_yolo
from support.real_models import FALL_MODEL, NUDENET_MODEL, POSE_MODEL, SHAPES_IMAGES
from support.ros_harness import PATIENCE_S, NodeProcess, Probe, stamped_anew
from vision_msgs.msg import Detection2DArray, LabelInfo
from visualization_msgs.msg import Marker, MarkerArray

from vision_factory.families.registry import family
from vision_factory.models.fasterrcnn import FasterRCNNDetector
from vision_factory.models.yolo import YoloDetector
from vision_factory.parameters import with_defaults
from vision_factory.results.boxes import Boxes
from vision_factory.results.frame import FrameResult
from vision_factory.results.keypoints import COCO_KEYPOINTS, COCO_SKELETON
from vision_factory.ros.messages import bgr_to_message
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.streaming import PAIRING_WINDOW
from vision_factory.tools.bags import write_image_bag
from vision_factory.tools.replay import replay

LOG = logging.getLogger("test")


def _replayed(tmp_path, frames, node: str, params: dict[str, str]) -> list[list[dict]]:
    bag = write_image_bag(tmp_path / "bag", frames)
    result = replay(bag, tmp_path / "out", node=node, params=params)
    assert result.missing_frames == [], open(result.node_log).read()
    records = json.loads(open(result.answers).read())
    assert [record["frame"] for record in records] == list(range(len(frames)))  # stamps mapped back, in order
    return [record["detections"] for record in records]


def _same(published: list[dict], expected: FrameResult) -> None:
    boxes = expected.boxes
    assert [d["class_name"] for d in published] == list(boxes.labels)
    assert np.allclose([d["score"] for d in published], boxes.scores, atol=1e-6)
    assert np.allclose(np.reshape([d["xyxy"] for d in published], (-1, 4)), boxes.xyxy, atol=1e-6)
    for row, got in enumerate(published):
        assert ("keypoints" in got) == (expected.keypoints is not None)
        if expected.keypoints is not None:
            assert np.allclose(got["keypoints"], expected.keypoints.points[row], atol=1e-5)


def test_yolo_node_publishes_what_the_detector_finds(tmp_path):
    model = pypi_model(*NUDENET_MODEL)  # dynamic input, 18 named classes
    frames = _photo_frames()
    published = _replayed(tmp_path, frames, "yolo", {"model_path": str(model), "classes": "FACE_FEMALE,FACE_MALE"})
    names = YoloDetector(OnnxRunner.load(model, {}, LOG)).names
    faces = [names.index("FACE_FEMALE"), names.index("FACE_MALE")]
    detector = YoloDetector(OnnxRunner.load(model, {}, LOG), image_size=0, classes=faces)
    for frame, detections in zip(frames, published):
        _same(detections, detector.detect(frame))
    assert all(len(d) >= 1 for d in published[:4]) and all(len(d) >= 2 for d in published[4:])  # faces found


def test_yolo_pose_node_publishes_keypoints_markers_labels_and_a_debug_image(tmp_path):
    if not POSE_MODEL.is_file():
        pytest.skip(f"{POSE_MODEL} is not there (shared models, see ../shared/models/README)")
    module = "vision_factory.yolo_pose_onnx_node"
    node = NodeProcess(tmp_path, {"model_path": str(POSE_MODEL), "qos_reliability": "reliable"}, module=module)
    probe = Probe()
    try:
        topics = {"/t/poses": Detection2DArray, "/t/pose_markers": MarkerArray, "/t/debug_image": Image}
        answers = {topic: probe.subscribe(kind, topic) for topic, kind in topics.items()}
        publisher = probe.publisher(Image, "/t/image")
        ready = lambda: publisher.get_subscription_count() > 0 and probe.matched()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), node.log()
        frame = _photo_frames()[4]  # two people
        # the markers and the debug image are on demand: the frame goes again, stamped anew, until all three of one
        # stamp are in
        header, answered = probe.answered(stamped_anew(publisher, frame, first_sec=12), answers, node)
        message, skeleton, image = answered.values()
        # LabelInfo is transient local: a subscriber that comes late still gets the class map.
        labels = []
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        probe.node.create_subscription(LabelInfo, "/t/labels", labels.append, latched)
        assert probe.spin_until(lambda: labels, PATIENCE_S)
    finally:
        probe.close()
        node.stop()
    assert message.header == header
    expected = YoloDetector(OnnxRunner.load(POSE_MODEL, {}, LOG), pose=True).detect(frame)
    assert len(message.detections) == len(expected) >= 2
    people = zip(expected.boxes.xyxy, expected.boxes.scores, expected.keypoints.points)
    for item, (xyxy, score, keypoints) in zip(message.detections, people):
        assert item.header == header
        assert item.results[0].hypothesis.class_id == "person"
        assert item.results[0].hypothesis.score == pytest.approx(score)
        x1, y1, x2, y2 = xyxy
        assert (item.bbox.center.position.x, item.bbox.center.position.y) == pytest.approx(
            ((x1 + x2) / 2, (y1 + y2) / 2)
        )
        assert (item.bbox.size_x, item.bbox.size_y) == pytest.approx((x2 - x1, y2 - y1))
        assert [r.hypothesis.class_id for r in item.results[1:]] == list(COCO_KEYPOINTS)
        for result, (x, y, score) in zip(item.results[1:], keypoints):
            position = result.pose.pose.position
            assert (position.x, position.y, result.hypothesis.score) == pytest.approx((x, y, score))
    assert [(c.class_id, c.class_name) for c in labels[0].class_map] == [(0, "person")]
    assert labels[0].threshold == pytest.approx(0.25) and labels[0].header.stamp.sec > 1_700_000_000  # when published
    assert skeleton.markers[0].action == Marker.DELETEALL
    limbs = [m for m in skeleton.markers if m.type == Marker.LINE_LIST]
    joints = [m for m in skeleton.markers if m.type == Marker.POINTS]
    assert len(limbs) == len(joints) == len(expected)
    for joint, limb, keypoints in zip(joints, limbs, expected.keypoints.points):
        shown = [score > 0.5 for _, _, score in keypoints]
        assert len(joint.points) == sum(shown)
        assert len(limb.points) == 2 * sum(shown[a] and shown[b] for a, b in COCO_SKELETON)
        assert joint.header == limb.header == header
    assert limbs[0].points  # the clearest person has limbs
    assert image.header == header and (image.width, image.height) == (frame.shape[1], frame.shape[0])
    assert not np.array_equal(np.frombuffer(image.data, np.uint8).reshape(frame.shape), frame)  # drawn on


def test_fasterrcnn_node_on_a_wrapped_real_yolo(tmp_path):
    if not SHAPES_IMAGES.is_dir():
        pytest.skip(f"{SHAPES_IMAGES} is not there (shared data)")
    model = wrap_yolo(tmp_path / "wrapped.onnx", "tflite")
    frames = [cv2.imread(str(path)) for path in sorted(SHAPES_IMAGES.glob("*.jpg"))[:6]]
    published = _replayed(tmp_path, frames, "fasterrcnn", {"model_path": str(model)})
    detector = FasterRCNNDetector(OnnxRunner.load(model, {}, LOG))
    for frame, detections in zip(frames, published):
        _same(detections, detector.detect(frame))
    assert sum(map(len, published)) >= 10


def test_rtmpose_node_with_its_own_person_detector(tmp_path):
    pose_model = spot_finder(tmp_path / "spot.onnx")
    person_model = pypi_model(*FALL_MODEL)  # classes Normal and Fall: everyone it finds is a person
    frames = _red_spots(_photo_frames()[:4])
    params = {"model_path": str(pose_model), "person_detector_path": str(person_model), "confidence_threshold": "0.3"}
    published = _replayed(tmp_path, frames, "rtmpose", params)
    values = with_defaults(family("rtmpose").parameters, {**params, "confidence_threshold": 0.3}, "rtmpose")
    detector = family("rtmpose").build(values, lambda path: OnnxRunner.load(path, {}, LOG))
    for index, (frame, detections) in enumerate(zip(frames, published)):
        expected = detector.detect(frame)
        assert expected, index
        _same(detections, expected)
        spot = (150 + 5 * index, 200 + 7 * index)
        for person in detections:  # every keypoint where the spot is, if the spot is in the crop
            x1, y1, x2, y2 = person["xyxy"]
            if x1 + 20 < spot[0] < x2 - 20 and y1 + 20 < spot[1] < y2 - 20:
                assert np.allclose([k[:2] for k in person["keypoints"]], spot, atol=3)


def test_rtmpose_node_poses_the_people_of_a_detections_topic(tmp_path):
    pose_model = spot_finder(tmp_path / "spot.onnx")
    params = {"model_path": str(pose_model), "person_source": "topic", "person_class": "person"}
    # queue_size 4: the three pairs come in a burst (a detector's default queue keeps only the newest frame)
    live = {"qos_reliability": "reliable", "queue_size": "4"}
    node = NodeProcess(tmp_path, {**params, **live}, module="vision_factory.rtmpose_onnx_node")
    probe = Probe()
    frames = _red_spots(_photo_frames()[:3])
    boxes = [[((100, 150, 260, 300), "person"), ((0, 0, 50, 50), "dog")] for _ in frames]
    try:
        poses = probe.subscribe(Detection2DArray, "/t/poses")
        diagnostics = probe.subscribe(DiagnosticArray, "/diagnostics")
        images = probe.publisher(Image, "/t/image")
        people = probe.publisher(Detection2DArray, "/t/person_detections")
        ready = lambda: images.get_subscription_count() and people.get_subscription_count()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), node.log()
        for index, frame in enumerate(frames):
            header = Header(frame_id="camera")
            header.stamp.sec = 100 + index
            found = Boxes([xyxy for xyxy, _ in boxes[index]], [0.9] * 2, [-1] * 2, [name for _, name in boxes[index]])
            image, detections = bgr_to_message(frame, header), found.to_message(header)
            # The pairing by stamp works whichever of the two comes first.
            for message, publisher in ((image, images), (detections, people))[:: 1 if index % 2 else -1]:
                publisher.publish(message)
        assert probe.spin_until(lambda: len(poses) == len(frames), PATIENCE_S), node.log()
        for index in range(40):  # images whose person detections never come
            header = Header(frame_id="camera")
            header.stamp.sec = 200 + index
            images.publish(bgr_to_message(frames[0], header))
            probe.spin_until(lambda: False, 0.02)

        # All delivered before the node stops: it counts an image as in once PAIRING_WINDOW newer ones came (or at
        # its stop), so its count of frames in reaches 3 + 40 - PAIRING_WINDOW with the last image.
        def all_delivered() -> bool:
            status = next((s for a in reversed(diagnostics) for s in a.status if s.name == "rtmpose: inference"), None)
            return status is not None and any(v.key == "frames in" and v.value == delivered for v in status.values)

        delivered = str(3 + 40 - PAIRING_WINDOW)
        assert probe.spin_until(all_delivered, PATIENCE_S), node.log()
    finally:
        probe.close()
        node.stop()
    log = node.log()  # counted and reported once, never lost silently
    assert log.count("skipping frame (image without person detections)") == 1, log
    assert "image without person detections: 40" in log and "frames in 43, dropped 0, skipped 40, outputs 3" in log
    for index, message in enumerate(sorted(poses, key=lambda m: m.header.stamp.sec)):
        assert message.header.stamp.sec == 100 + index
        (person,) = message.detections  # the dog is not posed
        assert person.results[0].hypothesis.class_id == "person"
        spot = (150 + 5 * index, 200 + 7 * index)
        for result in person.results[1:]:
            assert (result.pose.pose.position.x, result.pose.pose.position.y) == pytest.approx(spot, abs=3)


@pytest.mark.parametrize(
    "module,params,message",
    [
        ("rtmpose", {"model_path": "{spot}"}, "person_detector_path is empty"),
        ("rtmpose", {"model_path": "{spot}", "person_source": "both"}, "person_source must be 'detector' or 'topic'"),
        ("yolo", {"model_path": "{fall}", "classes": "cat"}, "'cat' is neither a class id nor one of"),
        ("yolo", {"model_path": "{fall}", "labels_path": "{labels}"}, "3 class names given for a model with 2"),
        ("yolo", {"model_path": "{fall}", "labels_path": "/nonexistent.txt"}, "labels_path /nonexistent.txt"),
        ("fasterrcnn", {"model_path": "{fall}"}, "fasterrcnn"),
        ("yolo_pose", {}, "model_path is empty"),
    ],
)
def test_start_up_errors_are_clear(tmp_path, module, params, message):
    labels = tmp_path / "labels.txt"
    labels.write_text("a\nb\nc\n")
    paths = {"spot": spot_finder(tmp_path / "spot.onnx"), "fall": pypi_model(*FALL_MODEL), "labels": labels}
    params = {name: value.format(**paths) for name, value in params.items()}
    node = NodeProcess(tmp_path, params, module=f"vision_factory.{module}_onnx_node")
    assert node.wait(30) == 2
    node.stop()
    assert "cannot start" in node.log() and message in node.log()
