"""track_node's tracker over its stream of frames (the detection nodes run their family's frame pipeline,
families/pipeline.py, which holds the same rule): a new stream starts (the tracker is reset, IDs count from 1
again) when families/pipeline.py's StreamRule says so: the frame size changes or a stamp goes back in time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from std_msgs.msg import Header

from ..families.pipeline import StreamRule
from ..families.tracking import from_model_text
from ..models.tracker import Tracking
from ..results.boxes import Boxes
from ..streaming import stamp_of


class TrackedStream:
    def __init__(self, tracking: Tracking, logger: Any):
        self.tracking, self.logger = tracking, logger
        note = from_model_text(tracking)
        if note:
            logger.info(note)
        self.rule = StreamRule()

    def update(self, header: Header, frame: np.ndarray, detections: Boxes) -> list[int | None]:
        """The track ID of each detection (None: no confirmed track), after a reset if a new stream starts."""
        reason = self.rule.new_stream(frame.shape[:2], stamp_of(header))
        if reason:
            self.tracking.reset()
            self.logger.info(f"new stream ({reason}): tracks reset, IDs count from 1 again")
        return self.tracking.update(frame, detections)
