"""Tracking parameters, shared by every detection family's node and the `track` tool: whether to track, the
tracker's thresholds (defaults: models/tracker.py's TrackerConfig) and the optional re-identification model
(families/reid.py's parameters; an empty reid_model_path tracks by motion only).

Appearance thresholds belong to the embedder: a re-id model tuned by `vision-factory reid-tune` carries its own in
its metadata (MODEL_THRESHOLDS), which replace the parameters' values while ``track_thresholds_from_model`` is on.
Those the model does not carry and the user did not set (a value other than the default) are calibrated online
from the stream while ``track_calibrate_online`` is on (models/reid_calibration.py): the embedder's own distances,
same track against tracks seen at once, with no truth.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..models.global_ids import GlobalIdentities
from ..models.reid_calibration import FIELDS, OnlineCalibration
from ..models.tracker import Tracker, TrackerConfig, Tracking
from ..parameters import CONFIGURE, FRACTION, LIVE, MAX_HISTORY_FRAMES, Parameter
from ..results.frame import FrameResult
from ..text import untrusted
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
    ("track_reentry_buffer", "reentry_buffer", "with re-id: frames a lost track is kept for re-entry, at least"),
    ("track_per_class", "per_class", "true: a track only takes detections of its class; false: any (Normal / Fall)"),
)
# appearance threshold parameter -> the re-id model's metadata key carrying its value (written by reid-tune)
MODEL_THRESHOLDS = {
    "track_appearance_threshold": "reid_appearance_threshold",
    "track_appearance_veto": "reid_appearance_veto",
    "track_reentry_threshold": "reid_reentry_threshold",
}
FROM_MODEL = Parameter(
    "track_thresholds_from_model",
    True,
    "appearance, veto and re-entry thresholds from the re-id model's metadata (vision-factory reid-tune) when it "
    "has them; false: these parameters'",
)

ONLINE = Parameter(
    "track_calibrate_online",
    True,
    "appearance, veto and re-entry thresholds the re-id model does not carry and left at their defaults are "
    "calibrated online from the stream (same track against tracks seen at once; motion only until measured); "
    "false: the parameters'",
)

CROSS_CAMERA = Parameter(
    "cross_camera_reid",
    False,
    "with several cameras and a reid_model_path: one global ID per person over every camera (Detection2D.id; "
    "models/global_ids.py); the per-camera track ID stays on <camera>/track_markers",
)
OVERLAPS = Parameter(
    "cross_camera_overlaps",
    "",
    "with cross_camera_reid: the pairs of cameras whose views overlap, e.g. [front:left, left:right]: one person may "
    "hold one global ID on both at once; on others (the default: all) two tracks seen at once are two people",
    dynamic_typing=True,
)
# Of the detection nodes alone: the track family and `vision-factory track` always track, and serve one stream.
NODE_ONLY = ("tracking", CROSS_CAMERA.name, OVERLAPS.name)


def _bounds(default: object) -> dict:
    """A threshold's valid values: 0..1 (scores, IoU and appearance distances, costs); a count of frames: 0 to
    MAX_HISTORY_FRAMES."""
    if isinstance(default, bool):
        return {}
    return {"minimum": 0, "maximum": MAX_HISTORY_FRAMES} if isinstance(default, int) else FRACTION


PARAMETERS = (
    Parameter("tracking", False, "give each detection a track ID (Detection2D.id)", launch_argument=True),
    *(
        Parameter(
            name,
            getattr(_DEFAULTS, field),
            description,
            **_bounds(getattr(_DEFAULTS, field)),
            applies=CONFIGURE if field in FIELDS else LIVE,  # appearance ones: calibrated or the model's at configure
        )
        for name, field, description in _THRESHOLDS
    ),
    FROM_MODEL,
    ONLINE,
    CROSS_CAMERA,
    OVERLAPS,
    dataclasses.replace(
        reid.MODEL,
        required=False,
        description="re-identification model (.onnx) for the tracker; empty: track by motion only",
    ),
    *reid.PARAMETERS[1:],
)


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> Tracking | None:
    """The node's or tool's Tracking from PARAMETERS values; None when ``tracking`` is off. Both models load now.
    With ``track_thresholds_from_model`` on, thresholds in the re-id model's metadata replace the parameters' (the
    Tracking's ``from_model`` lists them; a bad value is an error naming its key). With ``track_calibrate_online``
    on, those still at their defaults are calibrated online (the tracker's ``calibration``)."""
    if not values["tracking"]:
        return None
    embedder = reid.build(values, load_runner) if values["reid_model_path"] else None
    from_model = {}
    if embedder is not None and values[FROM_MODEL.name]:
        from_model = model_thresholds(embedder.runner.metadata, values["reid_model_path"])
    chosen = {**values, **from_model}
    config = TrackerConfig(**{field: type(getattr(_DEFAULTS, field))(chosen[name]) for name, field, _ in _THRESHOLDS})
    calibration = None
    if embedder is not None and values[ONLINE.name]:
        free = [field for field, name in FIELDS.items() if name not in from_model and set_by_user(values, name) is None]
        calibration = OnlineCalibration(free) if free else None
    return Tracking(Tracker(config, calibration), embedder, from_model)


def live_config(tracking: Tracking, values: Mapping[str, Any]) -> TrackerConfig:
    """The tracker's configuration with the LIVE thresholds of ``values`` (the motion ones), the appearance ones as
    configured (the re-id model's or calibrated): what ``Tracker.retune`` takes. Thresholds that do not go together
    (low over high) are a ValueError naming them."""
    live = {
        field: type(getattr(_DEFAULTS, field))(values[name]) for name, field, _ in _THRESHOLDS if field not in FIELDS
    }
    return dataclasses.replace(tracking.tracker.given, **live)


def cross_camera(values: Mapping[str, Any], cameras: Sequence[str]) -> GlobalIdentities | None:
    """The node's identities across its ``cameras`` (models/global_ids.py) with ``cross_camera_reid`` on; None when
    off. On, it needs tracking, a re-id model and two cameras or more: else the error says which is missing."""
    if not values.get(CROSS_CAMERA.name):
        return None
    missing = [
        need
        for need, given in (
            ("tracking: true", values.get("tracking")),
            ("a reid_model_path (appearance links one camera's tracks to another's)", values["reid_model_path"]),
            (f"two cameras or more in cameras (given: {len(cameras)})", len(cameras) >= 2),
        )
        if not given
    ]
    if missing:
        raise ValueError(f"{CROSS_CAMERA.name}: true needs {' and '.join(missing)}; set them, or set it false")
    return GlobalIdentities(overlapping=overlapping_cameras(values.get(OVERLAPS.name, ""), cameras))


def overlapping_cameras(value: Any, cameras: Sequence[str]) -> list[tuple[str, str]]:
    """``cross_camera_overlaps``' pairs, each "a:b" of two of ``cameras``: a list of them, or text of them separated by
    commas or spaces ("" or []: none). Anything else is a ValueError naming it and the fix."""
    items = re.split(r"[,\s]+", value.strip().strip("[]")) if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(item, str) for item in items):
        shown = untrusted(repr(value), 80)
        raise ValueError(f"{OVERLAPS.name} must be a list of camera pairs, e.g. [front:left], not {shown}")
    pairs = []
    for item in filter(None, (item.strip() for item in items)):
        pair = tuple(name.strip() for name in item.split(":"))
        if len(pair) != 2 or pair[0] == pair[1] or not set(pair) <= set(cameras):
            raise ValueError(
                f"{OVERLAPS.name}: {untrusted(repr(item), 80)} is not two of the node's cameras "
                f"({', '.join(cameras)}) joined by ':', e.g. {cameras[0]}:{cameras[-1]}"
            )
        pairs.append(pair)
    return pairs


def set_by_user(values: Mapping[str, Any], name: str) -> Any:
    """The value of the tracking parameter ``name`` when the user set it (other than its default), else None."""
    default = getattr(_DEFAULTS, next(field for parameter, field, _ in _THRESHOLDS if parameter == name))
    return None if values[name] == default else values[name]


def thresholds_in_use(tracking: Tracking) -> dict[str, Any]:
    """The appearance thresholds in use now and where each comes from (the re-id model's metadata, the parameter,
    calibrated online, or the prior until calibrated), with the online calibration's measured distances: for
    /diagnostics and `vision-factory track`'s summary. Empty when tracking by motion only."""
    if tracking.embedder is None:
        return {}
    tracker = tracking.tracker
    calibration = tracker.calibration
    calibrated = calibration.fields if calibration is not None else ()
    online = "calibrated online" if tracker.measured else "prior (motion only)"
    found: dict[str, Any] = {}
    for field, name in FIELDS.items():
        source = "model metadata" if name in tracking.from_model else online if field in calibrated else "parameter"
        found[name] = {"value": getattr(tracker.config, field), "from": source}
    if calibration is not None:
        found["calibration"] = calibration.report()
    return found


def diagnostic_values(tracking: Tracking) -> dict[str, str]:
    """``thresholds_in_use`` as /diagnostics key-values (ros/monitor.py): each threshold with where it comes from,
    and the online calibration's state and measured distances."""
    values = {}
    for name, entry in thresholds_in_use(tracking).items():
        if name == "calibration":
            values.update({f"reid calibration: {key}": str(value) for key, value in entry.items()})
        else:
            values[name] = f"{entry['value']:g} ({entry['from']})"
    return values


def model_thresholds(metadata: Mapping[str, str], path: str) -> dict[str, float]:
    """The appearance thresholds a re-id model's ``metadata`` carries (MODEL_THRESHOLDS), by parameter name. The
    text is the model file's, untrusted: each must be a number in 0..1, else the error names the key and the fix."""
    found = {}
    for name, key in MODEL_THRESHOLDS.items():
        if key not in metadata:
            continue
        text = metadata[key]
        try:
            value = float(text)
        except (TypeError, ValueError):
            value = float("nan")
        if not 0 <= value <= 1:  # NaN fails too
            raise ValueError(
                f"reid_model_path {untrusted(path)}: its metadata {key} is {untrusted(repr(text), 60)}, not an "
                f"appearance distance in 0..1; tune the model again with `vision-factory reid-tune`, or set "
                f"{FROM_MODEL.name}: false to use the {name} parameter"
            )
        found[name] = value
    return found


def from_model_text(tracking: Tracking) -> str | None:
    """The start-up log line naming the thresholds taken from the re-id model; None when none were."""
    if not tracking.from_model:
        return None
    taken = ", ".join(f"{name} {value:g}" for name, value in tracking.from_model.items())
    return f"thresholds from the re-id model's metadata: {taken} ({FROM_MODEL.name}: false for the parameters')"


def detector_values(values: Mapping[str, Any]) -> Mapping[str, Any]:
    """A detection node's parameter values for its detector: with tracking on, its confidence_threshold goes down
    to track_low_threshold, so that ByteTrack's second stage gets the low-score detections that keep tracks alive
    (what the node publishes is still chosen by ``published``)."""
    if not values.get("tracking"):
        return values
    return {**values, "confidence_threshold": min(values["confidence_threshold"], values["track_low_threshold"])}


def published(found: FrameResult, ids: Sequence[int | None], confidence: float) -> FrameResult:
    """The tracked detections a node publishes, each with its track ID: those scoring above ``confidence`` (the
    node's confidence_threshold, as without tracking), and the lower ones that continue a confirmed track
    (ByteTrack's second stage: an occluded, blurred person keeps being reported under their ID)."""
    kept = [
        row
        for row, (score, track) in enumerate(zip(found.boxes.scores, ids))
        if score > confidence or track is not None
    ]
    shown = found[kept]
    return shown.with_parts(boxes=shown.boxes.tracked([ids[row] for row in kept]))
