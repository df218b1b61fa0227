"""Parameters that do what they say (parameters.py's Parameter.applies, ros/node_live.py): every node parameter of
every family is live (set on a running node, it applies from the next frame), configure-time (refused on a
configured node with the reason and the way to change it) or start-time (read-only). The table below is the
specification, written out here, not read from the code; then, per family, a real node over real DDS whose live
parameter, set while it runs, changes the answer to the next frame, and whose configure-time one is refused with
the reason (before, a threshold set at run time was answered successful and did nothing until a reconfigure)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import skimage.data
from geometry_msgs.msg import PointStamped
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.parameter import Parameter as RosParameter
from rclpy.parameter_client import AsyncParameterClient
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from support.data import _photo_frames, _red_spots
from support.models import _constant_model, spot_finder, wrap_yolo
from support.nodes import _yolo_output
from support.real_models import POSE_MODEL, SHAPES_IMAGES
from support.ros_harness import PATIENCE_S, NodeProcess, Probe
from vision_msgs.msg import Classification, Detection2DArray

from vision_factory.families.registry import NODE_FAMILIES
from vision_factory.parameters import APPLIES, CONFIGURE, LIVE, START
from vision_factory.results.boxes import Boxes
from vision_factory.ros.detect_3d_node import PARAMETERS as DETECT_3D
from vision_factory.ros.messages import bgr_to_message
from vision_factory.runtime.backends import BACKENDS
from vision_factory.tools.synthetic import BallClip, build_tracknet_model

DEPTH = Path(__file__).resolve().parent / "data" / "depth"
DETR_MODEL = Path(__file__).resolve().parent / "data" / "detr_heads" / "rtdetr-hf.onnx"
OWLV2_MODEL = Path(__file__).resolve().parent / "data" / "open_vocab" / "owl" / "owlv2.onnx"
SAM_ENCODER = Path(__file__).resolve().parent / "data" / "sam" / "meta-encoder.onnx"  # its decoder beside it
YOLO_TASKS = Path(__file__).resolve().parent / "data" / "yolo_tasks"
FLORENCE2 = Path(__file__).resolve().parent / "data" / "florence2"  # an export folder

# The specification: the live parameters of each node (everything else configure-time, but autostart: start-time).
IMAGE_INPUT_LIVE = {"max_image_pixels", "max_frame_age"}
DETECTOR_LIVE = {"confidence_threshold", "iou_threshold", "max_detections", "classes"}
TRACKER_LIVE = {
    "track_high_threshold",
    "track_low_threshold",
    "track_new_threshold",
    "track_match_threshold",
    "track_buffer",
    "track_reentry_buffer",
    "track_per_class",
}  # the appearance thresholds are the re-id model's or calibrated online at configure
LIVE_PARAMETERS = {
    "tracknet": {"heatmap_threshold", "flush_timeout", "trajectory_length"},
    "yolo": DETECTOR_LIVE | {"mask_encoding"} | TRACKER_LIVE,
    "yolo_pose": DETECTOR_LIVE | {"keypoint_threshold"} | TRACKER_LIVE,
    "fasterrcnn": DETECTOR_LIVE - {"iou_threshold"} | TRACKER_LIVE,
    "detr": DETECTOR_LIVE - {"iou_threshold"} | TRACKER_LIVE,
    "rtmpose": {"person_class", "confidence_threshold", "iou_threshold", "max_detections", "score_mode"}
    | {"keypoint_threshold"},
    "track": TRACKER_LIVE,
    "depth": {"processor_size", "resize_filter", "max_depth"},
    "open_vocab": {"prompt", "confidence_threshold", "text_threshold", "iou_threshold", "max_detections"},
    "sam": {"prompt", "prompt_class", "confidence_threshold", "max_prompts", "mask_encoding"},
    "yolo_cls": {"top_k", "classes"},
    "florence2": {"prompt", "confidence_threshold", "max_new_tokens", "num_beams"},
}


@pytest.mark.parametrize("name", sorted(NODE_FAMILIES))
def test_each_node_parameter_is_live_configure_time_or_start_time_as_specified(name):
    spec = NODE_FAMILIES[name]
    parameters = (*spec.node_parameters, *(p for backend in BACKENDS.values() for p in backend.parameters))
    assert all(parameter.applies in APPLIES for parameter in parameters)
    assert {p.name for p in parameters if p.applies == LIVE} == LIVE_PARAMETERS[name] | IMAGE_INPUT_LIVE
    assert {p.name for p in parameters if p.applies == START} == {"autostart"}
    assert {p.name for p in parameters if p.applies == CONFIGURE} >= {"input_transport", "cameras", "queue_size"}
    assert all(p.applies == CONFIGURE for backend in BACKENDS.values() for p in backend.parameters)


def test_the_3d_nodes_fractions_are_live():
    assert {p.name for p in DETECT_3D if p.live} == {"core_fraction", "min_valid_fraction"} | IMAGE_INPUT_LIVE


# Each family's node over DDS.


@dataclass
class Case:
    """A family's node and what to show of it: ``send(probe, stamp)`` publishes one frame (and its partner) of
    ``stamp`` seconds on the node's inputs (``inputs``: topic -> type); ``seen(message)`` what its answer on
    ``output`` shows; ``live`` the parameters set while it runs; ``configure`` a configure-time one."""

    module: str
    params: dict[str, str]
    output: tuple[str, type]
    seen: Callable[[Any], Any]
    live: dict[str, Any]
    configure: tuple[str, Any]
    inputs: dict[str, type] = field(default_factory=lambda: {"/t/image": Image})
    send: Callable[[dict, int], None] | None = None


def _header(stamp: int) -> Header:
    header = Header(frame_id="camera")
    header.stamp.sec, header.stamp.nanosec = stamp, 250
    return header


def _image_sender(frame: np.ndarray) -> Callable[[dict, int], None]:
    def send(publishers: dict, stamp: int) -> None:
        publishers["/t/image"].publish(bgr_to_message(frame, _header(stamp)))

    return send


def _paired_sender(frame: np.ndarray, topic: str, boxes: list[tuple[tuple, str]]) -> Callable[[dict, int], None]:
    """The frame and ``boxes`` (xyxy, class name; score 0.9) on ``topic``, of one stamp."""

    def send(publishers: dict, stamp: int) -> None:
        header = _header(stamp)
        found = Boxes([xyxy for xyxy, _ in boxes], [0.9] * len(boxes), [-1] * len(boxes), [n for _, n in boxes])
        publishers[topic].publish(found.to_message(header))
        publishers["/t/image"].publish(bgr_to_message(frame, header))

    return send


def _classes(message) -> list[str]:
    return [detection.results[0].hypothesis.class_id for detection in message.detections]


def _ids(message) -> list[str]:
    return [detection.id for detection in message.detections]


def _count(message) -> int:
    return len(message.detections)


def _listed(message) -> list[str]:
    return [result.class_id for result in message.results]


def _finite(message) -> int:
    values = np.frombuffer(bytes(message.data), "<f4")
    return int(np.isfinite(values).sum())


def _case(name: str, tmp_path: Path) -> Case:
    if name == "yolo":  # a constant model: a square at 0.9 whatever the frame
        model = _constant_model(tmp_path / "m.onnx", _yolo_output())
        params = {"model_path": str(model)}
        return Case("yolo", params, ("/t/detections", Detection2DArray), _classes, {"confidence_threshold": 0.95},
                    ("model_path", str(model)), send=_image_sender(np.zeros((256, 256, 3), np.uint8)))  # fmt: skip
    if name == "yolo_pose":  # two people in the photo
        params = {"model_path": str(POSE_MODEL)}
        return Case("yolo_pose", params, ("/t/poses", Detection2DArray), _count, {"max_detections": 1},
                    ("image_size", 320), send=_image_sender(_photo_frames()[4]))  # fmt: skip
    if name == "fasterrcnn":  # the shapes model wrapped: boxes, scores and labels outputs
        frame = cv2.imread(str(SHAPES_IMAGES / "0004.jpg"))  # five shapes
        params = {"model_path": str(wrap_yolo(tmp_path / "wrapped.onnx", "tflite"))}
        return Case("fasterrcnn", params, ("/t/detections", Detection2DArray), _count, {"max_detections": 1},
                    ("resize", "letterbox"), send=_image_sender(frame))  # fmt: skip
    if name == "detr":
        params = {"model_path": str(DETR_MODEL), "confidence_threshold": "0.0"}
        return Case("detr", params, ("/t/detections", Detection2DArray), _count, {"max_detections": 1},
                    ("score_function", "softmax"), send=_image_sender(_photo_frames()[0]))  # fmt: skip
    if name == "rtmpose":  # another node's person and dog, both posed until person_class keeps the person alone
        frame = _red_spots(_photo_frames()[:1])[0]
        params = {"model_path": str(spot_finder(tmp_path / "spot.onnx")), "person_source": "topic"}
        boxes = [((100, 150, 260, 300), "person"), ((0, 0, 50, 50), "dog")]
        inputs = {"/t/image": Image, "/t/person_detections": Detection2DArray}
        send = _paired_sender(frame, "/t/person_detections", boxes)
        return Case("rtmpose", params, ("/t/poses", Detection2DArray), _classes, {"person_class": "person"},
                    ("person_source", "detector"), inputs, send)  # fmt: skip
    if name == "track":  # a person at 0.9 each frame: tracked, until 0.9 is under the low threshold
        frame = _photo_frames()[0]
        inputs = {"/t/image": Image, "/t/detections": Detection2DArray}
        live = {"track_high_threshold": 0.95, "track_low_threshold": 0.95}  # in this order: low <= high each time
        return Case("track", {}, ("/t/tracks", Detection2DArray), _ids, live, ("reid_model_path", "reid.onnx"),
                    inputs, _paired_sender(frame, "/t/detections", [((100, 100, 300, 400), "person")]))  # fmt: skip
    if name == "tracknet":  # the ball seen, until the heatmap threshold is its peak's maximum
        model = build_tracknet_model(tmp_path / "tracknet.onnx", 8, "")
        frame = next(iter(BallClip(num_frames=1, width=512, height=288, seed=3).frames()))
        params = {"model_path": str(model), "bg_mode": "''", "seq_len": "8", "flush_timeout": "0.5"}
        return Case("tracknet", params, ("/t/ball", PointStamped), lambda ball: ball.point.z,
                    {"heatmap_threshold": 1.0}, ("seq_len", 4), send=_image_sender(frame))  # fmt: skip
    if name == "depth":  # metres everywhere, until max_depth is under every pixel's
        frame = np.ascontiguousarray(skimage.data.coffee()[..., ::-1])
        params = {"model_path": str(DEPTH / "depth-anything-metric.onnx"), "depth_kind": "metric"}
        return Case("depth", params, ("/t/depth", Image), _finite, {"max_depth": 1e-6}, ("depth_kind", "relative"),
                    send=_image_sender(frame))  # fmt: skip
    if name == "open_vocab":  # OWLv2 finds 3 astronauts and flags (test_open_vocab.py's reference), until 1 at most
        frame = np.ascontiguousarray(skimage.data.astronaut()[..., ::-1])
        params = {"model_path": str(OWLV2_MODEL), "prompt": "'an astronaut . a flag'", "confidence_threshold": "0.72"}
        return Case("open_vocab", params, ("/t/detections", Detection2DArray), _count, {"max_detections": 1},
                    ("owl_variant", "owlvit"), send=_image_sender(frame))  # fmt: skip
    if name == "sam":  # another node's person and dog boxes, both segmented until prompt_class keeps the person alone
        frame = np.ascontiguousarray(skimage.data.astronaut()[..., ::-1])
        boxes = [((150, 20, 370, 500), "person"), ((0, 0, 160, 220), "dog")]
        inputs = {"/t/image": Image, "/t/boxes": Detection2DArray}
        return Case("sam", {"model_path": str(SAM_ENCODER)}, ("/t/detections", Detection2DArray), _classes,
                    {"prompt_class": "person"}, ("decoder_path", "other-decoder.onnx"), inputs,
                    _paired_sender(frame, "/t/boxes", boxes))  # fmt: skip
    if name == "yolo_cls":  # the classify export's top 5 of the coffee photo, until top_k lists 2
        frame = np.ascontiguousarray(skimage.data.coffee()[..., ::-1])
        params = {"model_path": str(YOLO_TASKS / "yolo11n-cls.onnx")}
        return Case("yolo_cls", params, ("/t/classification", Classification), _listed, {"top_k": 2},
                    ("image_size", 128), send=_image_sender(frame))  # fmt: skip
    if name == "florence2":  # <OD> on the coffee photo gives 2 boxes (test_florence2.py's reference), until a
        # max_new_tokens of 1 leaves room for the forced </s> only
        frame = np.ascontiguousarray(skimage.data.coffee()[..., ::-1])
        params = {"model_path": str(FLORENCE2), "prompt": "'<OD>'", "max_new_tokens": "48", "num_beams": "1"}
        return Case("florence2", params, ("/t/detections", Detection2DArray), _count, {"max_new_tokens": 1},
                    ("model_path", "other-export"), send=_image_sender(frame))  # fmt: skip
    raise AssertionError(name)


def _changed(name: str, before: Any, after: Any) -> bool:
    """Whether the answer to the next frame shows the live change (written out per family)."""
    return {
        "yolo": lambda: before == ["square"] and after == [],
        "yolo_pose": lambda: before >= 2 and after == 1,
        "fasterrcnn": lambda: before >= 2 and after == 1,
        "detr": lambda: before >= 2 and after == 1,
        "rtmpose": lambda: sorted(before) == ["dog", "person"] and after == ["person"],
        "track": lambda: before == ["1"] and after == [""],
        "tracknet": lambda: before == 1.0 and after == 0.0,
        "depth": lambda: before > 0 and after == 0,
        "open_vocab": lambda: before >= 2 and after == 1,
        "sam": lambda: sorted(before) == ["dog", "person"] and after == ["person"],
        "yolo_cls": lambda: len(before) == 5 and after == before[:2],
        "florence2": lambda: before >= 1 and after == 0,
    }[name]()


@pytest.mark.parametrize("name", sorted(NODE_FAMILIES))
def test_a_live_parameter_changes_the_next_frames_answer_and_a_configure_time_one_is_refused(tmp_path, name):
    if name in ("yolo_pose",) and not POSE_MODEL.is_file() or name == "fasterrcnn" and not SHAPES_IMAGES.is_dir():
        pytest.skip("the shared models and data are not there (../shared)")
    case = _case(name, tmp_path)
    params = {**case.params, "qos_reliability": "reliable", "queue_size": "4"}
    node = NodeProcess(tmp_path, params, module=f"vision_factory.{case.module}_onnx_node")
    probe = Probe()
    stamps = iter(range(1, 10_000))
    try:
        topic, kind = case.output
        answers = probe.subscribe(kind, topic)
        publishers = {
            input_topic: probe.publisher(kind_in, input_topic) for input_topic, kind_in in case.inputs.items()
        }
        client = AsyncParameterClient(probe.node, f"/t/{name}")
        ready = lambda: all(p.get_subscription_count() > 0 for p in publishers.values())  # noqa: E731
        assert probe.spin_until(lambda: ready() and client.services_are_ready(), PATIENCE_S), node.log()

        def answer() -> Any:
            def send() -> Header:
                stamp = next(stamps)
                case.send(publishers, stamp)
                return _header(stamp)

            _, found = probe.answered(send, {topic: answers}, node)
            return case.seen(found[topic])

        if name == "track":  # a track is confirmed on its second frame
            answer()
        before = answer()
        changes = [RosParameter(parameter, value=value) for parameter, value in case.live.items()]
        results = probe.answer(lambda: client.set_parameters(changes)).results
        assert all(result.successful for result in results), [result.reason for result in results]
        after = answer()
        assert _changed(name, before, after), (before, after, node.log_tail())

        parameter, value = case.configure
        (refused,) = probe.answer(lambda: client.set_parameters([RosParameter(parameter, value=value)])).results
        assert not refused.successful
        assert refused.reason.startswith(f"{parameter} takes effect at configure: deactivate and clean up"), refused
        assert f"ros2 lifecycle set /t/{name} deactivate" in refused.reason
        assert answer() == after  # it goes on as it was
        (described,) = probe.answer(lambda: client.describe_parameters([next(iter(case.live))])).descriptors
        assert isinstance(described, ParameterDescriptor) and described.description.endswith(
            "[live: set on a running node, it applies from the next frame]"
        )
    finally:
        probe.close()
        node.stop()
    assert "from the next frame: " in node.log() and "Traceback" not in node.log()
