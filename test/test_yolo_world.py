"""YOLO-World and YOLOE against test/data/yolo_world/reference.json (benchmarks/make_yolo_world.py: what Ultralytics
8.4's own ``predict`` returned on the PyTorch models, recorded when the files were made; no PyTorch here):

- an export with its classes baked in (Ultralytics' export after the classes are set) runs as a plain ``yolo`` model
  with Ultralytics' boxes;
- an export taking the text embeddings (``txt_feats``; YOLOE's ``tpe`` read alike) runs in ``open_vocab`` with its
  CLIP text encoder (found beside it), run once per prompt, and gives Ultralytics' boxes of each prompt's phrases
  (boxes within 2 px, scores within 0.01, the same phrases), the prompt padded to the export's K;
- a missing text encoder, one of another width, one that is no text encoder, too many phrases: refused in one line.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
import skimage.data
from click.testing import CliRunner
from onnx import TensorProto, helper

from vision_factory.cli import main
from vision_factory.families.open_vocab import FAMILY, build
from vision_factory.models.model_file import recognise, summarize
from vision_factory.models.tokenizer_file import read_tokenizer
from vision_factory.models.yolo import YoloDetector
from vision_factory.models.yolo_world import YoloTextDetector
from vision_factory.parameters import with_defaults
from vision_factory.runtime.onnx_runner import OnnxRunner

DATA = Path(__file__).parent / "data" / "yolo_world"
REFERENCE = json.loads((DATA / "reference.json").read_text())
MODELS = {model["file"]: model for model in REFERENCE["models"]}
BAKED = ("yolov8n-worldv2-baked.onnx", "yoloe-11n-baked.onnx")
TEXT = "yolov8n-worldv2-text.onnx"
PIXELS, SCORE = 2.0, 0.01
LOG = logging.getLogger("test")


@functools.cache
def frame(name: str) -> np.ndarray:
    return np.ascontiguousarray(getattr(skimage.data, name)()[..., ::-1])  # RGB -> BGR, as the maker fed it


@functools.cache
def runner(file: str) -> OnnxRunner:
    path = DATA / file
    recorded = MODELS[file]["sha256"] if file in MODELS else REFERENCE["text_encoder_sha256"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == recorded  # the file the reference was made on
    return OnnxRunner.load(path, {}, LOG)


def detector(**options) -> YoloTextDetector:
    tokenizer = read_tokenizer(DATA / "tokenizer.json")
    return YoloTextDetector(runner(TEXT), runner("text_encoder.onnx"), tokenizer, **options)


def same_detections(boxes, case: dict, phrases: list[str] | None = None) -> None:
    """Each of Ultralytics' detections found here with its class, box within PIXELS and score within SCORE, and
    none besides; only a box scoring within SCORE of the threshold may be missing on one side (another CPU's
    rounding may put it across). ``phrases``: the class names the boxes must carry."""
    free = list(range(len(boxes)))
    for row in case["detections"]:
        same = [i for i in free if boxes.class_ids[i] == row["class_id"]]
        distance = [np.abs(boxes.xyxy[i] - row["xyxy"]).max() for i in same]
        if not same or min(distance) > PIXELS:
            assert row["score"] - case["conf"] <= SCORE, f"{case['image']}: missed {row}"
            continue
        i = same[int(np.argmin(distance))]
        free.remove(i)
        assert abs(float(boxes.scores[i]) - row["score"]) <= SCORE, (case["image"], boxes.scores[i], row)
        if phrases is not None:
            assert boxes.labels[i] == phrases[row["class_id"]]
    assert all(boxes.scores[i] - case["conf"] <= SCORE for i in free), f"{case['image']}: extra boxes {free}"
    assert len(case["detections"]) >= 20  # NMS had work to do


@pytest.mark.parametrize("file", BAKED)
def test_an_export_with_its_classes_baked_in_is_a_plain_yolo_model_with_ultralytics_boxes(file):
    """Ultralytics' export of a YOLO-World / YOLOE model after its classes were set (as set_classes leaves them):
    recognised as yolo, its classes the metadata's names, the boxes of Ultralytics' predict on the PyTorch model."""
    model = MODELS[file]
    recognition = recognise(summarize(DATA / file))
    assert (recognition.family, recognition.details["names"]) == ("yolo", model["phrases"])
    for case in model["cases"]:
        found = YoloDetector(runner(file), confidence=case["conf"])(frame(case["image"])).boxes
        same_detections(found, case, model["phrases"])


@pytest.mark.parametrize("case", MODELS[TEXT]["cases"], ids=lambda case: f"{case['image']}-{len(case['phrases'])}")
def test_a_text_embedding_export_gives_ultralytics_boxes_of_the_prompts_phrases(case):
    """The phrases through the tokenizer and text_encoder.onnx, normalised, padded to K = 8 by the last phrase: the
    boxes Ultralytics' predict gave with exactly those phrases as its classes (txt_feats [1, N, 512])."""
    found = detector(confidence=case["conf"]).detect(frame(case["image"]), case["phrases"]).boxes
    same_detections(found, case, case["phrases"])


def test_the_embeddings_are_the_towers_l2_normalised_and_padded_with_the_last_phrase():
    yolo = detector()
    for text, first8 in REFERENCE["embeddings_first8"].items():
        feats = yolo.encode(text).feeds["txt_feats"]
        count = len(first8)
        assert feats.shape == (1, 8, 512) and feats.dtype == np.float32
        assert np.allclose(np.linalg.norm(feats[0], axis=1), 1.0, atol=1e-5)
        assert np.abs(feats[0, :count, :8] - np.array(first8)).max() < 1e-4  # Ultralytics' CLIP.encode_text's
        assert (feats[0, count:] == feats[0, count - 1]).all()


def test_the_text_encoder_runs_once_per_prompt():
    yolo = detector(prompt="a photo of a cat . a photo of a dog")
    frames = [frame(name) for name in ("astronaut", "coffee", "chelsea")]
    for image in frames:
        yolo.detect(image)
    yolo.detect(frames[0], "a photo of a cat. a photo of a dog.")  # the same phrases again
    yolo.detect(frames[1], ["a photo of a cat ", " a photo of a dog"])
    assert yolo.text_runs == yolo.encodings == 1
    yolo.detect(frames[2], "a flag . a rocket")
    yolo.detect(frames[0])
    assert yolo.text_runs == 2 and yolo.names == ["a flag", "a rocket"]
    assert yolo.status_values() == {"text encoder runs": "2"}


def test_the_family_finds_the_text_encoder_and_tokenizer_beside_the_model(tmp_path):
    """The node's build: the text encoder and tokenizer beside the model; a missing text encoder refused at start
    naming where it looked, one given by text_encoder_path taken."""
    for name in (TEXT, "tokenizer.json"):
        shutil.copy(DATA / name, tmp_path / name)
    values = with_defaults(
        FAMILY.parameters, {"model_path": str(tmp_path / TEXT), "prompt": "a flag . a rocket"}, "open_vocab"
    )
    load = lambda path: OnnxRunner.load(path, {}, LOG)  # noqa: E731
    with pytest.raises(ValueError) as refused:
        build(values, load)
    message = str(refused.value)
    assert f"no text encoder for {tmp_path / TEXT}: looked for {tmp_path / 'text_encoder.onnx'}" in message
    assert "text_encoder_path, --text-encoder" in message and "\n" not in message
    built = build({**values, "text_encoder_path": str(DATA / "text_encoder.onnx")}, load)
    assert isinstance(built, YoloTextDetector) and built.names == ["a flag", "a rocket"] and built.text_runs == 1
    shutil.copy(DATA / "text_encoder.onnx", tmp_path / "text_encoder.onnx")
    assert build(values, load).text_runs == 1


def narrow_encoder(target: Path, width: int) -> Path:
    """A text encoder of another width: input_ids -> the mean of their rows of an embedding table [vocab, width]."""
    rows = read_tokenizer(DATA / "tokenizer.json").tokenizer.get_vocab_size()
    table = helper.make_tensor("table", TensorProto.FLOAT, [rows, width], np.ones(rows * width, np.float32))
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "input_ids"], ["rows"]),
            helper.make_node("ReduceMean", ["rows"], ["text_embeds"], axes=[1], keepdims=0),
        ],
        "narrow",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["phrases", "tokens"])],
        [helper.make_tensor_value_info("text_embeds", TensorProto.FLOAT, ["phrases", width])],
        [table],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), target)
    return target


def test_a_text_encoder_of_another_width_or_none_is_refused_naming_the_file(tmp_path):
    tokenizer = read_tokenizer(DATA / "tokenizer.json")
    narrow = OnnxRunner.load(narrow_encoder(tmp_path / "narrow.onnx", 256), {}, LOG)
    with pytest.raises(ValueError) as refused:
        YoloTextDetector(runner(TEXT), narrow, tokenizer, encoder_name="text encoder narrow.onnx")
    assert str(refused.value).startswith("text encoder narrow.onnx gives text_embeds [phrases, 256], but the model's")
    assert "txt_feats [1, 8, 512] takes embeddings of 512" in str(refused.value)
    wide = OnnxRunner.load(narrow_encoder(tmp_path / "wide.onnx", 512), {}, LOG)  # no attention_mask: taken
    assert YoloTextDetector(runner(TEXT), wide, tokenizer, prompt="a flag").text_runs == 1
    with pytest.raises(ValueError, match="text encoder baked.onnx is not a CLIP text encoder"):
        YoloTextDetector(runner(TEXT), runner(BAKED[0]), tokenizer, encoder_name="text encoder baked.onnx")


def test_prompts_past_what_the_export_takes_are_refused():
    yolo = detector(prompt="a flag")
    with pytest.raises(ValueError, match="the prompt has 9 phrases, more than the 8 this export takes"):
        yolo.set_prompt(" . ".join(f"thing {i}" for i in range(9)))
    with pytest.raises(ValueError, match="tokens, more than the 77 the text encoder reads"):
        yolo.set_prompt("a " * 80)
    assert yolo.names == ["a flag"] and yolo.text_runs == 1  # the prompt in use kept


def test_the_text_input_is_recognised_by_its_name_for_yolo_world_and_yoloe(tmp_path):
    """txt_feats: YOLO-World; the same graph with the input named tpe reads as YOLOE (its export's name) and runs."""
    recognition = recognise(summarize(DATA / TEXT))
    assert recognition.family == "open_vocab" and "a YOLO-World detector" in recognition.reason
    assert {key: recognition.details[key] for key in ("head", "text", "phrases", "width")} == {
        "head": "yolo_text",
        "text": "txt_feats",
        "phrases": 8,
        "width": 512,
    }
    model = onnx.load(DATA / TEXT)
    for node in model.graph.node:
        node.input[:] = ["tpe" if name == "txt_feats" else name for name in node.input]
    next(tensor for tensor in model.graph.input if tensor.name == "txt_feats").name = "tpe"
    onnx.save(model, tmp_path / "yoloe.onnx")
    assert "a YOLOE detector" in recognise(summarize(tmp_path / "yoloe.onnx")).reason
    tokenizer = read_tokenizer(DATA / "tokenizer.json")
    case = MODELS[TEXT]["cases"][4]
    yoloe = YoloTextDetector(
        OnnxRunner.load(tmp_path / "yoloe.onnx", {}, LOG), runner("text_encoder.onnx"), tokenizer, case["conf"]
    )
    same_detections(yoloe.detect(frame(case["image"]), case["phrases"]).boxes, case, case["phrases"])


def test_predict_runs_both_kinds_from_the_command_line(tmp_path):
    """predict --model-type yolo on the baked export; --model-type open_vocab --prompt on the text-input one (its
    text encoder and tokenizer beside it), JSON lines of the reference's boxes and phrases; without its text
    encoder, one line naming where it looked."""
    baked = MODELS[BAKED[0]]["cases"][1]
    image = tmp_path / "coffee.png"
    import cv2

    cv2.imwrite(str(image), frame("coffee"))
    command = ["predict", "--model-type", "yolo", "--model", str(DATA / BAKED[0]), "--conf", str(baked["conf"])]
    result = CliRunner().invoke(main, [*command, "--format", "json", str(image)])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.splitlines()[-1])
    assert len(record["detections"]) >= len([d for d in baked["detections"] if d["score"] - baked["conf"] > SCORE])
    assert {d["class_name"] for d in record["detections"]} <= set(MODELS[BAKED[0]]["phrases"])
    case = MODELS[TEXT]["cases"][4]  # coffee, 3 phrases
    prompt = " . ".join(case["phrases"])
    command = ["predict", "--model-type", "open_vocab", "--model", str(DATA / TEXT), "--prompt", prompt]
    result = CliRunner().invoke(main, [*command, "--conf", str(case["conf"]), "--format", "json", str(image)])
    assert result.exit_code == 0, result.output
    detections = json.loads(result.stdout.splitlines()[-1])["detections"]
    want = [d for d in case["detections"] if d["score"] - case["conf"] > SCORE]
    assert len(want) <= len(detections) <= len(case["detections"])
    assert all(d["class_name"] == case["phrases"][d["class_id"]] for d in detections)
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(DATA / TEXT, alone / TEXT)
    shutil.copy(DATA / "tokenizer.json", alone / "tokenizer.json")
    command = ["predict", "--model-type", "open_vocab", "--model", str(alone / TEXT), "--prompt", prompt, str(image)]
    refused = CliRunner().invoke(main, command)
    assert refused.exit_code != 0 and "Traceback" not in refused.output
    assert f"no text encoder for {alone / TEXT}: looked for {alone / 'text_encoder.onnx'}" in refused.output
    given = CliRunner().invoke(main, [*command[:-1], "--text-encoder", str(DATA / "text_encoder.onnx"), str(image)])
    assert given.exit_code == 0, given.output
