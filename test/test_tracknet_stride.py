"""TrackNet ``stride``: the model once every ``stride`` frames, every frame still answered once.

The expected heatmaps are computed here on their own: the reference pre-processing of
test/reference_tracknet.py, ONNX Runtime sessions run by the test on the windows that the
definition names, and TrackNetV3's weights restricted to the windows covering each frame.
"""

from __future__ import annotations

import dataclasses
import json
import logging

import numpy as np
import onnxruntime as ort
import pytest
from conftest import dense_tracknet_model
from geometry_msgs.msg import PointStamped
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from support.reference_tracknet import ReferenceTrackNet, weights
from support.ros_harness import PATIENCE_S, NodeProcess, Probe

from vision_factory.models.ball_stream import BallStream, FrameSizeChanged
from vision_factory.models.tracknet import TrackNetModuleONNX
from vision_factory.models.tracknet_stream import TrackNetTracker
from vision_factory.ros.messages import bgr_to_message
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.runtime.providers import ProviderConfig
from vision_factory.tools.synthetic import BallClip

SEQ_LEN = 4


@pytest.fixture(scope="module")
def frames():
    return list(BallClip(num_frames=30, width=320, height=180, seed=5).frames())


def _expected(model, frames, seq_len, stride, bg_mode, warmup, eval_mode="weight"):
    """Each frame's (prediction, heatmap peak) by the definition, with the test's own session.

    Windows start at the stream's frames 0, s, 2s, ... while they fit; frames no such window covers
    (the end) take the window of the last seq_len frames. Warm-up frames before the stream's first
    (the last warm-up frame) get nothing.
    """
    reference = ReferenceTrackNet(model, seq_len, bg_mode, eval_mode)
    first = max(0, warmup - 1)
    if bg_mode:
        reference.median = np.median(np.stack([f[:, :, ::-1] for f in frames[:warmup]]), axis=0).astype(np.uint8)
    features = [reference.feature(frame) for frame in frames[first:]]
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def run(start):
        return session.run(None, {name: np.concatenate(features[start : start + seq_len])[None]})[0][0]

    count, w = len(features), weights(seq_len, eval_mode)
    sums = [np.zeros((288, 512), np.float32) for _ in range(count)]
    totals = [np.float32(0)] * count
    starts = list(range(0, count - seq_len + 1, stride))
    for start in starts:
        heatmaps = run(start)
        for j in range(seq_len):
            sums[start + j] += w[seq_len - 1 - j] * heatmaps[j]
            totals[start + j] += w[seq_len - 1 - j]
    tail = [t for t in range(count) if totals[t] == 0]
    if tail:
        heatmaps = run(count - seq_len)
        for t in tail:
            j = t - (count - seq_len)
            sums[t] += w[seq_len - 1 - j] * heatmaps[j]
            totals[t] += w[seq_len - 1 - j]
    height, width = frames[0].shape[:2]
    out = []
    for t in range(count):
        heatmap = sums[t] / totals[t]
        row, col = np.unravel_index(np.argmax(heatmap), heatmap.shape)
        x, y = int(col * (width / 512)), int(row * (height / 288))
        seen = heatmap.max() > 0 and not (x == 0 and y == 0)
        prediction = {"Frame": first + t, "X": x if seen else 0, "Y": y if seen else 0, "Visibility": int(seen)}
        out.append((prediction, float(heatmap.max())))
    return out, len(starts) + bool(tail)


def _counted_runner(model):
    """A real ONNX Runtime runner whose run calls are counted."""
    runner = OnnxRunner(model, ProviderConfig(), logging.getLogger("test"))
    calls = []
    original = runner.run

    def run(feeds):
        calls.append(1)
        return original(feeds)

    runner.run = run
    return runner, calls


def _stream(tracker, frames):
    peaks = {}
    tracker.on_peak = lambda fid, peak, _: peaks.__setitem__(fid, peak)
    returned = [tracker.push(frame, index) for index, frame in enumerate(frames)]
    return returned, tracker.flush(), peaks


@pytest.mark.parametrize("bg_mode,warmup", [("", 0), ("subtract", 5)])
@pytest.mark.parametrize("stride", [1, 2, 3, SEQ_LEN])
@pytest.mark.parametrize("count", [30, 27])  # the stream (after the warm-up) ends on or off the windows' grid
def test_stride_equals_the_windowed_evaluation(tmp_path, frames, bg_mode, warmup, stride, count):
    """stride = seq_len is TrackNetV3's non-overlapping evaluation, 1 the full overlap, and in
    between each frame is the weighted mean over the windows covering it; every frame is answered
    once, in order, and the model runs once per window (plus one for an uncovered end)."""
    model = dense_tracknet_model(tmp_path / "dense.onnx", SEQ_LEN, bg_mode, seed=7)
    runner, calls = _counted_runner(model)
    tracker = TrackNetTracker(runner, SEQ_LEN, bg_mode, median_warmup=warmup, stride=stride)
    returned, flushed, peaks = _stream(tracker, frames[:count])
    expected, runs = _expected(model, frames[:count], SEQ_LEN, stride, bg_mode, warmup)

    ours = [p for p in returned if p] + flushed
    assert ours == [prediction for prediction, _ in expected]
    assert [peaks[p["Frame"]] for p in ours] == pytest.approx([peak for _, peak in expected], rel=1e-6)
    # One answer per push once the window is full, each seq_len - 1 frames back, as with stride 1.
    first = max(0, warmup - 1)
    answered_by = [index for index, p in enumerate(returned) if p]
    assert answered_by == list(range(first + SEQ_LEN - 1, count))
    assert [returned[i]["Frame"] for i in answered_by] == [i - (SEQ_LEN - 1) for i in answered_by]
    stream = count - first
    assert len(calls) == runs == -(-(stream - SEQ_LEN) // stride) + 1  # ceil((frames - L) / s) + 1


def test_stride_one_is_the_reference_module(tmp_path, frames):
    """stride=1 given explicitly is TrackNetV3's full-overlap module, output for output."""
    model = dense_tracknet_model(tmp_path / "dense.onnx", SEQ_LEN, "subtract", seed=3)
    module = TrackNetModuleONNX(model, SEQ_LEN, "subtract", median_warmup=5, stride=1)
    reference = ReferenceTrackNet(model, SEQ_LEN, "subtract", median_warmup=5)
    assert [module.push(f) for f in frames] + module.flush() == [reference.push(f) for f in frames] + reference.flush()


@pytest.mark.parametrize("stride", [2, SEQ_LEN])
def test_short_streams_and_a_flush_mid_stream(tmp_path, frames, stride):
    """Shorter than a window: one padded window answers every frame, as with stride 1; after a
    flush the next frames start a new window grid."""
    model = dense_tracknet_model(tmp_path / "dense.onnx", SEQ_LEN, "", seed=4)
    strided = TrackNetModuleONNX(model, SEQ_LEN, "", stride=stride)
    full = TrackNetModuleONNX(model, SEQ_LEN, "")
    for module in (strided, full):
        assert [module.push(f, i) for i, f in enumerate(frames[:3])] == [None] * 3
    assert strided.flush() == full.flush() and strided.stats.inference_calls == 1
    again = [strided.push(f, i) for i, f in enumerate(frames[:9])] + strided.flush()
    fresh = TrackNetModuleONNX(model, SEQ_LEN, "", stride=stride)
    assert again == [fresh.push(f, i) for i, f in enumerate(frames[:9])] + fresh.flush()


@pytest.mark.parametrize("stride", [0, SEQ_LEN + 1, -1, 1.5, True])
def test_bad_stride_is_refused_at_construction(tmp_path, stride):
    model = dense_tracknet_model(tmp_path / "dense.onnx", SEQ_LEN, "", seed=1)
    with pytest.raises(ValueError, match=rf"stride must be an integer from 1 to seq_len \({SEQ_LEN}\)"):
        TrackNetModuleONNX(model, SEQ_LEN, "", stride=stride)


def test_a_restart_at_a_new_size_answers_every_frame_once(tmp_path):
    """Stride 3 through a frame-size change: the old stream's tail is flushed, the skipped frames
    raise, the new stream's answers are a fresh stream's."""
    model = dense_tracknet_model(tmp_path / "dense.onnx", SEQ_LEN, "", seed=2)
    first = list(BallClip(11, 320, 180, seed=1).frames())
    second = list(BallClip(12, 256, 144, seed=2).frames())
    stream = BallStream(TrackNetModuleONNX(model, SEQ_LEN, "", stride=3))
    answered, skipped = [], []
    for tag, frame in enumerate(first + second):
        try:
            answered += stream.push(frame, tag)
        except FrameSizeChanged:
            skipped.append(tag)
    answered += stream.flush()
    assert skipped == [11, 12, 13]  # restart_after = seq_len frames of the new size
    tags = [tag for tag, _ in answered]
    assert tags == [tag for tag in range(23) if tag not in skipped]
    fresh = BallStream(TrackNetModuleONNX(model, SEQ_LEN, "", stride=3))
    expected = [o for i, f in enumerate(second[3:]) for o in fresh.push(f, 14 + i)] + fresh.flush()
    assert [p for tag, p in answered if tag >= 14] == [p for _, p in expected]


def _messages(clip: BallClip, first_stamp: int) -> list[Image]:
    messages = []
    for index, frame in enumerate(clip.frames()):
        header = Header(frame_id="camera")
        header.stamp.sec = first_stamp + index
        messages.append(bgr_to_message(frame, header))
    return messages


def test_node_with_stride_answers_each_frame_once_with_its_own_stamp(tmp_path, synthetic_models):
    """stride 3, seq_len 8 over DDS: one ball message per frame, in order, stamped with its frame's
    header, equal to the module's answers with the same stride."""
    clip = BallClip(num_frames=21, width=320, height=180, seed=6)
    params = {
        "model_path": str(synthetic_models[""]),
        "stride": "3",
        "heatmap_threshold": "0.0",
        "qos_reliability": "reliable",
        "qos_depth": "50",
        "queue_size": "50",
        "flush_timeout": "0.3",
    }
    node = NodeProcess(tmp_path, params)
    probe = Probe()
    try:
        outputs = probe.subscribe(PointStamped, "/t/ball")
        publisher = probe.publisher(Image, "/t/image")
        assert probe.spin_until(lambda: publisher.get_subscription_count() > 0, PATIENCE_S), "node never subscribed"
        for message in _messages(clip, 100):
            publisher.publish(message)
            probe.spin_until(lambda: False, 0.02)
        probe.spin_until(lambda: len(outputs) >= clip.num_frames, PATIENCE_S)
        probe.spin_until(lambda: False, 0.5)  # nothing more comes
    finally:
        probe.close()
        node.stop()
    assert [m.header.stamp.sec for m in outputs] == list(range(100, 100 + clip.num_frames)), node.log()
    assert {m.header.frame_id for m in outputs} == {"camera"}
    module = BallStream(TrackNetModuleONNX(synthetic_models[""], 8, "", stride=3))
    expected = [o for i, f in enumerate(clip.frames()) for o in module.push(f, i)] + module.flush()
    assert module.stats.inference_calls == 6  # windows at 0, 3, ..., 12, then one for frames 20 (uncovered)
    assert [(m.point.x, m.point.y, m.point.z) for m in outputs] == [
        (float(r.ball.x), float(r.ball.y), float(r.ball.visible)) for _, r in expected
    ]
    assert sum(m.point.z for m in outputs) > 0  # the ball was tracked


@pytest.mark.parametrize("stride", ["0", "9"])
def test_node_refuses_a_bad_stride_at_start_up(tmp_path, synthetic_models, stride):
    node = NodeProcess(tmp_path, {"model_path": str(synthetic_models[""]), "stride": stride})
    assert node.wait() == 2
    node.stop()
    refusal = {  # 0 is no stride at all (the parameter's bound); 9 none of this model's (its seq_len's)
        "0": "stride must be an integer in 1..64, not 0",
        "9": "stride must be an integer from 1 to seq_len (8), got 9",
    }[stride]
    assert refusal in node.log()
    assert "Traceback" not in node.log()


@pytest.fixture(scope="module")
def rally(tmp_path_factory):
    from vision_factory.tools.bags import write_ball_csv, write_image_bag

    folder = tmp_path_factory.mktemp("rally")
    clip = BallClip(num_frames=30, width=640, height=360, seed=4)
    bag = write_image_bag(folder / "bag", clip.frames())
    truth = write_ball_csv(folder / "truth.csv", [(i, t.visibility, t.x, t.y) for i, t in enumerate(clip.truth)])
    return bag, truth, clip


def test_eval_with_stride_scores_the_strided_tracker(tmp_path, rally, synthetic_models):
    """eval --stride 8 runs the tracker with that stride over the bag: every frame has a row, equal to
    a stride-8 tracker's answers; a stride beyond seq_len is refused before anything runs."""
    from click.testing import CliRunner

    from vision_factory.cli import main
    from vision_factory.tools.bags import read_ball_csv
    from vision_factory.tools.ball_eval import evaluate

    def _row(p):
        return p["Visibility"], float(p["X"]), float(p["Y"])

    bag, truth, clip = rally
    model = synthetic_models["subtract"]
    arguments = ["eval", "--model-type", "tracknet", "--data", str(truth), "--model", str(model), "--source", str(bag)]
    result = CliRunner().invoke(main, [*arguments, "--stride", "8", "--out", str(tmp_path / "eval")])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert record["stride"] == 8 and "the model ran once every 8 frames" in result.output
    tracker = TrackNetModuleONNX(model, 8, "subtract", median_warmup=10, heatmap_threshold=0.5, stride=8)
    returned, flushed, _ = _stream(tracker, list(clip.frames()))
    answers = {p["Frame"]: p for p in [p for p in returned if p] + flushed}
    assert tracker.stats.inference_calls == 3  # stream frames 9..29: windows at 0, 8, then one for the end
    rows = [(i, *(_row(answers[i]) if i in answers else (0, 0.0, 0.0))) for i in range(clip.num_frames)]
    expected, _ = evaluate(read_ball_csv(truth), rows, (clip.width, clip.height))
    assert record["metrics"] == dataclasses.asdict(expected) and expected.counts["TP"] > 0
    bad = CliRunner().invoke(main, [*arguments, "--stride", "9", "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 1 and "stride must be an integer from 1 to seq_len (8), got 9" in bad.output


def test_bench_with_stride_runs_the_model_once_every_stride_frames(tmp_path, synthetic_models):
    """bench --stride 4: the pipeline runs the model on a quarter of the frames, the node answers
    every frame; --stride without tracknet or beyond seq_len is refused."""
    from click.testing import CliRunner

    from vision_factory.cli import main

    model = str(synthetic_models["subtract"])
    arguments = ["bench", model, "--backends", "onnx:cpu", "--runs", "20", "--model-type", "tracknet"]
    result = CliRunner().invoke(main, [*arguments, "--node", "--stride", "4", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "bench.json").read_text())
    measured = report["results"][0]
    assert report["stride"] == 4 and measured["pipeline"]["stride"] == 4
    # 30 frames (the node's default 10-frame warm-up), the first 9 only feed the median: windows at stream frames
    # 0, 4, 8, 12 of 21
    assert measured["pipeline"]["frames"] == 30 and measured["pipeline"]["model_runs"] == 4
    assert measured["node"]["frames"] == 60 and measured["node"]["steady_fps"] > 0
    assert "stride 4: the model once every 4 frames" in result.output
    beyond = CliRunner().invoke(main, [*arguments, "--stride", "9", "--out", str(tmp_path)])
    assert beyond.exit_code == 1 and "stride must be an integer from 1 to seq_len (8), got 9" in beyond.output
    other = CliRunner().invoke(main, ["bench", model, "--stride", "2", "--out", str(tmp_path)])
    assert other.exit_code == 1 and "--stride needs --model-type tracknet" in other.output
