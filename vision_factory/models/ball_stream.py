"""One camera stream through TrackNet (and optionally InpaintNet): frames and their tags in, one result per
accepted frame out (results/frame.py's FrameResult, its ball: results/ball.py), with the tag (e.g. the image
header) it belongs to: the frame pipeline of tracknet (families/frame_pipeline.py's shape)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..images import TOO_LARGE, ImageFormatError, read_image_file
from ..results.ball import Ball
from ..results.frame import FrameResult
from ..text import untrusted
from .inpaint_stream import InpaintRefiner
from .tracknet_background import median_problem
from .tracknet_stream import BallRow, PreparedFrame, StreamStats, TrackNetTracker

Tagged = tuple[Any, FrameResult]  # a frame's tag (as pushed) and its result


def load_median(path: str, bg_mode: str) -> np.ndarray | None:
    """The background median in ``path`` for ``bg_mode``: .npy (used as is) or an image file (read as
    RGB); None for no path. Whatever is wrong with the file is a ValueError naming it."""
    if not path:
        return None
    shown = untrusted(path)
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"median_path {shown}: {'not a file' if file.exists() else 'no such file'}")
    if path.lower().endswith(".npy"):
        try:
            median = np.load(file, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"median_path {shown}: not a readable .npy file ({untrusted(exc)})") from None
    else:
        try:
            image = read_image_file(file)  # its declared size checked before it is decoded
        except ImageFormatError as exc:
            problem = exc if exc.kind == TOO_LARGE else "not a readable image file (PNG, JPEG or WebP; nor .npy)"
            raise ValueError(f"median_path {shown}: {problem}") from None
        median = np.ascontiguousarray(image[..., ::-1])
    problem = median_problem(median, bg_mode)
    if problem:
        raise ValueError(f"median_path {shown}: {problem}")
    return median


class FrameSizeChanged(ValueError):
    """A frame whose size differs from the stream's; it was skipped."""

    kind = "frame size changed mid-stream"


class BallStream:
    """Streams frames through a tracker, keeping each frame's tag until its prediction is out.

    - Frames that only feed the background-median warm-up get an immediate miss, so every
      accepted frame yields exactly one prediction; the last warm-up frame completes the median
      and is the stream's first frame, answered by the model.
    - A frame of another size than the stream's is skipped (FrameSizeChanged); after
      ``restart_after`` consecutive frames of one new size, the stream is flushed and
      restarted at that size.
    - A frame whose ``push`` raises leaves nothing behind (no tag kept for it).
    - ``flush()`` ends the stream: the next frame starts one as on a fresh BallStream (median
      warm-up, window, InpaintNet buffer, frame size), whatever came before; only ``stats`` and
      ``restarts`` go on.
    - ``answer_pending()`` answers every pending frame now, as ``flush()`` does, but the stream goes
      on (median, window, frame size): what a node does when frames pause, e.g. a sender that
      waits for each answer before sending the next frame.
    """

    def __init__(
        self,
        tracker: TrackNetTracker,
        make_refiner: Callable[[tuple[float, float]], InpaintRefiner] | None = None,
        restart_after: int | None = None,
    ):
        self.tracker = tracker
        self._make_refiner = make_refiner
        self.refiner: InpaintRefiner | None = None
        self.restart_after = restart_after or tracker.seq_len
        self.restarts = 0
        self.past_stats = StreamStats()  # TrackNet stats of streams before the current one
        self.reset()

    @property
    def stats(self) -> StreamStats:
        """TrackNet stats over every stream since construction."""
        total = StreamStats()
        total.add(self.past_stats)
        total.add(self.tracker.stats)
        return total

    def reset(self) -> None:
        self.past_stats.add(self.tracker.stats)
        self.tracker.reset()
        if self.refiner is not None:
            self.refiner.reset()
        self.size: tuple[int, int] | None = None
        self._tags: dict[int, Any] = {}
        self._undelivered: list[Tagged] = []  # a restart's flush whose push then raised
        self._next_id = 0
        self._new_size: tuple[int, int] | None = None
        self._new_size_count = 0

    def prepare(self, frame_bgr: np.ndarray) -> PreparedFrame:
        """The frame's pre-processing, for ``push(frame_bgr, tag, prepared)``; safe to run on another
        thread while ``push`` runs (see ``TrackNetTracker.prepare``)."""
        return self.tracker.prepare(frame_bgr)

    def push(self, frame_bgr: np.ndarray, tag: Any, prepared: PreparedFrame | None = None) -> list[Tagged]:
        size = (frame_bgr.shape[1], frame_bgr.shape[0])
        outputs: list[Tagged] = []
        if self.size is not None and size != self.size:
            self._new_size_count = self._new_size_count + 1 if size == self._new_size else 1
            self._new_size = size
            if self._new_size_count < self.restart_after:
                raise FrameSizeChanged(
                    f"frame size changed from {self.size[0]}x{self.size[1]} to {size[0]}x{size[1]}; "
                    f"skipping such frames, the tracker restarts after {self.restart_after} in a row"
                )
            outputs = self.flush()  # the old stream's end; this frame starts a new one
            self.restarts += 1
        frame_id = self._next_id
        self._tags[frame_id] = tag
        warming_up = self.tracker.waiting_for_median
        try:
            prediction = self.tracker.push(frame_bgr, frame_id, prepared)
        except Exception:
            del self._tags[frame_id]  # nothing of a failed frame stays behind
            self._undelivered += outputs  # answered with the next frame, or by flush()
            raise
        self._next_id += 1
        self._new_size_count = 0
        self.size = size
        outputs = self._take_undelivered() + outputs
        if warming_up and self.tracker.waiting_for_median:  # it only fed the median: a miss, now
            return outputs + self._finish([{"Frame": frame_id, "X": 0, "Y": 0, "Visibility": 0}])
        return outputs + self._refine([prediction] if prediction else [])

    def _take_undelivered(self) -> list[Tagged]:
        outputs, self._undelivered = self._undelivered, []
        return outputs

    def tag(self, frame_id: int) -> Any:
        """The tag of the pending frame the tracker numbers ``frame_id`` (e.g. in its ``on_peak``)."""
        return self._tags[frame_id]

    @property
    def pending(self) -> int:
        """Frames pushed whose prediction is not out yet."""
        return len(self._tags) + len(self._undelivered)

    def answer_pending(self) -> list[Tagged]:
        """Everything still pending, in frame order, answered from what came so far; the stream goes on."""
        outputs = self._take_undelivered() + self._refine(self.tracker.answer_pending())
        if self.refiner is not None:
            outputs += self._finish(self.refiner.flush())  # the frames after it are repaired as without it
        return outputs

    def flush(self) -> list[Tagged]:
        """End the stream: everything still pending, in frame order; the next push starts a fresh stream (even
        when this raises: nothing of this stream is left to the next)."""
        try:
            outputs = self.answer_pending()
        finally:
            self.reset()
        return outputs

    def _refine(self, predictions: list[BallRow]) -> list[Tagged]:
        if self._make_refiner is None or not predictions:
            return self._finish(predictions)
        if self.refiner is None:
            self.refiner = self._make_refiner(self.tracker.img_scaler)
        self.refiner.img_scaler = self.tracker.img_scaler  # the stream may have restarted at a new size
        refined = [self.refiner.push(prediction) for prediction in predictions]
        return self._finish([prediction for prediction in refined if prediction])

    def _finish(self, predictions: list[BallRow]) -> list[Tagged]:
        """Each prediction (the tracker's row) as its frame's result, with the frame's tag."""
        width, height = self.size or (0, 0)
        return [
            (
                self._tags.pop(row["Frame"]),
                FrameResult(width, height, ball=Ball(row["X"], row["Y"], row["Visibility"] == 1)),
            )
            for row in predictions
        ]
