"""The tools on a Florence-2 export folder (the test export of benchmarks/make_florence2.py): `bench` times its
stages (the encoding, the first token, each token after) per backend, `compare` matches two configurations' answers
(token ids, text, boxes) over images, and every command that takes a model takes a model folder (click refused
every folder in bench, compare, eval, quantize, track, reid-tune and generate)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import skimage
from click.testing import CliRunner

from vision_factory.cli import main
from vision_factory.tools.bench_generation import ANSWER_TOKENS

DATA = Path(__file__).resolve().parent / "data" / "florence2"
SKIMAGE = Path(skimage.__file__).resolve().parent / "data"
STAGES = ("preprocess_ms", "vision_ms", "encode_ms", "inference_ms", "first_token_ms", "token_ms")


def invoke(*command: str):
    return CliRunner().invoke(main, [str(part) for part in command])


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("images")
    shutil.copy(DATA / "ocr.png", folder)
    for name in ("coffee.png", "astronaut.png"):
        shutil.copy(SKIMAGE / name, folder)
    return folder


def test_bench_times_the_encoding_the_first_token_and_each_token_after_on_each_backend(tmp_path):
    """`bench FOLDER --model-type florence2 --task '<OD>'`: on ONNX Runtime and OpenVINO (which runs the pair), the
    vision encoder's latency and the stages of a frame, an answer of N tokens their sum; said on the terminal."""
    done = invoke("bench", DATA, "--model-type", "florence2", "--task", "<OD>", "--runs", "2", "--warmup", "0",
                  "--backends", "onnx:cpu,openvino:CPU", "--out", tmp_path)  # fmt: skip
    assert done.exit_code == 0, done.output
    results = json.loads((tmp_path / "bench.json").read_text())["results"]
    assert [result["target"] for result in results] == ["onnx:cpu", "openvino:CPU"]
    for result in results:
        assert result["available"], result
        assert result["p50_ms"] > 0 and len(result["pipeline"]) > 0
        stages = result["pipeline"]
        assert stages["task"] == "<OD>" and stages["frame_size"] == "1280x720" and stages["tokens"] > 0
        assert stages["beams"] == 3  # the export's generation_config.json's num_beams, as the node's default
        assert all(stages[name] > 0 for name in STAGES), stages
        assert stages["inference_ms"] == pytest.approx(stages["encode_ms"] - stages["preprocess_ms"])
        for count in ANSWER_TOKENS:
            whole = stages["encode_ms"] + stages["first_token_ms"] + (count - 1) * stages["token_ms"]
            assert stages[f"answer_{count}_ms"] == pytest.approx(whole)
        assert f"{result['target']} per 1280x720 frame, task <OD>: pre " in done.output
    assert done.output.count("first token") == 2 and "each token after" in done.output


def predicted(model: Path, target: str, task: str, images: Path) -> list[dict]:
    """predict's records of each image (the tool compare is checked against)."""
    paths = sorted(images.iterdir())
    done = invoke("predict", "--model-type", "florence2", "--model", model, "--backend", target, "--task", task,
                  "--format", "json", *paths)  # fmt: skip
    assert done.exit_code == 0, done.output
    return [json.loads(line) for line in done.stdout.splitlines()]


def expected_outputs(a: list[dict], b: list[dict]) -> dict:
    """What compare should report of predict's records of A and B."""
    tokens = sum(x["tokens"] != y["tokens"] for x, y in zip(a, b))
    texts = sum(x["text"] != y["text"] for x, y in zip(a, b))
    boxes = sum(x["detections"] != y["detections"] for x, y in zip(a, b))
    firsts = [
        next((i for i, (s, t) in enumerate(zip(x["tokens"], y["tokens"])) if s != t), None)
        for x, y in zip(a, b)
        if x["tokens"] != y["tokens"]
    ]
    differ = sum(x["tokens"] != y["tokens"] or x["text"] != y["text"] or x["detections"] != y["detections"]
                 for x, y in zip(a, b))  # fmt: skip
    return {"frames": len(a), "tokens_differ": tokens, "texts_differ": texts, "boxes_differ": boxes, "first": firsts,
            "differ": differ}  # fmt: skip


def test_compare_matches_two_configurations_answers_as_predict_gives_them(tmp_path, images):
    """`compare --model-type florence2 --source IMAGES`: A the export, B a copy whose generation config allows
    repeated 3-grams (no_repeat_ngram_size 0: other answers where the test model repeats one), both on ONNX Runtime;
    then ONNX Runtime against OpenVINO. Its counts are those of predict's records of each."""
    other = tmp_path / "repeats"
    shutil.copytree(DATA, other)
    config = json.loads((DATA / "generation_config.json").read_text())
    (other / "generation_config.json").write_text(json.dumps({**config, "no_repeat_ngram_size": 0}))
    for model_b, target_b in ((other, "onnx:cpu"), (DATA, "openvino:CPU")):
        out = tmp_path / f"out_{target_b.replace(':', '_')}"
        done = invoke("compare", "--model-type", "florence2", "--model", DATA, "--model-b", model_b, "--b", target_b,
                      "--task", "<OD>", "--source", images, "--out", out)  # fmt: skip
        assert done.exit_code == 0, done.output
        (saved,) = out.glob("compare_*.json")
        report = json.loads(saved.read_text())
        expected = expected_outputs(
            predicted(DATA, "onnx:cpu", "<OD>", images), predicted(model_b, target_b, "<OD>", images)
        )
        outputs = report["outputs"]
        assert {name: outputs[name] for name in ("frames", "tokens_differ", "texts_differ", "boxes_differ")} == {
            name: expected[name] for name in ("frames", "tokens_differ", "texts_differ", "boxes_differ")
        }
        assert outputs["first_differing_token"] == min(expected["first"], default=-1)
        assert len(report["differing"]) == expected["differ"]
        assert ("the same answers" in done.output) == (expected["tokens_differ"] == 0)
        if model_b == other:  # the test model repeats 3-grams on these images: the copy answers otherwise
            assert expected["tokens_differ"] > 0 and "answers differ on" in report["verdict"]


def test_compare_without_source_and_eval_are_refused_in_one_line(tmp_path):
    for command in (
        ("compare", "--model-type", "florence2", "--model", DATA, "--out", tmp_path),
        ("eval", "--model-type", "florence2", "--model", DATA, "--data", DATA, "--out", tmp_path),
    ):
        done = invoke(*command)
        assert done.exit_code != 0 and "Traceback" not in done.output, done.output
        assert "florence2" in done.output.splitlines()[-1], done.output


@pytest.mark.parametrize(
    "command, said",
    [
        (("generate", "--model", "florence2", "--backend", "onnx", "--package-name", "x", "--out", "{tmp}",
          "--model-file", DATA), "is a model folder: a package is checked against one model file"),
        (("quantize", "--model-type", "yolo", "--model", DATA, "--out", "{tmp}/q.onnx"), "looks like a florence2"),
        (("track", "--model-type", "yolo", "--model", DATA, "--out", "{tmp}", DATA / "ocr.png"),
         "is a folder, not a model file"),
        (("reid-tune", "--model", DATA, "--frames", DATA, "--truth", DATA / "config.json", "--out", "{tmp}/r.onnx"),
         "looks like a florence2"),
    ],
    ids=["generate", "quantize", "track", "reid-tune"],
)  # fmt: skip
def test_every_command_that_takes_a_model_takes_a_folder_and_says_what_it_is(tmp_path, command, said):
    """A model folder reaches the command (click said "is a directory" before) and a family that runs one file
    refuses it in one line naming what the folder is."""
    done = invoke(*(str(part).replace("{tmp}", str(tmp_path)) for part in command))
    assert done.exit_code != 0 and "Traceback" not in done.output, done.output
    assert "is a directory" not in done.output and said in done.output, done.output
