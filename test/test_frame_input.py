"""A real yolo node over DDS fed unusual, damaged, lying and oversized frames: every frame it accepts is
answered with its own header, the others are counted and reported once per kind, the C libraries under
it print nothing, and a small file declaring a huge image is refused from its header (what a campaign does to a
node's memory is measured by benchmarks/fuzz_memory.py, not asserted here)."""

from __future__ import annotations

import logging
import re
import threading

import cv2
import numpy as np
import onnx
import pytest
import rclpy
from conftest import pypi_model
from onnx import TensorProto, helper, numpy_helper
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.serialization import serialize_message
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header
from support.data import UNUSUAL_SHAPES, _bytes_per_pixel, _damaged, huge_png
from support.real_models import NUDENET_MODEL, PHOTOS
from support.ros_harness import PATIENCE_S, NodeProcess, Probe, late_node_params
from vision_msgs.msg import Detection2DArray

from vision_factory.families.yolo import FAMILY as YOLO
from vision_factory.images import SUPPORTED_ENCODINGS, compressed_to_bgr, image_to_bgr
from vision_factory.models.yolo import YoloDetector
from vision_factory.ros.detection_node import DetectionNode
from vision_factory.ros.messages import image_from_cdr, message_to_bgr
from vision_factory.runtime.onnx_runner import OnnxRunner

LOG = logging.getLogger("test")
MODULE = "vision_factory.yolo_onnx_node"
# Every answer reaches the probe's LATE reader, also one published before the node's writer learnt of it.
PARAMS = {
    "qos_reliability": "reliable",
    "qos_depth": "500",
    "queue_size": "500",
    **late_node_params(["/t/detections"]),
}
ROS_LINE = re.compile(r"\[(INFO|WARN)\] \[\d+\.\d+\] \[t\.\w+\]: ")  # what the node logs; the libraries don't


def _header(index: int, frame_id: str = "camera") -> Header:
    header = Header(frame_id=frame_id)
    header.stamp.sec, header.stamp.nanosec = 1000 + index, 7
    return header


def _stamp(header: Header) -> int:
    return header.stamp.sec - 1000


def _send(probe: Probe, publisher, messages: list, answers: list, expected: int, timeout: float = PATIENCE_S) -> None:
    if publisher.get_subscription_count() == 0:
        assert probe.spin_until(lambda: publisher.get_subscription_count() > 0, PATIENCE_S), "the node never subscribed"
        # The count is our writer's match; the node's reader may match our writer a little later, and a volatile
        # reader drops what was written before (seen once in CI: the first frame never answered).
        probe.spin_until(lambda: False, 1.0)
    for message in messages:
        publisher.publish(message)
        probe.executor.spin_once(timeout_sec=0.002)  # take answers as they come: the node's writer keeps 10
    assert probe.spin_until(lambda: len(answers) >= expected, timeout), f"{len(answers)} answers of {expected}"
    probe.spin_until(lambda: False, 0.5)  # nothing more comes


def _padded_message(frame_rng: np.random.Generator, height: int, width: int, encoding: str, index: int) -> Image:
    step = width * _bytes_per_pixel(encoding) + 3  # padded rows
    data = frame_rng.integers(0, 256, step * height, dtype=np.uint8).tobytes()
    return Image(header=_header(index), width=width, height=height, encoding=encoding, step=step, data=data)


def test_yolo_node_answers_every_valid_but_unusual_frame(tmp_path):
    """Extreme aspect ratios, tiny and odd sizes, padded rows, every encoding: one answer each, as the core finds."""
    model = pypi_model(*NUDENET_MODEL)
    rng = np.random.default_rng(3)
    messages = []
    for height, width in UNUSUAL_SHAPES:  # 1x20000 rounded to 0 rows in the letterbox: no answer before
        for encoding in ("bgr8", "mono8", "yuyv"):
            messages.append(_padded_message(rng, height, width, encoding, len(messages)))
    for encoding in SUPPORTED_ENCODINGS:
        messages.append(_padded_message(rng, 5, 7, encoding, len(messages)))  # odd 4:2:2 widths failed before
    photo = PHOTOS["astronaut"][0]
    messages.append(_padded_message(rng, 3, 1600, "rgb8", len(messages)))
    step = photo.shape[1] * 3 + 64
    padded = np.zeros((photo.shape[0], step), np.uint8)
    padded[:, : photo.shape[1] * 3] = photo.reshape(photo.shape[0], -1)
    messages.append(
        Image(header=_header(len(messages)), width=photo.shape[1], height=photo.shape[0], encoding="bgr8", step=step)
    )
    messages[-1].data = padded.tobytes()
    node = NodeProcess(tmp_path, {"model_path": str(model), **PARAMS}, module=MODULE)
    probe = Probe()
    try:
        answers = probe.subscribe(Detection2DArray, "/t/detections", late=True)
        _send(probe, probe.publisher(Image, "/t/image"), messages, answers, len(messages))
    finally:
        probe.close()
        node.stop()
    assert sorted(_stamp(answer.header) for answer in answers) == list(range(len(messages))), node.log()
    assert all(answer.header.frame_id == "camera" and answer.header.stamp.nanosec == 7 for answer in answers)
    detector = YoloDetector(OnnxRunner.load(model, {}, LOG), image_size=0)
    for answer in answers:
        message = messages[_stamp(answer.header)]
        frame = image_to_bgr(message.width, message.height, message.encoding, message.step, message.data)
        assert len(answer.detections) == len(detector.detect(frame)), (message.width, message.height)
    assert len(answers[-1].detections) >= 1  # the photo's face: real detections, not only empty arrays
    assert "skipping" not in node.log() and "skipped 0" in node.log()


def _summary(log: str) -> dict[str, int]:
    """The counts per kind of the last 'frames with problems in all' line."""
    line = [line for line in log.splitlines() if "frames with problems in all, by kind:" in line][-1]
    counts = line.split("by kind: ", 1)[1]
    return {kind: int(count) for kind, count in (item.rsplit(": ", 1) for item in counts.split(", "))}


def test_compressed_campaign_is_refused_by_kind_quietly_and_in_bounded_memory(tmp_path):
    """Damaged, lying, garbage and huge compressed images among valid ones."""
    model = pypi_model(*NUDENET_MODEL)
    rng = np.random.default_rng(11)
    photo = PHOTOS["grace_hopper"][0]
    frame = cv2.resize(photo, (320, 384))
    png, jpeg = (cv2.imencode(ext, frame)[1].tobytes() for ext in (".png", ".jpg"))
    tiny = [cv2.imencode(".png", np.full((h, w, 3), 90, np.uint8))[1].tobytes() for h, w in ((1, 1), (1, 20000))]
    valid = [("png", png), ("jpeg", png), ("png", jpeg), ("jpeg", jpeg), *(("png", data) for data in tiny)]
    huge = huge_png()  # 30000x30000, under 1 MB: 2.7 GB decoded
    huge_jpeg = jpeg[:2] + b"\xff\xc0\x00\x11\x08\xfd\xe8\xfd\xe8\x03" + bytes(9) + b"\xff\xd9"  # 65000x65000
    bad = [(("png", "jpeg")[i % 2], _damaged((png, jpeg)[i % 2], rng)) for i in range(300)]
    bad += [("png", huge)] * 3 + [("jpeg", huge_jpeg)] * 5 + [("bmp", b"BM" + bytes(60)), ("jpeg", b"")] * 10
    bad += [("png", rng.integers(0, 256, rng.integers(1, 3000), dtype=np.uint8).tobytes()) for _ in range(50)]
    sent = [*valid, *valid, *bad]  # the valid frames first, to warm up on each accepted size, then mixed with the bad
    order = [*range(len(valid)), *(len(valid) + rng.permutation(len(valid) + len(bad)))]
    messages = [CompressedImage(header=_header(i), format=sent[k][0], data=sent[k][1]) for i, k in enumerate(order)]
    # What the core says of each: an answer (decoded, perhaps despite damage) or a refusal, by kind.
    expected, problems = [], {}
    count = lambda kind, detail="": problems.update({kind: problems.get(kind, 0) + 1})  # noqa: E731
    for i, message in enumerate(messages):
        try:
            compressed_to_bgr(message.data, warn=count)
            expected.append(i)
        except ValueError as exc:
            count(exc.kind)
    node = NodeProcess(tmp_path, {"model_path": str(model), "input_transport": "compressed", **PARAMS}, module=MODULE)
    probe = Probe()
    try:
        answers = probe.subscribe(Detection2DArray, "/t/detections", late=True)
        publisher = probe.publisher(CompressedImage, "/t/image/compressed")
        _send(probe, publisher, messages[: len(valid)], answers, len(valid))
        lines_before = len(node.log().splitlines())
        _send(probe, publisher, messages[len(valid) :], answers, len(expected))
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert sorted(_stamp(answer.header) for answer in answers) == expected, log[-3000:]
    assert len(expected) >= 2 * len(valid)
    assert [line for line in log.splitlines() if not ROS_LINE.match(line)] == []  # no libpng/libjpeg/OpenCV line
    assert _summary(log) == problems and problems["image too large"] == 8  # every problem counted by its kind
    lines = len(log.splitlines()) - lines_before  # the campaign's and the stop's lines
    assert lines / len(bad) < 0.03, log
    print(f"compressed campaign: {lines} log lines for {len(bad)} bad messages")


def test_raw_campaign_of_varied_bad_messages_gives_a_few_safe_lines(tmp_path):
    """Sizes, steps, lengths and encodings that change with every message; encodings that try to forge lines."""
    model = pypi_model(*NUDENET_MODEL)
    rng = np.random.default_rng(5)
    good = PHOTOS["astronaut"][0][::4, ::4].copy()
    bad = []
    for index in range(400):
        width, height = (int(v) for v in rng.integers(1, 3000, 2))
        way = index % 6
        if way == 0:  # data cut short
            message = Image(width=width, height=height, encoding="bgr8", step=3 * width, data=bytes(width))
        elif way == 1:  # step smaller than a row
            message = Image(width=width, height=height, encoding="rgb8", step=width, data=bytes(width * height))
        elif way == 2:  # an encoding of its own, with control characters and escapes that would forge a line
            encoding = f"x{index}\n[ERROR] [1.0] [yolo]: forged {index}\x1b[31m" + "y" * int(rng.integers(0, 5000))
            message = Image(width=4, height=4, encoding=encoding, step=12, data=bytes(48))
        elif way == 3:  # no pixels
            message = Image(width=0, height=height, encoding="mono8", step=0, data=b"")
        elif way == 4:  # declares more than 8K
            message = Image(width=10000 + width, height=5000 + height, encoding="mono8", step=10000 + width)
        else:  # 4:2:2 with a step shorter than the row
            message = Image(width=width, height=1, encoding="uyvy", step=width, data=bytes(width))
        message.header = _header(index, frame_id=f"cam\n{index}")
        bad.append(message)
    goods = []
    for index in range(400, 410):
        width, height, encoding, step = good.shape[1], good.shape[0], "bgr8", good.shape[1] * 3
        goods.append(Image(header=_header(index), width=width, height=height, encoding=encoding, step=step))
        goods[-1].data = good.tobytes()
    messages = [*goods[:5], *bad, *goods[5:]]
    node = NodeProcess(tmp_path, {"model_path": str(model), **PARAMS}, module=MODULE)
    probe = Probe()
    try:
        answers = probe.subscribe(Detection2DArray, "/t/detections", late=True)
        publisher = probe.publisher(Image, "/t/image")
        _send(probe, publisher, messages[:1], answers, 1)
        lines_before = len(node.log().splitlines())
        _send(probe, publisher, messages[1:], answers, len(goods))
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert sorted(_stamp(answer.header) for answer in answers) == list(range(400, 410))
    lines = log.splitlines()
    campaign_lines = len(lines) - lines_before  # the campaign's and the stop's lines
    assert campaign_lines / len(bad) < 0.03, log  # 0.4-0.6 per bad message when reports were keyed by text
    print(f"raw campaign: {campaign_lines} log lines for {len(bad)} bad messages")
    assert _summary(log) == {
        "image data too short": 67,
        "step too small": 67 + 66,
        "unsupported encoding": 67,
        "image has no pixels": 67,
        "image too large": 66,
    }
    assert not [line for line in lines if "forged" in line and not line.startswith("[WARN]")]  # no forged line
    assert max(len(line) for line in lines) < 1000  # untrusted text cut
    assert "\x1b" not in log


@pytest.mark.parametrize("encoding", SUPPORTED_ENCODINGS)
def test_images_read_from_their_serialized_bytes_equal_rclpy_messages(encoding):
    """image_from_cdr (the nodes' raw subscription) gives the fields rclpy would, its pixels a view of the bytes."""
    frame_rng = np.random.default_rng(3)
    for index, (height, width) in enumerate(((5, 7), (2, 1), (33, 64))):
        message = _padded_message(frame_rng, height, width, encoding, index)
        message.header.frame_id = "é" * index  # text of any length, not only ASCII
        message.header.stamp.sec = -index  # int32
        message.is_bigendian = index % 2
        data = serialize_message(message)
        view = image_from_cdr(data)
        assert (view.header, view.height, view.width, view.encoding, view.step) == (
            message.header,
            message.height,
            message.width,
            message.encoding,
            message.step,
        )
        assert view.is_bigendian == message.is_bigendian and bytes(view.data) == bytes(message.data)
        assert np.shares_memory(np.frombuffer(view.data, np.uint8), np.frombuffer(data, np.uint8))
        assert np.array_equal(message_to_bgr(view), message_to_bgr(message))


def test_serialized_images_cut_short_are_counted_and_the_node_goes_on(tmp_path):
    """The node reads raw images from their serialized bytes (no rclpy deserialization): bytes that end inside a
    field are one kind of problem, counted, and the frames after them are still answered with their headers."""
    model = pypi_model(*NUDENET_MODEL)
    good = PHOTOS["astronaut"][0][::4, ::4].copy()

    def serialized(index: int) -> bytes:
        height, width = good.shape[:2]
        message = Image(header=_header(index), width=width, height=height, encoding="bgr8", step=3 * width)
        message.data = good.tobytes()
        return serialize_message(message)

    whole = serialized(0)
    cuts = [6, 12, 30, 40, 52, len(whole) - 1000]  # inside the stamp, frame_id, size, encoding, step, pixels
    messages = [serialized(index) for index in range(400, 403)]
    messages += [whole[:cut] for cut in cuts]
    messages += [serialized(index) for index in range(403, 406)]
    node = NodeProcess(tmp_path, {"model_path": str(model), **PARAMS}, module=MODULE)
    probe = Probe()
    try:
        answers = probe.subscribe(Detection2DArray, "/t/detections", late=True)
        _send(probe, probe.publisher(Image, "/t/image"), messages, answers, 6)
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert sorted(_stamp(answer.header) for answer in answers) == list(range(400, 406)), log
    assert _summary(log) == {"malformed image message": len(cuts)}, log
    assert f"frames in {len(messages)}, dropped 0, skipped {len(cuts)}, outputs 6" in log


def _lying_model(path) -> str:
    """A YOLO-shaped model whose output name and class names try to forge log lines and flood them."""
    forged = "\n[ERROR] [1.0] [yolo]: forged\x1b[2J"
    output = f"output0{forged}"
    graph = helper.make_graph(
        [helper.make_node("Identity", ["value"], [output])],
        "lying",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, [1, 6, 100])],
        [numpy_helper.from_array(np.zeros((1, 6, 100), np.float32), "value")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    names = {0: f"a{forged}", 1: "b" * 20000}
    helper.set_model_props(model, {"names": repr(names)})
    onnx.save(model, path)
    return str(path)


@pytest.mark.parametrize("module,params", [("yolo", {"classes": "cat"}), ("fasterrcnn", {})])
def test_model_text_in_start_up_errors_is_one_bounded_line(tmp_path, module, params):
    """Class names and output names from the model file end up in start-up errors: escaped and cut."""
    model = _lying_model(tmp_path / "lying.onnx")
    node = NodeProcess(tmp_path, {"model_path": model, **params}, module=f"vision_factory.{module}_onnx_node")
    assert node.wait(30) == 2
    node.stop()
    lines = node.log().splitlines()
    (fatal,) = [line for line in lines if "cannot start" in line]
    assert "forged" in fatal and "\\n[ERROR]" in fatal  # quoted in the one line
    assert all(ROS_LINE.match(line) or line.startswith("[FATAL]") for line in lines), lines
    assert "\x1b" not in node.log() and max(map(len, lines)) < 2500


class _QuickReportingNode(DetectionNode):
    problems_period = 0.3


def test_problem_counts_are_logged_while_new_ones_come_and_only_then(capfd):
    """The counts per kind follow periodically while problems come, and not when none came since."""
    context = rclpy.Context()
    rclpy.init(context=context)
    model = str(pypi_model(*NUDENET_MODEL))
    # queue_size 4: the bad frames come in a burst (a detector's default queue keeps only the newest frame)
    overrides = [Parameter("model_path", value=model), Parameter("queue_size", value=4)]
    node = _QuickReportingNode(OnnxRunner, YOLO, context=context, parameter_overrides=overrides)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinning = threading.Thread(target=lambda: executor.spin(), daemon=True)
    spinning.start()
    probe = Probe()
    try:
        publisher = probe.publisher(Image, "/image")
        assert probe.spin_until(lambda: publisher.get_subscription_count() > 0, PATIENCE_S)
        capfd.readouterr()

        def logged(count_line: str) -> str:
            """What the node logs until ``count_line`` (however long that takes), then over four periods more."""
            err = ""

            def seen() -> bool:
                nonlocal err
                err += capfd.readouterr().err
                return count_line in err

            assert probe.spin_until(seen, PATIENCE_S), err
            probe.spin_until(lambda: False, 4 * _QuickReportingNode.problems_period)  # nothing new: nothing said
            return err + capfd.readouterr().err

        bad = Image(header=_header(0), width=4, height=4, encoding="32FC1", step=64, data=bytes(256))
        for _ in range(3):
            publisher.publish(bad)
        first = logged("frames with problems so far, by kind: unsupported encoding: 3")
        publisher.publish(Image(header=_header(1), width=4, height=4, encoding="bgr8", step=12, data=bytes(4)))
        second = logged("image data too short: 1")
    finally:
        probe.close()
        executor.shutdown()
        node.close()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    assert first.count("skipping frame (unsupported encoding)") == 1
    # Once per period while new ones come: once, or (a loaded machine spreading the three over periods) each
    # count once, rising.
    counts = re.findall(r"frames with problems so far, by kind: unsupported encoding: (\d)", first)
    assert counts in (["3"], ["1", "3"], ["2", "3"], ["1", "2", "3"]), first
    assert first.count("frames with problems") == len(counts)
    assert second.count("frames with problems so far, by kind: unsupported encoding: 3, image data too short: 1") == 1
    assert second.count("frames with problems") == 1


if __name__ == "__main__":
    pytest.main([__file__, "-s"])
