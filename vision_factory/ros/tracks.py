"""A node's tracker over its stream of frames: the detection nodes with tracking on and track_node share it.

A new stream starts (the tracker is reset, IDs count from 1 again) when the frame size changes or a stamp goes
back in time: a bag played again, a camera driver restarted, another camera on the topic. A gap alone does not
start one: a robot that stops publishing for a while and resumes keeps its tracks, which re-identification can
still join to people coming back (the tracker counts frames, not seconds: track_buffer frames).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from std_msgs.msg import Header

from ..families.tracking import from_model_text
from ..models.detections import Detection
from ..models.tracker import Tracking
from ..streaming import stamp_of


class TrackedStream:
    def __init__(self, tracking: Tracking, logger: Any):
        self.tracking, self.logger = tracking, logger
        note = from_model_text(tracking)
        if note:
            logger.info(note)
        self.size: tuple[int, ...] | None = None
        self.stamp: tuple[int, int] | None = None

    def new_stream(self, header: Header, size: tuple[int, ...]) -> str:
        """Why this frame starts a new stream ("" when it does not; the first frame needs no reset)."""
        stamp = stamp_of(header)
        reason = ""
        if self.size is not None and size != self.size:
            reason = f"the frame size changed from {self.size[1]}x{self.size[0]} to {size[1]}x{size[0]}"
        elif self.stamp is not None and stamp < self.stamp:
            reason = "a stamp went back in time"
        self.size, self.stamp = size, stamp
        return reason

    def update(self, header: Header, frame: np.ndarray, detections: Sequence[Detection]) -> list[int | None]:
        """The track ID of each detection (None: no confirmed track), after a reset if a new stream starts."""
        reason = self.new_stream(header, frame.shape[:2])
        if reason:
            self.tracking.reset()
            self.logger.info(f"new stream ({reason}): tracks reset, IDs count from 1 again")
        return self.tracking.update(frame, detections)
