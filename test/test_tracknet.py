"""TrackNetModuleONNX / InpaintModuleONNX against a plain reference and against known truth."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from conftest import dense_tracknet_model
from support.reference_tracknet import ReferenceInpaint, ReferenceTrackNet

from vision_factory.families.registry import family
from vision_factory.models.tracknet import InpaintModuleONNX, TrackNetModuleONNX
from vision_factory.models.tracknet_background import WarmupMedian, frames_before_stream
from vision_factory.models.tracknet_stream import ensemble_weights, heatmap_to_prediction
from vision_factory.runtime.backends import load_target
from vision_factory.runtime.providers import ProviderConfig
from vision_factory.tools.synthetic import BallClip

BG_MODES = ["", "subtract", "subtract_concat", "concat"]


@pytest.fixture(scope="module")
def small_clip():
    return BallClip(num_frames=30, width=320, height=180, seed=3)


def test_weight_mode_is_mirrored_ramp_normalised():
    np.testing.assert_array_equal(ensemble_weights(8, "weight"), np.array([1, 2, 3, 4, 4, 3, 2, 1], np.float32) / 20)
    np.testing.assert_array_equal(ensemble_weights(3, "weight"), np.array([1, 2, 1], np.float32) / 4)
    assert ensemble_weights(8, "weight").dtype == np.float32


def test_average_mode_and_unknown_mode():
    np.testing.assert_array_equal(ensemble_weights(4, "average"), np.full(4, 0.25, np.float32))
    with pytest.raises(ValueError, match="eval_mode"):
        ensemble_weights(4, "median")


def test_unknown_eval_mode_rejected_at_construction(synthetic_models):
    with pytest.raises(ValueError, match="eval_mode"):
        TrackNetModuleONNX(synthetic_models[""], 8, "", eval_mode="max")


def test_heatmap_to_prediction_scales_first_peak_and_flags_misses():
    heatmap = np.zeros((288, 512), np.float32)
    assert heatmap_to_prediction(heatmap, 5, 1280, 720) == {"Frame": 5, "X": 0, "Y": 0, "Visibility": 0}
    heatmap[100, 200] = heatmap[150, 10] = 0.9  # tie: the first in row-major order wins
    assert heatmap_to_prediction(heatmap, 5, 1280, 720) == {"Frame": 5, "X": 500, "Y": 250, "Visibility": 1}
    corner = np.zeros((288, 512), np.float32)
    corner[0, 0] = 1.0
    assert heatmap_to_prediction(corner, 1, 1280, 720)["Visibility"] == 0
    assert heatmap_to_prediction(heatmap, 5, 1280, 720, threshold=0.95)["Visibility"] == 0


@pytest.mark.parametrize("bg_mode", BG_MODES)
@pytest.mark.parametrize("eval_mode", ["weight", "average"])
def test_module_matches_reference_exactly(tmp_path, small_clip, bg_mode, eval_mode):
    model = dense_tracknet_model(tmp_path / "dense.onnx", 4, bg_mode, seed=len(bg_mode))
    warmup = 0 if bg_mode == "" else 5
    module = TrackNetModuleONNX(model, 4, bg_mode, eval_mode=eval_mode, median_warmup=warmup)
    reference = ReferenceTrackNet(model, 4, bg_mode, eval_mode, median_warmup=warmup)
    ours = [module.push(frame) for frame in small_clip.frames()] + module.flush()
    theirs = [reference.push(frame) for frame in small_clip.frames()] + reference.flush()
    assert ours == theirs
    emitted = [p["Frame"] for p in ours if p]
    first = max(0, warmup - 1)  # the last warm-up frame is the stream's first
    assert emitted == list(range(first, small_clip.num_frames))  # every frame once, in order


@pytest.mark.parametrize("bg_mode", ["subtract", "subtract_concat", "concat"])
@pytest.mark.parametrize("seq_len,warmup", [(1, 4), (3, 5), (4, 1)])
def test_last_warmup_frame_is_the_streams_first(tmp_path, small_clip, bg_mode, seq_len, warmup):
    """As TrackNetV3's TrackNetModule: the W-th frame completes the median, then is processed; the
    first prediction is frame W-1's, returned by push W-1+L-1 (0-based), equal to the reference's."""
    model = dense_tracknet_model(tmp_path / "dense.onnx", seq_len, bg_mode, seed=seq_len)
    module = TrackNetModuleONNX(model, seq_len, bg_mode, median_warmup=warmup)
    reference = ReferenceTrackNet(model, seq_len, bg_mode, median_warmup=warmup)
    frames = list(small_clip.frames())[:12]
    ours = [module.push(frame) for frame in frames]
    assert ours == [reference.push(frame) for frame in frames]
    first_push = next(index for index, prediction in enumerate(ours) if prediction)
    assert first_push == warmup - 1 + seq_len - 1 and ours[first_push]["Frame"] == warmup - 1
    assert frames_before_stream(bg_mode, warmup) == warmup - 1 and frames_before_stream("", warmup) == 0
    assert module.flush() == reference.flush()


@pytest.mark.parametrize("count", [1, 2, 3, 6, 7, 30])
def test_warmup_median_equals_numpy_median(count):
    rng = np.random.default_rng(count)
    frames = [rng.integers(0, 256, (37, 53, 3), dtype=np.uint8) for _ in range(count)]
    frames[0][:4] = 255  # extremes, ties and a padded (non-contiguous) frame
    frames[-1][:2] = 0
    frames[count // 2] = np.pad(frames[count // 2], ((0, 0), (0, 5), (0, 0)))[:, :53]
    median = WarmupMedian(count)
    results = [median.add(frame) for frame in frames]
    assert all(result is None for result in results[:-1])
    expected = np.median(np.stack(frames), axis=0).astype(np.uint8)
    np.testing.assert_array_equal(results[-1], expected)
    assert results[-1].dtype == np.uint8
    two = WarmupMedian(2)
    two.add(frames[0])
    with pytest.raises(ValueError, match="size changed during median warm-up"):
        two.add(frames[0][:10])


@pytest.mark.parametrize("bg_mode", BG_MODES)
def test_synthetic_model_tracks_the_ball(synthetic_models, bg_mode):
    clip = BallClip(num_frames=40, width=640, height=360, seed=1)
    warmup = 0 if bg_mode == "" else 10
    module = TrackNetModuleONNX(synthetic_models[bg_mode], 8, bg_mode, median_warmup=warmup)
    predictions = [p for p in (module.push(frame) for frame in clip.frames()) if p] + module.flush()
    assert len(predictions) == clip.num_frames - frames_before_stream(bg_mode, warmup)
    for prediction in predictions:
        truth = clip.truth[prediction["Frame"]]
        assert prediction["Visibility"] == truth.visibility, prediction
        if truth.visibility:
            assert abs(prediction["X"] - truth.x) <= 4 and abs(prediction["Y"] - truth.y) <= 4, (prediction, truth)


def test_warmup_median_and_frames_before_it(synthetic_models, small_clip):
    module = TrackNetModuleONNX(synthetic_models["subtract"], 8, "subtract", median_warmup=6)
    frames = list(small_clip.frames())
    assert all(module.push(frame) is None for frame in frames[:6])
    expected = np.median(np.stack([f[:, :, ::-1] for f in frames[:6]]), axis=0).astype(np.uint8)
    np.testing.assert_array_equal(module._median[:, :, ::-1], expected)
    outputs = [module.push(frame) for frame in frames[6:]] + module.flush()
    assert sorted(p["Frame"] for p in outputs if p) == list(range(5, len(frames)))


def test_given_median_is_used_as_is(synthetic_models, small_clip):
    median_rgb = np.ascontiguousarray(small_clip.background[:, :, ::-1])
    with_median = TrackNetModuleONNX(synthetic_models["subtract"], 8, "subtract", median=median_rgb)
    first = with_median.push(small_clip.frame(0))
    assert first is None and with_median.stats.push_calls == 1  # no warm-up: straight into the window
    outputs = [with_median.push(f) for f in list(small_clip.frames())[1:]] + with_median.flush()
    assert len([p for p in outputs if p]) == small_clip.num_frames
    concat = TrackNetModuleONNX(synthetic_models["concat"], 8, "concat", median=np.zeros((3, 288, 512), np.uint8))
    assert concat.push(small_clip.frame(0)) is None
    # concat also takes a frame-resolution median, turned into the model's form as a warm-up median is.
    from_frame = TrackNetModuleONNX(synthetic_models["concat"], 8, "concat", median=median_rgb)
    warmed = TrackNetModuleONNX(synthetic_models["concat"], 8, "concat", median_warmup=3)
    for _ in range(3):
        warmed.push(small_clip.background)
    np.testing.assert_array_equal(from_frame._median, warmed._median)
    with pytest.raises(ValueError, match="3x288x512"):
        TrackNetModuleONNX(synthetic_models["concat"], 8, "concat", median=np.zeros((3, 100, 100), np.uint8))


@pytest.mark.parametrize("bg_mode", ["subtract", "subtract_concat", "concat"])
def test_bg_mode_without_median_is_refused_at_construction(synthetic_models, bg_mode):
    """Neither a median nor a warm-up: refused when made, not by skipping every frame that comes."""
    with pytest.raises(ValueError, match="needs a background median: pass median= or median_warmup > 0"):
        TrackNetModuleONNX(synthetic_models[bg_mode], 8, bg_mode)


def test_the_node_says_the_median_rule_in_its_parameters_words(synthetic_models):
    """The tracker holds the rule; the family's build (node, eval, bench) gives its reason with the parameters'
    names, median_warmup and median_path, not the tracker's median=."""
    values = family("tracknet").values_from_model(synthetic_models["subtract"], median_warmup=0)
    with pytest.raises(ValueError) as refused:
        family("tracknet").build(values, lambda path: load_target("onnx:cpu", path))
    assert str(refused.value).startswith(
        "bg_mode 'subtract' needs a background median, but median_warmup is 0 and no median_path is given"
    )
    assert "median=" not in str(refused.value)


def test_short_stream_flush_still_infers_every_frame(synthetic_models):
    clip = BallClip(num_frames=5, width=640, height=360, seed=2, hidden_every=0)
    module = TrackNetModuleONNX(synthetic_models[""], 8, "")
    assert all(module.push(frame) is None for frame in clip.frames())
    outputs = module.flush()
    assert [p["Frame"] for p in outputs] == list(range(5))
    for prediction in outputs:
        truth = clip.truth[prediction["Frame"]]
        assert prediction["Visibility"] == 1
        assert abs(prediction["X"] - truth.x) <= 4 and abs(prediction["Y"] - truth.y) <= 4
    assert module.flush() == []  # never twice


def test_reset_starts_a_new_stream(synthetic_models, small_clip):
    module = TrackNetModuleONNX(synthetic_models["subtract"], 8, "subtract", median_warmup=5)
    first = [module.push(f) for f in small_clip.frames()] + module.flush()
    module.reset()
    assert module.stats.push_calls == 0 and module.img_scaler is None
    second = [module.push(f) for f in small_clip.frames()] + module.flush()
    assert first == second


def test_stats_count_calls_outputs_and_stages(synthetic_models, small_clip):
    module = TrackNetModuleONNX(synthetic_models["subtract"], 8, "subtract", median_warmup=5)
    outputs = [module.push(f) for f in small_clip.frames()] + module.flush()
    stats = module.stats
    assert stats.push_calls == small_clip.num_frames
    assert stats.outputs == len([p for p in outputs if p]) == small_clip.num_frames - 4
    assert stats.inference_calls == small_clip.num_frames - 4 - 7
    assert min(stats.preprocess_s, stats.inference_s, stats.postprocess_s, stats.median_s) > 0
    assert module.img_scaler == (320 / 512, 180 / 288)


def test_missing_corrupt_and_mismatched_models(tmp_path, synthetic_models):
    with pytest.raises(ValueError, match="model file not found: .*nope.onnx"):
        TrackNetModuleONNX(tmp_path / "nope.onnx", 8, "")
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07not really a protobuf" * 10)
    with pytest.raises(ValueError, match="corrupt.onnx"):
        TrackNetModuleONNX(corrupt, 8, "")
    with pytest.raises(ValueError, match=r"seq_len='8'.*seq_len=4"):
        TrackNetModuleONNX(synthetic_models[""], 4, "")
    with pytest.raises(ValueError, match=r"bg_mode='subtract'.*bg_mode=''"):
        TrackNetModuleONNX(synthetic_models["subtract"], 8, "")
    no_metadata = onnx.load(synthetic_models[""])
    del no_metadata.metadata_props[:]
    onnx.save(no_metadata, tmp_path / "bare.onnx")
    with pytest.raises(ValueError, match="24 input channels"):
        TrackNetModuleONNX(tmp_path / "bare.onnx", 8, "subtract", median_warmup=3)


def test_providers_unavailable_fail_or_fall_back(synthetic_models, caplog):
    with pytest.raises(RuntimeError, match="CUDAExecutionProvider not available"):
        TrackNetModuleONNX(synthetic_models[""], 8, "", device="cuda")
    config = ProviderConfig.create("cuda", fallback="cpu")
    with caplog.at_level(logging.INFO):
        module = TrackNetModuleONNX(synthetic_models[""], 8, "", provider_config=config)
    assert module.runner.providers == ["CPUExecutionProvider"]
    assert "CPUExecutionProvider" in caplog.text


@pytest.mark.parametrize("with_gaps", [True, False])
def test_inpaint_matches_reference_and_flushes_each_frame_once(synthetic_models, with_gaps):
    rng = np.random.default_rng(7)
    predictions = []
    for frame in range(40):
        visible = not (with_gaps and frame % 7 in (3, 4))
        x, y = (int(rng.integers(1, 1280)), int(rng.integers(1, 720))) if visible else (0, 0)
        predictions.append({"Frame": frame, "X": x, "Y": y, "Visibility": int(visible)})
    scaler = (1280 / 512, 720 / 288)
    module = InpaintModuleONNX(synthetic_models["inpaint"], 16, None, scaler)
    reference = ReferenceInpaint(synthetic_models["inpaint"], 16, scaler)
    ours = [module.push(p) for p in predictions]
    assert ours == [reference.push(p) for p in predictions]
    flushed = module.flush()
    emitted = [p["Frame"] for p in ours if p] + [p["Frame"] for p in flushed]
    assert emitted == list(range(40))
    for p in flushed:
        original = predictions[p["Frame"]]
        assert p == (original if original["Visibility"] else {**original, "X": 0, "Y": 0, "Visibility": 0})
    assert module.flush() == []


def test_inpaint_fills_gaps_between_visible_frames(synthetic_models):
    scaler = (1.0, 1.0)
    module = InpaintModuleONNX(synthetic_models["inpaint"], 16, "cpu", scaler)
    line = [{"Frame": i, "X": 10 + 4 * i, "Y": 20 + 2 * i, "Visibility": 0 if i in (5, 6) else 1} for i in range(40)]
    outputs = {p["Frame"]: p for p in (module.push(p) for p in line) if p}
    for frame in (5, 6):  # a straight line is recovered where the ball was not seen
        assert outputs[frame]["Visibility"] == 1
        assert abs(outputs[frame]["X"] - (10 + 4 * frame)) <= 1 and abs(outputs[frame]["Y"] - (20 + 2 * frame)) <= 1


def test_inpaint_rejects_wrong_seq_len(synthetic_models):
    with pytest.raises(ValueError, match="seq_len"):
        InpaintModuleONNX(synthetic_models["inpaint"], 8, None, (1.0, 1.0))


@pytest.mark.parametrize("bg_mode", BG_MODES)
def test_prepare_ahead_gives_the_same_outputs(tmp_path, small_clip, bg_mode):
    """The node's pipelining: frame i+1 is prepared before frame i is pushed, across a warm-up and a reset."""
    model = dense_tracknet_model(tmp_path / "dense.onnx", 4, bg_mode, seed=7)
    warmup = 0 if bg_mode == "" else 5
    plain = TrackNetModuleONNX(model, 4, bg_mode, median_warmup=warmup)
    ahead = TrackNetModuleONNX(model, 4, bg_mode, median_warmup=warmup)
    frames = list(small_clip.frames())

    def run(module, frames, prepare):
        outputs, prepared = [], module.prepare(frames[0]) if prepare else None
        for index, frame in enumerate(frames):
            following = module.prepare(frames[index + 1]) if prepare and index + 1 < len(frames) else None
            outputs.append(module.push(frame, prepared=prepared))
            prepared = following
        return outputs + module.flush()

    for _ in range(2):  # the second stream starts after reset(): a warm-up median is gone again
        assert run(ahead, frames, True) == run(plain, frames, False)
        assert ahead.stats.preprocess_s > 0 and ahead.stats.push_calls == plain.stats.push_calls
        # Frames prepared during the warm-up (or, for the first one after it, before the median) are recomputed.
        assert ahead.stats.prepared == len(frames) - (warmup + 1 if warmup else 0)
        ahead.reset()
        plain.reset()


def test_prepare_never_raises_and_push_checks_its_frame(synthetic_models, small_clip):
    module = TrackNetModuleONNX(synthetic_models["subtract"], 8, "subtract", median_warmup=2)
    assert module.prepare(np.zeros((4, 4), np.float32)).feature is None
    assert module.prepare(np.zeros((0, 0, 3), np.uint8)).feature is None
    assert module.prepare(small_clip.frame(0)).feature is None  # no median yet
    module.push(small_clip.frame(0))
    module.push(small_clip.frame(1))
    assert module.prepare(small_clip.frame(2)).feature is not None
    assert module.prepare(BallClip(1, 64, 36).frame(0)).feature is None  # not the median's size
    with pytest.raises(ValueError, match="same frame"):
        module.push(small_clip.frame(3), prepared=module.prepare(small_clip.frame(2)))


@pytest.mark.parametrize("bg_mode", ["subtract", "concat"])
def test_synthetic_backbone_costs_time_but_keeps_the_heatmaps(tmp_path, bg_mode):
    import onnxruntime

    from vision_factory.tools.synthetic import build_tracknet_model

    light = build_tracknet_model(tmp_path / "light.onnx", 4, bg_mode)
    heavy = build_tracknet_model(tmp_path / "heavy.onnx", 4, bg_mode, backbone_width=2)
    assert len(onnx.load(heavy).graph.node) > len(onnx.load(light).graph.node) + 30
    channels = 3 * 4 + 3 if bg_mode == "concat" else 4
    feeds = {"input": np.random.default_rng(0).random((1, channels, 288, 512), dtype=np.float32)}
    outputs = [onnxruntime.InferenceSession(str(path)).run(None, feeds)[0] for path in (light, heavy)]
    np.testing.assert_array_equal(outputs[0], outputs[1])
