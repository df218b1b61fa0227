"""Tracking parameters, shared by every detection family's node and the `track` tool: whether to track, the
tracker's thresholds (defaults: models/tracker.py's TrackerConfig) and the optional re-identification model
(families/reid.py's parameters; an empty reid_model_path tracks by motion only)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..models.tracker import Tracker, TrackerConfig, Tracking
from ..parameters import Parameter
from . import reid
from .family import LoadRunner

_DEFAULTS = TrackerConfig()
# (parameter, TrackerConfig field, description)
_THRESHOLDS = (
    ("track_high_threshold", "high_threshold", "detections at or above are matched first (ByteTrack stage 1)"),
    ("track_low_threshold", "low_threshold", "detections below are ignored; between low and high: stage 2"),
    ("track_new_threshold", "new_track_threshold", "an unmatched detection at or above starts a track"),
    ("track_match_threshold", "match_threshold", "stage 1 cost limit (1 - IoU x score, or appearance)"),
    ("track_buffer", "track_buffer", "frames a lost track is kept for re-identification"),
    ("track_appearance_threshold", "appearance_threshold", "appearance distance (1 - cos) / 2 under which it counts"),
    ("track_appearance_veto", "appearance_veto", "appearance distance over which a pair is never made; 1: off"),
    ("track_reentry_threshold", "reentry_threshold", "appearance distance for re-entry of lost tracks; 0: off"),
)
PARAMETERS = (
    Parameter("tracking", False, "give each detection a track ID (Detection2D.id)", launch_argument=True),
    *(Parameter(name, getattr(_DEFAULTS, field), description) for name, field, description in _THRESHOLDS),
    dataclasses.replace(
        reid.MODEL,
        required=False,
        description="re-identification model (.onnx) for the tracker; empty: track by motion only",
    ),
    *reid.PARAMETERS[1:],
)


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> Tracking | None:
    """The node's or tool's Tracking from PARAMETERS values; None when ``tracking`` is off. Both models load now."""
    if not values["tracking"]:
        return None
    config = TrackerConfig(**{field: type(getattr(_DEFAULTS, field))(values[name]) for name, field, _ in _THRESHOLDS})
    embedder = reid.build(values, load_runner) if values["reid_model_path"] else None
    return Tracking(Tracker(config), embedder)
