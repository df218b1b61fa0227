"""DETR-family heads (RT-DETR, D-FINE), recognised from the file alone and decoded as their exporting projects do,
against test/data/detr_heads/reference.json (benchmarks/make_detr_heads.py: what transformers' image processor and
post_process_object_detection, the RT-DETR repository's deploy reading and Ultralytics' RTDETRPredictor returned on
thin seeded exports of their own models, recorded when the files were made): the same detections, boxes within
1 px, scores within 1e-3; through the detr node over DDS, predict, inspect, eval, compare; and refused by the yolo
node (and a YOLO model by the detr node) at start-up, naming the family."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
import skimage
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper
from PIL import Image
from support.generated import generate_and_install, site_packages
from support.models import _constant_model
from support.results import detections_of
from support.ros_harness import KEEP_EVERY_FRAME, NodeProcess

from vision_factory.cli import main
from vision_factory.families.registry import family
from vision_factory.models.detr import DetrDetector, pil_resize
from vision_factory.models.recognition import WrongFamily, recognise
from vision_factory.parameters import with_defaults
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.bags import write_image_bag
from vision_factory.tools.replay import replay
from vision_factory.tools.verify import verify

HEADS = Path(__file__).parent / "data" / "detr_heads"
YOLO_HEADS = Path(__file__).parent / "data" / "yolo_heads"
SKIMAGE = Path(skimage.__file__).parent / "data"
LOG = logging.getLogger("test")
REFERENCE = json.loads((HEADS / "reference.json").read_text())
CASES = [(model, case) for model in REFERENCE["models"] for case in model["cases"]]
# What inspect says of each file (written out here, not read from the code under test).
FOUND = {
    "rtdetr-hf.onnx": "outputs logits [1, 300, 5] and pred_boxes [1, 300, 4], as Hugging Face's RT-DETR / D-FINE / "
    "DETR give: a DETR detector with 5 classes (sigmoid, the top queries x classes, assumed: no model_type or names "
    "say",
    "dfine-hf.onnx": "as Hugging Face's RT-DETR / D-FINE / DETR give: a DETR detector with 5 classes (sigmoid",
    "detr-hf.onnx": "outputs logits [1, 100, 6] and pred_boxes [1, 100, 4], as Hugging Face's RT-DETR / D-FINE / "
    'DETR give: a DETR detector with 5 classes (softmax over the classes and "no object", each query\'s best, '
    "as DETR (by its metadata model_type 'detr')",
    "rfdetr-renamed.onnx": "outputs dets [1, 300, 4] and labels [1, 300, 5], as RF-DETR's export gives them: a DETR "
    "detector with 5 classes (sigmoid, the top queries x classes; boxes cx, cy, w, h normalised)",
    "rtdetr-hf-deploy.onnx": "inputs images [1, 3, 320, 320] and orig_target_sizes [1, 2] (the frame's width and "
    "height), outputs labels [1, 300], boxes [1, 300, 4] and scores [1, 300]: an RT-DETR / D-FINE deploy export",
    "rtdetr-ul.onnx": "Ultralytics metadata head 'RTDETRDecoder' and one output output0 [1, 300, 6] read as [1, N, 6] "
    "rows cx, cy, w, h (normalised), score, class: an Ultralytics RT-DETR detector with 3 classes",
    "rtdetr-ul-old.onnx": "Ultralytics metadata task 'detect' and 300 rows, which are not a YOLO head's anchors on a "
    "320x320 input and one output output0 [1, 300, 7] read as [1, N, 4 + classes] rows cx, cy, w, h (normalised) "
    "and 3 class scores: an Ultralytics RT-DETR detector with 3 classes",
}


def _load(name: str) -> OnnxRunner:
    return OnnxRunner.load(HEADS / name, {}, LOG)


def _frame(name: str) -> np.ndarray:
    return cv2.imread(str(SKIMAGE / name))


def _constant_outputs(path: Path, image: str, outputs: dict[str, np.ndarray]) -> Path:
    """A model of one image input [1, 3, 32, 32] whose outputs are these arrays, whatever the image."""
    graph = helper.make_graph(
        [helper.make_node("Identity", [f"{name}_value"], [name]) for name in outputs],
        "constant",
        [helper.make_tensor_value_info(image, TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(value.shape)) for name, value in outputs.items()],
        [numpy_helper.from_array(value, f"{name}_value") for name, value in outputs.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _same_detections(ours, theirs) -> None:
    """Each of theirs matched by one of ours of its class, box within 1 px and score within 1e-3; no more of ours.
    (Matched rather than zipped: queries scoring alike to 1e-6 may trade places on another CPU.)"""
    assert theirs and len(ours) == len(theirs), (len(ours), len(theirs))
    free = list(ours)
    for reference in theirs:
        match = next(
            (
                d
                for d in free
                if d["class_id"] == reference["class_id"]
                and np.abs(np.subtract(d["xyxy"], reference["xyxy"])).max() <= 1.0
                and abs(d["score"] - reference["score"]) <= 1e-3
            ),
            None,
        )
        assert match is not None, (reference, [(d["class_id"], d["xyxy"], d["score"]) for d in free])
        free.remove(match)


@pytest.mark.parametrize("model,case", CASES, ids=[f"{m['file']}-{c['image']}" for m, c in CASES])
def test_same_detections_as_the_exporting_projects_own_post_processing(model, case):
    path, image = HEADS / model["file"], SKIMAGE / case["image"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == model["sha256"], f"{path} is not the model recorded"
    assert hashlib.sha256(image.read_bytes()).hexdigest() == case["sha256"], f"{image} is not the image recorded"
    detector = DetrDetector(_load(model["file"]), confidence=case["conf"], max_detections=1000)
    heads = {"ultralytics_scores": "ultralytics", "logits_boxes_softmax": "logits_boxes"}
    assert detector.head == heads.get(model["head"], model["head"])
    assert detector.scoring == ("softmax" if model["head"] == "logits_boxes_softmax" else "sigmoid")
    ours = detections_of(detector.detect(_frame(case["image"])))
    _same_detections(ours, case["detections"])
    if model["head"] in ("logits_boxes", "rfdetr"):  # transformers' and RF-DETR's top-k: best first
        assert [d["score"] for d in ours] == sorted((d["score"] for d in ours), reverse=True)


def test_hugging_face_exports_are_fed_the_frame_as_pil_resizes_it_not_as_opencv_does():
    """The image processor resizes with PIL's bilinear filter, antialiased on a downscale; OpenCV's INTER_LINEAR
    gives other pixels, and on these models scores off by more than 1e-3."""
    frame = _frame("coffee.png")  # 600 x 400 into 320 x 320: a downscale
    ours = pil_resize(frame, 320, 320)
    pil = np.asarray(Image.fromarray(frame[..., ::-1]).resize((320, 320), Image.Resampling.BILINEAR))[..., ::-1]
    assert np.array_equal(ours, pil)
    opencv = cv2.resize(frame, (320, 320), interpolation=cv2.INTER_LINEAR)
    assert np.abs(opencv.astype(int) - ours).max() > 10
    detector = DetrDetector(_load("rtdetr-hf.onnx"), confidence=0.7)
    feeds, _ = detector.preprocess(frame)
    assert np.array_equal(feeds["pixel_values"][0].transpose(1, 2, 0), pil[..., ::-1].astype(np.float32) / 255)


def test_ultralytics_rows_are_kept_in_the_models_order_above_the_threshold_without_nms(tmp_path):
    """RTDETRPredictor.postprocess on rows of class scores: each query's best class, rows scoring above conf in the
    model's order (no sorting, no NMS), the first max_det; boxes cx, cy, w, h x the frame's size, not clipped."""
    rows = np.zeros((300, 4 + 3), np.float32)
    rows[0] = [0.25, 0.5, 0.5, 0.5, 0.1, 0.9, 0.2]  # cat 0.9
    rows[1] = [0.26, 0.5, 0.5, 0.5, 0.1, 0.8, 0.2]  # almost the same box and class: kept (no NMS)
    rows[2] = [0.5, 0.5, 0.2, 0.2, 0.3, 0.1, 0.05]  # person 0.3, after the better ones above: kept in place
    rows[3] = [0.95, 0.5, 0.2, 0.2, 0.7, 0.0, 0.0]  # person 0.7, reaching past the frame's right edge
    rows[4] = [0.5, 0.5, 0.2, 0.2, 0.25, 0.0, 0.0]  # at the threshold: not above it, dropped
    metadata = {"head": "RTDETRDecoder", "task": "detect", "stride": "32"}
    model = _constant_model(tmp_path / "ul.onnx", rows[None], size=64, names="{0: 'person', 1: 'cat', 2: 'cup'}",
                            metadata=metadata)  # fmt: skip
    detector = DetrDetector(OnnxRunner.load(model, {}, LOG))
    assert (detector.head, detector.selected, detector.names) == ("ultralytics", False, ["person", "cat", "cup"])
    frame = np.zeros((100, 200, 3), np.uint8)
    found = detections_of(detector.detect(frame))
    assert [(d["class_name"], round(d["score"], 2)) for d in found] == [("cat", 0.9), ("cat", 0.8), ("person", 0.3),
                                                                  ("person", 0.7)]  # fmt: skip
    assert np.allclose([d["xyxy"] for d in found], [[0, 25, 100, 75], [2, 25, 102, 75], [80, 40, 120, 60],
                                                 [170, 40, 210, 60]])  # fmt: skip
    assert detector.head_note == (
        "DETR head (ultralytics): its queries are final detections, no NMS is run (iou_threshold does not apply)"
    )
    detector.keep_classes([0])
    assert [round(d["score"], 2) for d in detections_of(detector.detect(frame))] == [0.3, 0.7]
    few = DetrDetector(OnnxRunner.load(model, {}, LOG), max_detections=2)
    assert [round(d["score"], 2) for d in detections_of(few.detect(frame))] == [0.9, 0.8]


def test_hugging_face_top_k_is_over_queries_times_classes(tmp_path):
    """post_process_object_detection with focal loss: sigmoid scores, the best queries-many of queries x classes (a
    query may come twice, once per class), best first, those above the threshold."""
    logits = np.full((1, 4, 3), -9.0, np.float32)
    logits[0, 0] = [2.0, 1.0, -9.0]  # query 0: class 0 (0.881) and class 1 (0.731)
    logits[0, 3, 2] = 0.5  # query 3: class 2 (0.622)
    boxes = np.array([[[0.5, 0.5, 1.0, 0.5], [0, 0, 0, 0], [0, 0, 0, 0], [0.25, 0.25, 0.5, 0.5]]], np.float32)
    model = _constant_outputs(tmp_path / "hf.onnx", "pixel_values", {"logits": logits, "pred_boxes": boxes})
    detector = DetrDetector(OnnxRunner.load(model, {}, LOG), confidence=0.5)
    found = detections_of(detector.detect(np.zeros((40, 80, 3), np.uint8)))
    assert [(d["class_id"], round(d["score"], 3)) for d in found] == [(0, 0.881), (1, 0.731), (2, 0.622)]
    assert np.allclose([d["xyxy"] for d in found], [[0, 10, 80, 30], [0, 10, 80, 30], [0, 0, 40, 20]])


def test_detr_softmax_is_told_by_the_class_names_or_asked_for_never_silently_assumed(tmp_path):
    """A logits + pred_boxes file without model_type: 5 class names and 6 logits is DETR's softmax with its "no
    object" class; nothing to tell it by: sigmoid, said at start-up; score_function softmax asks for it; a
    Conditional DETR (sigmoid, top 100, normalised) is refused by its model_type, not decoded wrongly."""
    logits = np.full((1, 3, 6), -4.0, np.float32)
    logits[0, 0] = [3.0, 0.0, -4.0, -4.0, -4.0, 0.0]  # query 0: class 0, e^3 / (e^3 + 2 + 3 e^-4) = 0.907
    logits[0, 1, 5] = 5.0  # query 1: "no object"; its best class e^-4 / (e^5 + 5 e^-4) < 0.001
    logits[0, 2, 2] = 1.0  # query 2: class 2, e / (e + 5 e^-4) = 0.967
    boxes = np.array([[[0.5, 0.5, 1.0, 0.5], [0.5, 0.5, 0.2, 0.2], [0.25, 0.25, 0.5, 0.5]]], np.float32)
    model = _constant_outputs(tmp_path / "detr.onnx", "pixel_values", {"logits": logits, "pred_boxes": boxes})
    frame = np.zeros((40, 80, 3), np.uint8)
    named = DetrDetector(OnnxRunner.load(model, {}, LOG), confidence=0.2, names=["a", "b", "c", "d", "e"])
    assert named.scoring == "softmax" and named.class_count == 5 and not named.assumed
    found = detections_of(named.detect(frame))
    assert [(d["class_name"], round(d["score"], 3)) for d in found] == [("a", 0.907), ("c", 0.967)]  # query order
    assert np.allclose([d["xyxy"] for d in found], [[0, 10, 80, 30], [0, 0, 40, 20]])
    asked = DetrDetector(OnnxRunner.load(model, {}, LOG), confidence=0.2, score_function="softmax")
    found = detections_of(asked.detect(frame))
    assert [(d["class_id"], round(d["score"], 3)) for d in found] == [(0, 0.907), (2, 0.967)]
    unsaid = DetrDetector(OnnxRunner.load(model, {}, LOG), confidence=0.2)
    assert unsaid.scoring == "sigmoid" and unsaid.class_count == 6
    assert "assumed: the model records no model_type or class names" in unsaid.head_note
    assert "score_function softmax" in unsaid.head_note
    with pytest.raises(ValueError, match="score_function 'tanh': give one of auto, sigmoid, softmax"):
        DetrDetector(OnnxRunner.load(model, {}, LOG), score_function="tanh")
    conditional = onnx.load(model)
    conditional.metadata_props.add(key="model_type", value="conditional_detr")
    onnx.save(conditional, tmp_path / "conditional.onnx")
    with pytest.raises(ValueError, match="a transformers conditional_detr export .* which this adapter does not"):
        DetrDetector(OnnxRunner.load(tmp_path / "conditional.onnx", {}, LOG))


@pytest.mark.parametrize("file", sorted(FOUND))
def test_inspect_says_what_it_found(file):
    inspected = CliRunner().invoke(main, ["inspect", str(HEADS / file)])
    assert inspected.exit_code == 0, inspected.output
    text = " ".join(inspected.output.split())
    assert "looks like: detr — " in text and FOUND[file] in text, text
    assert "no NMS is run (iou_threshold does not apply)" in text
    assert recognise(_load(file)).family == "detr"


def _build(name: str, model: Path):
    spec = family(name)
    return spec.build(
        with_defaults(spec.parameters, {"model_path": str(model)}, name), lambda p: OnnxRunner.load(p, {}, LOG)
    )


@pytest.mark.parametrize("file", sorted(FOUND))
def test_the_yolo_node_refuses_a_detr_model_naming_the_detr_node(file):
    with pytest.raises(WrongFamily) as raised:
        _build("yolo", HEADS / file)
    message = str(raised.value)
    assert message.startswith(f"model_path {HEADS / file} looks like a detr model"), message
    assert "yolo_node needs a YOLO detector" in message


def test_the_detr_node_refuses_a_yolo_model():
    model = YOLO_HEADS / "yolov5n-thin.onnx"
    with pytest.raises(WrongFamily) as raised:
        _build("detr", model)
    message = str(raised.value)
    assert message.startswith(f"model_path {model} looks like a yolo model (output output0 [1, 1575, 8]); "), message
    assert "detr_node needs a DETR-family detector" in message


def test_the_yolo_node_started_with_an_rtdetr_model_says_so_and_exits(tmp_path):
    model = HEADS / "rtdetr-ul.onnx"
    process = NodeProcess(tmp_path, {"model_path": str(model)}, module="vision_factory.yolo_onnx_node")
    assert process.wait(30) == 2
    process.stop()
    log = process.log()
    assert "cannot start" in log and "Traceback" not in log, log
    assert f"model_path {model} looks like a detr model" in log and "yolo_node needs a YOLO detector" in log, log


@pytest.mark.parametrize(
    "file,conf",
    [
        ("rtdetr-hf.onnx", "0.7497"),
        ("rtdetr-hf-deploy.onnx", "0.7497"),
        ("rtdetr-ul-old.onnx", "0.8019"),
        ("detr-hf.onnx", "0.6"),
        ("rfdetr-renamed.onnx", "0.72"),
    ],
)
def test_the_detr_node_publishes_what_the_adapter_decodes(tmp_path, file, conf):
    """Over DDS: the frames of a bag through the detr node, against the adapter on the same frames."""
    frames = [_frame("astronaut.png"), _frame("coffee.png")]
    bag = write_image_bag(tmp_path / "bag", frames)
    params = {"model_path": str(HEADS / file), "confidence_threshold": conf, **KEEP_EVERY_FRAME}
    result = replay(bag, tmp_path / "out", node="detr", params=params)
    log = open(result.node_log).read()
    assert result.missing_frames == [], log
    assert log.count("its queries are final detections, no NMS is run") == 1, log  # said once, at start-up
    detector = DetrDetector(_load(file), confidence=float(conf))
    records = json.loads(open(result.answers).read())
    for frame, record in zip(frames, records, strict=True):
        expected, published = detections_of(detector.detect(frame)), record["detections"]
        assert len(published) == len(expected) > 0
        assert [d["class_name"] for d in published] == [d["class_name"] for d in expected]
        assert np.allclose([d["xyxy"] for d in published], [d["xyxy"] for d in expected], atol=1e-3)
        assert np.allclose([d["score"] for d in published], [d["score"] for d in expected], atol=1e-6)


def test_predict_writes_what_the_adapter_decodes_and_says_no_nms():
    image = SKIMAGE / "chelsea.png"
    model = HEADS / "rtdetr-ul.onnx"
    predicted = CliRunner().invoke(
        main,
        ["predict", "--model-type", "detr", "--model", str(model), str(image), "--conf", "0.8019", "--format", "json"],
    )
    assert predicted.exit_code == 0, predicted.output
    assert "DETR head (ultralytics): its queries are final detections, no NMS is run" in predicted.stderr
    (record,) = [json.loads(line) for line in predicted.stdout.splitlines()]
    expected = detections_of(DetrDetector(_load("rtdetr-ul.onnx"), confidence=0.8019).detect(_frame("chelsea.png")))
    assert record["detections"] == expected and expected
    assert {d["class_name"] for d in record["detections"]} <= {"person", "cat", "cup"}  # the metadata's names
    refused = CliRunner().invoke(
        main, ["predict", "--model-type", "detr", "--model", str(model), str(image), "--iou", "0.5"]
    )
    assert refused.exit_code != 0 and "detr models take no iou_threshold" in refused.output


def test_predict_takes_the_score_function_of_a_file_that_does_not_say():
    """rtdetr-hf.onnx records neither model_type nor names: predict says sigmoid is assumed; --score-function softmax
    decodes it as DETR (5 logits: 4 classes and "no object") as the adapter asked for softmax does."""
    image, model = SKIMAGE / "coffee.png", HEADS / "rtdetr-hf.onnx"
    arguments = ["predict", "--model-type", "detr", "--model", str(model), str(image), "--format", "json"]
    assumed = CliRunner().invoke(main, [*arguments, "--conf", "0.7497"])
    assert assumed.exit_code == 0 and "sigmoid, the top queries x classes, assumed" in assumed.stderr, assumed.output
    asked = CliRunner().invoke(main, [*arguments, "--conf", "0.3", "--score-function", "softmax"])
    assert asked.exit_code == 0, asked.output
    assert 'DETR head (logits_boxes; softmax over the classes and "no object"' in asked.stderr
    (record,) = [json.loads(line) for line in asked.stdout.splitlines()]
    expected = detections_of(
        DetrDetector(_load("rtdetr-hf.onnx"), confidence=0.3, score_function="softmax").detect(_frame("coffee.png"))
    )
    assert record["detections"] == expected and expected
    assert {d["class_id"] for d in record["detections"]} <= {0, 1, 2, 3}
    refused = CliRunner().invoke(main, ["predict", "--model-type", "yolo", "--model", str(model), str(image),
                                        "--score-function", "softmax"])  # fmt: skip
    assert refused.exit_code != 0 and "yolo models take no score_function" in refused.output


def test_verify_passes_the_detr_node_on_the_hugging_face_export(tmp_path):
    """verify: the node over ROS 2 against the model run offline through the adapter, answer by answer."""
    frames = [_frame(name) for name in ("astronaut.png", "coffee.png", "chelsea.png")]
    bag = write_image_bag(tmp_path / "bag", frames)
    config = tmp_path / "detr.yaml"  # the deployment's parameters: for the node and the offline model alike
    config.write_text('/**:\n  ros__parameters:\n    model_path: ""\n    confidence_threshold: 0.7497\n')
    report = verify(bag, "detr", HEADS / "rtdetr-hf.onnx", tmp_path / "v", KEEP_EVERY_FRAME, params_file=config)
    assert report.passed, report.text()
    assert [frame.model_count for frame in report.frames] == [7, 9, 3]  # the reference's counts at this threshold
    assert max(frame.deviation_px for frame in report.frames) <= 1e-3


def _coco_set(folder: Path, file: str = "rtdetr-hf.onnx", count: int = 2) -> Path:
    """The first ``count`` images (astronaut, coffee, chelsea) as a COCO data set of 5 categories class_0..class_4,
    each image's truth the reference's detections of ``file`` (so that AP is far from 0)."""
    (folder / "images").mkdir(parents=True)
    (reference,) = [m for m in REFERENCE["models"] if m["file"] == file]
    images, annotations = [], []
    for index, case in enumerate(reference["cases"][:count], start=1):
        frame = _frame(case["image"])
        cv2.imwrite(str(folder / "images" / case["image"]), frame)
        images.append({"id": index, "file_name": case["image"], "width": frame.shape[1], "height": frame.shape[0]})
        for truth in case["detections"]:
            x1, y1, x2, y2 = truth["xyxy"]
            box = [x1, y1, x2 - x1, y2 - y1]
            annotations.append({"id": len(annotations) + 1, "image_id": index, "category_id": truth["class_id"] + 1,
                                "bbox": box, "area": box[2] * box[3], "iscrowd": 0})  # fmt: skip
    categories = [{"id": i + 1, "name": f"class_{i}"} for i in range(5)]
    data = {"images": images, "annotations": annotations, "categories": categories}
    (folder / "annotations.json").write_text(json.dumps(data))
    return folder


def test_eval_scores_the_detr_model_as_pycocotools_does_on_the_adapters_detections(tmp_path):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    data = _coco_set(tmp_path / "set")
    model = HEADS / "rtdetr-hf.onnx"
    arguments = ["eval", "--model-type", "detr", "--model", str(model), "--data", str(data), "--out", str(tmp_path)]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "eval.json").read_text())["metrics"]
    # pycocotools on the adapter's own detections at validation confidence 0.001, class i -> category i + 1
    detector, results = DetrDetector(_load("rtdetr-hf.onnx"), confidence=0.001), []
    for image in json.loads((data / "annotations.json").read_text())["images"]:
        for d in detections_of(detector.detect(_frame(image["file_name"]))):
            x1, y1, x2, y2 = d["xyxy"]
            box = [x1, y1, x2 - x1, y2 - y1]
            category = d["class_id"] + 1
            results.append({"image_id": image["id"], "category_id": category, "bbox": box, "score": d["score"]})
    truth = COCO(str(data / "annotations.json"))
    scored = COCOeval(truth, truth.loadRes(results), "bbox")
    scored.evaluate(), scored.accumulate(), scored.summarize()
    assert metrics["AP"] == pytest.approx(scored.stats[0], abs=1e-6) and metrics["AP"] > 0.5, metrics
    assert metrics["AP50"] == pytest.approx(scored.stats[1], abs=1e-6)


def _coco_ap(data: Path, detector: DetrDetector) -> float:
    """pycocotools' AP of the detector's detections (class i -> category i + 1) on the COCO set ``data``."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    results = []
    for image in json.loads((data / "annotations.json").read_text())["images"]:
        for d in detections_of(detector.detect(_frame(image["file_name"]))):
            x1, y1, x2, y2 = d["xyxy"]
            box = [x1, y1, x2 - x1, y2 - y1]
            category = d["class_id"] + 1
            results.append({"image_id": image["id"], "category_id": category, "bbox": box, "score": d["score"]})
    truth = COCO(str(data / "annotations.json"))
    scored = COCOeval(truth, truth.loadRes(results), "bbox")
    scored.evaluate(), scored.accumulate(), scored.summarize()
    return scored.stats[0]


@pytest.mark.parametrize("target_cpu", ["auto", "avx2"])
def test_quantize_reports_the_int8_detr_models_loss_as_pycocotools_measures_it(tmp_path, target_cpu):
    """quantize of the DETR (softmax) export: the INT8 model keeps model_type, so the adapter still decodes it as
    DETR (softmax, ImageNet input); the AP it reports for FP32 and INT8 on real images (truth: FP32's reference
    detections) is pycocotools' on each model's own detections, whatever this CPU's int8 kernels (VNNI or AVX2's 7-bit
    weights) make of it. No bound on the loss itself: these are random weights (drawn wide so that queries differ),
    through which int8 rounding travels unlike it does through trained ones (here the backbone in int8 loses 0.27 AP
    on a VNNI CPU); the loss of a trained DETR is what quantize's --max-loss checks for its user."""
    from vision_factory.tools.quantize import quantize

    data = _coco_set(tmp_path / "set", "detr-hf.onnx", 3)
    out = tmp_path / "detr_int8.onnx"
    report = quantize("detr", HEADS / "detr-hf.onnx", data / "images", out, "onnx", frames=3, data=data, speed_runs=1,
                      accept_loss=True, target_cpu=target_cpu)  # fmt: skip
    summary = json.loads(report.files["summary"].read_text())
    int8 = DetrDetector(OnnxRunner.load(out, {}, LOG), confidence=0.001)
    assert int8.scoring == "softmax" and not int8.assumed and int8.class_count == 5
    assert onnx.load(out).graph.node and any(n.op_type == "QuantizeLinear" for n in onnx.load(out).graph.node)
    fp32 = DetrDetector(_load("detr-hf.onnx"), confidence=0.001)
    metrics = summary["comparison"]["metrics"]["AP"]
    assert metrics["a"] == pytest.approx(_coco_ap(data, fp32), abs=1e-6) and metrics["a"] > 0.9, metrics
    assert metrics["b"] == pytest.approx(_coco_ap(data, int8), abs=1e-6), metrics
    assert summary["comparison"]["outputs"]["matched"] > 0
    assert summary["loss"]["value"] == pytest.approx(metrics["a"] - metrics["b"], abs=1e-6), summary["loss"]


def test_compare_onnx_runtime_and_openvino_on_a_d_fine_export(tmp_path):
    """OpenVINO compiles and runs the D-FINE export (grid sampling, top-k) as ONNX Runtime does."""
    data = _coco_set(tmp_path / "set")
    arguments = ["compare", "--model-type", "detr", "--model", str(HEADS / "dfine-hf.onnx"), "--data", str(data)]
    result = CliRunner().invoke(main, [*arguments, "--a", "onnx:cpu", "--b", "openvino:CPU", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (saved,) = tmp_path.glob("compare_set_dfine-hf-onnx-cpu_vs_dfine-hf-openvino-CPU.json")
    report = json.loads(saved.read_text())
    assert report["verdict"] == "excellent", report
    outputs = report["outputs"]
    assert outputs["matched"] > 100 and outputs["only_in_a"] == outputs["only_in_b"] == 0, outputs
    assert outputs["box_delta_max_px"] < 0.01 and outputs["score_delta_max"] < 1e-4, outputs


def test_a_generated_detr_package_publishes_what_this_packages_node_does(tmp_path, monkeypatch):
    """generate: the detr family as its own package (ONNX Runtime), installed as colcon would, run over the same bag
    as vision_factory's detr node: the same detections; Pillow, which resizes its frames, among its requirements."""
    executable = generate_and_install("detr", "onnx", "gen_detr", tmp_path)
    setup = (tmp_path / "src" / "gen_detr" / "setup.py").read_text()
    assert '"pillow",' in setup and "python3-pil" in (tmp_path / "src" / "gen_detr" / "package.xml").read_text()
    monkeypatch.setenv("PYTHONPATH", str(site_packages(tmp_path / "install")))
    bag = write_image_bag(tmp_path / "bag", [_frame("astronaut.png"), _frame("chelsea.png")])
    params = {"model_path": str(HEADS / "rtdetr-hf-deploy.onnx"), "confidence_threshold": "0.7497", **KEEP_EVERY_FRAME}
    ours = replay(bag, tmp_path / "ours", node="detr", params=params)
    theirs = replay(bag, tmp_path / "theirs", node="detr", params=params, executable=[str(executable)])
    a, b = (json.loads(Path(result.answers).read_text()) for result in (ours, theirs))
    assert len(a) == len(b) == 2 and all(record["detections"] for record in a)
    assert [record["detections"] for record in a] == [record["detections"] for record in b]


@pytest.mark.parametrize("shape", [[1, 7, 84], [1, 84, 7], [1, 7, 340], [1, 340, 7]])
def test_yolo_exports_without_the_head_key_stay_yolo(tmp_path, shape):
    """Ultralytics metadata without ``head`` (exports before 8.4) and rows that are a YOLO head's anchors on the
    input (84 at strides 8-32 on 64 x 64, 340 at 4-32), either way round: a YOLO detector, not an RT-DETR."""
    metadata = {"task": "detect", "stride": "32"}
    model = _constant_model(tmp_path / "y.onnx", np.zeros(shape, np.float32), size=64, names="", metadata=metadata)
    assert recognise(OnnxRunner.load(model, {}, LOG)).family == "yolo"


# DETR exports that score no class: transformers' logits [1, Q, 0]; a DETR (softmax) whose one logit is its "no
# object"; RF-DETR's labels [1, Q, 0]. Predict answered nothing for them, or "attempt to get argmax of an empty
# sequence"; refused as they load.
NO_CLASS = {
    "logits of no class": ({"logits": np.zeros((1, 3, 0), np.float32)}, {}),
    "only no object": ({"logits": np.zeros((1, 3, 1), np.float32)}, {"model_type": "detr"}),
    "rf-detr labels of no class": ({"labels": np.zeros((1, 3, 0), np.float32)}, {}),
}


def _no_class_model(path: Path, case: str) -> Path:
    scores, metadata = NO_CLASS[case]
    boxes = np.full((1, 3, 4), 0.5, np.float32)
    outputs = {"dets": boxes, **scores} if "labels" in scores else {**scores, "pred_boxes": boxes}
    model = onnx.load(_constant_outputs(path, "pixel_values", outputs))
    helper.set_model_props(model, metadata)
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("case", list(NO_CLASS))
def test_a_detr_model_that_scores_no_class_is_refused_as_it_loads_naming_its_outputs(tmp_path, case):
    model = _no_class_model(tmp_path / "detr.onnx", case)
    image = tmp_path / "frame.png"
    cv2.imwrite(str(image), np.zeros((32, 32, 3), np.uint8))
    done = CliRunner().invoke(main, ["predict", "--model-type", "detr", "--model", str(model), str(image)])
    assert done.exit_code == 1 and isinstance(done.exception, SystemExit), (done.output, done.exception)
    assert "Error: the DETR model's outputs " in done.output and "score no class" in done.output, done.output
    assert "the file is damaged or no detector" in done.output, done.output


def test_the_detr_node_started_with_a_model_of_no_class_says_so_and_exits(tmp_path):
    model = _no_class_model(tmp_path / "detr.onnx", "logits of no class")
    process = NodeProcess(tmp_path, {"model_path": str(model)}, module="vision_factory.detr_onnx_node")
    code = process.wait(30)
    process.stop()
    log = process.log()
    assert code == 2 and "cannot start" in log and "Traceback" not in log, log
    assert "the DETR model's outputs logits [1, 3, 0] float32, pred_boxes [1, 3, 4] float32 score no class" in log
