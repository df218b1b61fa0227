"""Streams one after another: each starts as on a fresh stream (its own median warm-up, window and InpaintNet
buffer, any frame size), whatever came before it: another stream of the same size or of another, bad frames.

Offline through BallStream (``flush()`` ends a stream), and over DDS through a real tracknet node (a pause longer
than flush_timeout ends one), raw and compressed; plus what the node does with its defaults: bg_mode from the model,
a median warm-up that works, and a silence warning that says what it saw.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from geometry_msgs.msg import PointStamped
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from support.ros_harness import PATIENCE_S, NodeProcess, Probe

from vision_factory.families.registry import family
from vision_factory.models.ball_stream import BallStream, FrameSizeChanged
from vision_factory.models.tracknet import InpaintModuleONNX, TrackNetModuleONNX
from vision_factory.parameters import with_defaults
from vision_factory.ros.messages import bgr_to_message
from vision_factory.runtime.backends import load_target
from vision_factory.tools import fuzz
from vision_factory.tools.synthetic import BallClip

TOLERANCE_PX = 12
WARMUP = 6
MEDIAN_MODES = ["subtract", "subtract_concat", "concat"]


def _stream(synthetic_models, bg_mode: str, inpaint: bool = True) -> BallStream:
    warmup = WARMUP if bg_mode else 0
    tracker = TrackNetModuleONNX(synthetic_models[bg_mode], 8, bg_mode, median_warmup=warmup, heatmap_threshold=0.5)
    refiner = (lambda scaler: InpaintModuleONNX(synthetic_models["inpaint"], 16, None, scaler)) if inpaint else None
    return BallStream(tracker, refiner)


def _run(stream: BallStream, frames: list[np.ndarray], name: str) -> list[tuple]:
    """One stream: every frame pushed (tagged by ``name`` and index), then flushed; (index, x, y, visibility)."""
    outputs = [out for index, frame in enumerate(frames) for out in stream.push(frame, (name, index))]
    outputs += stream.flush()
    assert sorted(tag for tag, _ in outputs) == [(name, index) for index in range(len(frames))]
    return sorted((tag[1], r.ball.x, r.ball.y, int(r.ball.visible)) for tag, r in outputs)


def _found(clip: BallClip, answers: list[tuple], warmup: int = WARMUP) -> tuple[int, int]:
    """(visible frames answered within TOLERANCE_PX of the truth, visible frames), past the median warm-up."""
    visible = [t for t in clip.truth[warmup:] if t.visibility]
    by_frame = {answer[0]: answer for answer in answers}
    near = [
        t
        for t in visible
        if by_frame[t.frame][3] and np.hypot(by_frame[t.frame][1] - t.x, by_frame[t.frame][2] - t.y) <= TOLERANCE_PX
    ]
    return len(near), len(visible)


@pytest.fixture(scope="module")
def clips() -> dict[str, BallClip]:
    return {"big": BallClip(40, 640, 360, seed=4), "small": BallClip(36, 320, 180, seed=9)}


@pytest.mark.parametrize("bg_mode", [*MEDIAN_MODES, ""])
def test_the_same_clip_twice_is_answered_as_by_a_fresh_stream(synthetic_models, clips, bg_mode):
    """Stream A, flush, stream A again: the second is answered as the first, as by a fresh stream (on the
    original code the second used the first's median: its warm-up frames were tracked, not answered at once)."""
    frames = list(clips["big"].frames())
    fresh = _run(_stream(synthetic_models, bg_mode), frames, "fresh")
    used = _stream(synthetic_models, bg_mode)
    first, second = _run(used, frames, "first"), _run(used, frames, "second")
    assert first == second == fresh
    near, visible = _found(clips["big"], second)
    assert near >= 0.8 * visible, (near, visible)
    assert used.stats.push_calls == 2 * len(frames)  # the stats go on across streams


@pytest.mark.parametrize("bg_mode", MEDIAN_MODES)
def test_a_stream_cut_inside_its_warm_up_leaves_nothing_to_the_next(synthetic_models, clips, bg_mode):
    """A stream of 3 frames (inside a 6-frame warm-up), flush, then the clip: the clip's median is its own."""
    clip = clips["big"]
    used = _stream(synthetic_models, bg_mode)
    cut = _run(used, [BallClip(3, 640, 360, seed=77).frame(i) for i in range(3)], "cut")
    assert [answer[3] for answer in cut] == [0, 0, 0]  # warm-up frames: answered at once, no ball
    assert _run(used, list(clip.frames()), "clip") == _run(_stream(synthetic_models, bg_mode), list(clip.frames()), "")


@pytest.mark.parametrize("bg_mode", ["subtract", ""])
def test_streams_of_different_sizes_each_start_fresh(synthetic_models, clips, bg_mode):
    """Big, small, big, each ended by flush: no frame is refused as 'frame size changed', each answered as fresh."""
    big, small = list(clips["big"].frames()), list(clips["small"].frames())
    used = _stream(synthetic_models, bg_mode)
    answers = [_run(used, big, "big"), _run(used, small, "small"), _run(used, big, "big again")]
    assert answers[0] == answers[2] == _run(_stream(synthetic_models, bg_mode), big, "fresh")
    assert answers[1] == _run(_stream(synthetic_models, bg_mode), small, "fresh")
    assert used.restarts == 0 and used.size is None
    assert used.refiner.img_scaler == (640 / 512, 360 / 288)  # the last stream's scale reached InpaintNet
    near, visible = _found(clips["small"], answers[1])
    assert near >= 0.8 * visible, (near, visible)


@pytest.mark.parametrize("bg_mode", ["subtract", "concat"])
def test_bad_frames_between_streams_leave_nothing_behind(synthetic_models, clips, bg_mode):
    """A stream, frames that fail (no pixels, wrong type, a channel short, floats), a flush, the stream again: as
    fresh. Bad frames inside a stream (after its warm-up) are refused without changing its answers either."""
    frames = list(clips["big"].frames())
    bad = [np.zeros((0, 640, 3), np.uint8), np.zeros((360, 640), np.uint8), frames[0][..., :2], frames[0] / 255]
    fresh = _run(_stream(synthetic_models, bg_mode), frames, "fresh")
    used = _stream(synthetic_models, bg_mode)
    _run(used, frames, "first")
    for frame in bad:  # between streams: each refused, nothing kept
        with pytest.raises(ValueError):
            used.push(frame, "bad")
        assert used.pending == 0
    assert used.flush() == []
    assert _run(used, frames, "again") == fresh
    # Inside a stream: refused, the stream's answers unchanged (a frame of another size is refused too).
    outputs = []
    for index, frame in enumerate(frames):
        outputs += used.push(frame, index)
        if index in (WARMUP + 2, 20):
            for bad_frame in [*bad, cv2.resize(frame, (320, 180))]:
                with pytest.raises((ValueError, FrameSizeChanged)):
                    used.push(bad_frame, "bad")
    outputs += used.flush()
    assert sorted((tag, r.ball.x, r.ball.y, int(r.ball.visible)) for tag, r in outputs) == fresh


# --- pauses: answer_pending() answers what is pending and the stream goes on ---


def _answers(stream: BallStream, frames: list[np.ndarray], pauses: set[int]) -> tuple[dict, set]:
    """Every frame pushed, answer_pending() after the frames of index in ``pauses``, then flushed: (index -> (x, y,
    visibility, heatmap peak)), and the indexes answered by the pauses."""
    peaks = {}
    stream.tracker.on_peak = lambda fid, peak, _: peaks.__setitem__(stream.tag(fid), peak)
    answers, paused = {}, set()
    for index, frame in enumerate(frames):
        outputs = stream.push(frame, index)
        if index in pauses:
            pending = stream.answer_pending()
            paused |= {tag for tag, _ in pending}
            outputs += pending
            assert stream.pending == 0 and stream.answer_pending() == []
        for tag, result in outputs:
            assert tag not in answers, f"frame {tag} answered twice"
            p = result.ball.record()
            answers[tag] = (p["X"], p["Y"], p["Visibility"], peaks.get(tag))
    for tag, result in stream.flush():
        assert tag not in answers, f"frame {tag} answered twice"
        p = result.ball.record()
        answers[tag] = (p["X"], p["Y"], p["Visibility"], peaks.get(tag))
    assert sorted(answers) == list(range(len(frames)))
    return answers, paused


@pytest.mark.parametrize("stride", [1, 3])
@pytest.mark.parametrize("bg_mode", ["subtract", ""])
def test_a_pause_answers_the_pending_frames_and_changes_no_later_answer(tmp_path, clips, bg_mode, stride):
    """A model whose heatmaps depend on every frame of the window: a pause after frame 17 answers the frames
    pending then (those after the last one answered) from the windows so far; every later frame is answered as
    without the pause (the same heatmap peak: the median, window and stride positions went on), and so are the
    frames before the pending ones."""
    from conftest import dense_tracknet_model

    model = dense_tracknet_model(tmp_path / "dense.onnx", 8, bg_mode, seed=11)
    frames = list(clips["big"].frames())[:30]
    make = lambda: BallStream(  # noqa: E731
        TrackNetModuleONNX(model, 8, bg_mode, median_warmup=WARMUP if bg_mode else 0, stride=stride)
    )
    whole, _ = _answers(make(), frames, set())
    paused_answers, paused = _answers(make(), frames, {17})
    assert paused == set(range(17 - 7 + 1, 18))  # the window's but one, past frame 10 (answered at frame 17)
    for index in range(len(frames)):
        if index not in paused:
            assert paused_answers[index] == whole[index], index
    assert any(paused_answers[index] != whole[index] for index in paused)  # fewer windows, another ensemble


def test_a_pause_with_inpaintnet_changes_no_later_answer(synthetic_models, clips):
    """With InpaintNet (16 frames) a pause answers its pending frames as they are (the ones it would repair as
    misses), and every later frame is answered as without the pause (InpaintNet repairs a frame from the window it
    starts)."""
    frames = list(clips["big"].frames())
    whole, _ = _answers(_stream(synthetic_models, "subtract"), frames, set())
    paused_answers, paused = _answers(_stream(synthetic_models, "subtract"), frames, {29})
    assert paused == set(range(29 - 7 - 15 + 1, 30))  # TrackNet's 7 and InpaintNet's 15
    later = lambda answers: {i: a for i, a in answers.items() if i not in paused}  # noqa: E731
    assert later(paused_answers) == later(whole)


@pytest.mark.parametrize("bg_mode", ["subtract", ""])
def test_a_sender_that_waits_for_each_answer_is_answered_frame_by_frame(synthetic_models, clips, bg_mode):
    """A pause after every frame (a sender that waits for each answer): each frame answered once, right after it
    came, from the windows that end at it; the stream goes on (no new median warm-up), so the ball is found."""
    clip = clips["big"]
    frames = list(clip.frames())
    answers, paused = _answers(_stream(synthetic_models, bg_mode), frames, set(range(len(frames))))
    warmup = WARMUP - 1 if bg_mode else 0  # the frames only the median took, answered at once
    assert paused == set(range(warmup, len(frames)))
    near, visible = _found(clip, [(index, *answer) for index, answer in answers.items()])
    assert near >= 0.9 * visible, (near, visible)


# --- over DDS, through a real node ---


def _values(synthetic_models) -> dict:
    """The node's parameter values with its defaults: only the models given (bg_mode and warm-up are the node's)."""
    given = {"model_path": str(synthetic_models["subtract"]), "inpaint_model_path": str(synthetic_models["inpaint"])}
    return with_defaults(family("tracknet").parameters, given, "tracknet")


def _decoded(shots: list[fuzz.Shot], transport: str) -> list[np.ndarray]:
    """The frames the node sees: the pixels, or the JPEG decoded."""
    if transport == "raw":
        message = shots[0].message
        return [np.frombuffer(bytes(s.message.data), np.uint8).reshape(message.height, message.width, 3) for s in shots]
    return [cv2.imdecode(np.frombuffer(bytes(s.message.data), np.uint8), cv2.IMREAD_COLOR) for s in shots]


@pytest.mark.parametrize("transport", ["raw", "compressed"])
def test_a_node_answers_every_stream_as_a_fresh_one(tmp_path, synthetic_models, clips, transport):
    """Through one tracknet node with its defaults (bg_mode and a median warm-up from the model's family): a clip,
    malformed messages, the clip again, a clip of another size, the first again, each ended by a pause longer
    than flush_timeout. Every stream is answered as a fresh offline stream answers it, and the ball is found."""
    values = _values(synthetic_models)
    params = {
        "model_path": values["model_path"],
        "inpaint_model_path": values["inpaint_model_path"],
        "flush_timeout": "1.0",
        "queue_size": "1000",  # every frame of a stream is kept, whatever the machine's speed
        "qos_depth": "1000",
    }
    streams = {name: fuzz.stream(list(clip.frames()), transport) for name, clip in clips.items()}
    bad = [s for s in fuzz.campaign(list(clips["big"].frames())[:4], 60, transport, seed=3) if s.expect == fuzz.REFUSE]
    node = fuzz.NodeUnderTest(
        "vision_factory.tracknet_onnx_node", params, ("ball", PointStamped), transport, tmp_path / "node.log"
    )
    answers = []
    try:
        node.wait_ready()
        for name in ("big", "bad", "big", "small", "big"):
            # Each stream in a burst (a stall of the loaded machine between two frames never splits it), then
            # a pause longer than flush_timeout: the node's end of that stream.
            played = node.play(bad if name == "bad" else streams[name], gap=0.001, settle=2.5)
            answers.append((name, played))
    finally:
        code = node.stop()
    log = node.log()
    assert code == 0, log[-3000:]
    assert "bg_mode 'subtract' (the model's), background median from the first 10 frames of each stream" in log
    load = lambda path: load_target("onnx:cpu", Path(path))  # noqa: E731
    for name, played in answers:
        if name == "bad":
            assert played.answers == {}, "a malformed message was answered"
            continue
        fresh = family("tracknet").build(values, load)  # a fresh stream of the node's defaults
        expected = _run(fresh, _decoded(streams[name], transport), name)
        got = sorted((index, m.point.x, m.point.y, m.point.z) for index, m in played.answers.items())
        assert played.duplicates == played.strangers == 0
        assert got == [(i, float(x), float(y), float(v)) for i, x, y, v in expected], name
        near, visible = _found(clips[name], expected)
        assert near >= 0.8 * visible, (name, near, visible)
    assert "Traceback" not in log


# --- the node's defaults and its silence warning ---


def test_a_median_mode_without_warm_up_or_median_is_refused_at_start_up(tmp_path, synthetic_models):
    """bg_mode subtract with median_warmup 0 and no median_path would skip every frame: refused, saying how."""
    params = {"model_path": str(synthetic_models["subtract"]), "bg_mode": "subtract", "median_warmup": "0"}
    node = NodeProcess(tmp_path, params)
    assert node.wait() == 2
    node.stop()
    log = node.log()
    assert "bg_mode 'subtract' needs a background median, but median_warmup is 0 and no median_path is given" in log
    assert "set median_warmup to the frames to build it from at the start of each stream (default 10)" in log
    assert "Traceback" not in log


def test_the_defaults_agree_everywhere(synthetic_models):
    """One median warm-up default: the node's table, its config file and launch file, eval's, compare's and
    bench's options, quantize's node values."""
    import yaml
    from click.testing import CliRunner
    from conftest import ROOT
    from support.launch import launch_of

    from vision_factory.cli import main
    from vision_factory.tools.bench import node_params
    from vision_factory.tools.commands import node_default

    default = node_default(family("tracknet").parameters, "median_warmup")
    assert default == 10
    config = yaml.safe_load((ROOT / "config" / "tracknet_onnx.yaml").read_text())["/**"]["ros__parameters"]
    assert config["median_warmup"] == default and config["bg_mode"] == "model"
    launch = launch_of(ROOT / "launch" / "tracknet_onnx.launch.py")
    assert {a.name: a.default for a in launch.parameters}["median_warmup"] == str(default)
    for command in ("eval", "compare"):
        help_text = CliRunner().invoke(main, [command, "--help"]).output
        assert f"[default: {default}]" in help_text.split("--median-warmup")[1].split("--")[0], command
    bench_node = {  # what bench's node is given (nothing: the node's default)
        mode: node_params("tracknet", synthetic_models[mode], 1, {})[0].get("median_warmup")
        for mode in ("subtract", "")
    }
    assert bench_node == {"subtract": None, "": "0"}
    values = family("tracknet").values_from_model(synthetic_models["subtract"])
    assert values["median_warmup"] == default and values["bg_mode"] == "subtract"


def _frame(index: int, clip: BallClip, stamp: int) -> Image:
    header = Header(frame_id="camera")
    header.stamp.sec = stamp
    return bgr_to_message(clip.frame(index), header)


def _silences(node: NodeProcess, since: int) -> list[str]:
    """The node's silence warnings after the first ``since`` lines of its log."""
    return [line for line in node.log().splitlines()[since:] if "no frame on" in line]


def _said_after_three(node: NodeProcess, since: int) -> bool:
    """Whether the node warned of the silence after the three frames (a warning of the silence before them, which
    blames the transport, may be logged late on a loaded machine: it is not this one)."""
    return any("3 frames came before" in line for line in _silences(node, since))


def test_the_silence_warning_says_what_the_node_saw(tmp_path, synthetic_models):
    """Frames that came and were skipped, or a stream that ended inside its median warm-up, are said so when the
    camera falls silent; the transport is not blamed for frames that arrived."""
    clip = BallClip(6, 320, 180, seed=8)
    cv2.imwrite(str(tmp_path / "median.png"), BallClip(1, 640, 360).background)
    common = {
        "model_path": str(synthetic_models["subtract"]),
        "bg_mode": "subtract",
        "median_warmup": "10",
        "silence_timeout": "1.0",
        "flush_timeout": "0.3",
        "qos_reliability": "reliable",
        "qos_depth": "50",
        "queue_size": "50",
    }
    (tmp_path / "skipped").mkdir()
    (tmp_path / "warm-up").mkdir()
    skipped = NodeProcess(tmp_path / "skipped", {**common, "median_path": str(tmp_path / "median.png")}, namespace="/s")
    warming = NodeProcess(tmp_path / "warm-up", common, namespace="/w")
    probe = Probe()
    try:
        answers = probe.subscribe(PointStamped, "/w/ball")
        to_skipped, to_warming = probe.publisher(Image, "/s/image"), probe.publisher(Image, "/w/image")
        ready = lambda: to_skipped.get_subscription_count() > 0 and to_warming.get_subscription_count() > 0  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), skipped.log() + warming.log()
        probe.spin_until(lambda: False, 1.0)  # the nodes' readers match the probe's writers
        before = {node: len(node.log().splitlines()) for node in (skipped, warming)}  # a silence before frames
        for index in range(3):  # 320x180 frames: not the median's 640x360 (skipped); inside a 10-frame warm-up
            to_skipped.publish(_frame(index, clip, 100 + index))
            to_warming.publish(_frame(index, clip, 100 + index))
            probe.spin_until(lambda: False, 0.05)
        assert probe.spin_until(lambda: len(answers) == 3, PATIENCE_S)
        said = lambda: all(_said_after_three(node, before[node]) for node in (skipped, warming))  # noqa: E731
        assert probe.spin_until(said, PATIENCE_S), skipped.log() + warming.log()
    finally:
        probe.close()
        skipped.stop()
        warming.stop()
    assert [answer.point.z for answer in answers] == [0.0, 0.0, 0.0]  # warm-up frames: no ball
    # The last silence: after the three frames (a stall between two of them may have been said too).
    line = _silences(skipped, before[skipped])[-1]
    assert "3 frames came before (the last " in line and "so frames do reach this node" in line
    assert "every one skipped, by kind: frame size differs from the background median: 3" in line
    assert "Fast DDS" not in line and "pkg prefix" not in line
    line = _silences(warming, before[warming])[-1]
    assert "3 frames came before" in line and "10-frame background-median warm-up (median_warmup)" in line
    assert "skipped" not in line and "Fast DDS" not in line


# --- senders that wait for answers ---


@pytest.mark.parametrize("transport", ["raw", "compressed"])
def test_a_sender_that_waits_for_each_answer_gets_the_ball_tracked(tmp_path, synthetic_models, clips, transport):
    """A user's request-and-wait loop: publish frame k, wait for its answer (longer than flush_timeout), then k+1.
    A frame is answered held_back frames later, so each wait ends at flush_timeout: the stream pauses, the node
    answers the pending frame from the windows so far and the next frame goes on with the stream (median, window,
    size). The ball is tracked on 90 % of the visible frames past the median warm-up, each frame answered once. On
    the original node each pause ended the stream: every stream was 9 warm-up frames ('no ball') and one tracked
    (3 of 42 visible frames). Then a sender that keeps held_back frames unanswered, as the README says: answered as
    an offline stream, paused only at its end."""
    clip = clips["big"]
    values = _values(synthetic_models)
    held_back = family("tracknet").held_back(values)
    assert held_back == 7 + 15  # TrackNet's window but one, and InpaintNet's
    params = {
        "model_path": values["model_path"],
        "inpaint_model_path": values["inpaint_model_path"],
        "flush_timeout": "0.3",
        "queue_size": "1000",
        "qos_depth": "1000",
    }
    shots = fuzz.stream(list(clip.frames()), transport)
    node = fuzz.NodeUnderTest(
        "vision_factory.tracknet_onnx_node", params, ("ball", PointStamped), transport, tmp_path / "node.log"
    )
    try:
        node.wait_ready()
        waiting = node.play(shots, gap=0.0, behind=0, timeout=30.0, settle=1.5)
        keeping = node.play(shots, gap=0.0, behind=held_back, timeout=30.0, settle=1.5)
    finally:
        code = node.stop()
    log = node.log()
    assert code == 0, log[-3000:]
    assert "Traceback" not in log
    for played in (waiting, keeping):
        assert played.duplicates == played.strangers == 0
        assert sorted(played.answers) == list(range(len(shots)))
    got = lambda played: sorted((i, m.point.x, m.point.y, m.point.z) for i, m in played.answers.items())  # noqa: E731
    waited = [(i, int(x), int(y), int(z)) for i, x, y, z in got(waiting)]
    warmup = values["median_warmup"]
    assert [answer[3] for answer in waited[: warmup - 1]] == [0] * (warmup - 1)  # the warm-up: no ball
    near, visible = _found(clip, waited, warmup)
    assert near >= 0.9 * visible, (near, visible, log[-3000:])
    load = lambda path: load_target("onnx:cpu", Path(path))  # noqa: E731
    expected = _run(family("tracknet").build(values, load), _decoded(shots, transport), "offline")
    assert got(keeping) == [(i, float(x), float(y), float(v)) for i, x, y, v in expected]
    # Each stream's first pause is logged (the waiting sender's later ones are counted): the second stream paused
    # only at its end, with held_back frames pending.
    pauses = [line for line in log.splitlines() if "pending from the windows so far" in line]
    assert len(pauses) == 2 and f"answered {held_back} pending" in pauses[1], log[-3000:]
    assert log.count("the stream is over") == 2, log[-3000:]
