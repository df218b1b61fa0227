"""BallStream: tags follow their frames, warm-up frames answer at once, size changes are handled."""

from __future__ import annotations

import pytest

from vision_factory.models.ball_stream import BallStream, FrameSizeChanged
from vision_factory.models.tracknet import InpaintModuleONNX, TrackNetModuleONNX
from vision_factory.tools.synthetic import BallClip


def test_one_tagged_prediction_per_frame_in_order(synthetic_models):
    clip = BallClip(30, 320, 180)
    stream = BallStream(TrackNetModuleONNX(synthetic_models["subtract"], 8, "subtract", median_warmup=5))
    outputs = []
    for index, frame in enumerate(clip.frames()):
        step = stream.push(frame, f"header-{index}")
        if index < 5:  # warm-up frames are answered immediately as misses
            assert step == [(f"header-{index}", {"Frame": index, "X": 0, "Y": 0, "Visibility": 0})]
        outputs += step
    outputs += stream.flush()
    assert [tag for tag, _ in outputs] == [f"header-{i}" for i in range(30)]
    assert all(prediction["Frame"] == int(tag.split("-")[1]) for tag, prediction in outputs)


def test_inpaint_stage_keeps_tags(synthetic_models):
    clip = BallClip(40, 320, 180)
    stream = BallStream(
        TrackNetModuleONNX(synthetic_models["subtract"], 8, "subtract", median_warmup=5),
        lambda scaler: InpaintModuleONNX(synthetic_models["inpaint"], 16, None, scaler),
    )
    outputs = [o for i, f in enumerate(clip.frames()) for o in stream.push(f, i)] + stream.flush()
    assert sorted(tag for tag, _ in outputs) == list(range(40))
    assert stream.refiner.img_scaler == (320 / 512, 180 / 288)


def test_size_change_skips_then_restarts(synthetic_models):
    big, small = BallClip(20, 640, 360), BallClip(20, 320, 180)
    stream = BallStream(TrackNetModuleONNX(synthetic_models[""], 8, ""), restart_after=3)
    outputs = [o for i, f in enumerate(big.frames()) for o in stream.push(f, ("big", i))]
    for i in range(2):
        with pytest.raises(FrameSizeChanged, match="640x360 to 320x180"):
            stream.push(small.frame(i), ("small", i))
    outputs += stream.push(small.frame(2), ("small", 2))  # third in a row: the old stream is flushed
    assert sorted(tag for tag in (t for t, _ in outputs) if tag[0] == "big") == [("big", i) for i in range(20)]
    assert stream.restarts == 1 and stream.size == (320, 180)
    outputs += [o for i in range(3, 20) for o in stream.push(small.frame(i), ("small", i))] + stream.flush()
    assert sorted(t for t, _ in outputs if t[0] == "small") == [("small", i) for i in range(2, 20)]
    assert stream.stats.push_calls == 20 + 18


def test_flush_before_any_frame_is_empty(synthetic_models):
    stream = BallStream(
        TrackNetModuleONNX(synthetic_models["subtract"], 8, "subtract", median_warmup=5),
        lambda scaler: InpaintModuleONNX(synthetic_models["inpaint"], 16, None, scaler),
    )
    assert stream.pending == 0 and stream.flush() == [] and stream.refiner is None
    stream.push(BallClip(1, 320, 180).frame(0), "warm-up frame")  # answered at once
    assert stream.pending == 0


def test_prepared_frames_across_a_size_change(synthetic_models):
    big, small = BallClip(12, 640, 360), BallClip(12, 320, 180)
    frames = [*big.frames(), *small.frames()]

    def run(prepare: bool):
        stream = BallStream(TrackNetModuleONNX(synthetic_models[""], 8, ""), restart_after=1)
        outputs = []
        for index, frame in enumerate(frames):
            outputs += stream.push(frame, index, stream.prepare(frame) if prepare else None)
        return outputs + stream.flush(), stream.stats

    (with_prepare, stats), (without, _) = run(True), run(False)
    assert with_prepare == without and stats.prepared == stats.push_calls == 24
