"""The tracking parameters the detection nodes and the `track` tool share (families/tracking.py)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from conftest import SHARED

from vision_factory.families import tracking
from vision_factory.models.tracker import TrackerConfig
from vision_factory.parameters import with_defaults
from vision_factory.results.boxes import Boxes
from vision_factory.runtime.onnx_runner import OnnxRunner

REID_MODEL = SHARED / "models" / "mobilenetv2-reid-embedder.onnx"


def _load(path):
    return OnnxRunner.load(path, {}, logging.getLogger("test"))


def _values(**given):
    return with_defaults(tracking.PARAMETERS, given, "tracking")


def test_tracking_is_off_by_default_and_its_thresholds_are_the_trackers():
    values = _values()
    assert values["tracking"] is False and tracking.build(values, _load) is None
    defaults = TrackerConfig()
    assert values["track_buffer"] == defaults.track_buffer == 30
    assert values["track_high_threshold"] == defaults.high_threshold
    built = tracking.build(_values(tracking=True, track_buffer=7, track_low_threshold=0.2), _load)
    assert built.embedder is None  # motion only without a re-id model
    assert built.tracker.config.track_buffer == 7 and built.tracker.config.low_threshold == 0.2


def test_tracking_with_a_reid_model_gives_ids_from_its_features():
    if not REID_MODEL.is_file():
        pytest.skip(f"{REID_MODEL} is not there (shared models, see ../shared/models/README)")
    built = tracking.build(_values(tracking=True, reid_model_path=str(REID_MODEL)), _load)
    frame = np.random.default_rng(0).integers(0, 255, (240, 320, 3), np.uint8)
    people = Boxes([(10, 10, 60, 120), (200, 20, 260, 140)], [0.9, 0.8], [0, 0], ["person"] * 2)
    assert built.update(frame, people) == [1, 2]
    moved = Boxes([(14, 10, 64, 120), (196, 20, 256, 140)], [0.9, 0.8], [0, 0], ["person"] * 2)
    assert built.update(frame, moved) == [1, 2]
    built.reset()
    assert built.update(frame, people[1:]) == [1]


def test_a_bad_reid_model_is_named_at_build(tmp_path):
    with pytest.raises(ValueError, match="reid_model_path.*missing.onnx"):
        tracking.build(_values(tracking=True, reid_model_path=str(tmp_path / "missing.onnx")), _load)


def _with_metadata(tmp_path, entries: dict[str, str]):
    """A copy of the shipped re-id model with ``entries`` added to its metadata (written here with onnx)."""
    import onnx

    model = onnx.load(REID_MODEL)
    for key, value in entries.items():
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value
    path = tmp_path / "reid_with_thresholds.onnx"
    onnx.save(model, path)
    return str(path)


def test_thresholds_in_the_reid_models_metadata_replace_the_parameters_unless_turned_off(tmp_path):
    if not REID_MODEL.is_file():
        pytest.skip(f"{REID_MODEL} is not there (shared models, see ../shared/models/README)")
    tuned = {"reid_appearance_threshold": "0.11", "reid_appearance_veto": "0.16", "reid_reentry_threshold": "0.09"}
    path = _with_metadata(tmp_path, tuned)
    given = dict(track_appearance_threshold=0.3, track_appearance_veto=0.5, track_reentry_threshold=0.2)
    built = tracking.build(_values(tracking=True, reid_model_path=path, **given), _load)
    config = built.tracker.config
    assert (config.appearance_threshold, config.appearance_veto, config.reentry_threshold) == (0.11, 0.16, 0.09)
    assert built.from_model == {
        "track_appearance_threshold": 0.11,
        "track_appearance_veto": 0.16,
        "track_reentry_threshold": 0.09,
    }
    assert "track_appearance_veto 0.16" in tracking.from_model_text(built)
    off = tracking.build(
        _values(tracking=True, reid_model_path=path, track_thresholds_from_model=False, **given), _load
    )
    config = off.tracker.config
    assert (config.appearance_threshold, config.appearance_veto, config.reentry_threshold) == (0.3, 0.5, 0.2)
    assert off.from_model == {} and tracking.from_model_text(off) is None
    # the untuned model carries none: the parameters stay, nothing is logged
    plain = tracking.build(_values(tracking=True, reid_model_path=str(REID_MODEL), **given), _load)
    assert plain.tracker.config.appearance_veto == 0.5 and tracking.from_model_text(plain) is None
    # only one key in the model: only that parameter is replaced
    one = tracking.build(
        _values(tracking=True, reid_model_path=_with_metadata(tmp_path, {"reid_appearance_veto": "0.2"}), **given),
        _load,
    )
    assert (one.tracker.config.appearance_threshold, one.tracker.config.appearance_veto) == (0.3, 0.2)


def test_thresholds_neither_in_the_model_nor_set_are_calibrated_online_and_said_where_each_comes_from(tmp_path):
    if not REID_MODEL.is_file():
        pytest.skip(f"{REID_MODEL} is not there (shared models, see ../shared/models/README)")
    # the model carries the veto, the user sets re-entry (not its default): only appearance is calibrated online
    path = _with_metadata(tmp_path, {"reid_appearance_veto": "0.16"})
    built = tracking.build(_values(tracking=True, reid_model_path=path, track_reentry_threshold=0.07), _load)
    assert built.tracker.calibration.fields == ("appearance_threshold",)
    config = built.tracker.config  # before any distance: the prior, appearance off
    assert (config.appearance_threshold, config.appearance_veto, config.reentry_threshold) == (0.0, 0.16, 0.07)
    shown = tracking.thresholds_in_use(built)
    assert shown["track_appearance_threshold"] == {"value": 0.0, "from": "prior (motion only)"}
    assert shown["track_appearance_veto"] == {"value": 0.16, "from": "model metadata"}
    assert shown["track_reentry_threshold"] == {"value": 0.07, "from": "parameter"}
    assert shown["calibration"]["same count"] == shown["calibration"]["different count"] == 0
    # off: every threshold the parameter's, nothing measured; motion only: nothing to say
    off = tracking.build(_values(tracking=True, reid_model_path=str(REID_MODEL), track_calibrate_online=False), _load)
    assert off.tracker.calibration is None and off.tracker.config == TrackerConfig()
    assert {entry["from"] for entry in tracking.thresholds_in_use(off).values()} == {"parameter"}
    assert tracking.thresholds_in_use(tracking.build(_values(tracking=True), _load)) == {}


@pytest.mark.parametrize("text", ["1.5", "-0.1", "nan", "0,15", "", "0.1\x1b[2J\nforged log line"])
def test_a_bad_threshold_in_the_reid_models_metadata_is_refused_at_build(tmp_path, text):
    if not REID_MODEL.is_file():
        pytest.skip(f"{REID_MODEL} is not there (shared models, see ../shared/models/README)")
    path = _with_metadata(tmp_path, {"reid_appearance_veto": text})
    with pytest.raises(ValueError) as error:
        tracking.build(_values(tracking=True, reid_model_path=path), _load)
    message = str(error.value)
    assert "reid_appearance_veto" in message and "reid-tune" in message and "track_thresholds_from_model" in message
    assert "\n" not in message and "\x1b" not in message  # the model's text is escaped
    # turned off, the model's thresholds are not read: it builds with the parameters (as they are: no calibration)
    off = dict(track_thresholds_from_model=False, track_calibrate_online=False)
    built = tracking.build(_values(tracking=True, reid_model_path=path, **off), _load)
    assert built.tracker.config.appearance_veto == TrackerConfig().appearance_veto
    assert built.tracker.calibration is None
