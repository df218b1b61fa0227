"""The florence2 node over real DDS (families/florence2.py on ros/detection_node.py), on the committed test export
and transformers' own answers (test/data/florence2/reference.json, benchmarks/make_florence2.py): a caption on
``text``, then the task changed by ~/set_prompt and by ~/prompt, answered on the next frame with transformers'
boxes and phrases of the new task; a task it cannot take refused, the task in use kept; each task encoded once.
`verify` passes the node against the model offline. Real ONNX Runtime sessions, a real node, a real bag."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from std_msgs.msg import String
from support.cli import run_cli
from support.prompted import prompted_node
from support.ros_harness import PATIENCE_S, NodeProcess, Probe, stamped_anew
from test_florence2 import CASES, DATA, expected_rows, image
from vision_msgs.msg import Classification

from vision_factory.models.florence2 import ENCODED
from vision_factory.results.boxes import Boxes
from vision_factory.tools.bags import write_image_bag

pytestmark = pytest.mark.dds

MODULE = "vision_factory.florence2_onnx_node"


def _case(task: str, name: str = "coffee.png") -> dict:
    return next(case for case in CASES if case["task"] == task and case["image"] == name)


def test_the_node_answers_each_task_and_changes_task_on_the_next_frame(tmp_path):
    caption, od, grounding = _case("<CAPTION>"), _case("<OD>"), _case("<CAPTION_TO_PHRASE_GROUNDING>")
    limit = 48
    assert {case["max_new_tokens"] for case in (caption, od, grounding)} == {limit}, "cases cut short: pick others"
    frame = image("coffee.png")
    params = {"model_path": str(DATA), "prompt": "<CAPTION>", "max_new_tokens": str(limit), "num_beams": "1"}
    params["qos_reliability"] = "reliable"
    node = NodeProcess(tmp_path, params, module=MODULE)
    probe = Probe()
    try:
        ends = prompted_node(probe, node, "florence2")
        texts = probe.subscribe(Classification, "/t/text")
        send = stamped_anew(ends.images, frame)

        def next_answer() -> tuple:
            _, found = probe.answered(send, {"/t/detections": ends.answers, "/t/text": texts}, node)
            return found["/t/detections"], found["/t/text"]

        boxes, text = next_answer()
        assert text.results[0].class_id == caption["answer"] and not boxes.detections
        assert boxes.header.stamp == text.header.stamp

        from vision_factory_interfaces.srv import SetPrompt

        assert probe.answer(lambda: ends.service.call_async(SetPrompt.Request(prompt="<OD>"))).success
        boxes, _ = next_answer()
        expected, labels = expected_rows(od)
        found = Boxes.from_message(boxes, labels)
        assert list(found.labels) == labels
        np.testing.assert_allclose(found.xyxy, np.reshape(expected, (-1, 4)), atol=1e-3)

        ends.prompts.publish(String(data=grounding["task"] + grounding["text"]))
        prompt = lambda: probe.answer(lambda: ends.parameters.get_parameters(["prompt"])).values[0].string_value  # noqa: E731
        assert probe.spin_until(lambda: prompt() == grounding["task"] + grounding["text"], PATIENCE_S)
        boxes, _ = next_answer()
        expected, labels = expected_rows(grounding)
        assert [d.results[0].hypothesis.class_id for d in boxes.detections] == labels

        refused = SetPrompt.Request(prompt="<NOT_A_TASK>")
        assert not probe.answer(lambda: ends.service.call_async(refused)).success
        boxes, _ = next_answer()
        assert [d.results[0].hypothesis.class_id for d in boxes.detections] == labels  # grounding still
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert "is not one of Florence-2's" in log and "Traceback" not in log, log
    encoded = [line.split(ENCODED, 1)[1].split(" '")[0] for line in log.splitlines() if ENCODED in line]
    assert encoded == ["<CAPTION>", "<OD>", "<CAPTION_TO_PHRASE_GROUNDING>"], log


def test_verify_passes_the_node_against_the_model(tmp_path):
    """`vision-factory verify BAG --model EXPORT_FOLDER --prompt '<OD>'` (-p max_new_tokens): a bag of three frames
    through the node, its answers the offline model's."""
    frames = [cv2.resize(image(name), (320, 240)) for name in ("astronaut.png", "coffee.png", "chelsea.png")]
    bag = write_image_bag(tmp_path / "bag", frames)
    arguments = ["verify", str(bag), "--model-type", "florence2", "--model", str(DATA), "--prompt", "<OD>"]
    arguments += ["-p", "queue_size:=32", "-p", "max_new_tokens:=24", "--out", str(tmp_path / "v")]
    done = run_cli(*arguments)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "v" / "verify.json").read_text())["verdict"] == "pass", done.stdout
    answers = json.loads((tmp_path / "v" / "node" / "detections.json").read_text())
    assert len(answers) == 3
