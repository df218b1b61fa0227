"""Florence-2 (families/florence2.py, models/florence2.py) against transformers' own: the architecture-true test
export of benchmarks/make_florence2.py (transformers' Florence2ForConditionalGeneration from a small seeded config
at the real 768 x 768 input, a tokenizer built with the tokenizers library), whose reference.json records, per image
and task, what transformers' processor, ``generate(num_beams=1, do_sample=False)``, ``batch_decode`` and
``post_process_generation`` gave. Through `predict` (the tool) and the adapter, with no PyTorch here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
import skimage
from click.testing import CliRunner

from vision_factory.cli import main
from vision_factory.families.florence2 import FAMILY
from vision_factory.models import florence2_interface as interface
from vision_factory.models.florence2 import Florence2
from vision_factory.models.florence2_answer import dequantize
from vision_factory.parameters import with_defaults
from vision_factory.runtime.backends import load_target

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parent / "data" / "florence2"
REFERENCE = json.loads((DATA / "reference.json").read_text())
CASES = REFERENCE["cases"]
SKIMAGE = Path(skimage.__file__).resolve().parent / "data"


def image(name: str) -> np.ndarray:
    path = DATA / name if name == "ocr.png" else SKIMAGE / name
    frame = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert frame is not None, path
    return frame


def load(path) -> object:
    return load_target("onnx:cpu", Path(path))


def model_of(folder: Path, task: str = "<CAPTION>", max_new_tokens: int = 48, num_beams: int = 1) -> Florence2:
    """The family's adapter on ``folder``; greedy (num_beams 1, reference.json's) unless told (0: the export's)."""
    values = {"model_path": str(folder), "prompt": task, "max_new_tokens": max_new_tokens, "num_beams": num_beams}
    return FAMILY.build(with_defaults(FAMILY.parameters, values, FAMILY.name), load)


@pytest.fixture(scope="module")
def merged() -> Florence2:
    return model_of(DATA)


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Florence2:
    """The same export in optimum's pair layout (decoder_model + decoder_with_past_model, no merged decoder)."""
    folder = tmp_path_factory.mktemp("pair") / "florence2"
    shutil.copytree(DATA, folder, ignore=shutil.ignore_patterns(interface.MERGED))
    return model_of(folder)


def expected_rows(case: dict) -> tuple[list[list[float]], list[str]]:
    """transformers' parsed regions as boxes: its boxes, its quadrilaterals' and polygons' bounds, with labels."""
    answer = case["answer"]
    boxes, labels = list(answer.get("bboxes", [])), list(answer.get("labels", answer.get("bboxes_labels", [])))
    for quad in answer.get("quad_boxes", []):
        points = np.asarray(quad, np.float64).reshape(4, 2)
        boxes.append([*points.min(axis=0), *points.max(axis=0)])
    if "quad_boxes" in answer:
        labels = list(answer["labels"])
    for polygons, label in zip(answer.get("polygons", []), answer.get("polygons_labels", answer.get("labels", []))):
        points = np.concatenate([np.asarray(p, np.float64).reshape(-1, 2) for p in polygons])
        boxes.append([*points.min(axis=0), *points.max(axis=0)])
        labels.append(label)
    return boxes, labels


def test_the_reference_is_what_the_script_made():
    """The committed export is the one the references were recorded on, and ONNX Runtime's first step matched."""
    import hashlib

    for name, digest in REFERENCE["sha256"].items():
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name
    assert max(REFERENCE["first_step"].values()) < 1e-3


@pytest.mark.parametrize("case", CASES, ids=[f"{c['image']}-{c['task']}" for c in CASES])
def test_each_task_gives_transformers_tokens_and_answer(merged, case):
    """Per image and task: the prompt's token ids, the generated token ids (greedy, the key-value cache, forced
    BOS/EOS, no repeated 3-gram), the decoded text and the parsed answer are transformers'."""
    merged.set_task(case["task"], case["text"])
    assert list(merged.task.ids) == case["prompt_ids"]
    found = merged.answer(image(case["image"]), case["max_new_tokens"])
    assert_transformers_answer(found, case)


def assert_transformers_answer(found, case: dict) -> None:
    """The generated token ids, the decoded text and the parsed answer are transformers' (``case``)."""
    assert list(found.tokens) == case["tokens"]
    assert found.generated_text == case["generated_text"]
    answer = case["answer"]
    if isinstance(answer, str):
        assert found.text == answer
        return
    if "bboxes" in answer:
        np.testing.assert_array_equal(found.boxes, np.asarray(answer["bboxes"], np.float64).reshape(-1, 4))
        assert list(found.labels) == list(answer.get("labels", answer.get("bboxes_labels", [])))
    if "quad_boxes" in answer:
        np.testing.assert_array_equal(found.quads, np.asarray(answer["quad_boxes"], np.float64).reshape(-1, 8))
        assert list(found.quad_labels) == answer["labels"]
    if "polygons" in answer:
        assert len(found.polygons) == len(answer["polygons"])
        for mine, theirs in zip(found.polygons, answer["polygons"]):
            assert [p.reshape(-1).tolist() for p in mine] == [list(map(float, p)) for p in theirs]


def test_the_pair_layout_gives_the_merged_decoders_tokens(pair, merged):
    """optimum's decoder_model + decoder_with_past_model decode as the merged graph does."""
    for case in CASES[:: max(1, len(CASES) // 6)]:
        for model in (pair, merged):
            model.set_task(case["task"], case["text"])
        frame = image(case["image"])
        assert pair.answer(frame, case["max_new_tokens"]).tokens == tuple(case["tokens"])


def test_predict_writes_transformers_answers(tmp_path):
    """`vision-factory predict --model-type florence2 --task ... --format json`: each record's text, tokens and
    detections (xyxy in the image's pixels, the phrase as class_name) are transformers'."""
    chosen = {}
    for case in CASES:  # one image per task kind: a caption, OCR, <OD>, grounding, OCR with regions
        if case["task"] in ("<CAPTION>", "<OCR>", "<OD>", "<CAPTION_TO_PHRASE_GROUNDING>", "<OCR_WITH_REGION>"):
            chosen.setdefault((case["task"], case["image"]), case)
    for case in list(chosen.values())[:10]:
        path = DATA / case["image"] if case["image"] == "ocr.png" else SKIMAGE / case["image"]
        command = ["predict", "--model-type", "florence2", "--model", str(DATA), "--task", case["task"]]
        command += ["--max-new-tokens", str(case["max_new_tokens"]), "--num-beams", "1"]
        command += [*(("--text", case["text"]) if case["text"] else ()), "--format", "json", str(path)]
        done = CliRunner().invoke(main, command)
        assert done.exit_code == 0, done.output
        (record,) = [json.loads(line) for line in done.stdout.splitlines()]
        assert record["tokens"] == case["tokens"]
        answer = case["answer"]
        if isinstance(answer, str):
            assert record["text"] == answer and record["detections"] == []
            continue
        boxes, labels = expected_rows(case)
        assert [row["class_name"] for row in record["detections"]] == labels
        found = np.reshape([row["xyxy"] for row in record["detections"]], (-1, 4))
        np.testing.assert_allclose(found, np.reshape(boxes, (-1, 4)))


def test_a_task_is_encoded_once_and_bad_tasks_are_refused(merged):
    """set_task encodes a task's question once (counted), and names what is wrong with a task it cannot take."""
    merged.set_task("<OD>")
    before = merged.encodings
    merged.set_task("<OD>")
    assert merged.encodings == before
    merged.set_task("<CAPTION_TO_PHRASE_GROUNDING>", "a cat")
    assert merged.encodings == before + 1
    with pytest.raises(ValueError, match="is not one of Florence-2's"):
        merged.set_task("<NOT_A_TASK>")
    with pytest.raises(ValueError, match="needs a text"):
        merged.set_task("<CAPTION_TO_PHRASE_GROUNDING>")
    with pytest.raises(ValueError, match="takes no text"):
        merged.set_task("<OD>", "a cat")


def test_loc_bins_map_back_as_transformers_maps_them():
    """The bins where float64 arithmetic would land one pixel off transformers' float32 (recorded by the script)."""
    assert REFERENCE["dequantize"], "the script found no such bin: the check would check nothing"
    for size, bin_, pixel in REFERENCE["dequantize"]:
        assert int(dequantize([bin_], size)[0]) == pixel


def test_an_incomplete_export_is_refused_naming_what_is_missing(tmp_path):
    folder = tmp_path / "export"
    shutil.copytree(DATA, folder)
    (folder / "onnx" / interface.EMBED).unlink()
    with pytest.raises(ValueError, match="lacks .*embed_tokens.onnx"):
        model_of(folder)


def test_graphs_of_different_widths_are_refused_at_start_naming_both(tmp_path):
    """An embed_tokens graph whose embeddings are not the vision encoder's features' width (another export's) is
    refused when the model is built, not at the first frame."""
    import onnx
    from onnx import helper, numpy_helper

    folder = tmp_path / "export"
    shutil.copytree(DATA, folder)
    rows = max(
        numpy_helper.to_array(t).shape[0] for t in onnx.load(str(DATA / "onnx" / interface.EMBED)).graph.initializer
    )
    table = numpy_helper.from_array(np.zeros((rows, 72), np.float32), "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["inputs_embeds"])],
        "embed_tokens",
        [helper.make_tensor_value_info("input_ids", onnx.TensorProto.INT64, ["batch", "length"])],
        [helper.make_tensor_value_info("inputs_embeds", onnx.TensorProto.FLOAT, ["batch", "length", 72])],
        [table],
    )
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(folder / "onnx" / interface.EMBED)
    )
    with pytest.raises(ValueError, match="image features 64 wide but embed_tokens.onnx embeds tokens 72 wide"):
        model_of(folder)


def test_openvino_runs_the_pair_where_it_cannot_compile_the_merged_decoder():
    """OpenVINO's CPU plugin compiles no If of dynamic rank (the merged decoder's): the family runs optimum's pair of
    the same folder instead, and answers (its numerics are the CPU's: the tokens are not compared here)."""
    values = {"model_path": str(DATA), "prompt": "<OD>", "max_new_tokens": 8}
    model = FAMILY.build(
        with_defaults(FAMILY.parameters, values, FAMILY.name), lambda path: load_target("openvino:CPU", Path(path))
    )
    assert model.layout == interface.PAIR_LAYOUT
    found = model.answer(image("coffee.png"))
    assert found.tokens[:2] == (2, 0) and len(found.tokens) <= 9


def test_inspect_recognises_the_export_folder_and_names_what_a_folder_lacks(tmp_path):
    """`inspect FOLDER`: an export folder is florence2 (by its vision encoder); any other folder is refused in one line
    naming what a model folder holds (click refused every folder before)."""
    found = CliRunner().invoke(main, ["inspect", str(DATA)])
    assert found.exit_code == 0 and "looks like: florence2" in found.output, found.output
    refused = CliRunner().invoke(main, ["inspect", str(tmp_path)])
    assert refused.exit_code != 0 and "is a folder, not a model file, nor a model folder" in refused.output
    assert "Traceback" not in refused.output and len(refused.output.strip().splitlines()) == 1, refused.output


BEAMS = json.loads((DATA / "beams.json").read_text())  # benchmarks/make_florence2_beams.py: generate(num_beams=3)
BEAM_CASES = BEAMS["cases"]


def test_the_beam_references_are_of_this_export():
    """beams.json was recorded on the committed export: its model made again by the export script gave the
    committed ONNX graphs' first step and the committed greedy tokens; the files it read are these."""
    import hashlib

    for name, digest in BEAMS["sha256"].items():
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name
    assert max(BEAMS["rebuilt"]["first_step"].values()) < 1e-3 and BEAMS["rebuilt"]["greedy_cases_given_again"] > 0
    assert len(BEAM_CASES) >= 16 and {case["num_beams"] for case in BEAM_CASES} == {3}


@pytest.fixture(scope="module")
def beams() -> Florence2:
    """num_beams 0: the export's generation_config.json's (3, the published config's)."""
    return model_of(DATA, num_beams=0)


@pytest.mark.parametrize("case", BEAM_CASES, ids=[f"{c['image']}-{c['task']}" for c in BEAM_CASES])
def test_beam_search_gives_transformers_tokens_and_answer(beams, case):
    """Per image and task: the token ids, text and parsed answer of transformers' generate(num_beams=3,
    do_sample=False) with the export's generation config (early stopping, length penalty 1, forced BOS/EOS and no
    repeated 3-gram per beam, the cache reordered by beam); the export's num_beams is the default, as in
    transformers."""
    assert beams.num_beams == 3
    beams.set_task(case["task"], case["text"])
    assert_transformers_answer(beams.answer(image(case["image"]), case["max_new_tokens"]), case)


def test_beam_search_is_not_greedy_and_the_pair_layout_searches_as_the_merged_decoder(pair):
    """The beam references differ from greedy decoding on most cases (the test tells the two apart), and optimum's
    pair of decoders gives the same beams as the merged one."""
    greedy = model_of(DATA)
    differ = 0
    for case in BEAM_CASES:
        greedy.set_task(case["task"], case["text"])
        differ += list(greedy.answer(image(case["image"]), case["max_new_tokens"]).tokens) != case["tokens"]
    assert differ >= len(BEAM_CASES) // 2
    searching = model_of(pair.export.top, num_beams=3)
    assert searching.layout == interface.PAIR_LAYOUT
    for case in BEAM_CASES[::3]:
        searching.set_task(case["task"], case["text"])
        assert list(searching.answer(image(case["image"]), case["max_new_tokens"]).tokens) == case["tokens"]


def test_num_beams_is_the_exports_unless_given_and_bad_settings_are_refused(tmp_path):
    """predict without --num-beams searches the export's 3 beams; an export whose generation config names no
    num_beams decodes greedily (transformers' default 1); num_beams out of range, early_stopping not true, false or
    "never", and do_sample true (transformers would sample) are refused naming the value."""
    case = next(c for c in BEAM_CASES if c["task"] == "<OD>")
    path = DATA / case["image"] if case["image"] == "ocr.png" else SKIMAGE / case["image"]
    command = ["predict", "--model-type", "florence2", "--model", str(DATA), "--task", case["task"], "--format", "json"]
    done = CliRunner().invoke(main, [*command, "--max-new-tokens", str(case["max_new_tokens"]), str(path)])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["tokens"] == case["tokens"]
    folder = tmp_path / "florence2"
    shutil.copytree(DATA, folder)
    config = json.loads((DATA / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "num_beams"}))
    assert model_of(folder, num_beams=0).num_beams == 1
    with pytest.raises(ValueError, match="num_beams must be an integer in 0..8, not 9"):
        model_of(DATA, num_beams=9)
    for key, value, said in (("early_stopping", "sometimes", "early_stopping"), ("do_sample", True, "do_sample")):
        (folder / "generation_config.json").write_text(json.dumps({**config, key: value}))
        with pytest.raises(ValueError, match=said):
            model_of(folder)
