"""The frame pipeline of the detection and pose families (``DetectionPipeline``: FramePipeline's shape,
families/frame_pipeline.py): the detector and, with tracking on, its tracker and the new-stream rule
(``StreamRule``, which the track node's streams keep too)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..models.tracker import TrackerConfig, Tracking
from ..results.finite import MESSAGE_FIX, finite
from ..results.frame import Detector, FrameResult
from . import tracking as tracking_parameters
from .family import Family, LoadRunner
from .frame_pipeline import Answer
from .prompts import BoxesPrompt


def detector_of(family: Family, values: Mapping[str, Any], load_runner: LoadRunner) -> Detector:
    """``family``'s detector from its node's parameter ``values`` (with tracking on, down to track_low_threshold:
    tracking.detector_values)."""
    return family.build(tracking_parameters.detector_values(values), load_runner)


class StreamRule:
    """When a tracker's stream starts anew: the frame size changes or a stamp goes back in time (a bag played
    again, a camera driver restarted, another camera on the topic). A gap alone does not: a robot that stops
    publishing for a while and resumes keeps its tracks (the tracker counts frames, not seconds)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.size: tuple[int, ...] | None = None
        self.stamp: Any = None

    def new_stream(self, size: tuple[int, ...], stamp: Any = None) -> str:
        """Why a frame of ``size`` (height, width) and ``stamp`` (comparable, e.g. (sec, nanosec); None: not
        compared) starts a new stream; "" when it does not (the first frame needs no reset)."""
        reason = ""
        if self.size is not None and size != self.size:
            reason = f"the frame size changed from {self.size[1]}x{self.size[0]} to {size[1]}x{size[0]}"
        elif self.stamp is not None and stamp is not None and stamp < self.stamp:
            reason = "a stamp went back in time"
        self.size = size
        if stamp is not None:
            self.stamp = stamp
        return reason


class DetectionPipeline:
    """A detection or pose family's frame pipeline: the detector and, with ``tracking`` on, its tracker and the
    new-stream rule. With tracking on the detector hands the tracker its detections down to track_low_threshold
    (tracking.detector_values) and ``push`` returns those above confidence_threshold and the lower ones that
    continue a track (tracking.published). Every detection passes results/finite.py's ``finite`` first, before the
    tracker and before a message or a file: one NaN or infinite value never reaches either, and never costs the
    frame's other detections (the result's ``problems`` say what was left out)."""

    def __init__(
        self, detector: Detector, tracking: Tracking | None, confidence: float, boxes_prompt: BoxesPrompt | None = None
    ):
        self.detector, self.tracking, self.confidence = detector, tracking, confidence
        self.masks = has_masks(detector)  # a segmentation model: each detection its mask
        self.boxes_prompt = boxes_prompt  # how boxes from another node reach the detector (families/prompts.py)
        self.rule = StreamRule()

    @classmethod
    def build(
        cls, family: Family, values: Mapping[str, Any], load_runner: LoadRunner, detector: Detector | None = None
    ) -> DetectionPipeline:
        """``family``'s pipeline from its node's parameter values; every model loads now (the re-id model first).
        ``detector``: one already built of these values (another camera's: an adapter keeps nothing of a stream),
        which the pipeline shares."""
        tracking = tracking_parameters.build(values, load_runner) if "tracking" in values else None
        detector = detector or detector_of(family, values, load_runner)
        return cls(detector, tracking, values.get("confidence_threshold", 0.0), family.boxes_prompt)

    def retune(self, detector: Detector, values: Mapping[str, Any], tracker: TrackerConfig | None) -> None:
        """From the next frame: ``detector`` (``detector_of`` the live parameter ``values``, on the models loaded),
        their confidence_threshold, and the tracker's ``tracker`` configuration (``tracking.live_config``); the
        tracks go on."""
        self.detector, self.confidence = detector, values.get("confidence_threshold", 0.0)
        self.masks = has_masks(detector)
        if self.tracking is not None and tracker is not None:
            self.tracking.tracker.retune(tracker)

    def push(self, frame: np.ndarray, stamp: Any = None, boxes: FrameResult | None = None) -> list[Answer]:
        """The frame's detections, tracked when tracking is on (``stamp``: comparable, e.g. (sec, nanosec), or
        None); ``boxes``: another node's, the family's boxes prompt (e.g. the people a top-down pose model poses,
        instead of its own detector's: those of a NaN or infinite value are left out, counted)."""
        if boxes is None:
            return [(stamp, self.track(frame, self.detector.detect(frame), stamp))]
        if self.boxes_prompt is None:
            raise ValueError("this family takes no boxes from another node")
        screened = finite(boxes, self.boxes_prompt.what, MESSAGE_FIX)
        found = self.track(frame, self.boxes_prompt.run(self.detector, frame, screened.result), stamp)
        return [(stamp, found.with_parts(problems={**screened.problems, **found.problems}))]

    def track(self, frame: np.ndarray, found: FrameResult, stamp: Any = None) -> FrameResult:
        """``push`` after the detector: the detections ``found`` in ``frame``, those of a NaN or infinite value
        left out (the result's ``problems`` say), through the tracker (when on)."""
        found = finite(found, masks=self.masks).result
        if self.tracking is None:
            return found
        reason = self.rule.new_stream(frame.shape[:2], stamp)
        if reason:
            self.tracking.reset()
        ids = self.tracking.update(frame, found.boxes)
        return tracking_parameters.published(found, ids, self.confidence).with_parts(new_stream=reason)

    def flush(self) -> list[Answer]:
        """Nothing is held back: every frame is answered when pushed."""
        return []

    def reset(self) -> None:
        """Forget the stream: the next frame starts a new one (tracks from 1 again)."""
        self.rule.reset()
        if self.tracking is not None:
            self.tracking.reset()


def has_masks(detector: Any) -> bool:
    """Whether ``detector`` gives each detection its instance mask (a YOLO segmentation model)."""
    return bool(getattr(detector, "mask_channels", 0))
