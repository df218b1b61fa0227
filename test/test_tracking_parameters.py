"""The tracking parameters the detection nodes and the `track` tool share (families/tracking.py)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from conftest import SHARED

from vision_factory.families import tracking
from vision_factory.models.detections import Detection
from vision_factory.models.tracker import TrackerConfig
from vision_factory.parameters import with_defaults
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
    people = [Detection((10, 10, 60, 120), 0.9, 0, "person"), Detection((200, 20, 260, 140), 0.8, 0, "person")]
    assert built.update(frame, people) == [1, 2]
    moved = [Detection((14, 10, 64, 120), 0.9, 0, "person"), Detection((196, 20, 256, 140), 0.8, 0, "person")]
    assert built.update(frame, moved) == [1, 2]
    built.reset()
    assert built.update(frame, people[1:]) == [1]


def test_a_bad_reid_model_is_named_at_build(tmp_path):
    with pytest.raises(ValueError, match="reid_model_path.*missing.onnx"):
        tracking.build(_values(tracking=True, reid_model_path=str(tmp_path / "missing.onnx")), _load)
