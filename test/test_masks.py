"""Instance segmentation (YOLOv8-seg): masks decoded from the model file, scored as COCO masks, written as COCO RLE.

The model is trained here on synthetic shapes (../shared/models/README.md); its validation set has exact COCO
truth with segmentation polygons. Ultralytics measured on it (its own validator): box mAP50 0.49, mAP50-95 0.33,
mask mAP50 0.49, mAP50-95 0.35.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SHARED
from sensor_msgs.msg import Image
from support.ros_harness import PATIENCE_S, NodeProcess, Probe, stamped_anew
from vision_msgs.msg import Detection2DArray

from vision_factory.cli import main
from vision_factory.families.registry import family
from vision_factory.models.masks import instance_masks
from vision_factory.models.recognition import recognise
from vision_factory.models.yolo import YoloDetector
from vision_factory.parameters import with_defaults
from vision_factory.results.coco import coco_results, differences
from vision_factory.results.drawing import place_labels
from vision_factory.results.masks import InstanceMask, Masks, label_image
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.bags import write_image_bag
from vision_factory.tools.verify import verify

SEG_MODEL = SHARED / "models" / "shapes-yolov8n-seg.onnx"
SEG_DATA = SHARED / "data" / "shapes-seg-val"
needs_seg = pytest.mark.skipif(
    not (SEG_MODEL.is_file() and SEG_DATA.is_dir()),
    reason=f"{SEG_MODEL} or {SEG_DATA} is not there (shared models, see ../shared/models/README.md)",
)
# Ultralytics' own validator on shapes-seg-val (../shared/models/README.md). Its AP is computed its own way (not
# pycocotools'), at the letterboxed input's size: pycocotools on frame-sized masks lands within a few points.
ULTRALYTICS_MASK = {"mask_AP50": 0.49, "mask_AP": 0.35}
ULTRALYTICS_BOX = {"AP50": 0.49, "AP": 0.33}
AP_TOLERANCE = 0.04


def _runner(path=SEG_MODEL):
    return OnnxRunner.load(path, {}, logging.getLogger("test"))


def _image(index: int) -> np.ndarray:
    return cv2.imread(str(SEG_DATA / "images" / f"{index:06d}.jpg"))


@needs_seg
def test_a_seg_model_is_recognised_as_a_yolo_model_with_masks():
    runner = _runner()
    found = recognise(runner)
    assert found.family == "yolo"
    assert found.details["masks"] == 32 and found.details["classes"] == 3
    assert "instance segmentation" in found.reason and "output1 [1, 32, 64, 64]" in found.reason


@needs_seg
def test_each_detection_has_its_mask_at_the_frame_size_inside_its_box():
    detector = YoloDetector(_runner())
    frame = _image(0)
    padded = cv2.copyMakeBorder(frame, 0, 0, 0, 128, cv2.BORDER_CONSTANT, value=(0, 0, 0))  # letterboxed in height
    for image in (frame, padded):
        found = detector.detect(image)
        assert found
        for (x1, y1, x2, y2), detection_mask in zip(found.boxes.xyxy, found.masks.masks):
            mask = detection_mask.full()
            assert mask.shape == image.shape[:2] and mask.dtype == bool
            rows, columns = np.nonzero(mask)
            assert len(rows) > 0.3 * (x2 - x1) * (y2 - y1)  # a shape fills a good part of its box
            assert columns.min() >= x1 - 1 and columns.max() <= x2 and rows.min() >= y1 - 1 and rows.max() <= y2
    # The padding added on the right changes nothing of the frame's masks (the letterbox is undone).
    found = detector.detect(frame)
    first = {round(box[0]): mask.full() for box, mask in zip(found.boxes.xyxy, found.masks.masks)}
    padded_found = detector.detect(padded)
    for box, mask in zip(padded_found.boxes.xyxy, padded_found.masks.masks):
        same = first.get(round(box[0]))
        if same is not None:
            inside = mask.full()[:, : frame.shape[1]]
            assert (inside & same).sum() / max((inside | same).sum(), 1) > 0.9


def test_masks_are_cropped_to_their_boxes_and_labelled_in_score_order():
    # Prototypes: one everywhere positive channel, one everywhere negative: a detection's mask is its box.
    prototypes = np.stack([np.ones((16, 16)), -np.ones((16, 16))]).astype(np.float32)
    boxes = np.array([[10.2, 5.0, 30.0, 20.5], [20.0, 10.0, 40.0, 30.0], [0.0, 0.0, 40.0, 30.0]])
    coefficients = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], np.float32)
    masks = instance_masks(prototypes, coefficients, boxes, (30, 40))
    assert masks[0].full()[5:21, 11:30].all() and masks[0].area == 16 * 19  # columns 11..29, rows 5..20
    assert masks[2].area == 0
    labels = label_image(masks, (30, 40))
    assert labels.dtype == np.uint16
    assert labels[15, 25] == 1 and labels[25, 35] == 2 and labels[2, 2] == 0  # the overlap goes to the first


@needs_seg
def test_eval_scores_masks_as_ultralytics_measured(tmp_path):
    arguments = ["eval", "--model-type", "yolo", "--data", str(SEG_DATA), "--model", str(SEG_MODEL)]
    result = CliRunner().invoke(main, [*arguments, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "eval.json").read_text())["metrics"]
    for name, expected in (ULTRALYTICS_MASK | ULTRALYTICS_BOX).items():
        assert abs(metrics[name] - expected) <= AP_TOLERANCE, (name, metrics)
    # The masks are scored as masks: box-shaped masks of circles and triangles would not score so.
    predictions = json.loads((tmp_path / "predictions.json").read_text())
    assert all("segmentation" in result for result in predictions)
    assert metrics["mask_AP"] > metrics["AP"]


@needs_seg
def test_predict_json_has_each_mask_as_coco_rle(tmp_path):
    from pycocotools import mask as coco_mask

    image = SEG_DATA / "images" / "000003.jpg"
    result = CliRunner().invoke(
        main, ["predict", "--model-type", "yolo", "--model", str(SEG_MODEL), "--format", "json", str(image)]
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.output.strip().splitlines()[-1])
    detector = YoloDetector(_runner())
    expected = detector.detect(cv2.imread(str(image)))
    assert len(record["detections"]) == len(expected) > 0
    for written, mask in zip(record["detections"], expected.masks.masks):
        rle = written["mask"]
        assert rle["size"] == [record["height"], record["width"]]
        decoded = coco_mask.decode({"size": rle["size"], "counts": rle["counts"].encode()}).astype(bool)
        assert np.array_equal(decoded, mask.full())


def test_a_mask_paints_only_its_pixels():
    mask = InstanceMask(2, 1, np.array([[True, False], [False, True]]), 5, 4)
    full = mask.full()
    assert full.sum() == 2 and full[1, 2] and full[2, 3]


@needs_seg
@pytest.mark.parametrize("encoding", ["mono16", "mono8"])
def test_yolo_node_publishes_masks_whose_label_k_is_detection_k(tmp_path, encoding):
    params = {"model_path": str(SEG_MODEL), "qos_reliability": "reliable", "mask_encoding": encoding}
    node = NodeProcess(tmp_path, params, module="vision_factory.yolo_onnx_node")
    probe = Probe()
    frame = _image(3)
    try:
        topics = {"/t/detections": Detection2DArray, "/t/masks": Image, "/t/debug_image": Image}
        answers = {topic: probe.subscribe(kind, topic) for topic, kind in topics.items()}
        publisher = probe.publisher(Image, "/t/image")
        ready = lambda: publisher.get_subscription_count() > 0 and probe.matched()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), node.log()
        # masks and debug_image are on demand: the frame goes again, stamped anew, until all three of one are in
        header, answered = probe.answered(stamped_anew(publisher, frame, first_sec=21), answers, node)
    finally:
        probe.close()
        node.stop()
    found, labels, drawn = answered.values()
    assert found.header == labels.header == drawn.header == header
    assert (labels.width, labels.height, labels.encoding) == (frame.shape[1], frame.shape[0], encoding)
    dtype = np.dtype("<u2" if encoding == "mono16" else "u1")
    assert labels.step == frame.shape[1] * dtype.itemsize and labels.is_bigendian == 0
    image = np.frombuffer(bytes(labels.data), dtype).reshape(frame.shape[:2])
    expected = YoloDetector(_runner()).detect(frame)
    assert len(found.detections) == len(expected) >= 2
    assert set(np.unique(image)) <= set(range(len(expected) + 1))
    for k, (item, score, detection_mask) in enumerate(
        zip(found.detections, expected.boxes.scores, expected.masks.masks), start=1
    ):
        assert item.results[0].hypothesis.score == pytest.approx(score)
        own = image == k
        mask = detection_mask.full()
        assert own.sum() > 0 and not (own & ~mask).any()  # label k lies only on detection k's mask
        earlier = np.isin(image, range(1, k))
        assert not (mask & ~own & ~earlier).any()  # and covers it but where an earlier detection's lies
        # label k sits inside detection k's box as published
        rows, columns = np.nonzero(own)
        centre, size = item.bbox.center.position, (item.bbox.size_x, item.bbox.size_y)
        assert columns.min() >= centre.x - size[0] / 2 - 1 and columns.max() <= centre.x + size[0] / 2
        assert rows.min() >= centre.y - size[1] / 2 - 1 and rows.max() <= centre.y + size[1] / 2
    assert not np.array_equal(np.frombuffer(bytes(drawn.data), np.uint8).reshape(frame.shape), frame)


@needs_seg
def test_tracked_detections_keep_their_masks_in_their_place():
    spec = family("yolo")
    values = with_defaults(spec.parameters, {"model_path": str(SEG_MODEL), "tracking": True}, spec.name)
    pipeline = spec.pipeline(values, _runner)
    plain = YoloDetector(_runner(), confidence=values["track_low_threshold"])
    frame = _image(5)
    for _ in range(3):  # tracks confirmed by the third frame
        ((_, found),) = pipeline.push(frame)
    assert found.boxes.track_ids is not None and (found.boxes.track_ids >= 0).any()
    every = plain.detect(frame)
    expected = {tuple(box): mask.full() for box, mask in zip(every.boxes.xyxy.tolist(), every.masks.masks)}
    for box, mask in zip(found.boxes.xyxy.tolist(), found.masks.masks):  # each its own mask, whatever its place
        assert np.array_equal(mask.full(), expected[tuple(box)])


def _decoded(rle: dict) -> np.ndarray:
    """An uncompressed COCO RLE (column-major runs, zeros first) as a bool mask."""
    height, width = rle["size"]
    values = np.zeros(len(rle["counts"]), bool)
    values[1::2] = True
    return np.repeat(values, rle["counts"]).reshape((height, width), order="F")


@needs_seg
def test_masks_are_ultralytics_own_on_the_same_model_file():
    """test/data/ultralytics_seg_reference.json: Ultralytics' predict (retina_masks: masks at the frame's size) on
    the same file and pixels, made by benchmarks/ultralytics_seg_reference.py. Same detections both ways (boxes within
    1 px, same class, scores within 1e-3; one within 1e-3 of the threshold may be missing on either side), and each
    mask's IoU with Ultralytics' at least 0.95 (measured: 1.0)."""
    import hashlib

    reference = json.loads((Path(__file__).parent / "data" / "ultralytics_seg_reference.json").read_text())
    assert hashlib.sha256(SEG_MODEL.read_bytes()).hexdigest() == reference["model_sha256"]
    detector = YoloDetector(_runner(), confidence=0.25, iou=0.7)
    edge, ious = 0.25 + 1e-3, []
    for name, recorded in reference["images"].items():
        frame = cv2.imread(str(SEG_DATA / "images" / name))
        assert hashlib.sha256(frame.tobytes()).hexdigest() == recorded["pixels_sha256"], name
        found, theirs = detector.detect(frame), recorded["detections"]
        boxes = found.boxes  # each of ours: (xyxy, class id, score, mask)
        ours = list(zip(boxes.xyxy.tolist(), boxes.class_ids.tolist(), boxes.scores.tolist(), found.masks.masks))

        def same(detection, item):
            near = np.abs(np.subtract(detection[0], item["xyxy"])).max() <= 1
            return near and detection[1] == item["class_id"]

        assert all(any(same(d, item) for item in theirs) for d in ours if d[2] >= edge), name
        for item in theirs:
            match = [d for d in ours if same(d, item)]
            assert match or item["score"] < edge, (name, item["xyxy"], [d[0] for d in ours])
            if match:
                assert match[0][2] == pytest.approx(item["score"], abs=1e-3)
                mine, truth = match[0][3].full(), _decoded(item["mask"])
                ious.append((mine & truth).sum() / max((mine | truth).sum(), 1))
    assert len(ious) >= 20
    assert min(ious) >= 0.95, ious


@needs_seg
def test_predict_save_draws_each_mask(tmp_path):
    image = SEG_DATA / "images" / "000003.jpg"
    arguments = ["predict", "--model-type", "yolo", "--model", str(SEG_MODEL), str(image), "--save", str(tmp_path)]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 0, result.output
    frame = cv2.imread(str(image)).astype(np.float32)
    saved = cv2.imread(str(tmp_path / image.name)).astype(np.float32)
    detections = YoloDetector(_runner()).detect(cv2.imread(str(image)))
    outside = np.ones(frame.shape[:2], bool)
    boxes = detections.boxes
    texts = [f"{label} {score:.2f}" for label, score in zip(boxes.labels, boxes.scores)]
    for x1, y1, x2, y2 in place_labels(boxes.xyxy.tolist(), texts, frame.shape):
        outside[y1 : y2 + 1, x1 : x2 + 1] = False  # the labels (above their boxes or moved clear of each other)
    for box, mask in zip(boxes.xyxy, detections.masks.masks):
        x1, y1, x2, y2 = (int(round(v)) for v in box)
        outside[max(y1 - 3, 0) : y2 + 3, max(x1 - 3, 0) : x2 + 3] = False  # the box
        interior = cv2.erode(mask.full().astype(np.uint8), np.ones((7, 7), np.uint8)).astype(bool)
        assert np.abs(saved - frame)[interior].mean() > 8  # filled with its colour
    assert np.abs(saved - frame)[outside].mean() < 3  # nothing else drawn (JPEG noise only)


@needs_seg
def test_compare_reports_the_smallest_mask_iou_of_paired_detections():
    frame = _image(3)
    detections = YoloDetector(_runner()).detect(frame)
    categories = {int(c): int(c) for c in detections.boxes.class_ids}
    a = coco_results(1, detections, categories)[0]
    first = detections.masks.masks[0]
    half = first.bits.copy()
    half[:, : half.shape[1] // 2] = False  # B's first mask loses its left half; its box stays
    changed = Masks([InstanceMask(first.left, first.top, half, first.width, first.height), *detections.masks.masks[1:]])
    b = coco_results(1, detections.with_parts(masks=changed), categories)[0]
    found = differences(a, b)
    expected = half.sum() / first.bits.sum()
    assert found["matched"] == len(detections) and found["mask_iou_min"] == pytest.approx(expected, abs=1e-6)
    assert differences(a, a)["mask_iou_min"] == 1.0


@needs_seg
def test_verify_compares_each_paired_detections_mask_with_the_models(tmp_path):
    frames = [np.hstack([_image(index), _image(index + 1)[:, :128]]) for index in range(6)]  # letterboxed
    bag = write_image_bag(tmp_path / "bag", frames, fps=5, frame_id="camera")
    params = {"queue_size": "16", "qos_depth": "16"}  # every frame answered, nothing dropped
    report = verify(bag, "yolo", SEG_MODEL, tmp_path / "v", params, rate=2.0)
    (masks,) = [check for check in report.checks if check.name == "masks within tolerance"]
    assert masks.passed and report.passed, report.text()
    compared = sum(frame.masks for frame in report.frames)
    assert compared >= 10 and f"{compared} paired detections' masks compared" in masks.numbers
    assert min(frame.mask_iou_min for frame in report.frames) >= 0.99  # the same backend: the same masks


@needs_seg
def test_the_mask_check_fails_where_a_node_mask_differs_from_the_models():
    from vision_factory.tools.verify import as_published
    from vision_factory.tools.verify_checks import mask_check
    from vision_factory.tools.verify_frames import Answer
    from vision_factory.tools.verify_frames import compare as _compare

    model = as_published(YoloDetector(_runner()).detect(_image(3)))
    first = model.masks.masks[0]
    half = first.bits.copy()
    half[: half.shape[0] // 2] = False  # the node's first mask lost its top half
    node = model.with_parts(masks=Masks([replace(first, bits=half), *model.masks.masks[1:]]))
    frame = _compare(0, Answer(0, (1, 0), "camera", node), model)
    assert frame.masks == len(model) and frame.mask_iou_min < 0.9
    check = mask_check([frame])
    assert not check.passed and "frame 0" in check.cause
    assert mask_check([_compare(0, Answer(0, (1, 0), "camera", model), model)]).passed
