"""YOLO heads beyond the raw YOLOv8 one, decoded as their exporting projects do: end-to-end (YOLO26, YOLOv10,
``nms=True`` exports: final rows, no NMS) and YOLOv5's objectness head (objectness x class probability, then NMS);
the real end-to-end YOLO26n shapes detector through eval, predict, quantize and a node over DDS; and, against
test/data/yolo_heads/reference.json (benchmarks/make_yolo_heads.py: what Ultralytics and YOLOv5 return on their own
exports, recorded when the files were made), a thin seeded YOLO26 end-to-end pose export and a YOLOv5 export."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import cv2
import matplotlib
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SHARED
from sensor_msgs.msg import Image
from support.models import _constant_model
from support.results import detections_of, full_mask
from support.ros_harness import KEEP_EVERY_FRAME, PATIENCE_S, NodeProcess, Probe, stamped_anew
from vision_msgs.msg import Detection2DArray

from vision_factory.cli import main
from vision_factory.models.yolo import YoloDetector
from vision_factory.results.boxes import box_iou
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.bags import write_image_bag
from vision_factory.tools.bench import run_bench, table
from vision_factory.tools.quantize import quantize
from vision_factory.tools.replay import replay

E2E_MODEL = SHARED / "models" / "shapes-yolo26n.onnx"
SEG_DATA = SHARED / "data" / "shapes-seg-val"
HEADS = Path(__file__).parent / "data" / "yolo_heads"  # benchmarks/make_yolo_heads.py
THREE = "{0: 'circle', 1: 'square', 2: 'triangle'}"
LOG = logging.getLogger("test")
# eval (pycocotools) against Ultralytics' own val of the same file on the same set, recorded in reference.json: they
# count matches and integrate precision differently, by a few 1e-3 here (0.719 / 0.545 against 0.721 / 0.539);
# the rows are final, so another CPU moves nothing but scores by 1e-6. (../shared/models/README.md's 0.78 / 0.58
# were measured on the PyTorch weights at the end of training, not on this ONNX file.)
AP_TOLERANCE = 0.02


def _needs(path):
    return pytest.mark.skipif(not path.exists(), reason=f"{path} not found (shared models, ../shared/models/README.md)")


def _end2end(tmp_path, rows: np.ndarray, **metadata: str):
    """A model whose output is these [N, C] end-to-end rows, with Ultralytics' end2end metadata."""
    metadata = {"task": "detect", "end2end": "True", **metadata}
    model = _constant_model(tmp_path / "e2e.onnx", rows[None], names=THREE, metadata=metadata)
    return OnnxRunner.load(model, {}, LOG)


def test_end_to_end_rows_are_kept_in_the_models_order_above_the_threshold_without_nms(tmp_path):
    rows = np.zeros((300, 6), np.float32)
    rows[0] = [10, 100, 60, 140, 0.9, 1]  # square
    rows[1] = [12, 100, 62, 140, 0.8, 1]  # overlaps it almost fully, same class: kept (no NMS)
    rows[2] = [100, 120, 200, 150, 0.3, 2]  # triangle, scored lower than the next: kept before it (model order)
    rows[3] = [0, 96, 30, 110, 0.5, 0]  # circle
    rows[4] = [0, 96, 30, 110, 0.25, 0]  # at the threshold: not above it, dropped
    rows[5] = [0, 96, 30, 110, 0.7, 7]  # a class the model does not have: dropped
    rows[6] = [0, 96, 30, 110, 0.7, np.nan]  # a damaged row: dropped
    detector = YoloDetector(_end2end(tmp_path, rows), iou=0.1)
    assert detector.head == "end2end" and detector.names == ["circle", "square", "triangle"]
    frame = np.zeros((128, 512, 3), np.uint8)  # into 256: r = 0.5, 256 x 64, 96 px of padding on top
    found = detections_of(detector.detect(frame))
    assert [(d["class_name"], round(d["score"], 2)) for d in found] == [
        ("square", 0.9),
        ("square", 0.8),
        ("triangle", 0.3),
        ("circle", 0.5),
    ]
    # x / 0.5; y: (y - 96) / 0.5, clipped to the frame
    assert np.allclose(
        [d["xyxy"] for d in found], [[20, 8, 120, 88], [24, 8, 124, 88], [200, 48, 400, 108], [0, 0, 60, 28]]
    )
    assert "iou_threshold 0.1 does not apply" in detector.head_note

    detector.keep_classes([0, 2])
    assert [d["class_name"] for d in detections_of(detector.detect(frame))] == ["triangle", "circle"]
    few = YoloDetector(_end2end(tmp_path, rows), max_detections=2)
    first = [round(d["score"], 2) for d in detections_of(few.detect(frame))]
    assert first == [0.9, 0.8]  # the first rows, as Ultralytics keeps them


def test_end_to_end_pose_rows_carry_their_keypoints_to_the_frame(tmp_path):
    rows = np.zeros((300, 6 + 2 * 3), np.float32)
    rows[0] = [40, 100, 80, 150, 0.9, 0, 50, 110, 0.95, 70, 140, 0.2]  # a person with 2 keypoints
    metadata = {"task": "pose", "kpt_shape": "[2, 3]", "names": "{0: 'person'}"}
    model = _constant_model(
        tmp_path / "p.onnx", rows[None], names="{0: 'person'}", metadata={"end2end": "True", **metadata}
    )
    detector = YoloDetector(OnnxRunner.load(model, {}, LOG), pose=True)
    (person,) = detections_of(detector.detect(np.zeros((128, 512, 3), np.uint8)))
    assert person["class_name"] == "person" and np.allclose(person["xyxy"], [80, 8, 160, 108])
    assert np.allclose(person["keypoints"], [[100, 28, 0.95], [140, 88, 0.2]])


def test_end_to_end_detector_needs_rows_of_six_and_class_names(tmp_path):
    with pytest.raises(ValueError, match=r"not \[1, N, 6\]"):
        YoloDetector(_end2end(tmp_path, np.zeros((300, 7), np.float32)))
    model = _constant_model(
        tmp_path / "n.onnx", np.zeros((1, 300, 6), np.float32), names="", metadata={"end2end": "True"}
    )
    with pytest.raises(ValueError, match="give the class names"):
        YoloDetector(OnnxRunner.load(model, {}, LOG))


def test_yolov5_objectness_times_class_probability_then_nms(tmp_path):
    """YOLOv5's non_max_suppression: candidates by objectness, score = objectness x best class probability,
    kept above the threshold, class-aware NMS at iou_thres."""
    rows = np.zeros((252, 8), np.float32)  # 64 x 64 input: 84 cells x 3 anchors; 4 box + objectness + 3 classes
    rows[0] = [20, 20, 20, 20, 0.9, 0.1, 0.8, 0.1]  # square 0.72
    rows[1] = [22, 20, 20, 20, 0.75, 0.1, 0.9, 0.0]  # square 0.675, overlapping the first (IoU 0.82): suppressed
    rows[2] = [22, 20, 20, 20, 0.95, 0.3, 0.0, 0.7]  # triangle 0.665, same place, other class: kept
    rows[3] = [50, 50, 10, 10, 0.5, 0.4, 0.0, 0.0]  # circle 0.2: below 0.25 though its objectness is not
    rows[4] = [50, 50, 10, 10, 0.2, 0.0, 0.0, 1.0]  # objectness 0.2: not a candidate
    rows[5] = [50, 50, 10, 10, 0.6, 0.0, 0.0, 0.5]  # triangle 0.3
    model = _constant_model(tmp_path / "v5.onnx", rows[None], size=64, names=THREE, metadata={"stride": "32"})
    detector = YoloDetector(OnnxRunner.load(model, {}, LOG), iou=0.45)
    assert detector.head == "objectness" and detector.class_count == 3 and detector.head_note is None
    found = detections_of(detector.detect(np.zeros((64, 64, 3), np.uint8)))
    assert [(d["class_name"], round(d["score"], 3)) for d in found] == [
        ("square", 0.72),
        ("triangle", 0.665),
        ("triangle", 0.3),
    ]
    assert np.allclose(found[0]["xyxy"], [10, 10, 30, 30])  # from cx, cy, w, h
    detector.keep_classes([2])
    kept = detections_of(detector.detect(np.zeros((64, 64, 3), np.uint8)))
    assert [d["class_name"] for d in kept] == ["triangle", "triangle"]


@_needs(E2E_MODEL)
@_needs(SEG_DATA)
def test_eval_of_the_end_to_end_yolo26n_reaches_ultralytics_figures(tmp_path):
    result = CliRunner().invoke(
        main,
        ["eval", "--model-type", "yolo", "--model", str(E2E_MODEL), "--data", str(SEG_DATA), "--out", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "eval.json").read_text())["metrics"]
    (ultralytics,) = [
        m for m in json.loads((HEADS / "reference.json").read_text())["models"] if m["file"] == E2E_MODEL.name
    ]
    assert metrics["AP50"] == pytest.approx(ultralytics["val_map50"], abs=AP_TOLERANCE), metrics
    assert metrics["AP"] == pytest.approx(ultralytics["val_map"], abs=AP_TOLERANCE), metrics


@_needs(E2E_MODEL)
@_needs(SEG_DATA)
def test_predict_and_inspect_say_what_they_found_in_the_end_to_end_yolo26n(tmp_path):
    image = SEG_DATA / "images" / "000001.jpg"
    predicted = CliRunner().invoke(
        main, ["predict", "--model-type", "yolo", "--model", str(E2E_MODEL), str(image), "--format", "json"]
    )
    assert predicted.exit_code == 0, predicted.output
    assert "end-to-end head" in predicted.stderr and "iou_threshold 0.7 does not apply" in predicted.stderr
    (record,) = [json.loads(line) for line in predicted.stdout.splitlines()]
    detector = YoloDetector(OnnxRunner.load(E2E_MODEL, {}, LOG))
    assert record["detections"] == detections_of(detector.detect(cv2.imread(str(image))))
    assert record["detections"]  # the shapes of this image are found
    inspected = CliRunner().invoke(main, ["inspect", str(E2E_MODEL)])
    assert inspected.exit_code == 0, inspected.output
    assert "looks like: yolo — Ultralytics metadata end2end True" in inspected.output
    assert "iou_threshold does not apply" in inspected.output


@_needs(E2E_MODEL)
@_needs(SEG_DATA)
def test_yolo_node_publishes_the_end_to_end_detections_and_says_nms_does_not_apply(tmp_path):
    frames = [cv2.imread(str(path)) for path in sorted((SEG_DATA / "images").glob("*.jpg"))[:4]]
    bag = write_image_bag(tmp_path / "bag", frames)
    result = replay(
        bag,
        tmp_path / "out",
        node="yolo",
        params={"model_path": str(E2E_MODEL), "iou_threshold": "0.5", **KEEP_EVERY_FRAME},
    )
    log = open(result.node_log).read()
    assert result.missing_frames == [], log
    assert log.count("iou_threshold 0.5 does not apply") == 1, log  # said once, at start-up
    records = json.loads(open(result.answers).read())
    detector = YoloDetector(OnnxRunner.load(E2E_MODEL, {}, LOG))
    for frame, record in zip(frames, records, strict=True):
        expected = detections_of(detector.detect(frame))
        assert expected and [d["class_name"] for d in record["detections"]] == [d["class_name"] for d in expected]
        assert np.allclose([d["xyxy"] for d in record["detections"]], [d["xyxy"] for d in expected], atol=1e-3)
        assert np.allclose([d["score"] for d in record["detections"]], [d["score"] for d in expected], atol=1e-6)


@_needs(E2E_MODEL)
@_needs(SEG_DATA)
def test_quantize_keeps_the_end_to_end_head_in_float_and_the_int8_model_is_still_end_to_end(tmp_path):
    """The float tail of an end-to-end head: its final convs (one2one box and class branches, each scale) and the
    top-k selection after them; the INT8 model keeps the metadata that says end-to-end, and finds what FP32 finds."""
    images = sorted((SEG_DATA / "images").glob("*.jpg"))
    (tmp_path / "calibration").mkdir()
    for path in images[:4]:
        shutil.copy(path, tmp_path / "calibration")
    out = tmp_path / "yolo26n_int8.onnx"
    quantize("yolo", E2E_MODEL, tmp_path / "calibration", out, "onnx", frames=4, speed_runs=1)
    runner = OnnxRunner.load(out, {}, LOG)
    float_nodes = set(runner.metadata["quantization_float_nodes"].split(": ", 1)[1].split(", "))
    head = {f"/model.23/one2one_{b}.{s}/one2one_{b}.{s}.2/Conv" for b in ("cv2", "cv3") for s in range(3)}
    assert head <= float_nodes and any("TopK" in name for name in float_nodes), sorted(float_nodes)
    int8, fp32 = YoloDetector(runner), YoloDetector(OnnxRunner.load(E2E_MODEL, {}, LOG))
    assert int8.head == "end2end"
    for path in images[20:24]:  # not calibrated on
        frame = cv2.imread(str(path))
        confident = [d for d in detections_of(fp32.detect(frame)) if d["score"] > 0.6]
        found = detections_of(int8.detect(frame))
        for d in confident:  # each confident FP32 detection has an INT8 one of its class in place
            assert any(
                f["class_id"] == d["class_id"] and box_iou(np.asarray(f["xyxy"]), np.asarray([d["xyxy"]]))[0] > 0.8
                for f in found
            ), d


def _reference_cases():
    """(model, case) pairs of test/data/yolo_heads/reference.json (benchmarks/make_yolo_heads.py)."""
    reference = json.loads((HEADS / "reference.json").read_text())
    return [(model, case) for model in reference["models"] for case in model["cases"]]


def _reference_file(source: str) -> Path:
    kind, _, rest = source.partition(":")
    if kind == "matplotlib":
        return Path(matplotlib.get_data_path()) / rest
    path = SHARED / rest
    if not path.is_file():
        pytest.skip(f"{path} not found (shared data)")
    return path


@pytest.mark.parametrize(
    "model,case", _reference_cases(), ids=[f"{m['file']}-{c['image']}" for m, c in _reference_cases()]
)
def test_same_rows_as_the_exporting_projects_own_post_processing(model, case):
    """Ours against what Ultralytics' predict (end-to-end heads) or YOLOv5's detect.py steps (objectness) returned on
    the same file and image: the same detections in the same order, boxes and keypoints within 1 px, scores within
    1e-3 (a keypoint's position compared where its confidence is above 0.5)."""
    path = (
        HEADS / model["file"]
        if (HEADS / model["file"]).is_file()
        else _reference_file(f"shared:models/{model['file']}")
    )
    assert hashlib.sha256(path.read_bytes()).hexdigest() == model["sha256"], f"{path} is not the model recorded"
    image_path = _reference_file(case["path"])
    assert hashlib.sha256(image_path.read_bytes()).hexdigest() == case["sha256"]
    options = {"confidence": case["conf"], "iou": model.get("iou", 0.7), "max_detections": 1000}
    detector = YoloDetector(OnnxRunner.load(path, {}, LOG), pose=model["task"] == "pose", **options)
    ours, theirs = detections_of(detector.detect(cv2.imread(str(image_path)))), case["detections"]
    assert theirs and len(ours) == len(theirs)
    for detection, reference in zip(ours, theirs, strict=True):
        assert detection["class_id"] == reference["class_id"]
        assert np.abs(np.subtract(detection["xyxy"], reference["xyxy"])).max() <= 1.0, (
            detection["xyxy"],
            reference["xyxy"],
        )
        assert abs(detection["score"] - reference["score"]) <= 1e-3
        if "keypoints" in reference:
            ours_points, their_points = np.asarray(detection["keypoints"]), np.asarray(reference["keypoints"])
            assert np.abs(ours_points[:, 2] - their_points[:, 2]).max() <= 1e-3
            confident = their_points[:, 2] > 0.5
            assert np.abs(ours_points[confident, :2] - their_points[confident, :2]).max(initial=0) <= 1.0


@pytest.mark.parametrize(
    "node,file,params",
    [
        ("yolo_pose", "yolo26n-pose-e2e.onnx", {"confidence_threshold": "0.999"}),
        ("yolo", "yolov5n-thin.onnx", {"confidence_threshold": "0.7", "iou_threshold": "0.45"}),
    ],
)
def test_nodes_publish_what_the_adapter_decodes_from_each_head(tmp_path, node, file, params):
    """The thin end-to-end pose and YOLOv5 exports through their nodes over DDS, against the adapter on the frames."""
    frames = [cv2.imread(str(Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"))] * 2
    bag = write_image_bag(tmp_path / "bag", frames)
    result = replay(
        bag, tmp_path / "out", node=node, params={"model_path": str(HEADS / file), **KEEP_EVERY_FRAME, **params}
    )
    log = open(result.node_log).read()
    assert result.missing_frames == [], log
    assert ("does not apply" in log) == (node == "yolo_pose"), log  # the end-to-end head says so, YOLOv5's runs NMS
    options = {"confidence": float(params["confidence_threshold"]), "iou": float(params.get("iou_threshold", 0.7))}
    detector = YoloDetector(OnnxRunner.load(HEADS / file, {}, LOG), pose=node == "yolo_pose", **options)
    expected = detections_of(detector.detect(frames[0]))
    for record in json.loads(open(result.answers).read()):
        published = record["detections"]
        assert len(published) == len(expected) > 0
        assert np.allclose([d["xyxy"] for d in published], [d["xyxy"] for d in expected], atol=1e-3)
        assert np.allclose([d["score"] for d in published], [d["score"] for d in expected], atol=1e-6)
        if node == "yolo_pose":
            assert np.allclose([d["keypoints"] for d in published], [d["keypoints"] for d in expected], atol=1e-3)


@_needs(E2E_MODEL)
@_needs(SEG_DATA)
def test_openvino_runs_the_end_to_end_detector_as_onnx_runtime_does():
    from vision_factory.runtime.openvino_runner import OpenVinoRunner

    onnx, openvino = (YoloDetector(runner.load(E2E_MODEL, {}, LOG)) for runner in (OnnxRunner, OpenVinoRunner))
    assert openvino.head == "end2end"
    for path in sorted((SEG_DATA / "images").glob("*.jpg"))[:3]:
        frame = cv2.imread(str(path))
        ours, theirs = detections_of(onnx.detect(frame)), detections_of(openvino.detect(frame))
        assert [d["class_id"] for d in ours] == [d["class_id"] for d in theirs] and ours
        assert np.allclose([d["xyxy"] for d in ours], [d["xyxy"] for d in theirs], atol=0.05)
        assert np.allclose([d["score"] for d in ours], [d["score"] for d in theirs], atol=1e-3)


# --- the end-to-end segmentation head (YOLO26-seg): rows [1, 300, 6 + 32] and the prototypes [1, 32, H/4, W/4] ---

SEG_E2E = HEADS / "yolo26n-seg-e2e.onnx"  # benchmarks/make_yolo26_seg.py


def _seg_reference() -> dict:
    return json.loads((HEADS / "seg_reference.json").read_text())["models"][0]


def _seg_frame(case: dict) -> np.ndarray:
    """A reference case's frame: a file (matplotlib's, shared) or a crop of one ("crop:SOURCE:FIRST:LAST" rows)."""
    source = case["path"]
    if source.startswith("crop:"):
        source, first, last = source[len("crop:") :].rsplit(":", 2)
        frame = cv2.imread(str(_reference_file(source)))[int(first) : int(last)]
    else:
        frame = cv2.imread(str(_reference_file(source)))
    assert hashlib.sha256(frame.tobytes()).hexdigest() == case["pixels_sha256"], case["image"]
    return frame


def _rle_mask(rle: dict) -> np.ndarray:
    """An uncompressed COCO RLE (column-major runs, zeros first) as a bool mask."""
    height, width = rle["size"]
    values = np.zeros(len(rle["counts"]), bool)
    values[1::2] = True
    return np.repeat(values, rle["counts"]).reshape((height, width), order="F")


def _iou_off_the_edge(ours: np.ndarray, truth: np.ndarray, band: int) -> float:
    """Mask IoU over the pixels farther than ``band`` pixels from ``truth``'s edge (1.0 when none is left)."""
    kernel = np.ones((2 * band + 1, 2 * band + 1), np.uint8)
    edge = cv2.dilate(truth.astype(np.uint8), kernel) != cv2.erode(truth.astype(np.uint8), kernel)
    ours, truth = ours & ~edge, truth & ~edge
    union = np.count_nonzero(ours | truth)
    return np.count_nonzero(ours & truth) / union if union else 1.0


@pytest.mark.parametrize("case", _seg_reference()["cases"], ids=lambda case: case["image"])
def test_end_to_end_segmentation_rows_and_masks_are_ultralytics_own(case):
    """Ours against Ultralytics' predict (retina_masks: masks at the frame's size) on the same file and pixels: the
    same detections in the same order (those whose mask is empty left out, as its predictor leaves them), boxes
    within 1 px, scores within 1e-3, and each mask's IoU with Ultralytics' at least 0.9 outside half a prototype cell
    of its edge (random weights make fragmented masks; measured: 1.0 on every pixel)."""
    model = _seg_reference()
    assert hashlib.sha256(SEG_E2E.read_bytes()).hexdigest() == model["sha256"], f"{SEG_E2E} is not the model recorded"
    frame = _seg_frame(case)
    detector = YoloDetector(OnnxRunner.load(SEG_E2E, {}, LOG), confidence=case["conf"], max_detections=1000)
    assert detector.head == "end2end" and detector.mask_channels == 32
    ours, theirs = detections_of(detector.detect(frame)), case["detections"]
    assert len(theirs) >= 20 and len(ours) == len(theirs)
    # half a prototype cell in frame pixels: the prototypes are a quarter of the input, the input gain min(in / frame)
    gain = min(s / f for s, f in zip(detector.size, frame.shape[:2]))
    band = int(np.ceil(0.5 * 4 / gain))
    for detection, reference in zip(ours, theirs, strict=True):
        assert detection["class_id"] == reference["class_id"]
        assert np.abs(np.subtract(detection["xyxy"], reference["xyxy"])).max() <= 1.0, (
            detection["xyxy"],
            reference["xyxy"],
        )
        assert abs(detection["score"] - reference["score"]) <= 1e-3
        assert _iou_off_the_edge(full_mask(detection), _rle_mask(reference["mask"]), band) >= 0.9


def test_the_end_to_end_segmentation_model_is_recognised_and_predict_writes_its_masks(tmp_path):
    from pycocotools import mask as coco_mask

    inspected = CliRunner().invoke(main, ["inspect", str(SEG_E2E)])
    assert inspected.exit_code == 0, inspected.output
    assert "end-to-end YOLO instance segmentation model with 3 classes" in inspected.output
    case = _seg_reference()["cases"][0]
    image = _reference_file(case["path"])
    command = ["predict", "--model-type", "yolo", "--model", str(SEG_E2E), "--format", "json", "--conf", "0.6"]
    predicted = CliRunner().invoke(main, [*command, str(image)])
    assert predicted.exit_code == 0, predicted.output
    assert "end-to-end head" in predicted.stderr
    (record,) = [json.loads(line) for line in predicted.stdout.splitlines()]
    expected = detections_of(
        YoloDetector(OnnxRunner.load(SEG_E2E, {}, LOG), confidence=0.6).detect(cv2.imread(str(image)))
    )
    assert len(record["detections"]) == len(expected) > 0
    for written, detection in zip(record["detections"], expected):
        rle = written["mask"]
        decoded = coco_mask.decode({"size": rle["size"], "counts": rle["counts"].encode()}).astype(bool)
        assert np.array_equal(decoded, full_mask(detection))


def test_eval_scores_the_end_to_end_segmentation_masks_as_pycocotools_does(tmp_path):
    """eval (iou_type segm) on a COCO set with polygons, against pycocotools run here on the predictions it wrote."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    if not SEG_DATA.is_dir():
        pytest.skip(f"{SEG_DATA} not found (shared data)")
    truth = json.loads((SEG_DATA / "annotations.json").read_text())
    images = sorted(truth["images"], key=lambda image: image["file_name"])[:6]
    (tmp_path / "data" / "images").mkdir(parents=True)
    for image in images:
        shutil.copy(SEG_DATA / "images" / image["file_name"], tmp_path / "data" / "images")
    ids = {image["id"] for image in images}
    subset = {**truth, "images": images, "annotations": [a for a in truth["annotations"] if a["image_id"] in ids]}
    (tmp_path / "data" / "annotations.json").write_text(json.dumps(subset))
    command = ["eval", "--model-type", "yolo", "--model", str(SEG_E2E), "--data", str(tmp_path / "data")]
    result = CliRunner().invoke(main, [*command, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "out" / "eval.json").read_text())["metrics"]
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    assert predictions and all("segmentation" in p for p in predictions)
    coco = COCO(str(tmp_path / "data" / "annotations.json"))
    scored = COCOeval(coco, coco.loadRes(predictions), "segm")
    scored.evaluate()
    scored.accumulate()
    scored.summarize()
    assert metrics["mask_AP"] == pytest.approx(max(scored.stats[0], 0.0), abs=1e-9)
    assert metrics["mask_AP50"] == pytest.approx(max(scored.stats[1], 0.0), abs=1e-9)


def node_masks(tmp_path, model: Path, frame: np.ndarray, params: dict[str, str], executable=None, masks=True):
    """One frame through a yolo node (this package's, or ``executable``: a generated package's) over DDS: its
    Detection2DArray and its ~/masks label image, as [height, width] uint16 (``masks`` False: a detector's, None),
    and its log."""
    node_params = {"model_path": str(model), "qos_reliability": "reliable", **params}
    node = NodeProcess(tmp_path, node_params, module="vision_factory.yolo_onnx_node", executable=executable)
    probe = Probe()
    try:
        answers = {"/t/detections": probe.subscribe(Detection2DArray, "/t/detections")}
        if masks:
            answers["/t/masks"] = probe.subscribe(Image, "/t/masks")
        publisher = probe.publisher(Image, "/t/image")
        ready = lambda: publisher.get_subscription_count() > 0 and probe.matched()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), node.log()
        # ~/masks is on demand: the frame goes again, stamped anew, until both answers of one stamp are in.
        header, answered = probe.answered(stamped_anew(publisher, frame, first_sec=7), answers, node)
        found, labels = answered["/t/detections"], answered.get("/t/masks")
        log = node.log()
    finally:
        probe.close()
        node.stop()
    assert found.header == header and header.frame_id == "camera"
    if not masks:
        return found, None, log
    assert labels.header == header
    assert (labels.width, labels.height, labels.encoding) == (frame.shape[1], frame.shape[0], "mono16")
    return found, np.frombuffer(bytes(labels.data), "<u2").reshape(frame.shape[:2]), log


def assert_labels_are_the_masks(found, labels: np.ndarray | None, expected, iou: float = 1.0) -> None:
    """The published detections are the adapter's, and label k of the ~/masks image lies on the k-th detection's
    mask where no earlier one's lies (IoU ``iou`` at least: 1.0, the same pixels)."""
    assert len(found.detections) == len(expected) > 0
    for k, (item, detection) in enumerate(zip(found.detections, expected), start=1):
        assert item.results[0].hypothesis.score == pytest.approx(detection["score"], abs=1e-6 if iou == 1 else 1e-3)
        assert item.results[0].hypothesis.class_id == detection["class_name"]
        if labels is not None:
            own, mask = labels == k, full_mask(detection) & ~np.isin(labels, range(1, k))
            assert np.count_nonzero(own & mask) >= iou * np.count_nonzero(own | mask), k


def test_the_yolo_node_publishes_the_end_to_end_segmentation_masks(tmp_path):
    case = _seg_reference()["cases"][0]
    frame = _seg_frame(case)
    found, labels, log = node_masks(tmp_path, SEG_E2E, frame, {"confidence_threshold": "0.9"})
    assert log.count("does not apply") == 1, log  # no NMS: said once, at start-up
    expected = detections_of(YoloDetector(OnnxRunner.load(SEG_E2E, {}, LOG), confidence=0.9).detect(frame))
    assert_labels_are_the_masks(found, labels, expected)


def test_bench_splits_the_post_processing_of_a_segmentation_model_into_rows_and_masks():
    (result,) = run_bench(SEG_E2E, "onnx:cpu", runs=3, warmup=1, model_type="yolo")
    pipeline = result.pipeline
    assert pipeline["head"] == "end2end" and pipeline["decode_ms"] > 0 and pipeline["masks_ms"] > 0
    assert pipeline["decode_ms"] + pipeline["masks_ms"] == pytest.approx(pipeline["postprocess_ms"], rel=0.5)
    shown = table([result])
    assert "(rows, no NMS" in shown and f"masks {pipeline['masks_ms']:.2f} ms" in shown


@pytest.mark.skipif(not SEG_DATA.is_dir(), reason=f"{SEG_DATA} not found (shared data)")
def test_generated_yolo_packages_take_the_segmentation_end_to_end_and_objectness_heads(tmp_path, monkeypatch):
    """`generate` for onnx and openvino, installed as colcon installs it; each generated node over DDS on the
    end-to-end segmentation export, the YOLOv8-seg model (masks on ~/masks) and the YOLOv5 export, against the
    adapter on the same runtime. OpenVINO cannot compile Ultralytics' end-to-end segmentation ONNX (its
    GatherElements): the generated node refuses it at start-up saying so."""
    from support.generated import generate_and_install, site_packages

    from vision_factory.runtime.openvino_runner import OpenVinoRunner

    monkeypatch.setenv("PYTHONPATH", str(site_packages(tmp_path / "install")))
    photo = _seg_frame(_seg_reference()["cases"][0])
    shapes = cv2.imread(str(SEG_DATA / "images" / "000003.jpg"))
    seg_model = SHARED / "models" / "shapes-yolov8n-seg.onnx"
    cases = [
        (SEG_E2E, photo, {"confidence_threshold": "0.9"}, {"confidence": 0.9}, True),
        (seg_model, shapes, {}, {}, True),
        (
            HEADS / "yolov5n-thin.onnx",
            photo,
            {"confidence_threshold": "0.7", "iou_threshold": "0.45"},
            {"confidence": 0.7, "iou": 0.45},
            False,
        ),
    ]
    for backend, runner in (("onnx", OnnxRunner), ("openvino", OpenVinoRunner)):
        executable = [str(generate_and_install("yolo", backend, f"gen_heads_{backend}", tmp_path))]
        for index, (model, frame, params, options, masks) in enumerate(cases):
            work = tmp_path / f"{backend}_{index}"
            work.mkdir()
            if backend == "openvino" and model == SEG_E2E:
                node = NodeProcess(work, {"model_path": str(model)}, executable=executable)
                assert node.wait(PATIENCE_S) != 0
                assert "OpenVINO cannot compile yolo26n-seg-e2e.onnx" in node.log(), node.log()
                continue
            found, labels, log = node_masks(work, model, frame, params, executable, masks)
            assert f"{backend} " in log.lower() or backend == "onnx", log
            expected = detections_of(YoloDetector(runner.load(model, {}, LOG), **options).detect(frame))
            assert_labels_are_the_masks(found, labels, expected, 1.0 if backend == "onnx" else 0.98)
