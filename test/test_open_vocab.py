"""Open-vocabulary detection (Grounding DINO in its Hugging Face and IDEA / TAO layouts, OWLv2, OWL-ViT) against
test/data/open_vocab/reference.json (benchmarks/make_open_vocab.py: what transformers' processors and post-processing
returned on ONNX Runtime's outputs for the same files, recorded when they were made): the same tokens, the same
detections (boxes within 2 px, scores within 0.01, the same phrases), the prompt encoded once, the export's own
tokenizer found or refused naming the file, and each layout recognised from the file alone."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
import skimage

from vision_factory.models.grounding_dino import GroundingDino, phrase_masks
from vision_factory.models.interface import Interface
from vision_factory.models.model_file import recognise, summarize
from vision_factory.models.open_vocab_interface import OPEN_VOCAB, owl_variant, parse_phrases
from vision_factory.models.owl import OwlDetector
from vision_factory.models.tokenizer_file import MAX_TOKENIZER_BYTES, load_tokenizer, read_tokenizer
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.runtime.runner import TensorInfo

DATA = Path(__file__).parent / "data" / "open_vocab"
SKIMAGE = Path(skimage.__file__).parent / "data"
LOG = logging.getLogger("test")
REFERENCE = json.loads((DATA / "reference.json").read_text())
MODELS = {model["file"]: model for model in REFERENCE["models"]}
CASES = [(model["file"], case) for model in REFERENCE["models"] for case in model["cases"]]
GD_HF, GD_IDEA = "grounding_dino/grounding-dino-hf.onnx", "grounding_dino/grounding-dino-idea.onnx"
OWLV2, OWLVIT = "owl/owlv2.onnx", "owl/owlvit.onnx"
GD_NAMES, OWL_NAMES = ("tokenizer.json", "vocab.txt"), ("tokenizer.json",)


@pytest.fixture(scope="module")
def runners() -> dict[str, OnnxRunner]:
    """One session a file, shared by the module's tests (Grounding DINO's take a second to load)."""
    return {file: OnnxRunner.load(DATA / file, {}, LOG) for file in MODELS}


def _detector(runners, file: str, **options):
    model = MODELS[file]
    if file.startswith("grounding_dino/"):
        tokenizer = load_tokenizer(DATA / file, None, GD_NAMES)
        options = {"confidence": model["threshold"], "text_threshold": model["text_threshold"], **options}
        return GroundingDino(runners[file], tokenizer, **options)
    return OwlDetector(runners[file], load_tokenizer(DATA / file, None, OWL_NAMES), model["threshold"], **options)


def _frame(name: str) -> np.ndarray:
    return cv2.imread(str(SKIMAGE / name))


def _tokens(detector) -> list:
    prompt = detector.prompt
    return prompt.input_ids.tolist() if hasattr(prompt, "input_ids") else prompt.feeds["input_ids"].tolist()


def _same_detections(found, expected: list[dict]) -> None:
    """Each expected detection matched by one found of its phrase (or of a phrase tied with it to 2e-4: another
    CPU's rounding may turn such a tie), box within 2 px and score within 0.01; none found besides. Matched rather
    than zipped: queries scoring alike may trade places."""
    assert len(found) == len(expected), (len(found), len(expected))
    free = list(range(len(found)))
    for reference in expected:
        phrases = [reference["class_id"], *reference.get("near", [])]
        match = next(
            (
                i
                for i in free
                if found.class_ids[i] in phrases
                and np.abs(found.boxes[i] - reference["xyxy"]).max() <= 2.0
                and abs(float(found.scores[i]) - reference["score"]) <= 0.01
            ),
            None,
        )
        assert match is not None, (reference, [(found.class_names[i], found.boxes[i], found.scores[i]) for i in free])
        assert found.class_names[match] == found.class_names[match].strip() and found.class_names[match]
        free.remove(match)


@pytest.mark.parametrize("file,case", CASES, ids=[f"{file}-{c['image']}-{i % 3}" for i, (file, c) in enumerate(CASES)])
def test_the_same_detections_as_transformers_processor_and_post_processing(runners, file, case):
    model = MODELS[file]
    assert hashlib.sha256((DATA / file).read_bytes()).hexdigest() == REFERENCE["sha256"][file], "not the file recorded"
    detector = _detector(runners, file)
    found = detector.detect(_frame(case["image"]), case["prompt"])
    assert _tokens(detector) == case["input_ids"]  # the processor's own tokens, padding and all
    named = [d for d in case["detections"] if d["class_id"] is not None]
    _same_detections(found, named)
    for unnamed in (d for d in case["detections"] if d["class_id"] is None):  # left out: it names no phrase
        assert not len(found) or np.abs(found.boxes - unnamed["xyxy"]).max(axis=1).min() > 2.0
    assert list(found.scores) == sorted(found.scores, reverse=True)  # best first
    phrases = list(parse_phrases(case["prompt"]))
    assert all(found.class_names[i] == phrases[c] for i, c in enumerate(found.class_ids))
    if model["layout"] in ("hf", "idea"):
        bert = detector.tokenizer.tokenizer
        for reference in named:  # a word piece of the phrase is among those transformers' label decodes
            pieces = bert.encode(reference["class_name"], add_special_tokens=False).tokens
            assert any(piece.removeprefix("##") in reference["label"] for piece in pieces), reference
    else:
        assert all(d["class_name"] == phrases[d["class_id"]] for d in named)  # transformers' own text labels


def test_the_reference_holds_grounding_dino_detections_that_name_no_phrase():
    """Below text_threshold transformers keeps a detection with an empty label, or with delimiters only ('.',
    '[SEP]'): the detection test above leaves each out (it names nothing of the prompt); here, that there are such."""
    for file in (GD_HF, GD_IDEA):
        unnamed = [d for _, case in CASES if _ == file for d in case["detections"] if d["class_id"] is None]
        assert len(unnamed) >= 10, f"{file}: the reference has {len(unnamed)} such detections"
        assert all(not d["label"].replace(".", "").replace("[SEP]", "").strip() for d in unnamed)


@pytest.mark.parametrize("file", sorted(MODELS))
def test_the_prompt_is_encoded_once_per_prompt(runners, file):
    detector = _detector(runners, file)
    frames = [_frame(name) for name in ("astronaut.png", "coffee.png", "chelsea.png")]
    detector.set_prompt("a cat. a cup of coffee.")
    for frame in frames:
        detector.detect(frame)
    detector.detect(frames[0], "a cat. a cup of coffee.")  # the same text again
    detector.detect(frames[1], [" a cat", "a cup of coffee "])  # the same phrases, as a list
    assert detector.encodings == 1
    first = detector.prompt
    detector.detect(frames[2], "a flag. a rocket.")
    detector.detect(frames[0])
    assert (
        detector.encodings == 2 and detector.prompt is not first and detector.prompt.phrases == ("a flag", "a rocket")
    )


def test_the_hosts_phrase_mask_and_position_ids_are_transformers():
    """IDEA / TAO exports take the phrase mask and position ids from the host. Written out here from transformers'
    generate_masks_with_special_tokens_and_transfer_map for [CLS] a cat . a dog . [SEP] and two pads: each phrase
    with its '.' one block counted from 0; [CLS], [SEP] and the pads themselves only, at 0."""
    ids = np.array([101, 1063, 1136, 1012, 1063, 1140, 1012, 102, 0, 0])
    mask, positions = phrase_masks(ids)
    assert positions.tolist() == [0, 0, 1, 2, 0, 1, 2, 0, 0, 0]
    blocks = [[0], [1, 2, 3], [1, 2, 3], [1, 2, 3], [4, 5, 6], [4, 5, 6], [4, 5, 6], [7], [8], [9]]
    assert [np.flatnonzero(row).tolist() for row in mask] == blocks
    unpadded, unpadded_positions = phrase_masks(ids[:8])  # [SEP] last: the same for every real token
    assert np.array_equal(unpadded, mask[:8, :8]) and np.array_equal(unpadded_positions, positions[:8])
    open_ended, open_positions = phrase_masks(np.array([101, 1063, 1136, 102]))  # no closing '.': no block
    assert np.array_equal(open_ended, np.eye(4, dtype=bool)) and open_positions.tolist() == [0, 0, 0, 0]


def test_a_text_prompt_is_joined_as_the_processor_joins_a_list(runners):
    """'a cat . a remote control' (no closing '.') is tokenized as the processor tokenizes the list of its phrases:
    'a cat. a remote control.', so its last phrase is a block of the phrase mask too."""
    detector = _detector(runners, GD_HF)
    listed = detector.encode(["a cat", "a remote control", "astronaut"])
    texted = detector.encode("a cat . a remote control . astronaut")
    assert listed.text == texted.text == "a cat. a remote control. astronaut."
    assert texted.input_ids.tolist() == REFERENCE["models"][0]["cases"][0]["input_ids"]
    owners = texted.owners[: len(texted.input_ids)].tolist()
    assert owners == [-1, 0, 0, -1, 1, 1, 1, -1, 2, 2, 2, -1, -1]  # astronaut: as ##tro ##naut, all phrase 2


def test_a_missing_tokenizer_is_refused_naming_where_it_looked(tmp_path, runners):
    shutil.copy(DATA / GD_HF, tmp_path / "model.onnx")
    with pytest.raises(ValueError) as raised:
        load_tokenizer(tmp_path / "model.onnx", None, GD_NAMES)
    message = str(raised.value)
    assert f"looked for {tmp_path / 'tokenizer.json'}, {tmp_path / 'vocab.txt'}" in message, message
    assert "never downloaded" in message and "--tokenizer" in message
    (tmp_path / "onnx").mkdir()
    with pytest.raises(ValueError, match="looked for .*onnx/tokenizer.json, .*onnx/vocab.txt, .*/tokenizer.json"):
        load_tokenizer(tmp_path / "onnx" / "model.onnx", None, GD_NAMES)  # transformers.js: the folder above too
    with pytest.raises(ValueError, match=f"tokenizer {tmp_path / 'nowhere.json'} not found"):
        load_tokenizer(tmp_path / "model.onnx", tmp_path / "nowhere.json", GD_NAMES)


def test_the_tokenizer_is_found_beside_the_model_or_above_its_onnx_folder(tmp_path):
    (tmp_path / "onnx").mkdir()
    shutil.copy(DATA / "owl" / "tokenizer.json", tmp_path / "tokenizer.json")
    found = load_tokenizer(tmp_path / "onnx" / "model.onnx", None, OWL_NAMES)
    assert found.path == tmp_path / "tokenizer.json" and found.algorithm == "BPE"
    shutil.copy(DATA / "grounding_dino" / "vocab.txt", tmp_path / "onnx" / "vocab.txt")
    assert (
        load_tokenizer(tmp_path / "onnx" / "model.onnx", None, ("vocab.txt",)).path == tmp_path / "onnx" / "vocab.txt"
    )


def test_a_vocab_txt_alone_tokenizes_as_the_processor(tmp_path, runners):
    shutil.copy(DATA / "grounding_dino" / "vocab.txt", tmp_path / "vocab.txt")
    tokenizer = load_tokenizer(tmp_path / "model.onnx", None, GD_NAMES)
    assert tokenizer.path == tmp_path / "vocab.txt" and tokenizer.algorithm == "WordPiece"
    detector = GroundingDino(runners[GD_HF], tokenizer)
    for case in MODELS[GD_HF]["cases"]:
        assert detector.encode(case["prompt"]).input_ids.tolist() == case["input_ids"]


def test_a_mismatched_tokenizer_is_refused_naming_the_file(tmp_path, runners):
    clip, bert = DATA / "owl" / "tokenizer.json", DATA / "grounding_dino" / "tokenizer.json"
    with pytest.raises(ValueError, match=f"tokenizer {clip} is a BPE tokenizer, not WordPiece: give the export's own"):
        GroundingDino(runners[GD_HF], read_tokenizer(clip))
    with pytest.raises(ValueError, match=f"tokenizer {bert} is a WordPiece tokenizer, not CLIP's BPE"):
        OwlDetector(runners[OWLV2], read_tokenizer(bert))
    shifted = tmp_path / "vocab.txt"  # a BERT vocabulary whose ids are not bert-base-uncased's
    shifted.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n.\n?\na\ncat\n")
    with pytest.raises(ValueError, match=f"tokenizer {shifted} gives '\\[CLS\\]' the id 2, not 101 as the graph reads"):
        GroundingDino(runners[GD_HF], read_tokenizer(shifted))
    no_cls = tmp_path / "other" / "vocab.txt"
    no_cls.parent.mkdir()
    no_cls.write_text("[PAD]\na\n")
    with pytest.raises(ValueError, match=f"tokenizer {no_cls} is not a BERT vocabulary"):
        read_tokenizer(no_cls)
    end_not_last = json.loads(clip.read_text())
    vocab = end_not_last["model"]["vocab"]
    vocab["<|endoftext|>"], vocab["!"] = vocab["!"], vocab["<|endoftext|>"]
    swapped = tmp_path / "swapped.json"
    swapped.write_text(json.dumps(end_not_last))
    with pytest.raises(ValueError, match=f"tokenizer {swapped} gives <\\|endoftext\\|> the id 0, not its highest"):
        OwlDetector(runners[OWLV2], read_tokenizer(swapped))


def test_a_file_that_is_no_tokenizer_is_refused_naming_it(tmp_path):
    garbage = tmp_path / "tokenizer.json"
    garbage.write_text('{"model": {"type": "WordPiece"}, "nothing": [')
    with pytest.raises(ValueError, match=f"tokenizer {garbage} is not a tokenizers tokenizer.json"):
        read_tokenizer(garbage)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00tokenizer")
    with pytest.raises(ValueError, match=f"tokenizer {binary} is not UTF-8 text"):
        read_tokenizer(binary)
    large = tmp_path / "large.json"
    with large.open("wb") as file:
        file.truncate(MAX_TOKENIZER_BYTES + 1)  # sparse: no disk used
    with pytest.raises(ValueError, match=f"tokenizer {large} is larger than {MAX_TOKENIZER_BYTES} bytes"):
        read_tokenizer(large)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=f"tokenizer {fifo} is not a regular file"):
        read_tokenizer(fifo)  # not waited on forever


@pytest.mark.parametrize(
    "file,head,details",
    [
        (GD_HF, "grounding_dino_hf", {"input_size": (320, 320), "image": "pixel_values", "positions": None}),
        (GD_IDEA, "grounding_dino_idea", {"input_size": (256, 384), "image": "inputs", "text_length": 256}),
        (OWLV2, "owl", {"input_size": (160, 160), "variant": "owlv2", "queries": 100}),
        (OWLVIT, "owl", {"input_size": (192, 192), "variant": "owlvit", "queries": 144}),
    ],
)
def test_each_layout_is_recognised_from_the_file_alone(file, head, details):
    """From the ONNX file read without a runtime (inspect's reading); no other family's rule claims it."""
    summary = summarize(DATA / file)
    found = OPEN_VOCAB.recognise(Interface.of(summary))
    assert found is not None and found.family == "open_vocab" and found.details["head"] == head
    assert {key: found.details[key] for key in details} == details
    assert "no NMS is run" in found.reason
    assert recognise(summary).family in ("unknown", "open_vocab")  # the family's rule is registered with its node


def test_owl_is_told_from_its_input_side_without_metadata(runners, tmp_path):
    def image(side):
        return Interface((TensorInfo("pixel_values", (1, 3, side, side), "float32"),), (), {})

    assert owl_variant(image(960), image(960).inputs[0])[0] == "owlv2"
    assert owl_variant(image(768), image(768).inputs[0])[0] == "owlvit"
    assert owl_variant(image(160), image(160).inputs[0]) is None
    model = onnx.load(DATA / OWLVIT)
    del model.metadata_props[:]
    onnx.save(model, tmp_path / "owl.onnx")
    unsaid = OwlDetector(OnnxRunner.load(tmp_path / "owl.onnx", {}, LOG), read_tokenizer(DATA / "owl/tokenizer.json"))
    assert unsaid.variant == "owlv2" and "assumed" in unsaid.head_note
    told = OwlDetector(runners[OWLVIT], read_tokenizer(DATA / "owl/tokenizer.json"), variant="owlvit")
    assert told.variant == "owlvit" and "assumed" not in told.head_note


def test_a_dynamic_size_export_runs_only_at_the_size_given(runners, tmp_path):
    """A Swin traced at 320x320 gives other boxes at another size (reference.json's 'elsewhere'): an export of
    dynamic height and width is refused without the size it was made at, and with it detects as the fixed one."""
    assert "boxes differ from the model's by up to" in REFERENCE["elsewhere"]
    model = onnx.load(DATA / GD_HF)
    for tensor in model.graph.input:
        if tensor.name in ("pixel_values", "pixel_mask"):
            for dim, name in zip(list(tensor.type.tensor_type.shape.dim)[-2:], ("height", "width")):
                dim.Clear()
                dim.dim_param = name
    onnx.save(model, tmp_path / "dynamic.onnx")
    runner = OnnxRunner.load(tmp_path / "dynamic.onnx", {}, LOG)
    tokenizer = load_tokenizer(DATA / GD_HF, None, GD_NAMES)
    with pytest.raises(ValueError, match="dynamic height and width.* give that size \\(image_size WIDTHxHEIGHT\\)"):
        GroundingDino(runner, tokenizer)
    reference = MODELS[GD_HF]
    detector = GroundingDino(
        runner, tokenizer, reference["threshold"], reference["text_threshold"], image_size=(320, 320)
    )
    case = reference["cases"][4]
    found = detector.detect(_frame(case["image"]), case["prompt"])
    _same_detections(found, [d for d in case["detections"] if d["class_id"] is not None])


def _fixed(file: str, target: Path, inputs: dict[str, dict[int, int]]) -> OnnxRunner:
    """The file with these inputs' dimensions declared fixed (the graph is the same)."""
    model = onnx.load(DATA / file)
    for tensor in model.graph.input:
        for axis, value in inputs.get(tensor.name, {}).items():
            dim = tensor.type.tensor_type.shape.dim[axis]
            dim.Clear()
            dim.dim_value = value
    onnx.save(model, target)
    return OnnxRunner.load(target, {}, LOG)


def test_exports_of_fixed_text_shapes_are_fed_padded(tmp_path):
    """A Grounding DINO export of fixed token length (as Isaac ROS pads to 256) gets the tokens padded with [PAD] and
    attention 0; an OWL export of fixed rows gets rows of zeros after the phrases (a padded query to OWL). Both
    detect what the reference says; more phrases than an OWL export's rows are refused."""
    texts = {name: {1: 64} for name in ("input_ids", "token_type_ids", "attention_mask")}
    grounding, model = _fixed(GD_HF, tmp_path / "gd.onnx", texts), MODELS[GD_HF]
    tokenizer = load_tokenizer(DATA / GD_HF, None, GD_NAMES)
    detector = GroundingDino(grounding, tokenizer, model["threshold"], model["text_threshold"])
    case = model["cases"][5]
    found = detector.detect(_frame(case["image"]), case["prompt"])
    assert detector.prompt.feeds["input_ids"].shape == (1, 64)
    assert detector.prompt.feeds["attention_mask"][0].tolist() == [1] * len(case["input_ids"]) + [0] * (
        64 - len(case["input_ids"])
    )
    _same_detections(found, [d for d in case["detections"] if d["class_id"] is not None])
    rows = {"input_ids": {0: 4}, "attention_mask": {0: 4}}
    owl, model = _fixed(OWLV2, tmp_path / "owl.onnx", rows), MODELS[OWLV2]
    detector = OwlDetector(owl, load_tokenizer(DATA / OWLV2, None, OWL_NAMES), model["threshold"])
    case = model["cases"][7]  # chelsea, 3 phrases
    found = detector.detect(_frame(case["image"]), case["prompt"])
    assert detector.prompt.feeds["input_ids"].shape == (4, 16) and not detector.prompt.feeds["input_ids"][3].any()
    _same_detections(found, case["detections"])
    with pytest.raises(ValueError, match="the prompt has 5 phrases, more than the 4 this export takes"):
        detector.encode("a. b. c. d. e.")


def test_prompts_past_what_the_model_reads_are_refused(runners):
    grounding = _detector(runners, GD_IDEA)
    with pytest.raises(ValueError, match="is 302 tokens, more than the 256 this model reads"):
        grounding.encode(["a cat"] * 100)
    owl = _detector(runners, OWLV2)
    with pytest.raises(ValueError, match="the phrase 'supercalifragilistic' is 18 tokens, more than the 16 OWL reads"):
        owl.encode("a cat. supercalifragilistic.")
    assert owl.encodings == 0 and grounding.encodings == 0
    assert owl.encode("an astronaut on the moon").feeds["attention_mask"].tolist() == [[1] * 16]  # 16: the most


@pytest.mark.parametrize(
    "prompt,message",
    [
        ("", "names nothing to detect"),
        (" . .. ", "names nothing to detect"),
        (["a cat", "st. louis"], "the phrase 'st. louis' holds a '.'"),
        (["\x1b[31mred.", "a cat"], "the phrase '\\\\x1b\\[31mred\\.' holds"),  # escaped, not a colour
        ("x" * 10_001, "the prompt is 10001 characters, more than 10000"),
        (". ".join(["a"] * 1001), "the prompt has 1001 phrases, more than 1000"),
    ],
)
def test_a_bad_prompt_is_one_clear_error(prompt, message):
    with pytest.raises(ValueError, match=message) as raised:
        parse_phrases(prompt)
    assert "\x1b" not in str(raised.value)


def test_thresholds_outside_0_to_1_are_refused(runners):
    tokenizer = load_tokenizer(DATA / GD_HF, None, GD_NAMES)
    with pytest.raises(ValueError, match="text_threshold -0.5 is not a score threshold: give one from 0 to 1"):
        GroundingDino(runners[GD_HF], tokenizer, text_threshold=-0.5)
    with pytest.raises(ValueError, match="confidence 2 is not a score threshold"):
        OwlDetector(runners[OWLV2], load_tokenizer(DATA / OWLV2, None, OWL_NAMES), confidence=2)


def test_the_wrong_adapter_is_refused_naming_what_it_needs(runners):
    with pytest.raises(ValueError, match="not a Grounding DINO model .* it needs an open-vocabulary detector"):
        GroundingDino(runners[OWLV2], load_tokenizer(DATA / GD_HF, None, GD_NAMES))
    with pytest.raises(ValueError, match="not an OWLv2 or OWL-ViT model"):
        OwlDetector(runners[GD_HF], load_tokenizer(DATA / OWLV2, None, OWL_NAMES))
