"""The Segment Anything node (sam_node, families/sam.py) over real DDS: another node's Detection2DArray on ``boxes``
paired by stamp with the image prompts it; its detections carry each box's class and ID, its ``masks`` label image
holds transformers' masks (reference.json, IoU >= 0.95: the architecture-true test exports, test/data/sam/); the
encoder runs once per frame and the decoder once per prompt (Meta's export), counted on /diagnostics; the same
pixels again reuse the embedding. "Detect, then segment": a YOLO node's detections prompt it, each mask carrying its
detection's class. Points given by ~/set_prompt are answered at once on the last frame with its cached embedding, then
on each new frame, until an empty prompt on ~/prompt clears them. Real nodes, real ONNX Runtime sessions."""

from __future__ import annotations

import sys

import cv2
import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import Image
from std_msgs.msg import Header, String
from support.models import SHAPES_MODEL
from support.prompted import prompted_node
from support.real_models import SHAPES_IMAGES
from support.ros_harness import PATIENCE_S, NodeProcess, Probe
from test_sam import DATA, REFERENCE, SKIMAGE, decoded, iou
from vision_msgs.msg import Detection2DArray

from vision_factory.results.boxes import Boxes
from vision_factory.results.masks import label_rows
from vision_factory.ros.messages import bgr_to_message

META = next(model for model in REFERENCE["models"] if model["layout"] == "meta")
BOX_CASES = [case for case in META["cases"] if case["kind"] == "boxes"]  # three images, three boxes each
POINT_CASES = [case for case in META["cases"] if case["kind"] == "points"]  # the same images, three points each
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
        ready = lambda: images.get_subscription_count() and boxes.get_subscription_count() and probe.matched()  # noqa: E731
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
        # the SAM node's boxes subscription matched too (the probe's and the SAM node's on /d/detections): a box
        # array published before it matched is lost, and its image then waits for boxes that never come
        boxes_matched = lambda: probe.node.count_subscribers("/d/detections") >= 2  # noqa: E731
        ready = lambda: to_yolo.get_subscription_count() and to_sam.get_subscription_count() and boxes_matched()  # noqa: E731
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


def test_points_by_the_prompt_service_are_answered_on_the_last_frame_with_its_embedding(tmp_path):
    """A frame with a box from the topic, then a point by ~/set_prompt: answered at once on that frame (its stamp),
    the box's mask and the point's (transformers' masks, reference.json), no second encoder run; a bad prompt refused
    by the service with its reason; a new frame of the same pixels answered with both; an empty prompt on ~/prompt
    clears the point (answered on that last frame, the box alone); bad prompts on the topic logged once, counted."""
    from vision_factory_interfaces.srv import SetPrompt

    boxes_case = next(case for case in BOX_CASES if case["image"] == "astronaut.png")
    points_case = next(case for case in POINT_CASES if case["image"] == "astronaut.png")
    box, box_mask = boxes_case["prompts"][2], boxes_case["masks"][2]
    (x, y), point_mask = points_case["prompts"][1], points_case["masks"][1]
    frame = cv2.imread(str(SKIMAGE / "astronaut.png"), cv2.IMREAD_COLOR)
    node = _sam_node(tmp_path)
    probe = Probe()
    try:
        ends = prompted_node(probe, node, "sam")
        masks = probe.subscribe(Image, "/t/masks")
        diagnostics = probe.subscribe(DiagnosticArray, "/diagnostics")
        boxes = probe.publisher(Detection2DArray, "/t/boxes")
        # the masks and diagnostics readers matched too: a volatile answer written before its reader matched is lost
        assert probe.spin_until(lambda: boxes.get_subscription_count() and probe.matched(), PATIENCE_S), node.log()

        def send(sec: int) -> None:
            header = Header(frame_id="camera")
            header.stamp.sec = sec
            ends.images.publish(bgr_to_message(frame, header))
            boxes.publish(Boxes([box], [0.9], [-1], ["rocket"], None, [5]).to_message(header))

        def answer(sec: int, rows: list[str]) -> tuple:
            """The first answer of stamp ``sec`` whose rows have these class names, and its label image."""

            def found():
                names = lambda m: [d.results[0].hypothesis.class_id for d in m.detections]  # noqa: E731
                hits = [m for m in ends.answers if m.header.stamp.sec == sec and names(m) == rows]
                labels = [rows for m in masks if m.header.stamp.sec == sec for rows in [label_rows(m)]]
                labels = [image for image in labels if image.max() == len(rows)]
                return (hits[0], labels[0]) if hits and labels else None

            assert probe.spin_until(found, PATIENCE_S), ([a.header.stamp.sec for a in ends.answers], node.log_tail())
            return found()

        send(100)
        answer(100, ["rocket"])
        point = f"{x:g},{y:g},1"
        assert probe.answer(lambda: ends.service.call_async(SetPrompt.Request(prompt=point))).success
        clicked, labels = answer(100, ["rocket", "points 0"])  # the last frame, no new one sent
        for row, expected in enumerate((box_mask, point_mask)):
            detection = clicked.detections[row]
            assert detection.results[0].hypothesis.score == pytest.approx(expected["iou_score"], abs=0.01)
            truth = decoded(expected["bits"], frame.shape[:2])
            free = ~np.isin(labels, range(1, row + 1))  # an earlier row's label wins where masks overlap
            assert iou(labels == row + 1, truth & free) >= IOU_MIN, row
        assert [d.id for d in clicked.detections] == ["5", ""]  # the box's track ID; a clicked prompt has none
        refused = probe.answer(lambda: ends.service.call_async(SetPrompt.Request(prompt="10,20,30")))
        assert not refused.success  # a point's label is 0 or 1

        send(101)  # the same pixels again: its embedding cached
        answer(101, ["rocket", "points 0"])
        for text in ("1,2\x07", "not a prompt", "1,2\x1b", ""):  # three refused (two kinds), then cleared
            ends.prompts.publish(String(data=text))
        answer(101, ["rocket"])  # the empty prompt, answered on the last frame

        def counted() -> bool:
            values = _status(diagnostics, "sam: inference")
            return int(values.get("sam decoder runs", 0)) >= 6  # a box, box + point, box + point, a box

        assert probe.spin_until(counted, PATIENCE_S), node.log_tail()
        assert _status(diagnostics, "sam: inference")["sam encoder runs"] == "1"
    finally:
        probe.close()
        node.stop()
    log = node.log()
    refusals = [line for line in log.splitlines() if "refused a prompt from" in line]
    assert len(refusals) == 2 and "Traceback" not in log, refusals  # each kind once, whichever way it came
    assert "~/set_prompt (prompt not read)" in refusals[0] and "'10,20,30' is not a point" in refusals[0]
    assert "~/prompt (prompt with control characters)" in refusals[1] and "\\x07" in refusals[1], refusals
