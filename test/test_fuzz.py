"""Seeded fuzz campaigns against real nodes over DDS (raw and compressed input): a detection node on a
real model and the tracknet node receive a few hundred bad, lying and unusual messages interleaved with
valid frames. Afterwards each node is alive, every valid frame was answered exactly once and exactly as
before the campaign, nothing it had to refuse was answered, no traceback and no C-library line reached
its log, and log lines per bad message stay far below 0.05. Its memory over the campaign is a figure of
benchmarks/fuzz_memory.py (against a clean stream as long, in the same run), not asserted here: what a
process' resident size does depends on the machine (its allocator, its CPU's kernels, its load).
"""

from __future__ import annotations

import re

import cv2
import numpy as np
import pytest
from conftest import pypi_model
from geometry_msgs.msg import PointStamped
from support.real_models import NUDENET_MODEL, PHOTOS
from vision_msgs.msg import Detection2DArray

from vision_factory.tools import fuzz
from vision_factory.tools.synthetic import BallClip

SHOTS = 400
# Every line of a node's output is one of its own ROS log lines: nothing that OpenCV, libpng or libjpeg
# print to stderr by themselves, no traceback, no line forged by text from a message.
NODE_LINE = re.compile(r"\[(DEBUG|INFO|WARN|ERROR|FATAL)\] \[\d+\.\d+\] \[vf_fuzz_\d+_\d+\.\w+\]: ")


def _boxes(message: Detection2DArray) -> list[tuple]:
    return [
        (
            round(d.bbox.center.position.x, 3),
            round(d.bbox.center.position.y, 3),
            round(d.bbox.size_x, 3),
            round(d.bbox.size_y, 3),
            d.results[0].hypothesis.class_id,
            round(d.results[0].hypothesis.score, 5),
        )
        for d in message.detections
    ]


def _ball(message: PointStamped) -> tuple:
    return message.point.x, message.point.y, message.point.z


def _run(tmp_path, module, params, output, transport, clean, shots, answer_of, idle: float = 0.0):
    """Clean stream, campaign, clean stream again; returns (answers before, during, after, node log).

    Each play waits for the answers the node must give (however long a loaded machine makes it take), then
    for ``idle`` seconds more and until no answer came for 2 s: what should not come would come then."""
    node = fuzz.NodeUnderTest(module, params, output, transport, tmp_path / "node.log")
    every = range(len(clean))
    must_answer = {i for i, shot in enumerate(shots) if shot.expect == fuzz.ANSWER}
    try:
        node.wait_ready()
        before = node.play(fuzz.stream(clean, transport), until=every, settle=2.0 + idle)
        log_lines_before = len(node.log().splitlines())
        during = node.play(shots, until=must_answer, settle=3.0 + idle)
        log_lines_during = len(node.log().splitlines()) - log_lines_before
        after = node.play(fuzz.stream(clean, transport), until=every, settle=2.0 + idle)
        assert node.process.poll() is None, "the node died:\n" + node.log()[-3000:]
    finally:
        code = node.stop()
    log = node.log()
    assert code == 0, log[-3000:]
    bad = [shot for shot in shots if shot.kind != "valid"]
    for played in (before, during, after):
        assert played.duplicates == 0 and played.strangers == 0
    assert sorted(before.answers) == sorted(after.answers) == list(range(len(clean)))
    must_refuse = {i for i, shot in enumerate(shots) if shot.expect == fuzz.REFUSE}
    missing = sorted(must_answer - set(during.answers))
    assert not missing, [(shots[i].kind, shots[i].message.width if transport == "raw" else "") for i in missing]
    answered_wrongly = sorted(must_refuse & set(during.answers))
    assert not answered_wrongly, [shots[i].kind for i in answered_wrongly]
    # Valid frames are answered during and after the campaign exactly as before it.
    expected = {i: answer_of(before.answers[i]) for i in before.answers}
    assert {i: answer_of(after.answers[i]) for i in after.answers} == expected
    for i, shot in enumerate(shots):
        if shot.kind == "valid" and shot.frame >= 0 and answer_of is _boxes:
            assert answer_of(during.answers[i]) == expected[shot.frame], i
    assert "Traceback" not in log, log[-3000:]
    foreign = [line for line in log.splitlines() if not NODE_LINE.match(line)]
    assert not foreign, foreign[:5]
    assert "\x1b" not in log
    lines_per_bad = log_lines_during / len(bad)
    assert lines_per_bad < 0.05, f"{log_lines_during} log lines for {len(bad)} bad messages"
    return before, during, after, log


@pytest.fixture(scope="module")
def photos() -> list[np.ndarray]:
    astronaut, grace = PHOTOS["astronaut"][0], PHOTOS["grace_hopper"][0]
    return [astronaut, cv2.resize(grace, (480, 600)), astronaut[:, ::-1].copy()]


@pytest.mark.parametrize("transport", ["raw", "compressed"])
def test_detection_node_survives_a_fuzz_campaign(tmp_path, photos, transport):
    model = pypi_model(*NUDENET_MODEL)
    shots = fuzz.campaign(photos, SHOTS, transport, seed=7)
    params = {"model_path": str(model), "queue_size": "1000", "qos_depth": "1000"}
    before, *_ = _run(
        tmp_path,
        "vision_factory.yolo_onnx_node",
        params,
        ("detections", Detection2DArray),
        transport,
        photos,
        shots,
        _boxes,
    )
    assert any(_boxes(answer) for answer in before.answers.values()), "the photos' faces must be found"


@pytest.mark.parametrize("transport", ["raw", "compressed"])
def test_tracknet_node_survives_a_fuzz_campaign(tmp_path, synthetic_models, transport):
    clip = BallClip(num_frames=24, width=640, height=360, seed=5)
    frames = list(clip.frames())
    shots = fuzz.campaign(frames, SHOTS, transport, seed=11, unusual=fuzz.EITHER)
    params = {
        "model_path": str(synthetic_models["subtract"]),
        "bg_mode": "subtract",
        "median_warmup": "4",
        "flush_timeout": "0.3",
        "queue_size": "1000",
        "qos_depth": "1000",
    }
    module = "vision_factory.tracknet_onnx_node"
    before, *_ = _run(tmp_path, module, params, ("ball", PointStamped), transport, frames, shots, _ball, idle=0.5)
    assert sum(answer.point.z for answer in before.answers.values()) >= len(frames) // 2, "the ball must be seen"
