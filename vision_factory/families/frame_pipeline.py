"""One frame pipeline per family: what its node runs on each frame, and what the tools run (verify's offline
model, track, eval, bench, quantize's calibration), built once by ``Family.pipeline(values, load_runner)`` from the
node's parameter values (their defaults: the family's parameter table).

Every pipeline has one shape (``FramePipeline``): ``push(frame, stamp)`` takes a stream's frames in order and gives
the frames answered now, each its stamp (whatever the caller gave: a header stamp, a frame index) with its
FrameResult (results/frame.py); ``flush()`` ends the stream with what is still pending; ``reset()`` forgets it:
- detection and pose families: families/pipeline.py's ``DetectionPipeline``, each frame answered at once;
- tracknet: models/ball_stream.py's ``BallStream`` (with InpaintNet when given): up to seq_len frames after their
  frame;
- a family whose frames are answered each alone by its model (depth): ``SingleFrame`` below.
No ROS here: a node converts its messages, a tool reads its files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from ..results.frame import Adapter, FrameResult

Answer = tuple[Any, FrameResult]  # a frame's stamp (as pushed) and its result


class FramePipeline(Protocol):
    """What every family's pipeline is (``Family.pipeline``)."""

    def push(self, frame: np.ndarray, stamp: Any = None) -> list[Answer]: ...

    def flush(self) -> list[Answer]: ...

    def reset(self) -> None: ...


class SingleFrame:
    """The pipeline of a family whose model answers each frame alone: ``model``, its adapter (a function from a
    BGR frame to the frame's FrameResult, results/frame.py's Adapter)."""

    def __init__(self, model: Adapter):
        self.model = model

    def push(self, frame: np.ndarray, stamp: Any = None) -> list[Answer]:
        return [(stamp, self.model(frame))]

    def flush(self) -> list[Answer]:
        return []

    def reset(self) -> None:
        pass


def run_stream(
    pipeline: FramePipeline,
    frames: Iterable[np.ndarray],
    warm_up: bool = False,
    progress: Callable[[str, int, int | None], None] | None = None,
    what: str = "frames",
) -> list[FrameResult]:
    """Each frame's result from a fresh stream of ``pipeline`` (stamps: the frames' indices), the stream flushed at
    the end. ``warm_up``: the first frame is pushed once before (its answer left out), as replay sends a node its
    first frame once before the bag (a tracker has then seen it). ``progress`` (progress.py): the frames run, as
    ``what`` (not imported: a generated package carries this module, and no progress bars)."""
    pipeline.reset()
    frames = list(frames)
    answers: dict[Any, FrameResult] = {}
    if warm_up and frames:
        pipeline.push(frames[0], -1)
    for index, frame in enumerate(frames):
        answers.update(pipeline.push(frame, index))
        if progress:
            progress(what, index + 1, len(frames))
    answers.update(pipeline.flush())
    return [answers[index] for index in range(len(frames))]


def class_names(pipeline: FramePipeline) -> tuple[list[str] | None, list[str]]:
    """The class names of ``pipeline``'s model and its keypoint names ([] without), known before any frame: a
    detection pipeline's detector's (families/pipeline.py); None and [] for the others (the ball, a map)."""
    detector = getattr(pipeline, "detector", None)
    if detector is None:
        return None, []
    return list(detector.names), list(getattr(detector, "keypoint_names", []))


def results_of(answers: Sequence[Answer]) -> list[FrameResult]:
    """The results of ``answers``, in their order."""
    return [result for _, result in answers]
