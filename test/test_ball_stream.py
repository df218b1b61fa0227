"""BallStream: tags follow their frames, warm-up frames answer at once, size changes are handled."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from vision_factory.models.ball_stream import BallStream, FrameSizeChanged, load_median
from vision_factory.models.tracknet import InpaintModuleONNX, TrackNetModuleONNX
from vision_factory.models.tracknet_background import MedianSizeMismatch
from vision_factory.results.ball import Ball
from vision_factory.tools.synthetic import BallClip


def test_one_tagged_prediction_per_frame_in_order(synthetic_models):
    clip = BallClip(30, 320, 180)
    stream = BallStream(TrackNetModuleONNX(synthetic_models["subtract"], 8, "subtract", median_warmup=5))
    outputs = []
    for index, frame in enumerate(clip.frames()):
        step = stream.push(frame, f"header-{index}")
        if index < 4:  # frames that only feed the median warm-up are answered immediately as misses
            assert [(tag, result.ball) for tag, result in step] == [(f"header-{index}", Ball(0, 0, False))]
        elif index < 4 + 7:  # the last warm-up frame is the stream's first: answered by the model
            assert step == []
        else:
            assert [tag for tag, _ in step] == [f"header-{index - 7}"]
        outputs += step
    outputs += stream.flush()
    assert [tag for tag, _ in outputs] == [f"header-{i}" for i in range(30)]
    assert all((result.width, result.height) == (320, 180) for _, result in outputs)  # each its frame's result


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


def test_failed_frames_leave_nothing_behind(synthetic_models):
    """A frame whose push raises keeps no tag (the node's header and debug-frame copy): memory stays flat."""
    clip, wrong = BallClip(12, 320, 180), BallClip(1, 640, 360)
    median = np.ascontiguousarray(clip.background[..., ::-1])
    make = lambda: TrackNetModuleONNX(synthetic_models["subtract"], 8, "subtract", median=median)  # noqa: E731
    stream = BallStream(make(), restart_after=2)
    for index in range(200):  # not the median's size: every one fails, and none is kept
        with pytest.raises(MedianSizeMismatch, match="640x360 but the background median is 320x180"):
            stream.push(wrong.frame(0), ("wrong", index, wrong.frame(0).copy()))
        assert stream.pending == 0
    assert stream.size is None and stream.stats.push_calls == 0
    # The stream then runs as a fresh one: same frame ids, same outputs.
    fresh = BallStream(make(), restart_after=2)
    ours = [o for i, f in enumerate(clip.frames()) for o in stream.push(f, i)]
    assert ours == [o for i, f in enumerate(clip.frames()) for o in fresh.push(f, i)]
    # A restart whose first frame fails still answers the old stream's pending frames, once.
    assert stream.pending == 7
    with pytest.raises(FrameSizeChanged):
        stream.push(wrong.frame(0), "wrong size 1")
    with pytest.raises(MedianSizeMismatch):
        stream.push(wrong.frame(0), "wrong size 2")  # second in a row: flushed, restarted, then failed
    assert stream.pending == 7 and stream.size is None
    ours += stream.push(clip.frame(0), "next stream")
    assert sorted(tag for tag, _ in ours) == list(range(12)) and stream.pending == 1  # "next stream"


@pytest.mark.parametrize("bg_mode", ["subtract", "subtract_concat", "concat"])
def test_median_image_file_works_for_every_bg_mode(tmp_path, synthetic_models, bg_mode):
    clip = BallClip(24, 320, 180, seed=5)
    path = tmp_path / "median.png"
    cv2.imwrite(str(path), clip.background)
    median = load_median(str(path), bg_mode)
    stream = BallStream(TrackNetModuleONNX(synthetic_models[bg_mode], 8, bg_mode, median=median))
    outputs = [o for i, f in enumerate(clip.frames()) for o in stream.push(f, i)] + stream.flush()
    assert [tag for tag, _ in outputs] == list(range(24))  # no warm-up: every frame tracked
    for frame, result in outputs:
        truth, ball = clip.truth[frame], result.ball
        assert ball.visible == bool(truth.visibility)
        if truth.visibility:
            assert abs(ball.x - truth.x) <= 4 and abs(ball.y - truth.y) <= 4


def test_median_file_problems_name_the_file(tmp_path):
    garbage = tmp_path / "garbage.npy"
    garbage.write_bytes(b"\x93NUMPY not really")
    image = tmp_path / "garbage.png"
    image.write_bytes(b"not a png")
    cases = {
        tmp_path / "missing.npy": "no such file",
        tmp_path: "not a file",
        garbage: "not a readable .npy file",
        image: "not a readable image file",
    }
    for shape, dtype in [((180, 320), np.uint8), ((180, 320, 3), np.float32), ((3, 100, 100), np.uint8)]:
        cases[_save(tmp_path, np.zeros(shape, dtype))] = "a median must be HxWx3 RGB uint8 at frame resolution"
    for path, problem in cases.items():
        with pytest.raises(ValueError, match=f"median_path {path}: {problem}"):
            load_median(str(path), "subtract")
    concat = _save(tmp_path, np.zeros((3, 288, 512), np.uint8))
    assert load_median(str(concat), "concat").shape == (3, 288, 512)
    with pytest.raises(ValueError, match="or 3x288x512 CHW RGB, got 3x100x100"):
        load_median(str(_save(tmp_path, np.zeros((3, 100, 100), np.uint8))), "concat")
    assert load_median("", "subtract") is None


def _save(folder, array) -> str:
    path = folder / f"median_{'x'.join(map(str, array.shape))}_{array.dtype}.npy"
    np.save(path, array)
    return path
