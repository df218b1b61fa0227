"""TrackNetV3 ball tracking, streaming, on any Runner (InpaintNet's repair: inpaint_stream.py).

``TrackNetTracker`` holds the pre-processing, the temporal ensemble and the decoding on top of
a ``Runner`` of any backend; ``models.tracknet`` binds it and inpaint_stream.py's
``InpaintRefiner`` to ONNX Runtime as TrackNetV3's ``TrackNetModule`` and ``InpaintModule``.

Differences from the reference, on purpose:
- ``reset()`` clears everything for a new stream (window, sums, warm-up, counters, stats);
  a median given to the constructor is configuration and is kept.
- ``flush()`` ends the stream: it emits every pending frame exactly once, and the next push
  starts a new stream as ``reset()`` would (a warm-up median is the stream's, never the
  next one's; only the stats go on). When a stream ends before the first full window, the
  frames it has are still inferred once, with the window left-padded by repeating its oldest
  frame, instead of being reported as misses.
- ``answer_pending()`` emits every pending frame now, from the windows that ran so far, as
  ``flush()`` does, but the stream goes on: the next push continues its median, window and
  frame count, and later windows only add to frames not answered yet. A sender that waits for
  each answer before sending the next frame (which TrackNet answers ``seq_len - 1`` frames
  later) is answered this way, frame by frame, from the windows that end at each frame.

As the reference does, the ``median_warmup``-th frame completes the background median and is
then the stream's first frame: with ``median_warmup=W`` and ``seq_len=L`` the first prediction
is frame W-1's, returned by the (W-1+L-1)-th push (0-based). The median is the same as
``np.median`` of the W frames (as uint8), built as they arrive (``WarmupMedian``, in
tracknet_background.py with the rest of the background median), so that
no push of the warm-up stalls the stream.

``TrackNetTracker.prepare()`` computes a frame's feature (the pre-processing) without
touching the stream, so that a caller can run it on another thread while ``push`` runs the
previous frame's inference; ``push(frame, prepared=...)`` then only assembles the window,
runs the model and decodes. The outputs are the same as without it.

``stride`` (1..seq_len) runs the model once every ``stride`` frames: the windows start at the
stream's frames 0, s, 2s, ... (s = stride), so 1 is the full-overlap ensemble above and
``seq_len`` is TrackNetV3's non-overlapping evaluation. A frame's heatmap is the ensemble over
the windows that ran and cover it, each weighted by ``ensemble_weights`` at the frame's position
in it, divided by the sum of those weights (TrackNetV3's weights restricted to the covering
windows, normalised). Each push still returns one prediction, the frame that just left the
window (seq_len - 1 frames back, as with stride 1): every window covering it has run by then.
``flush()`` answers the frames no window covered yet (the last stride - 1 at most) with one more
window, of the stream's last ``seq_len`` frames, which only adds to those frames.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass

import cv2
import numpy as np

from ..runtime.runner import Runner, fixed_dim
from ..text import shown_path
from .tracknet_background import (
    MEDIAN_MODES,
    MedianMissing,
    MedianSizeMismatch,
    WarmupMedian,
    background_difference,
    median_problem,
)
from .tracknet_interface import BG_MODES, FEATURE_CHANNELS, HEIGHT, WIDTH, input_channels

EVAL_MODES = ("average", "weight")

BallRow = dict[str, int]  # one row of the ball CSV: Frame, X, Y, Visibility (tools.predict.Prediction is a detector's)


@dataclass
class StreamStats:
    """Counters and per-stage wall time (seconds) of a streaming module."""

    push_calls: int = 0
    outputs: int = 0
    inference_calls: int = 0
    preprocess_s: float = 0.0
    inference_s: float = 0.0
    postprocess_s: float = 0.0
    median_s: float = 0.0
    prepared: int = 0  # pushes whose feature came from prepare() (its time is in preprocess_s)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def add(self, other: StreamStats) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)


def ensemble_weights(seq_len: int, eval_mode: str) -> np.ndarray:
    """Temporal-ensemble weights: uniform, or 1..ceil(L/2) mirrored, summing to 1 (float32)."""
    if eval_mode == "average":
        return np.full(seq_len, 1.0 / seq_len, dtype=np.float32)
    if eval_mode == "weight":
        ramp = np.array([min(i + 1, seq_len - i) for i in range(seq_len)], dtype=np.float32)
        return ramp / ramp.sum()
    raise ValueError(f"eval_mode must be one of {', '.join(EVAL_MODES)}, got '{eval_mode}'")


def check_stride(stride: int, seq_len: int) -> int:
    """``stride`` when it is an int in 1..seq_len, else a ValueError saying why and what to use."""
    if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) or not 1 <= stride <= seq_len:
        raise ValueError(
            f"stride must be an integer from 1 to seq_len ({seq_len}), got {stride!r}: the model runs once "
            f"every stride frames and every frame must fall in a window (1 = full overlap, {seq_len} = "
            "non-overlapping windows)"
        )
    return int(stride)


def heatmap_to_prediction(
    heatmap: np.ndarray, frame_id: int, width: int, height: int, threshold: float = 0.0
) -> BallRow:
    """First row-major peak of a 288x512 heatmap, scaled to the source frame's pixels.

    A map whose maximum is <= ``threshold`` is a miss.
    """
    if heatmap.max() <= threshold:
        return {"Frame": frame_id, "X": 0, "Y": 0, "Visibility": 0}
    row, col = divmod(int(np.argmax(heatmap)), heatmap.shape[1])
    x = int(col * (width / WIDTH))
    y = int(row * (height / HEIGHT))
    return {"Frame": frame_id, "X": x, "Y": y, "Visibility": 0 if x == 0 and y == 0 else 1}


def _resize(image: np.ndarray) -> np.ndarray:
    return cv2.resize(image, (WIDTH, HEIGHT), interpolation=cv2.INTER_AREA)


_SCALE = np.float32(255)


def _unit(plane: np.ndarray, out: np.ndarray) -> np.ndarray:
    """uint8 plane / 255 as float32 into ``out``: the same IEEE division as astype(float32) / 255."""
    return np.divide(plane, _SCALE, out=out)


def _bgr_to_chw_rgb(image_bgr: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """HxWx3 BGR uint8 -> RGB CxHxW float32 / 255 into ``out``[:3], one pass per plane, no copy."""
    if out is None:
        out = np.empty((3, *image_bgr.shape[:2]), np.float32)
    for channel, plane in enumerate(cv2.split(image_bgr)):
        _unit(plane, out[2 - channel])
    return out


@dataclass
class PreparedFrame:
    """A frame and its TrackNet feature, computed by ``TrackNetTracker.prepare`` ahead of ``push``."""

    frame: np.ndarray
    feature: np.ndarray | None  # None: not computable then (median warm-up, size mismatch, bad frame)
    median: np.ndarray | None  # the background median it was computed with
    seconds: float = 0.0  # wall time it took


def _is_bgr(frame: np.ndarray) -> bool:
    return (
        isinstance(frame, np.ndarray)
        and frame.dtype == np.uint8
        and frame.ndim == 3
        and frame.shape[2] == 3
        and frame.size > 0
    )


def check_metadata(metadata: dict[str, str], expected: dict[str, object], model: str) -> None:
    for key, value in expected.items():
        found = metadata.get(key)
        if found is not None and str(found) != str(value):
            raise ValueError(
                f"model {shown_path(model)} was exported with {key}={found!r} but {key}={value!r} was "
                f"requested; pass {key}={found!r} or use the matching model"
            )


def check_input_frame(shape: tuple, model_name: str) -> None:
    """A TrackNet input is [1, C, 288, 512] (C and the size may be dynamic): a clear error for any other."""
    if len(shape) != 4:
        raise ValueError(f"{model_name} has a {len(shape)}-D input; TrackNet takes [1, C, 288, 512]")
    size = (fixed_dim(shape[2]), fixed_dim(shape[3]))
    if size not in ((HEIGHT, WIDTH), (None, None)):
        raise ValueError(f"{model_name} input is {size[0]}x{size[1]}; TrackNet takes {HEIGHT}x{WIDTH}")


class TrackNetTracker:
    """Streaming TrackNet on a Runner: push BGR frames, get one ball prediction per frame."""

    def __init__(
        self,
        runner: Runner,
        seq_len: int,
        bg_mode: str,
        eval_mode: str = "weight",
        median: np.ndarray | None = None,
        median_warmup: int = 0,
        model_name: str = "TrackNet model",
        heatmap_threshold: float = 0.0,
        stride: int = 1,
    ):
        if seq_len < 1:
            raise ValueError(f"seq_len must be >= 1, got {seq_len}")
        self.stride = check_stride(stride, seq_len)
        if bg_mode not in BG_MODES:
            raise ValueError(f"bg_mode must be one of {BG_MODES}, got {bg_mode!r}")
        if median_warmup < 0:
            raise ValueError(f"median_warmup must be >= 0, got {median_warmup}")
        self.runner = runner
        self.seq_len = seq_len
        self.bg_mode = bg_mode
        self.eval_mode = eval_mode
        self.weights = ensemble_weights(seq_len, eval_mode)
        self.median_warmup = median_warmup
        self.heatmap_threshold = heatmap_threshold
        # Called per emitted frame with its heatmap peak and its position at any threshold (threshold sweeps).
        self.on_peak: Callable[[int, float, BallRow], None] | None = None
        self._check_model(model_name)
        self._given_median = None if median is None else self._validate_median(median)
        if self.needs_median and self._given_median is None and median_warmup == 0:
            raise MedianMissing(bg_mode)
        self._input_name = runner.inputs[0].name
        self.reset()

    def _check_model(self, model_name: str) -> None:
        check_metadata(self.runner.metadata, {"seq_len": self.seq_len, "bg_mode": self.bg_mode}, model_name)
        channels = input_channels(self.bg_mode, self.seq_len)
        shape = self.runner.inputs[0].shape
        check_input_frame(shape, model_name)
        found = fixed_dim(shape[1])
        if found is not None and found != channels:
            raise ValueError(
                f"{model_name} takes {found} input channels but seq_len={self.seq_len}, "
                f"bg_mode={self.bg_mode!r} needs {channels}; check seq_len and bg_mode"
            )

    def _validate_median(self, median: np.ndarray) -> np.ndarray:
        median = np.asarray(median)
        problem = median_problem(median, self.bg_mode)
        if problem:
            raise ValueError(problem)
        if self.bg_mode == "concat" and median.shape == (3, HEIGHT, WIDTH):
            return median.astype(np.float32) / 255 if median.dtype == np.uint8 else median.astype(np.float32)
        return self._stored_median(np.ascontiguousarray(median[..., ::-1]))  # frames are BGR

    def _stored_median(self, median_bgr: np.ndarray) -> np.ndarray:
        """A frame-resolution BGR median as the stream uses it: as is, or for concat the model-input
        CHW RGB / 255 (the same for a warm-up median and a given one)."""
        if self.bg_mode == "concat":
            return _bgr_to_chw_rgb(_resize(median_bgr))
        return np.ascontiguousarray(median_bgr)

    @property
    def needs_median(self) -> bool:
        return self.bg_mode in MEDIAN_MODES

    @property
    def waiting_for_median(self) -> bool:
        """True while pushed frames go to the median warm-up and yield no prediction."""
        return self.needs_median and self._median is None

    @property
    def warmup_frames(self) -> int:
        """Frames the median warm-up holds so far (0 when not waiting for a median)."""
        return self._warmup.seen if self.waiting_for_median and self._warmup is not None else 0

    def reset(self) -> None:
        """Forget the stream: window, running sums, warm-up frames, counters and stats."""
        self.stats = StreamStats()
        self.img_scaler: tuple[float, float] | None = None
        self._new_stream()

    def _new_stream(self) -> None:
        """The next push starts a stream as on a fresh tracker (the stats go on; ``img_scaler`` stays the last
        stream's until the new one's first frame sets it)."""
        self._median = self._given_median
        self._warmup = WarmupMedian(self.median_warmup) if self.median_warmup > 0 else None
        self._counter = 0
        channels = FEATURE_CHANNELS[self.bg_mode]
        # Each feature is written twice so that the last L features are always one
        # contiguous slice: the model input is a view, never a concatenation.
        self._ring = np.zeros((2 * self.seq_len, channels, HEIGHT, WIDTH), dtype=np.float32)
        self._filled = 0
        self._head = 0
        self._stream_frames = 0  # frames in the window since the stream (or the last flush) began
        self._window_ids: deque[int] = deque(maxlen=self.seq_len)
        self._pending: dict[int, list] = {}  # frame id -> [sum, weight total, width, height]; not answered yet

    def prepare(self, frame_bgr: np.ndarray) -> PreparedFrame:
        """Pre-process a frame now for a later ``push(frame_bgr, prepared=...)``; never raises.

        It reads the configuration and the current background median and changes nothing, so it
        may run on another thread while ``push`` runs (OpenCV and the runtimes release the GIL).
        ``push`` uses the feature only if the median it was computed with is still the stream's
        (a warm-up median may appear or go with ``reset()`` in between); otherwise it computes
        the feature again. Either way the outputs are those of a plain ``push(frame_bgr)``.
        """
        median = self._median
        start = time.perf_counter()
        feature = None
        usable = _is_bgr(frame_bgr) and not (self.needs_median and median is None)
        if usable and (self.bg_mode in ("", "concat") or median.shape == frame_bgr.shape):
            try:
                feature = self._feature(frame_bgr, median)
            except (ValueError, cv2.error):  # e.g. an empty frame: push() meets it again and raises
                feature = None
        return PreparedFrame(frame_bgr, feature, median, time.perf_counter() - start)

    def push(
        self, frame_bgr: np.ndarray, frame_id: int | None = None, prepared: PreparedFrame | None = None
    ) -> BallRow | None:
        """Add a BGR uint8 frame; return the prediction of the frame that just left the window (None while the
        window fills, or when ``answer_pending()`` answered that frame already).

        ``prepared``: ``prepare(frame_bgr)``'s result, whose feature is used when still valid.
        A frame that raises leaves the stream as it was.
        """
        if not _is_bgr(frame_bgr):
            raise ValueError(
                f"frames must be HxWx3 BGR uint8 with pixels, got {getattr(frame_bgr, 'shape', None)} "
                f"{getattr(frame_bgr, 'dtype', type(frame_bgr).__name__)}"
            )
        if prepared is not None and prepared.frame is not frame_bgr:
            raise ValueError("prepared= must be prepare()'s result for this same frame")
        fid = self._counter if frame_id is None else int(frame_id)
        height, width = frame_bgr.shape[:2]
        if self.waiting_for_median:
            self._collect_warmup(frame_bgr)
            if self._median is None:
                self._count_push(width, height)
                return None
            # The frame that completes the median is the stream's first, as in the reference.
        start = time.perf_counter()
        if prepared is not None and prepared.feature is not None and prepared.median is self._median:
            feature = prepared.feature
            self.stats.preprocess_s += prepared.seconds
            self.stats.prepared += 1
        else:
            feature = self._feature(frame_bgr, self._median)
        self._count_push(width, height)
        self._add_feature(feature)
        self._window_ids.append(fid)
        self._pending[fid] = [np.zeros((HEIGHT, WIDTH), np.float32), np.float32(0), width, height]
        self.stats.preprocess_s += time.perf_counter() - start
        if self._filled < self.seq_len:
            return None
        if (self._stream_frames - self.seq_len) % self.stride == 0:  # windows start at frames 0, s, 2s, ...
            self._infer(self._window())
        oldest = self._window_ids[0]
        return self._emit(oldest) if oldest in self._pending else None  # answered already by answer_pending()

    def flush(self) -> list[BallRow]:
        """End the stream: emit every frame still waiting for later windows, in frame-id order; the next push
        starts a new stream as on a fresh tracker (a new median warm-up, window and frame count; the stats go on).

        A stream shorter than a window is inferred once, left-padded; frames after the last window
        that ran (stride > 1) get one more window, of the last seq_len frames, for them alone.
        """
        outputs = self.answer_pending()
        self._new_stream()
        return outputs

    def answer_pending(self) -> list[BallRow]:
        """Emit every frame still waiting for later windows now, in frame-id order, as ``flush()`` does, without
        ending the stream: the next push goes on with its median, window and frame count."""
        uncovered = {fid for fid, entry in self._pending.items() if entry[1] == 0}
        if uncovered:  # no window covered them yet: the last seq_len frames, left-padded while fewer came
            self._infer(self._window() if self._filled == self.seq_len else self._padded_window(), only=uncovered)
        return [self._emit(fid) for fid in sorted(self._pending)]

    def _count_push(self, width: int, height: int) -> None:
        self.stats.push_calls += 1
        if self._counter == 0:  # the stream's first frame
            self.img_scaler = (width / WIDTH, height / HEIGHT)
        self._counter += 1

    def _collect_warmup(self, frame_bgr: np.ndarray) -> None:
        start = time.perf_counter()
        median_bgr = self._warmup.add(frame_bgr)  # raises, changing nothing, for a frame of another size
        if median_bgr is not None:
            self._median = self._stored_median(median_bgr)
        self.stats.median_s += time.perf_counter() - start

    def _feature(self, frame_bgr: np.ndarray, median: np.ndarray | None) -> np.ndarray:
        # Resize first (BGR, full resolution -> 512x288), then reverse channels and scale
        # on the small image, each plane written once into the float32 feature.
        feature = np.empty((FEATURE_CHANNELS[self.bg_mode], HEIGHT, WIDTH), np.float32)
        if self.bg_mode in ("", "concat"):
            return _bgr_to_chw_rgb(_resize(frame_bgr), feature)
        if median.shape != frame_bgr.shape:
            hint = "give a median of the frames' size" if median is self._given_median else "reset() for a new stream"
            raise MedianSizeMismatch(
                f"frame is {frame_bgr.shape[1]}x{frame_bgr.shape[0]} but the background median is "
                f"{median.shape[1]}x{median.shape[0]}; {hint}"
            )
        difference = _resize(background_difference(frame_bgr, median))
        if self.bg_mode == "subtract_concat":
            _bgr_to_chw_rgb(_resize(frame_bgr), feature)  # channels 0..2: RGB, 3: difference
        _unit(difference, feature[-1])
        return feature

    def _add_feature(self, feature: np.ndarray) -> None:
        slot = self._head
        self._ring[slot] = feature
        self._ring[slot + self.seq_len] = feature
        self._head = (slot + 1) % self.seq_len
        self._filled = min(self._filled + 1, self.seq_len)
        self._stream_frames += 1

    def _window(self) -> np.ndarray:
        window = self._ring[self._head : self._head + self.seq_len]
        return window.reshape(1, -1, HEIGHT, WIDTH)

    def _padded_window(self) -> np.ndarray:
        count = self._filled
        newest = self._ring[self._head + self.seq_len - count : self._head + self.seq_len]
        padding = np.repeat(newest[:1], self.seq_len - count, axis=0)
        return np.concatenate([padding, newest]).reshape(1, -1, HEIGHT, WIDTH)

    def _infer(self, window: np.ndarray, only: set[int] | None = None) -> None:
        """Run the model on ``window`` and add its weighted heatmaps to its frames' sums (``only``: to those)."""
        if self.bg_mode == "concat":
            window = np.concatenate([self._median[None], window], axis=1)
        start = time.perf_counter()
        heatmaps = self.runner.run({self._input_name: window})[0][0]
        self.stats.inference_s += time.perf_counter() - start
        self.stats.inference_calls += 1
        start = time.perf_counter()
        offset = self.seq_len - len(self._window_ids)  # > 0 only for a padded window
        for position, fid in enumerate(self._window_ids):
            entry = self._pending.get(fid)  # None: answered already (answer_pending)
            if entry is None or (only is not None and fid not in only):
                continue
            j = position + offset
            weight = self.weights[self.seq_len - 1 - j]
            entry[0] += weight * heatmaps[j]
            entry[1] += weight
        self.stats.postprocess_s += time.perf_counter() - start

    def _emit(self, fid: int) -> BallRow:
        start = time.perf_counter()
        total, weight, width, height = self._pending.pop(fid)
        heatmap = total / max(np.float32(1e-6), weight)
        prediction = heatmap_to_prediction(heatmap, fid, width, height, self.heatmap_threshold)
        if self.on_peak is not None:
            self.on_peak(fid, float(heatmap.max()), heatmap_to_prediction(heatmap, fid, width, height, -1.0))
        self.stats.outputs += 1
        self.stats.postprocess_s += time.perf_counter() - start
        return prediction
