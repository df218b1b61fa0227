"""The open_vocab family end to end (families/open_vocab.py), on the committed architecture-true Grounding DINO and OWL
exports and transformers' own detections of them (test/data/open_vocab/reference.json, benchmarks/make_open_vocab.py):
`predict` gives the reference detections; the node, over real DDS, answers a prompt changed by ~/set_prompt and by
~/prompt on the next frame with the reference detections of the new prompt, republishes LabelInfo, encodes each
prompt once (counted in its own log) and refuses a missing tokenizer at start naming where it looked; `verify` passes
the node against the model offline. Real ONNX Runtime sessions, real nodes, a real bag."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import pytest
from click.testing import CliRunner
from std_msgs.msg import String
from support.prompted import prompted_node
from support.ros_harness import PATIENCE_S, NodeProcess, Probe, stamped_anew
from test_open_vocab import DATA, MODELS, SKIMAGE, _same_detections
from vision_msgs.msg import Detection2DArray

from vision_factory.cli import main
from vision_factory.families.open_vocab import FAMILY
from vision_factory.models.model_file import summarize
from vision_factory.models.open_vocab import ENCODED
from vision_factory.models.open_vocab_interface import parse_phrases
from vision_factory.models.recognition import recognise
from vision_factory.results.boxes import Boxes
from vision_factory.results.frame import FrameResult
from vision_factory.tools.bags import write_image_bag
from vision_factory.tools.replay import parse_overrides
from vision_factory.tools.verify import verify

IMAGES = ("astronaut.png", "coffee.png", "chelsea.png")
OWLV2 = "owl/owlv2.onnx"
GD_HF = "grounding_dino/grounding-dino-hf.onnx"


def _prompt(case: dict) -> str:
    """The case's prompt as a node and --prompt take it: its phrases separated by ' . '."""
    return " . ".join(parse_phrases(case["prompt"]))


def _options(file: str) -> list[str]:
    """The thresholds the reference was made with, as predict's options."""
    model = MODELS[file]
    options = ["--conf", str(model["threshold"])]
    return options + (["--text-threshold", str(model["text_threshold"])] if model.get("text_threshold") else [])


def _named(case: dict) -> list[dict]:
    """The reference's detections that name a phrase (Grounding DINO's others are dropped: test_open_vocab.py)."""
    return [d for d in case["detections"] if d["class_id"] is not None]


def test_the_family_recognises_every_layout_and_is_registered():
    for file in MODELS:
        assert recognise(summarize(DATA / file)).family == "open_vocab", file
    assert FAMILY.text_prompt is not None and FAMILY.executable == "open_vocab_node"
    live = {parameter.name for parameter in FAMILY.parameters if parameter.live}
    assert {"prompt", "confidence_threshold", "text_threshold", "max_detections"} <= live


@pytest.mark.parametrize("file", sorted(MODELS))
def test_predict_gives_transformers_detections(file, tmp_path):
    """predict --model-type open_vocab --prompt ... --format json, one run per prompt over the three images: each
    image's detections those transformers' processor and post-processing gave (boxes within 2 px, scores within
    0.01, the same phrases), the phrase's index its class_id."""
    cases = MODELS[file]["cases"]
    for prompt in dict.fromkeys(_prompt(case) for case in cases):
        images = [str(SKIMAGE / name) for name in IMAGES]
        command = ["predict", "--model-type", "open_vocab", "--model", str(DATA / file), "--prompt", prompt]
        result = CliRunner().invoke(main, [*command, *_options(file), "--format", "json", *images])
        assert result.exit_code == 0, result.output
        records = [json.loads(line) for line in result.stdout.splitlines()]
        assert [Path(record["image"]).name for record in records] == list(IMAGES)
        phrases = prompt.split(" . ")
        for record in records:
            (case,) = [c for c in cases if c["image"] == Path(record["image"]).name and _prompt(c) == prompt]
            found = FrameResult(record["width"], record["height"], Boxes.from_record(record["detections"], phrases))
            _same_detections(found, _named(case))
            assert all(d["class_name"] == phrases[d["class_id"]] for d in record["detections"])


def test_predict_refuses_no_prompt_and_a_missing_tokenizer_in_one_line(tmp_path):
    image = str(SKIMAGE / "coffee.png")
    model = tmp_path / "model.onnx"
    shutil.copy(DATA / OWLV2, model)
    runner = CliRunner()
    no_prompt = runner.invoke(main, ["predict", "--model-type", "open_vocab", "--model", str(DATA / OWLV2), image])
    assert no_prompt.exit_code != 0 and "give it, e.g. 'a person . a forklift'" in no_prompt.output
    alone = runner.invoke(
        main, ["predict", "--model-type", "open_vocab", "--model", str(model), "--prompt", "a", image]
    )
    assert alone.exit_code != 0, alone.output
    assert f"no tokenizer for {model}: looked for {tmp_path / 'tokenizer.json'}" in alone.output
    for refused in (no_prompt, alone):
        assert "Traceback" not in refused.output
        assert len([line for line in refused.output.splitlines() if line.startswith("Error")]) == 1, refused.output


# Over DDS: the node, as a user runs it.


def _answer_of(message: Detection2DArray, prompt: str, width: int, height: int) -> FrameResult:
    return FrameResult(width, height, Boxes.from_message(message, prompt.split(" . ")))


def test_the_node_answers_a_prompt_changed_by_the_service_and_the_topic_on_the_next_frame(tmp_path):
    """OWLv2's node on the astronaut: its start prompt's detections, then after ~/set_prompt and after ~/prompt the
    next frame's are the new prompt's (transformers' own, of reference.json), LabelInfo the new phrases; a prompt
    the model cannot read (a phrase of 18 tokens) refused, the prompt in use kept; each prompt encoded once."""
    from vision_factory_interfaces.srv import SetPrompt

    model, (start, by_service, by_topic) = MODELS[OWLV2], MODELS[OWLV2]["cases"][:3]
    assert all(case["image"] == "astronaut.png" for case in (start, by_service, by_topic))
    frame = cv2.imread(str(SKIMAGE / "astronaut.png"))
    params = {"model_path": str(DATA / OWLV2), "prompt": _prompt(start), "qos_reliability": "reliable"}
    params["confidence_threshold"] = str(model["threshold"])
    node = NodeProcess(tmp_path, params, module="vision_factory.open_vocab_onnx_node")
    probe = Probe()
    try:
        ends = prompted_node(probe, node, "open_vocab")
        answers, images, prompts, service = ends.answers, ends.images, ends.prompts, ends.service
        send = stamped_anew(images, frame)

        def next_answer(prompt: str) -> FrameResult:
            _, found = probe.answered(send, {"/t/detections": answers}, node)
            return _answer_of(found["/t/detections"], prompt, frame.shape[1], frame.shape[0])

        _same_detections(next_answer(_prompt(start)), _named(start))
        assert probe.spin_until(lambda: ends.phrases_named() == _prompt(start).split(" . "), PATIENCE_S)

        reply = probe.answer(lambda: service.call_async(SetPrompt.Request(prompt=_prompt(by_service))))
        assert reply.success
        _same_detections(next_answer(_prompt(by_service)), _named(by_service))  # the next frame
        assert probe.spin_until(lambda: ends.phrases_named() == _prompt(by_service).split(" . "), PATIENCE_S)

        prompts.publish(String(data=_prompt(by_topic)))
        prompt_in_use = lambda: probe.answer(lambda: ends.parameters.get_parameters(["prompt"])).values[0].string_value  # noqa: E731
        assert probe.spin_until(lambda: prompt_in_use() == _prompt(by_topic), PATIENCE_S), node.log_tail()
        _same_detections(next_answer(_prompt(by_topic)), _named(by_topic))
        assert probe.spin_until(lambda: ends.phrases_named() == _prompt(by_topic).split(" . "), PATIENCE_S)

        long = SetPrompt.Request(prompt="a cat . supercalifragilistic")  # 18 tokens: more than OWL's 16
        assert not probe.answer(lambda: service.call_async(long)).success
        _same_detections(next_answer(_prompt(by_topic)), _named(by_topic))
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert "more than the 16 OWL reads" in log and "Traceback" not in log, log
    encoded = [line.split(ENCODED, 1)[1] for line in log.splitlines() if ENCODED in line]
    assert encoded == [
        f"'{_prompt(case)}' ({len(parse_phrases(case['prompt']))} phrases)" for case in model["cases"][:3]
    ]


def test_the_node_refuses_a_missing_tokenizer_at_start_naming_where_it_looked(tmp_path):
    (tmp_path / "models").mkdir()
    model = shutil.copy(DATA / GD_HF, tmp_path / "models" / "gd.onnx")
    node = NodeProcess(
        tmp_path, {"model_path": str(model), "prompt": "a cat"}, module="vision_factory.open_vocab_onnx_node"
    )
    assert node.wait(PATIENCE_S) == 2
    looked = f"looked for {tmp_path / 'models' / 'tokenizer.json'}, {tmp_path / 'models' / 'vocab.txt'}"
    assert "cannot start" in node.log() and looked in node.log() and "never downloaded" in node.log(), node.log()
    assert "Traceback" not in node.log()


def test_verify_passes_the_node_against_the_model_with_the_prompt_given(tmp_path):
    """A bag of the three images played through Grounding DINO's node with --prompt and the reference thresholds
    (-p): its answers are the offline model's, of the prompt's phrases."""
    case, model = MODELS[GD_HF]["cases"][0], MODELS[GD_HF]
    frames = [cv2.resize(cv2.imread(str(SKIMAGE / name)), (320, 240)) for name in IMAGES]
    bag = write_image_bag(tmp_path / "bag", frames)
    given = [f"confidence_threshold:={model['threshold']}", f"text_threshold:={model['text_threshold']}"]
    params = parse_overrides(["queue_size:=32", *given], _prompt(case))
    report = verify(bag, "open_vocab", DATA / GD_HF, tmp_path / "v", params)
    assert report.passed, report.text()
    answers = json.loads((tmp_path / "v" / "node" / "detections.json").read_text())
    assert len(answers) == 3 and sum(len(frame["detections"]) for frame in answers) > 0
    phrases = _prompt(case).split(" . ")
    assert all(d["class_name"] == phrases[d["class_id"]] for frame in answers for d in frame["detections"])
