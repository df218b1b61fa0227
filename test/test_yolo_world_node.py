"""A YOLO-World export taking text embeddings, run by open_vocab_node over real DDS (test/data/yolo_world/,
benchmarks/make_yolo_world.py): the prompt changed by ~/set_prompt and by ~/prompt answered on the next frame with
Ultralytics' own boxes of the new phrases (reference.json), LabelInfo republished, the text encoder run once per
prompt (its encoding logged once per prompt: one text encoder run each), too many phrases refused with the prompt kept;
without its text encoder the node refuses to start, naming where it looked. Real ONNX Runtime sessions, a real node."""

from __future__ import annotations

import json
import shutil

import cv2
from std_msgs.msg import String
from support.prompted import prompted_node
from support.ros_harness import PATIENCE_S, NodeProcess, Probe, stamped_anew
from test_yolo_world import DATA, MODELS, PIXELS, SCORE, TEXT, frame
from vision_msgs.msg import Detection2DArray

from vision_factory.models.open_vocab import ENCODED
from vision_factory.results.boxes import Boxes
from vision_factory.results.frame import FrameResult
from vision_factory.tools.bags import write_image_bag
from vision_factory.tools.replay import parse_overrides
from vision_factory.tools.verify import verify


def _cases() -> list[dict]:
    """The astronaut's three prompts (2, 3 and 4 phrases)."""
    cases = [case for case in MODELS[TEXT]["cases"] if case["image"] == "astronaut"]
    assert [len(case["phrases"]) for case in cases] == [2, 3, 4]
    return cases


def _same_above(found: FrameResult, case: dict, conf: float) -> None:
    """Ultralytics' detections of ``case`` scoring above ``conf`` (NMS keeps a box by the boxes above it alone: the
    same as its predict at ``conf``), each found with its phrase, box and score; none besides (only boxes within
    SCORE of ``conf`` may differ)."""
    boxes, free = found.boxes, list(range(len(found.boxes)))
    for row in case["detections"]:
        if row["score"] <= conf - SCORE:
            continue
        same = [i for i in free if boxes.class_ids[i] == row["class_id"]]
        distance = [abs(boxes.xyxy[i] - row["xyxy"]).max() for i in same]
        if not same or min(distance) > PIXELS:
            assert row["score"] - conf <= SCORE, f"missed {row}"
            continue
        i = same[distance.index(min(distance))]
        free.remove(i)
        assert (
            abs(float(boxes.scores[i]) - row["score"]) <= SCORE and boxes.labels[i] == case["phrases"][row["class_id"]]
        )
    assert all(boxes.scores[i] - conf <= SCORE for i in free), f"extra boxes {free}"


def test_the_node_answers_a_prompt_changed_by_the_service_and_the_topic_on_the_next_frame(tmp_path):
    from vision_factory_interfaces.srv import SetPrompt

    start, by_service, by_topic = _cases()
    conf = max(case["conf"] for case in (start, by_service, by_topic))  # one threshold for the three
    image = frame("astronaut")
    params = {"model_path": str(DATA / TEXT), "prompt": " . ".join(start["phrases"]), "qos_reliability": "reliable"}
    params["confidence_threshold"] = str(conf)
    node = NodeProcess(tmp_path, params, module="vision_factory.open_vocab_onnx_node")
    probe = Probe()
    try:
        ends = prompted_node(probe, node, "open_vocab")
        send = stamped_anew(ends.images, image)

        def next_answer(case: dict) -> FrameResult:
            _, found = probe.answered(send, {"/t/detections": ends.answers}, node)
            message: Detection2DArray = found["/t/detections"]
            return FrameResult(image.shape[1], image.shape[0], Boxes.from_message(message, case["phrases"]))

        _same_above(next_answer(start), start, conf)
        assert probe.spin_until(lambda: ends.phrases_named() == start["phrases"], PATIENCE_S)

        request = SetPrompt.Request(prompt=" . ".join(by_service["phrases"]))
        assert probe.answer(lambda: ends.service.call_async(request)).success
        _same_above(next_answer(by_service), by_service, conf)  # the next frame
        assert probe.spin_until(lambda: ends.phrases_named() == by_service["phrases"], PATIENCE_S)

        ends.prompts.publish(String(data=" . ".join(by_topic["phrases"])))
        prompt_in_use = lambda: probe.answer(lambda: ends.parameters.get_parameters(["prompt"])).values[0].string_value  # noqa: E731
        assert probe.spin_until(lambda: prompt_in_use() == " . ".join(by_topic["phrases"]), PATIENCE_S)
        _same_above(next_answer(by_topic), by_topic, conf)  # the next frame
        assert probe.spin_until(lambda: ends.phrases_named() == by_topic["phrases"], PATIENCE_S), node.log_tail()

        nine = SetPrompt.Request(prompt=" . ".join(f"thing {i}" for i in range(9)))  # K is 8
        assert not probe.answer(lambda: ends.service.call_async(nine)).success
        _same_above(next_answer(by_topic), by_topic, conf)
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert "more than the 8 this export takes" in log and "Traceback" not in log, log
    encoded = [line.split(ENCODED, 1)[1] for line in log.splitlines() if ENCODED in line]
    prompts = [" . ".join(case["phrases"]) for case in (start, by_service, by_topic)]
    assert encoded == [f"'{text}' ({len(case['phrases'])} phrases)" for text, case in zip(prompts, _cases())], log


def test_the_node_refuses_to_start_without_its_text_encoder_naming_where_it_looked(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    for name in (TEXT, "tokenizer.json"):
        shutil.copy(DATA / name, models / name)
    node = NodeProcess(
        tmp_path, {"model_path": str(models / TEXT), "prompt": "a flag"}, module="vision_factory.open_vocab_onnx_node"
    )
    assert node.wait(PATIENCE_S) == 2
    log = node.log()
    assert "cannot start" in log and f"looked for {models / 'text_encoder.onnx'}" in log, log
    assert "Traceback" not in log


def test_verify_passes_the_node_against_the_model_with_the_prompt_given(tmp_path):
    """A bag of the three images played through the node with --prompt: its answers are the offline model's (the
    text encoder found beside the model by both), of the prompt's phrases."""
    case = _cases()[1]
    frames = [cv2.resize(frame(name), (320, 240)) for name in ("astronaut", "coffee", "chelsea")]
    bag = write_image_bag(tmp_path / "bag", frames)
    params = parse_overrides(["queue_size:=32", f"confidence_threshold:={case['conf']}"], " . ".join(case["phrases"]))
    report = verify(bag, "open_vocab", DATA / TEXT, tmp_path / "v", params)
    assert report.passed, report.text()
    answers = json.loads((tmp_path / "v" / "node" / "detections.json").read_text())
    assert len(answers) == 3 and sum(len(answer["detections"]) for answer in answers) > 0
    assert all(d["class_name"] == case["phrases"][d["class_id"]] for answer in answers for d in answer["detections"])
