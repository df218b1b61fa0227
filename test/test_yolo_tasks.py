"""Ultralytics classify and OBB exports, taken as they come: the same answers as Ultralytics' own ``predict`` on the
same file (classes and top-5 scores within 0.01; oriented boxes within 2 px and 1 degree), a ``dynamic=True`` export
without onnxslim (a symbolic channel dimension) read by its metadata, and one clear line for a task no family runs,
from every entry point.

test/data/yolo_tasks/ holds architecture-true exports made from Ultralytics' own yolo11-cls.yaml and yolo11-obb.yaml
with seeded random weights, and reference.json what Ultralytics 8.4's ``predict`` found on three skimage.data images:
made by benchmarks/make_yolo_cls_obb.py in a scratch venv (its docstring says how). No PyTorch here.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import onnx
import pytest
import skimage.data
import vision_msgs.msg
from click.testing import CliRunner
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from support.ros_harness import PATIENCE_S, NodeProcess, Probe, stamped_anew
from vision_msgs.msg import Detection2DArray

from vision_factory.cli import main
from vision_factory.families.registry import family
from vision_factory.models.model_file import require_file_family, summarize
from vision_factory.models.recognition import WrongFamily, recognise, require_family
from vision_factory.models.yolo import YoloDetector
from vision_factory.models.yolo_cls import YoloClassifier
from vision_factory.results.boxes import Boxes
from vision_factory.results.frame import FrameResult
from vision_factory.results.rotated import corners, probiou, rotated_nms
from vision_factory.runtime.onnx_runner import OnnxRunner

DATA = Path(__file__).parent / "data" / "yolo_tasks"
REFERENCE = {model["file"]: model for model in json.loads((DATA / "reference.json").read_text())["models"]}
SCORE = 0.01  # classes' and boxes' scores, and the margin around the threshold
PIXELS = 2.0  # an oriented box's centre, width and height
DEGREES = 1.0  # its angle
LOG = logging.getLogger("test")
UNSUPPORTED = "Ultralytics metadata task 'semantic' is not supported"


@functools.cache
def _frame(name: str) -> np.ndarray:
    return np.ascontiguousarray(getattr(skimage.data, name)()[..., ::-1])  # RGB -> BGR, as the maker fed it


def _runner(file: str) -> OnnxRunner:
    path = DATA / file
    assert hashlib.sha256(path.read_bytes()).hexdigest() == REFERENCE[file]["sha256"]  # the file it was made on
    return OnnxRunner.load(path, {}, LOG)


@pytest.mark.parametrize("case", REFERENCE["yolo11n-cls.onnx"]["cases"], ids=lambda case: case["image"])
def test_a_classify_export_gives_ultralytics_top5(case):
    classes = YoloClassifier(_runner("yolo11n-cls.onnx"))(_frame(case["image"])).classes
    assert classes.class_ids.tolist() == case["top5"]
    assert np.abs(classes.scores - case["scores"]).max() <= SCORE
    names = REFERENCE["yolo11n-cls.onnx"]  # the classes are named by the file's metadata
    assert classes.labels[0] != f"class_{case['top5'][0]}" and names


@pytest.mark.parametrize("file", ["yolo11n-obb.onnx", "yolo11n-obb-dynamic.onnx"])
def test_an_obb_export_gives_ultralytics_rotated_boxes(file):
    """Every box Ultralytics found, found here with its class, centre, size and angle (and the other way round);
    only a box scoring within SCORE of the threshold may be missing on one side."""
    detector = YoloDetector(_runner(file), image_size=0)  # a dynamic export at its recorded imgsz, as Ultralytics
    for case in REFERENCE[file]["cases"]:
        boxes = detector(_frame(case["image"])).boxes
        assert boxes.angles is not None
        theirs = case["detections"]
        want = np.array([row["xywhr"] for row in theirs]).reshape(-1, 5)
        mine, free = boxes.xywhr(), list(range(len(boxes)))
        for row, box in zip(theirs, want):
            same_class = [i for i in free if boxes.class_ids[i] == row["class_id"]]
            distance = [np.abs(mine[i, :2] - box[:2]).max() for i in same_class]
            if not same_class or min(distance) > PIXELS:
                assert row["score"] - case["conf"] <= SCORE, f"{case['image']}: missed {row}"
                continue
            i = same_class[int(np.argmin(distance))]
            free.remove(i)
            assert np.abs(mine[i, :4] - box[:4]).max() <= PIXELS, (case["image"], mine[i], box)
            assert np.degrees(abs(mine[i, 4] - box[4])) <= DEGREES, (case["image"], mine[i], box)
            assert abs(boxes.scores[i] - row["score"]) <= SCORE
        assert all(boxes.scores[i] - case["conf"] <= SCORE for i in free), f"{case['image']}: extra boxes {free}"
        assert len(theirs) >= 20  # NMS had work to do


def test_the_files_are_recognised_by_their_task():
    cls, obb, dynamic = (recognise(summarize(DATA / name)) for name in REFERENCE)
    assert (cls.family, cls.details["classes"]) == ("yolo_cls", 10)
    assert (obb.family, obb.details["classes"], obb.details["rotated"]) == ("yolo", 3, True)
    # a dynamic export without onnxslim: [batch, Concatoutput0_dim_1, anchors], read by its metadata (obb, 3 names)
    assert (dynamic.family, dynamic.details["classes"]) == ("yolo", 3) and "8 = 4 box + 3 class + 1 angle" in (
        dynamic.reason
    )


def test_probiou_is_ultralytics_gaussian_overlap():
    box = np.array([[50.0, 40.0, 30.0, 10.0, 0.3]])
    assert probiou(box, box)[0, 0] == pytest.approx(1.0, abs=1e-3)
    turned = np.array([[50.0, 40.0, 10.0, 30.0, 0.3 + np.pi / 2]])  # the same rectangle, said the other way
    assert probiou(box, turned)[0, 0] == pytest.approx(1.0, abs=1e-3)
    assert probiou(box, box + [500.0, 0, 0, 0, 0])[0, 0] < 1e-3  # far apart
    across = np.array([[50.0, 40.0, 30.0, 10.0, 0.3 + np.pi / 2]])  # crossed: overlapping, far from the same
    assert 0.05 < probiou(box, across)[0, 0] < 0.6
    # Ultralytics' xywhr2xyxyxyxy corners: from +w/2, +h/2 in the box's frame
    assert corners(np.array([[0.0, 0.0, 4.0, 2.0, np.pi / 2]]))[0, 0] == pytest.approx([-1.0, 2.0])


def test_rotated_nms_is_fast_nms_within_a_class():
    """Ultralytics' rotated NMS drops a box that any higher-scoring box overlaps, kept or not: of a chain A > B > C
    where A covers B and B covers C but A does not cover C, only A stays (greedy NMS would keep C too)."""
    chain = np.array([[0.0, 0.0, 40, 10, 0], [12.0, 0.0, 40, 10, 0], [24.0, 0.0, 40, 10, 0]])
    overlaps = probiou(chain, chain)
    assert overlaps[0, 1] > 0.5 and overlaps[1, 2] > 0.5 and overlaps[0, 2] < 0.5
    scores = np.array([0.9, 0.8, 0.7])
    assert rotated_nms(chain, scores, np.zeros(3, int), 0.5).tolist() == [0]
    assert rotated_nms(chain, scores, np.array([0, 1, 0]), 0.5).tolist() == [0, 1, 2]  # another class: kept
    assert rotated_nms(chain[::-1], scores[::-1], np.zeros(3, int), 0.5, limit=1).tolist() == [2]


def test_rotated_nms_in_blocks_keeps_what_the_whole_square_keeps():
    """Over more boxes than a block (results/rotated.py's BLOCK), with and without a limit: the boxes the definition
    keeps (no higher-scoring box of its class over the threshold), computed here on the whole square at once."""
    rng = np.random.default_rng(3)
    count = 1300
    boxes = np.column_stack([rng.uniform(0, 400, (count, 2)), rng.uniform(5, 60, (count, 2)), rng.uniform(0, 3, count)])
    scores, class_ids = rng.uniform(0, 1, count), rng.integers(0, 2, count)
    order = np.argsort(-scores, kind="stable")
    overlap = np.triu(probiou(boxes[order], boxes[order]), k=1) > 0.3
    overlap &= class_ids[order][:, None] == class_ids[order][None, :]
    expected = order[~overlap.any(axis=0)]
    assert 100 < len(expected) < count  # both kept and dropped
    assert rotated_nms(boxes, scores, class_ids, 0.3).tolist() == expected.tolist()
    assert rotated_nms(boxes, scores, class_ids, 0.3, limit=50).tolist() == expected[:50].tolist()


def test_an_oriented_box_travels_with_its_angle():
    boxes = Boxes.rotated([[30.0, 20.0, 16.0, 6.0, 0.5], [10.0, 12.0, 8.0, 4.0, -0.25]], [0.9, 0.6], [1, 0], ("a", "b"))
    frame = FrameResult(64, 48, boxes)
    header = Header(frame_id="camera")
    message = frame.to_message(header)
    assert [item.bbox.center.theta for item in message.detections] == [0.5, -0.25]
    assert (message.detections[0].bbox.size_x, message.detections[0].bbox.size_y) == (16.0, 6.0)
    back = FrameResult.from_message(("boxes",), message, 64, 48, ("a", "b"))
    assert back.boxes == boxes and back.to_message(header) == message
    record = frame.record("x.png", 0)
    assert [row["angle"] for row in record["detections"]] == [0.5, -0.25]
    assert FrameResult.from_record(record).boxes == dataclasses.replace(boxes, names=None)  # names: not recorded
    turned = FrameResult(64, 48, Boxes.rotated([[30.0, 20.0, 16.0, 6.0, 0.5 + np.radians(2)]], [0.9], [1], "ab"))
    assert frame[:1].compare(turned).deviation_px > 0.2  # an angle apart is compared (by the corners)
    # drawn rotated: its corners coloured, not the upright box's edges (the middle of its left edge, x 60, y 120)
    one = FrameResult(200, 200, Boxes.rotated([[100.0, 120.0, 80.0, 20.0, 0.5]], [0.9], [0], ("a",)))
    image = one.draw(np.zeros((200, 200, 3), np.uint8))
    assert all(image[y - 1 : y + 2, x - 1 : x + 2].any() for x, y in np.round(one.boxes.corners()[0]).astype(int))
    assert not image[118:123, 58:63].any()
    upright = FrameResult(200, 200, Boxes.rotated([[100.0, 120.0, 80.0, 20.0, 0.0]], [0.9], [0], ("a",)))
    assert upright.draw(np.zeros((200, 200, 3), np.uint8))[118:123, 58:63].any()


@pytest.fixture(scope="module")
def semantic(tmp_path_factory) -> Path:
    """The classify export, its metadata saying task 'semantic' (an Ultralytics task no family runs)."""
    model = onnx.load(DATA / "yolo11n-cls.onnx")
    for prop in model.metadata_props:
        if prop.key == "task":
            prop.value = "semantic"
    path = tmp_path_factory.mktemp("semantic") / "yolo11n-sem.onnx"
    onnx.save(model, path)
    return path


def test_an_unsupported_task_is_said_in_one_line_by_every_entry_point(semantic):
    runner = OnnxRunner.load(semantic, {}, LOG)
    for name in ("yolo", "yolo_cls", "yolo_pose"):  # the node (and predict) build: Family.build's load_checked
        with pytest.raises(WrongFamily, match=UNSUPPORTED) as refused:
            require_family(runner, name, f"model_path {semantic}", f"{name}_node")
        assert "\n" not in str(refused.value) and "yolo_cls" in str(refused.value)
    with pytest.raises(ValueError, match=UNSUPPORTED):  # generate and quantize: the file's family
        require_file_family(semantic, "yolo")
    with pytest.raises(ValueError, match=UNSUPPORTED):  # an adapter built on it directly
        YoloDetector(runner)
    runner_cli = CliRunner()
    inspected = runner_cli.invoke(main, ["inspect", str(semantic)])
    assert inspected.exit_code == 0 and UNSUPPORTED in inspected.output
    for command in (
        ["predict", "--model-type", "yolo", "--model", str(semantic), str(semantic)],
        ["generate", "--model", "yolo", "--backend", "onnx", "--package-name", "p", "--model-file", str(semantic),
         "--out", str(semantic.parent / "out")],
    ):  # fmt: skip
        result = runner_cli.invoke(main, command)
        assert result.exit_code != 0 and UNSUPPORTED in result.output, result.output
        assert "Traceback" not in result.output and not (semantic.parent / "out").exists()


def test_predict_lists_a_classifiers_top5_and_names_its_family(tmp_path):
    image = tmp_path / "coffee.png"
    import cv2

    cv2.imwrite(str(image), _frame("coffee"))
    cli = CliRunner()
    model = str(DATA / "yolo11n-cls.onnx")
    result = cli.invoke(main, ["predict", "--model-type", "yolo_cls", "--model", model, str(image), "--format", "json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    case = next(case for case in REFERENCE["yolo11n-cls.onnx"]["cases"] if case["image"] == "coffee")
    assert [row["class_id"] for row in record["classes"]] == case["top5"]
    assert np.abs(np.array([row["score"] for row in record["classes"]]) - case["scores"]).max() <= SCORE
    # given as a detector, the classifier is named for what it is (on main: "10 class names ... 6 classes")
    wrong = cli.invoke(main, ["predict", "--model-type", "yolo", "--model", model, str(image)])
    assert wrong.exit_code != 0 and "looks like a yolo_cls model" in wrong.output
    assert family("yolo_cls").result.message == "vision_msgs/msg/Classification"


def _answer(node: NodeProcess, topic: str, kind: type, frame: np.ndarray):
    """The node's answer on ``topic`` (of ``kind``) to ``frame``, sent on /t/image until answered, and the header
    sent with it; the node stopped after."""
    probe = Probe()
    try:
        answers = {topic: probe.subscribe(kind, topic)}
        publisher = probe.publisher(Image, "/t/image")
        ready = lambda: publisher.get_subscription_count() > 0 and probe.matched()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), node.log()
        header, answered = probe.answered(stamped_anew(publisher, frame), answers, node)
    finally:
        probe.close()
        node.stop()
    return header, answered[topic]


def test_the_yolo_node_publishes_an_obb_exports_rotated_boxes(tmp_path):
    """The yolo node on the dynamic OBB export (read by its metadata): each Detection2D's bbox.center.theta is the
    box's angle, its centre and size the adapter's."""
    model = DATA / "yolo11n-obb-dynamic.onnx"
    params = {"model_path": str(model), "qos_reliability": "reliable", "confidence_threshold": "0.6"}
    node = NodeProcess(tmp_path, params, module="vision_factory.yolo_onnx_node")
    frame = _frame("chelsea")
    header, message = _answer(node, "/t/detections", Detection2DArray, frame)
    expected = YoloDetector(_runner(model.name), confidence=0.6, image_size=0)(frame).boxes
    assert message.header == header and len(message.detections) == len(expected) >= 3
    got = np.array(
        [[d.bbox.center.position.x, d.bbox.center.position.y, d.bbox.size_x, d.bbox.size_y, d.bbox.center.theta]
         for d in message.detections]
    )  # fmt: skip
    assert np.allclose(got, expected.xywhr(), atol=1e-4)
    assert [d.results[0].hypothesis.class_id for d in message.detections] == list(expected.labels)


def test_the_yolo_cls_node_publishes_classification_or_says_what_to_build(tmp_path):
    """The yolo_cls node publishes each frame's top-5 as a vision_msgs/Classification; where this vision_msgs was
    built before Classification joined it, the node refuses to start and names the fix."""
    params = {"model_path": str(DATA / "yolo11n-cls.onnx"), "qos_reliability": "reliable"}
    node = NodeProcess(tmp_path, params, module="vision_factory.yolo_cls_onnx_node")
    if not hasattr(vision_msgs.msg, "Classification"):
        code = node.wait(60)
        assert code != 0 and "install-vision-msgs --force" in node.log(), node.log_tail()
        assert "no message Classification" in node.log() and "Traceback" not in node.log()
        return
    header, message = _answer(node, "/t/classification", vision_msgs.msg.Classification, _frame("coffee"))
    case = next(case for case in REFERENCE["yolo11n-cls.onnx"]["cases"] if case["image"] == "coffee")
    names = YoloClassifier(_runner("yolo11n-cls.onnx")).names
    assert message.header == header
    assert [r.class_id for r in message.results] == [names[i] for i in case["top5"]]
    assert np.abs(np.array([r.score for r in message.results]) - case["scores"]).max() <= SCORE
