"""The tools beside predict for the prompted families (issues 33 and 34): eval, compare, bench, replay and quantize of
open_vocab (Grounding DINO, OWL: a text prompt and the export's tokenizer) and sam (an encoder with its decoder beside
it, prompted by boxes), on the committed architecture-true test exports (test/data/open_vocab, test/data/sam). Their
weights are seeded, not trained: boxes and masks are arbitrary, so what is checked is that each tool loads the
family's extra inputs, runs, maps what it finds to the truth's categories exactly, and records it."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
from rclpy.serialization import serialize_message
from std_msgs.msg import Header
from support.cli import run_cli
from support.data import coco_split
from support.real_models import SHARED
from test_open_vocab import DATA as OPEN_VOCAB
from test_sam import DATA as SAM
from test_sam import REFERENCE as SAM_REFERENCE
from test_sam import SKIMAGE, decoded, iou
from test_yolo_world import DATA as YOLO_WORLD

from vision_factory.families.registry import family
from vision_factory.results import DETECTIONS
from vision_factory.results.boxes import Boxes
from vision_factory.results.frame import FrameResult
from vision_factory.ros.messages import bgr_to_message
from vision_factory.runtime.backends import load_target
from vision_factory.tools.bags import RawMessage, read_messages, write_image_bag, write_messages
from vision_factory.tools.bench import node_params, run_bench
from vision_factory.tools.bench_prompted import BENCH_PROMPT, prompt_values
from vision_factory.tools.coco_eval import evaluate_detections, predict_coco
from vision_factory.tools.coco_prompts import eval_detector
from vision_factory.tools.commands import UsageError
from vision_factory.tools.evaluation import evaluation
from vision_factory.tools.predict import detector_from_options
from vision_factory.tools.quantize import quantize
from vision_factory.tools.quantize_calibration import calibration_inputs
from vision_factory.tools.replay import replay

GD = OPEN_VOCAB / "grounding_dino" / "grounding-dino-hf.onnx"
OWLV2 = OPEN_VOCAB / "owl" / "owlv2.onnx"
META = next(model for model in SAM_REFERENCE["models"] if model["layout"] == "meta")
ENCODER, DECODER = SAM / META["encoder"], SAM / META["decoder"]
SHAPES, SHAPES_SEG = SHARED / "data" / "shapes-val", SHARED / "data" / "shapes-seg-val"
needs_shapes = pytest.mark.skipif(not SHAPES_SEG.is_dir(), reason=f"{SHARED}/data is not there (shared data sets)")


def _subset(tmp_path: Path, source: Path, count: int) -> Path:
    """The first ``count`` images of a COCO folder and their annotations, as a COCO folder."""
    return coco_split(source, tmp_path / "split", 0, slice(0, count)) / "eval"


@needs_shapes
def test_eval_prompts_an_open_vocabulary_detector_with_the_truths_category_names(tmp_path):
    data = _subset(tmp_path, SHAPES, 3)
    report = evaluate_detections("open_vocab", data, tmp_path / "out", model=GD)
    record = json.loads((tmp_path / "out" / "eval.json").read_text())
    assert record["prompt"] == "circle . square . triangle"  # the categories, a phrase each, in their order
    assert set(record["metrics"]) == {"AP", "AP50", "AP75", "AR100"}
    assert all(0.0 <= value <= 1.0 for value in record["metrics"].values())
    found = json.loads(Path(record["predictions"]).read_text())
    assert found and {entry["category_id"] for entry in found} <= {0, 1, 2}
    assert record["skipped_detections"] == 0 and "AP" in report.shown()


@needs_shapes
def test_each_detections_phrase_maps_to_the_category_of_that_name(tmp_path):
    """Categories of other ids in another order than the prompt's: each COCO result carries the id of the category
    named by the phrase the detector gave that detection (run apart on the same image), by name, not by place."""
    data = _subset(tmp_path, SHAPES, 2)
    truth = json.loads((data / "annotations.json").read_text())
    truth["categories"] = [{"id": 12, "name": "triangle"}, {"id": 3, "name": "circle"}, {"id": 7, "name": "square"}]
    ids = {"triangle": 12, "circle": 3, "square": 7}
    old = {0: 3, 1: 7, 2: 12}
    for annotation in truth["annotations"]:
        annotation["category_id"] = old[annotation["category_id"]]
    (data / "annotations.json").write_text(json.dumps(truth))
    runner = load_target("onnx:cpu", OWLV2)
    prompt = {"--prompt": "square . circle"}  # a prompt naming two of the three, in another order
    detector = eval_detector("open_vocab", OWLV2, runner, "onnx:cpu", truth, data / "annotations.json", prompt)
    results = predict_coco(detector, data, "bbox").results
    expected = []
    for image in truth["images"]:
        found = detector.detect(cv2.imread(str(data / "images" / image["file_name"]))).boxes
        expected += [(image["id"], ids[label], round(score, 5)) for label, score in zip(found.labels, found.scores)]
    assert expected and {label for _, label, _ in expected} == {3, 7}
    assert [(r["image_id"], r["category_id"], round(r["score"], 5)) for r in results] == expected


@needs_shapes
def test_eval_of_sam_prompts_it_with_each_images_truth_boxes(tmp_path):
    data = _subset(tmp_path, SHAPES_SEG, 1)
    truth = json.loads((data / "annotations.json").read_text())
    evaluate_detections("sam", data, tmp_path / "out", model=ENCODER, options={"--decoder": DECODER})
    record = json.loads((tmp_path / "out" / "eval.json").read_text())
    assert {"AP", "mask_AP", "mask_AP50", "mask_AR100"} <= set(record["metrics"])
    found = json.loads(Path(record["predictions"]).read_text())
    # a mask per truth box whose mask is not empty, each of its box's category, in the truth's order
    assert 0 < len(found) <= len(truth["annotations"])
    assert [r["category_id"] for r in found] == [a["category_id"] for a in truth["annotations"]][: len(found)]
    assert all("segmentation" in r for r in found)


@needs_shapes
@pytest.mark.parametrize(("model_type", "model", "source", "prompts"), [
    ("open_vocab", OWLV2, SHAPES, {}),
    ("sam", ENCODER, SHAPES_SEG, {"--decoder": DECODER}),
])  # fmt: skip
def test_compare_runs_a_prompted_family_on_onnx_runtime_and_openvino(tmp_path, model_type, model, source, prompts):
    pytest.importorskip("openvino")
    data = _subset(tmp_path, source, 1)
    options = {"data": data, "out_dir": tmp_path / "out", "prompts": prompts}
    configurations = ((model, "onnx:cpu"), (model, "openvino:CPU"))
    report = evaluation(family(model_type).result).compare(model_type, configurations, options)
    saved = json.loads(next((tmp_path / "out").glob("compare_*.json")).read_text())
    assert saved["outputs"]["matched"] > 0 and saved["outputs"]["only_in_a"] == saved["outputs"]["only_in_b"] == 0
    assert "AP" in saved["metrics"] and "verdict" in report.shown()


@pytest.mark.parametrize(("model_type", "model", "prompts", "part"), [
    ("open_vocab", GD, {"--prompt": "a person . a tie"}, "text_ms"),
    ("sam", ENCODER, {"--decoder": DECODER}, "decoder_ms_per_box"),
])  # fmt: skip
def test_bench_times_a_prompted_family_on_its_prompts_inputs(model_type, model, prompts, part):
    (result,) = run_bench(model, "onnx:cpu", runs=2, warmup=0, model_type=model_type, prompts=prompts)
    assert result.available, result.reason
    assert result.p50_ms > 0 and result.pipeline[part] > 0 and result.pipeline["inference_ms"] > 0


def test_bench_gives_the_node_its_prompt_and_tokenizer(tmp_path):
    """bench --node's parameters of an open_vocab node: the prompt (bench's own unless --prompt) and --tokenizer."""
    tokenizer = str(OPEN_VOCAB / "owl" / "tokenizer.json")
    params, _ = node_params("open_vocab", OWLV2, 1, {}, prompt_values("open_vocab", {"--tokenizer": tokenizer}))
    assert params == {"model_path": str(OWLV2), "prompt": BENCH_PROMPT, "tokenizer_path": tokenizer}
    given = prompt_values("open_vocab", {"--prompt": "a cup", "--text-threshold": 0.3})
    assert node_params("open_vocab", OWLV2, 1, {}, given)[0] == {
        "model_path": str(OWLV2),
        "prompt": "a cup",
        "text_threshold": "0.3",
    }
    with pytest.raises(UsageError, match="yolo models take no decoder_path"):
        prompt_values("yolo", {"--decoder": str(DECODER)})


def test_the_prompted_tools_name_the_missing_tokenizer_and_decoder(tmp_path):
    shutil.copy(OWLV2, tmp_path / "owlv2.onnx")
    shutil.copy(ENCODER, tmp_path / "lone-encoder.onnx")
    runs = [
        ("--tokenizer", "bench", str(tmp_path / "owlv2.onnx"), "--model-type", "open_vocab"),
        ("--decoder", "bench", str(tmp_path / "lone-encoder.onnx"), "--model-type", "sam"),
        ("--tokenizer", "eval", "--model-type", "open_vocab", "--model", str(tmp_path / "owlv2.onnx"),
         "--data", str(SHAPES)),
    ]  # fmt: skip
    for option, *arguments in runs:
        done = run_cli(*arguments, "--out", str(tmp_path / "out"))
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        error = done.stderr.strip().splitlines()[-1]
        assert error.startswith("Error: ") and option in error, error


def _images(folder: Path, names=("astronaut.png", "coffee.png")) -> Path:
    folder.mkdir(parents=True)
    for name in names:
        cv2.imwrite(str(folder / name), cv2.imread(str(SKIMAGE / name)))
    return folder


@needs_shapes
@pytest.mark.parametrize("model", [GD, OWLV2], ids=["grounding-dino", "owlv2"])
def test_quantize_calibrates_an_open_vocab_models_text_inputs_with_the_prompt_its_check_uses(tmp_path, model):
    """The calibration feeds' tokens are the tokenizer's encoding (the tokenizers library, read here) of the prompt
    the accuracy check prompts with: --data's category names, a phrase each, or --prompt; neither: refused naming
    --prompt."""
    from tokenizers import Tokenizer

    data = _subset(tmp_path, SHAPES, 1)
    tokenizer = Tokenizer.from_file(str(model.parent / "tokenizer.json"))
    for options, phrases in (
        ({}, ["circle", "square", "triangle"]),
        ({"--prompt": "a cup . a cat"}, ["a cup", "a cat"]),
    ):
        feeds, read = calibration_inputs("open_vocab", model, data / "images", 1, options, data=data)
        assert read == 1 and len(feeds) == 1
        ids, mask = feeds[0]["input_ids"], feeds[0]["attention_mask"]
        if model == GD:  # one text, as transformers' processor joins a list of phrases ("a cat. a dog.")
            assert ids.tolist() == [tokenizer.encode("".join(f"{phrase}." for phrase in phrases)).ids]
        else:  # a row a phrase, padded to 16 tokens
            assert [row[keep == 1].tolist() for row, keep in zip(ids, mask)] == [
                tokenizer.encode(phrase).ids for phrase in phrases
            ]
    with pytest.raises(UsageError, match="give --data .* or --prompt"):
        calibration_inputs("open_vocab", model, data / "images", 1, {})


@needs_shapes
@pytest.mark.parametrize(("model", "files"), [
    (GD, {"--tokenizer": GD.parent / "tokenizer.json"}),
    (OPEN_VOCAB / "grounding_dino" / "grounding-dino-idea.onnx", {"--tokenizer": GD.parent / "tokenizer.json"}),
    (OWLV2, {"--tokenizer": OWLV2.parent / "tokenizer.json"}),
    (YOLO_WORLD / "yolov8n-worldv2-text.onnx",
     {"--tokenizer": YOLO_WORLD / "tokenizer.json", "--text-encoder": YOLO_WORLD / "text_encoder.onnx"}),
], ids=["grounding-dino-hf", "grounding-dino-idea", "owlv2", "yolo-world-text"])  # fmt: skip
def test_quantize_of_open_vocab_checks_the_ap_lost_as_eval_prompts_it(tmp_path, model, files):
    """quantize --model-type open_vocab: an INT8 QDQ copy with the source's outputs, whose detections are those of the
    same model (some matched to the FP32 ones: the masks' -inf kept in float, where they made every logit NaN), and
    whose loss is the drop of eval's AP (run apart on each file, prompted with the categories) from FP32 to INT8; the
    tokenizer and text encoder found beside the source serve both."""
    import onnx

    data = _subset(tmp_path, SHAPES, 3)
    out = tmp_path / "q" / "int8.onnx"
    out.parent.mkdir()
    quantize("open_vocab", model, data / "images", out, backend="onnx", frames=2, data=data, speed_runs=1)
    assert sorted(path.name for path in out.parent.glob("*.onnx")) == ["int8.onnx"]  # the tokenizer not copied
    source, made = onnx.load(model), onnx.load(out)
    assert {node.op_type for node in made.graph.node} >= {"QuantizeLinear", "DequantizeLinear"}
    assert [value.name for value in made.graph.output] == [value.name for value in source.graph.output]
    summary = json.loads((out.parent / "int8_quantize" / "quantize.json").read_text())
    compared = summary["comparison"]["outputs"]
    if "--text-encoder" not in files:  # a transformer's masks: NaN logits found nothing (the thin YOLO-World's may not)
        assert compared["matched"] + compared["only_in_b"] > 0, compared
    aps = []
    for index, path in enumerate((model, out)):
        evaluate_detections("open_vocab", data, tmp_path / f"eval{index}", model=path, options=files)
        aps.append(json.loads((tmp_path / f"eval{index}" / "eval.json").read_text())["metrics"]["AP"])
    assert summary["loss"]["loss"] == "AP lost"
    assert summary["loss"]["value"] == pytest.approx(aps[0] - aps[1], abs=1e-9)
    assert summary["comparison"]["metrics"]["AP"]["a"] == pytest.approx(aps[0], abs=1e-9)


def test_quantize_of_open_vocab_refuses_a_missing_tokenizer_and_leaves_nothing_unchecked(tmp_path):
    """An export with no tokenizer beside it and none given: refused at once in one line naming --tokenizer and the
    paths looked at, nothing written; a comparison that fails (--data whose annotations are not JSON, the prompt
    given so that calibration does not read them): no model left at --out."""
    alone = tmp_path / "alone" / "owlv2.onnx"
    alone.parent.mkdir()
    shutil.copy(OWLV2, alone)
    images = _images(tmp_path / "images", ("astronaut.png",))
    out = tmp_path / "q" / "owlv2_int8.onnx"
    out.parent.mkdir()
    common = ("quantize", "--model-type", "open_vocab", "--calibration", str(images), "--frames", "1",
              "--backend", "onnx", "--speed-runs", "1", "--out", str(out), "--prompt", "a person")  # fmt: skip
    done = run_cli(*common, "--model", str(alone))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert "--tokenizer" in error and f"looked for {alone.parent / 'tokenizer.json'}" in error, error
    assert not list(out.parent.iterdir())
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "annotations.json").write_text("{not json")
    done = run_cli(*common, "--model", str(OWLV2), "--data", str(bad))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "annotations" in done.stderr.strip().splitlines()[-1], done.stderr
    assert not list(out.parent.glob("*.onnx")), list(out.parent.iterdir())


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@needs_shapes
def test_quantize_of_sam_makes_the_encoder_int8_and_scores_its_masks_through_the_same_decoder(tmp_path):
    """quantize --model-type sam: the encoder alone quantized (calibrated on its image input, QDQ), the decoder left
    as it is; the loss is the drop of mask_mIoU from the FP32 encoder's masks to the INT8 encoder's, both through
    that decoder, prompted by the truth's boxes: each side's figure is eval's of that encoder (run apart)."""
    import onnx

    data = _subset(tmp_path, SHAPES_SEG, 2)
    decoder = tmp_path / "decoder.onnx"
    shutil.copy(DECODER, decoder)
    before = _digest(decoder)
    out = tmp_path / "encoder_int8.onnx"
    quantize("sam", ENCODER, data / "images", out, backend="onnx", frames=2, data=data,
             options={"--decoder": decoder}, speed_runs=1)  # fmt: skip
    assert _digest(decoder) == before and sorted(path.name for path in tmp_path.glob("*.onnx")) == [
        "decoder.onnx", "encoder_int8.onnx"
    ]  # fmt: skip
    source, made = onnx.load(ENCODER), onnx.load(out)
    assert {node.op_type for node in made.graph.node} >= {"QuantizeLinear", "DequantizeLinear"}
    assert [value.name for value in made.graph.output] == [value.name for value in source.graph.output]
    metadata = {entry.key: entry.value for entry in made.metadata_props}
    assert metadata["quantization_precision"] == "int8" and "quantization_float_nodes" not in metadata  # whole
    summary = json.loads((tmp_path / "encoder_int8_quantize" / "quantize.json").read_text())
    mious = []
    for index, model in enumerate((ENCODER, out)):
        evaluate_detections("sam", data, tmp_path / f"eval{index}", model=model, options={"--decoder": decoder})
        mious.append(json.loads((tmp_path / f"eval{index}" / "eval.json").read_text())["metrics"]["mask_mIoU"])
    assert summary["loss"]["loss"] == "mask mIoU lost"
    assert summary["loss"]["value"] == pytest.approx(mious[0] - mious[1], abs=1e-9)
    assert summary["comparison"]["metrics"]["mask_mIoU"]["a"] == pytest.approx(mious[0], abs=1e-9)


def test_quantize_of_sam_refuses_an_encoder_without_its_decoder_and_leaves_nothing_unchecked(tmp_path):
    """An encoder with no decoder beside it and none given: refused at once naming --decoder; a comparison that
    fails (--data whose annotations are not JSON): no model left at --out."""
    alone = tmp_path / "alone" / "encoder.onnx"
    alone.parent.mkdir()
    shutil.copy(ENCODER, alone)
    images = tmp_path / "images"
    images.mkdir()
    cv2.imwrite(str(images / "a.png"), cv2.imread(str(SKIMAGE / "astronaut.png")))
    out = tmp_path / "q" / "encoder_int8.onnx"
    out.parent.mkdir()
    common = ("quantize", "--model-type", "sam", "--calibration", str(images), "--frames", "1", "--backend", "onnx",
              "--speed-runs", "1", "--out", str(out))  # fmt: skip
    done = run_cli(*common, "--model", str(alone))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert "--decoder" in error and "no prompt decoder is beside encoder" in error, error
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "annotations.json").write_text("{not json")
    done = run_cli(*common, "--model", str(ENCODER), "--decoder", str(DECODER), "--data", str(bad))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "annotations" in done.stderr.strip().splitlines()[-1], done.stderr
    assert not list(out.parent.glob("*.onnx")), list(out.parent.iterdir())


def _header(index: int) -> Header:
    header = Header(frame_id="camera")
    header.stamp.sec, header.stamp.nanosec = 1_700_000_000 + index, 0
    return header


def test_replay_runs_the_open_vocab_node_with_its_prompt(tmp_path):
    """The prompt as the node's parameter (replay's --prompt): what the node answers over a real bag is what predict's
    detector finds offline on the same frames."""
    frames = [cv2.imread(str(SKIMAGE / name)) for name in ("astronaut.png", "coffee.png")]
    bag = write_image_bag(tmp_path / "bag", frames)
    prompt = "a person . a cup"
    result = replay(bag, tmp_path / "out", params={"model_path": str(OWLV2), "prompt": prompt})
    assert result.node == "open_vocab" and result.frames_sent == 2 and result.missing_frames == []
    records = json.loads(Path(result.answers).read_text())
    detector = detector_from_options("open_vocab", OWLV2, "onnx:cpu", {"--prompt": prompt})  # predict's
    for record, frame in zip(records, frames):
        expected = detector.detect(frame).boxes
        assert expected.labels, "nothing found offline: nothing to compare"
        assert [d["class_name"] for d in record["detections"]] == list(expected.labels)
        assert np.allclose([d["score"] for d in record["detections"]], expected.scores, atol=1e-4)


def test_replay_runs_the_sam_node_on_the_boxes_recorded_in_the_bag(tmp_path):
    """A bag of images and another node's Detection2DArray (the boxes of test_sam's reference cases): the encoder
    and decoder run in the node and its masks are recorded, each transformers' (IoU >= 0.95 on the pixels no earlier
    mask holds: the node's label image gives each pixel to one detection), of its box's class, with its predicted
    IoU."""
    cases = [case for case in META["cases"] if case["kind"] == "boxes"][:2]
    frames = [cv2.imread(str(SKIMAGE / case["image"])) for case in cases]
    messages, start = [], 1_700_000_000_000_000_000
    for index, (frame, case) in enumerate(zip(frames, cases)):
        count = len(case["prompts"])
        boxes = Boxes.of(np.array(case["prompts"], float), [0.9] * count, list(range(count)), ("a", "b", "c"))
        at = start + index * 100_000_000
        image = serialize_message(bgr_to_message(frame, _header(index)))
        found = serialize_message(FrameResult.of(frame, boxes=boxes).to_message(_header(index)))
        messages += [RawMessage("/camera/image_raw", "sensor_msgs/msg/Image", at, image),
                     RawMessage("/detector/detections", DETECTIONS.message, at + 1, found)]  # fmt: skip
    bag = write_messages(tmp_path / "bag", messages)
    result = replay(
        bag, tmp_path / "out", node="sam", params={"model_path": str(ENCODER), "decoder_path": str(DECODER)}
    )
    assert result.frames_sent == 2 and result.missing_frames == []
    assert len(list(read_messages(result.output_bag, "/masks"))) == 2
    records = json.loads(Path(result.answers).read_text())
    from pycocotools import mask as coco_mask

    for record, case, frame in zip(records, cases, frames):
        assert [d["class_name"] for d in record["detections"]] == ["a", "b", "c"][: len(case["prompts"])]
        taken = np.zeros(frame.shape[:2], bool)  # the label image gives a pixel to the first mask holding it
        for detection, expected in zip(record["detections"], case["masks"]):
            mask = coco_mask.decode(detection["mask"]).astype(bool)
            assert iou(mask, decoded(expected["bits"], frame.shape[:2]) & ~taken) >= 0.95
            assert detection["score"] == pytest.approx(expected["iou_score"], abs=0.01)
            taken |= mask
