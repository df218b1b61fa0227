"""The Segment Anything node (sam_node, families/sam.py) over real DDS: another node's Detection2DArray on ``boxes``
paired by stamp with the image prompts it; its detections carry each box's class and ID, its ``masks`` label image
holds transformers' masks (reference.json, IoU >= 0.95: the architecture-true test exports, test/data/sam/); the
encoder runs once per frame and the decoder once per prompt (Meta's export), counted on /diagnostics; the same
pixels again reuse the embedding. "Detect, then segment": a YOLO node's detections prompt it, each mask carrying its
detection's class. Real nodes, real ONNX Runtime sessions."""

from __future__ import annotations

import sys

import cv2
import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from support.models import SHAPES_MODEL
from support.real_models import SHAPES_IMAGES
from support.ros_harness import PATIENCE_S, NodeProcess, Probe
from test_sam import DATA, REFERENCE, SKIMAGE, decoded, iou
from vision_msgs.msg import Detection2DArray

from vision_factory.results.boxes import Boxes
from vision_factory.results.masks import label_rows
from vision_factory.ros.messages import bgr_to_message

META = next(model for model in REFERENCE["models"] if model["layout"] == "meta")
BOX_CASES = [case for case in META["cases"] if case["kind"] == "boxes"]  # three images, three boxes each
CLASSES = ("person", "rocket", "cup")
TRACKS = (7, 3, 12)
IOU_MIN = 0.95


def _status(diagnostics: list, name: str) -> dict[str, str]:
    status = next((s for a in reversed(diagnostics) for s in a.status if s.name == name), None)
    return {} if status is None else {value.key: value.value for value in status.values}


def _sam_node(tmp_path, executable: list[str] | None = None) -> NodeProcess:
    params = {
        "model_path": str(DATA / META["encoder"]),
        "decoder_path": str(DATA / META["decoder"]),
        "qos_reliability": "reliable",
        "queue_size": "4",
    }
    return NodeProcess(tmp_path, params, module="vision_factory.sam_onnx_node", executable=executable)


def test_a_detection_topic_prompts_the_sam_node_each_mask_with_its_class_and_id(tmp_path):
    node = _sam_node(tmp_path)
    probe = Probe()
    frames = [cv2.imread(str(SKIMAGE / case["image"]), cv2.IMREAD_COLOR) for case in BOX_CASES]
    try:
        detections = probe.subscribe(Detection2DArray, "/t/detections")
        masks = probe.subscribe(Image, "/t/masks")
        diagnostics = probe.subscribe(DiagnosticArray, "/diagnostics")
        images = probe.publisher(Image, "/t/image")
        boxes = probe.publisher(Detection2DArray, "/t/boxes")
        ready = lambda: images.get_subscription_count() and boxes.get_subscription_count()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), node.log()
        sent = [(frame, case, case["prompts"]) for frame, case in zip(frames, BOX_CASES)]
        # the last frame's pixels again (a new stamp), one box: its cached embedding, no encoder run
        sent.append((frames[-1], BOX_CASES[-1], BOX_CASES[-1]["prompts"][:1]))
        for index, (frame, _, prompts) in enumerate(sent):
            header = Header(frame_id="camera")
            header.stamp.sec = 100 + index
            count = len(prompts)
            found = Boxes(prompts, [0.9] * count, [-1] * count, CLASSES[:count], None, TRACKS[:count])
            for message, publisher in ((bgr_to_message(frame, header), images), (found.to_message(header), boxes)):
                publisher.publish(message)
            probe.spin_until(lambda: False, 0.3)  # one pair at a time: the queue keeps each

        def counted() -> bool:
            values = _status(diagnostics, "sam: inference")
            return values.get("sam encoder runs") == "3" and values.get("sam decoder runs") == "10"

        assert probe.spin_until(lambda: len(detections) == len(sent) and len(masks) == len(sent), PATIENCE_S), (
            node.log()
        )
        counts = lambda: {k: v for k, v in _status(diagnostics, "sam: inference").items() if k.startswith("sam")}  # noqa: E731
        assert probe.spin_until(counted, PATIENCE_S), (counts(), node.log_tail())
    finally:
        probe.close()
        node.stop()
    by_stamp = {message.header.stamp.sec: message for message in detections}
    labels_by_stamp = {message.header.stamp.sec: label_rows(message) for message in masks}
    for index, (frame, case, prompts) in enumerate(sent):
        answer, labels = by_stamp[100 + index], labels_by_stamp[100 + index]
        assert labels.shape == frame.shape[:2]
        assert [d.results[0].hypothesis.class_id for d in answer.detections] == list(CLASSES[: len(prompts)])
        assert [d.id for d in answer.detections] == [str(track) for track in TRACKS[: len(prompts)]]
        for row, (detection, expected) in enumerate(zip(answer.detections, case["masks"])):
            assert detection.results[0].hypothesis.score == pytest.approx(expected["iou_score"], abs=0.01)
            truth = decoded(expected["bits"], frame.shape[:2])
            mine = labels == row + 1
            # where masks overlap the earlier row's label wins: compare on the pixels no earlier row holds
            free = ~np.isin(labels, range(1, row + 1))
            assert iou(mine, truth & free) >= IOU_MIN, (index, row)
            ys, xs = np.nonzero(truth)  # the box is the mask's own
            box = detection.bbox
            assert box.size_x == pytest.approx(xs.max() + 1 - xs.min(), abs=3)
            assert box.size_y == pytest.approx(ys.max() + 1 - ys.min(), abs=3)


def test_detect_then_segment_a_yolo_nodes_detections_prompt_the_sam_node(tmp_path):
    """A YOLO node (the shapes detector) on /d/image, its detections remapped to the SAM node's boxes; the same image
    with the same stamp to both: a mask per detection, each with the detection's class."""
    image = SHAPES_IMAGES / "0001.jpg"  # three shapes found (triangle, triangle, circle)
    frame = cv2.imread(str(image), cv2.IMREAD_COLOR)
    reliable = {"qos_reliability": "reliable", "queue_size": "4"}
    (tmp_path / "yolo").mkdir()
    yolo = NodeProcess(
        tmp_path / "yolo", {"model_path": str(SHAPES_MODEL), **reliable}, namespace="/d",
        module="vision_factory.yolo_onnx_node",
    )  # fmt: skip
    remapped = [sys.executable, "-m", "vision_factory.sam_onnx_node", "--ros-args", "-r", "boxes:=/d/detections"]
    node = _sam_node(tmp_path, executable=remapped)
    probe = Probe()
    try:
        found = probe.subscribe(Detection2DArray, "/d/detections")
        segmented = probe.subscribe(Detection2DArray, "/t/detections")
        masks = probe.subscribe(Image, "/t/masks")
        to_yolo, to_sam = probe.publisher(Image, "/d/image"), probe.publisher(Image, "/t/image")
        ready = lambda: to_yolo.get_subscription_count() and to_sam.get_subscription_count()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), yolo.log() + node.log()
        header = Header(frame_id="camera")
        header.stamp.sec = 100
        message = bgr_to_message(frame, header)
        to_sam.publish(message)
        to_yolo.publish(message)
        assert probe.spin_until(lambda: segmented and masks and found, PATIENCE_S), yolo.log_tail() + node.log_tail()
    finally:
        probe.close()
        node.stop()
        yolo.stop()
    (detected,), (answer,), (labels,) = found, segmented, [label_rows(m) for m in masks]
    assert len(detected.detections) > 0, "the shapes detector found nothing: no prompt to segment"
    assert answer.header.stamp == detected.header.stamp
    # each mask carries its detection's ID and class, in the detections' order (an empty mask gives no row)
    given = [(d.id, d.results[0].hypothesis.class_id) for d in detected.detections]
    carried = [(d.id, d.results[0].hypothesis.class_id) for d in answer.detections]
    assert carried and carried == [pair for pair in given if pair in carried], (given, carried)
    assert labels.shape == frame.shape[:2] and labels.max() == len(carried)
