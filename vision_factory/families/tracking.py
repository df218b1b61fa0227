"""Tracking parameters, shared by every detection family's node and the `track` tool: whether to track, the
tracker's thresholds (defaults: models/tracker.py's TrackerConfig) and the optional re-identification model
(families/reid.py's parameters; an empty reid_model_path tracks by motion only)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ..models.detections import Detection
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
    ("track_per_class", "per_class", "a track only takes detections of its class; false: any (e.g. Normal / Fall)"),
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


def detector_values(values: Mapping[str, Any]) -> Mapping[str, Any]:
    """A detection node's parameter values for its detector: with tracking on, its confidence_threshold goes down
    to track_low_threshold, so that ByteTrack's second stage gets the low-score detections that keep tracks alive
    (what the node publishes is still chosen by ``published``)."""
    if not values.get("tracking"):
        return values
    return {**values, "confidence_threshold": min(values["confidence_threshold"], values["track_low_threshold"])}


def published(detections: Sequence[Detection], ids: Sequence[int | None], confidence: float) -> list[int]:
    """Indices of the tracked detections a node publishes: those scoring above ``confidence`` (the node's
    confidence_threshold, as without tracking), and the lower ones that continue a confirmed track (ByteTrack's
    second stage: an occluded, blurred person keeps being reported under their ID)."""
    return [index for index, (d, track) in enumerate(zip(detections, ids)) if d.score > confidence or track is not None]


def id_text(track: int | None) -> str:
    """Detection2D.id of a tracked detection: the track ID, or empty when it is not part of a confirmed track."""
    return "" if track is None else str(track)
