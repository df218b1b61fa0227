"""Prompts as inputs (families/prompts.py, ros/node_prompts.py), on the docs' worked example, a tiny family that takes
a text prompt (test/support/phrase_family.py): its prompt changed on a running node by the ~/set_prompt service and
by the ~/prompt topic, each applied from the next frame over real DDS; what it derives from a prompt computed once per
prompt (counted in the node's own log); LabelInfo republished with the new phrases; a bad prompt refused (success
false), its reason logged once per kind. Real ONNX Runtime sessions of a real model, real nodes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import rclpy
from click.testing import CliRunner
from rclpy.parameter import Parameter
from rclpy.qos import ReliabilityPolicy
from std_msgs.msg import String
from support import phrase_family
from support.plugins import registered
from support.prompted import prompted_node
from support.results import detections_of
from support.ros_harness import PATIENCE_S, NodeProcess, Probe, stamped_anew

from vision_factory.cli import main
from vision_factory.families.prompts import MAX_PROMPT_CHARS, PromptError, phrases
from vision_factory.families.registry import FAMILIES
from vision_factory.ros.detection_node import DetectionNode
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.bags import write_image_bag
from vision_factory.tools.families import describe_families
from vision_factory.tools.predict import detector_from_options, predict
from vision_factory.tools.replay import parse_overrides
from vision_factory.tools.verify import verify

RELIABLE = ReliabilityPolicy.RELIABLE
SUPPORT = Path(__file__).resolve().parent / "support"
FRAME = np.full((128, 256, 3), 200, np.uint8)  # its mean, 200/255, is every phrase's score


def _box(phrase: str) -> tuple[float, ...]:
    """Where the model puts ``phrase`` on FRAME, written out here: (4c, 2c, 4c + 8, 2c + 8) for c its length, in the
    model's 64 x 64, scaled to the frame (x4 across, x2 down)."""
    c = min(len(phrase), 12)
    return (16.0 * c, 4.0 * c, 16.0 * c + 32, 4.0 * c + 16)


def _found(message) -> list[tuple[str, tuple[float, ...]]]:
    found = []
    for detection in message.detections:
        box = detection.bbox
        half_w, half_h = box.size_x / 2, box.size_y / 2
        xyxy = (box.center.position.x - half_w, box.center.position.y - half_h)
        xyxy += (box.center.position.x + half_w, box.center.position.y + half_h)
        found.append((detection.results[0].hypothesis.class_id, tuple(round(v, 3) for v in xyxy)))
    return found


def _expected(prompt: str) -> list[tuple[str, tuple[float, ...]]]:
    return [(phrase, _box(phrase)) for phrase in phrases(prompt)]


# The prompt's rules, without ROS.


def test_a_prompt_is_its_phrases_and_a_bad_one_is_refused_naming_the_kind():
    assert phrases("a cat. a remote control . ") == ["a cat", "a remote control"]
    prompt = phrase_family.PROMPT
    assert prompt.phrases("a . b . c . d") == ["a", "b", "c", "d"]
    for text, kind in (
        ("a . b . c . d . e", "too many phrases"),
        ("x" * (MAX_PROMPT_CHARS + 1), "prompt too long"),
        ("a cat\x1b[2J", "prompt with control characters"),
    ):
        with pytest.raises(PromptError) as refused:
            prompt.check(text)
        assert refused.value.kind == kind
        assert "\x1b" not in str(refused.value) and len(str(refused.value)) < 400  # escaped and bounded


def test_a_family_declares_its_prompt_once_and_is_described_with_it():
    """The text prompt brings its parameter (live), the service's package among its node's dependencies, and a
    line in `vision-factory models`; a family without one is described as before."""
    spec = phrase_family.FAMILY
    (prompt,) = [parameter for parameter in spec.parameters if parameter.name == "prompt"]
    assert prompt.live and prompt in spec.node_parameters
    assert "vision_factory_interfaces" in spec.ros_dependencies
    with registered(spec):
        text = describe_families()
    block = text.split(f"{spec.name}: ")[1].split("\n", 6)
    assert any(line.startswith("  prompt:   text (what to find)") and "~/set_prompt" in line for line in block), block
    # without it, only the package's families that take text (open_vocab, florence2) are described with a prompt
    assert describe_families().count("  prompt:   text") == sum(bool(f.text_prompt) for f in FAMILIES.values()) == 2


def test_the_prompt_is_derived_once_per_prompt_whatever_the_cameras(tmp_path):
    """A node of two cameras (two pipelines on one model): the codes of its start prompt derived once, of each
    prompt set once, however many frames; the adapter of the old prompt dropped."""
    model = phrase_family.build_model(tmp_path / "phrases.onnx")
    context = rclpy.Context()
    rclpy.init(context=context)
    overrides = [
        Parameter("model_path", value=str(model)),
        Parameter("prompt", value="a cat"),
        Parameter("cameras", value=["front", "left"]),
    ]
    phrase_family.DERIVED.clear()
    node = DetectionNode(OnnxRunner, phrase_family.FAMILY, context=context, parameter_overrides=overrides)
    try:
        assert phrase_family.DERIVED == {"a cat": 1}
        first = node.detector
        for prompt in ("a horse . dog", "a cat"):
            assert node.take_prompt(prompt, "test")
            node._threads.run_changes()  # what the next frame's thread does first
            for camera in node.cameras:
                for _ in range(3):
                    ((_, found),) = node.pipelines[camera].push(FRAME)
                    assert [(d["class_name"], tuple(d["xyxy"])) for d in detections_of(found)] == _expected(prompt)
        assert phrase_family.DERIVED == {"a cat": 2, "a horse . dog": 1}  # 'a cat' again: set again
        assert node.detector is not first and all(p.detector is node.detector for p in node.pipelines.values())
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)


# Over DDS: the node of the worked example, as a user runs it.


def test_the_prompt_changes_on_a_running_node_by_the_service_and_by_the_topic_from_the_next_frame(tmp_path):
    from vision_factory_interfaces.srv import SetPrompt

    model = phrase_family.build_model(tmp_path / "phrases.onnx")
    executable = [sys.executable, str(SUPPORT / "phrase_family.py")]
    params = {"model_path": str(model), "prompt": "cat", "qos_reliability": "reliable"}
    node = NodeProcess(tmp_path, params, executable=executable)
    probe = Probe()
    try:
        ends = prompted_node(probe, node, "phrases")
        answers, labels, images, prompts = ends.answers, ends.labels, ends.images, ends.prompts
        service, parameters = ends.service, ends.parameters
        send = stamped_anew(images, FRAME)

        def answer() -> list:
            _, found = probe.answered(send, {"/t/detections": answers}, node)
            return _found(found["/t/detections"])

        assert answer() == _expected("cat")

        # The service: answered success, and the next frame has the new phrases.
        reply = probe.answer(lambda: service.call_async(SetPrompt.Request(prompt="a horse . dog")))
        assert reply.success
        assert answer() == _expected("a horse . dog")
        assert answer() == _expected("a horse . dog")  # and the ones after

        # The topic: taken once the node's parameter says so (no reply), then the next frame has it.
        prompts.publish(String(data="a remote control"))

        def prompt_is(text: str) -> bool:
            return probe.answer(lambda: parameters.get_parameters(["prompt"])).values[0].string_value == text

        assert probe.spin_until(lambda: prompt_is("a remote control"), PATIENCE_S), node.log_tail()
        assert answer() == _expected("a remote control")

        # LabelInfo says the phrases in use (latched: the last one published).
        named = lambda: labels and [c.class_name for c in labels[-1].class_map] == ["a remote control"]  # noqa: E731
        assert probe.spin_until(named, PATIENCE_S)

        # A bad prompt: success false, the prompt in use kept, its reason logged once per kind.
        for _ in range(2):
            reply = probe.answer(lambda: service.call_async(SetPrompt.Request(prompt="a . b . c . d . e")))
            assert not reply.success
        prompts.publish(String(data="x\x1b[31m" * 500))  # over MAX_PROMPT_CHARS, with escape sequences
        assert answer() == _expected("a remote control")
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert log.count("(too many phrases)") == 1 and log.count("(prompt too long)") == 1, log
    assert "\x1b" not in log and "Traceback" not in log
    derived = [line for line in log.splitlines() if phrase_family.DERIVED_LOG in line]
    prompts_set = ("cat", "a horse . dog", "a remote control")
    assert derived == [f"{phrase_family.DERIVED_LOG}{prompt!r}" for prompt in prompts_set]


# The tools take the prompt from the family's table: --prompt (predict, track), -p prompt / --prompt (replay, verify).


@pytest.fixture
def phrases_registered(tmp_path):
    with registered(phrase_family.FAMILY):
        yield phrase_family.build_model(tmp_path / "phrases.onnx")


def test_predict_takes_the_prompt_and_a_family_without_one_refuses_it(phrases_registered, tmp_path):
    image = tmp_path / "grey.png"
    cv2.imwrite(str(image), FRAME)
    detector = detector_from_options(phrase_family.NAME, phrases_registered, "onnx:cpu", {"--prompt": "a cat . dog"})
    (found,) = predict(detector, [image])
    assert [(d["class_name"], tuple(d["xyxy"])) for d in found.record["detections"]] == _expected("a cat . dog")
    refused = CliRunner().invoke(
        main, ["predict", "--model-type", "yolo", "--model", str(phrases_registered), str(image), "--prompt", "cat"]
    )
    assert refused.exit_code != 0 and "yolo models take no prompt" in refused.output, refused.output
    assert "Traceback" not in refused.output


def test_verify_plays_a_bag_through_the_node_with_the_prompt_given_and_passes(phrases_registered, tmp_path):
    """--prompt reaches the node (its answers are of these phrases) and the offline model alike."""
    rng = np.random.default_rng(3)
    frames = [rng.integers(0, 256, (96, 160, 3), np.uint8) for _ in range(4)]
    bag = write_image_bag(tmp_path / "bag", frames)
    executable = [sys.executable, str(SUPPORT / "phrase_family.py")]
    params = parse_overrides(["queue_size:=32"], "a horse . dog")
    report = verify(bag, phrase_family.NAME, phrases_registered, tmp_path / "v", params, executable=executable)
    assert report.passed, report.text()
    answers = json.loads((tmp_path / "v" / "node" / "detections.json").read_text())
    assert [[d["class_name"] for d in frame["detections"]] for frame in answers] == [["a horse", "dog"]] * 4
