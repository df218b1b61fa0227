"""The appearance thresholds calibrated online (models/reid_calibration.py): the rule on given distances, the prior
until enough of them, the bounded window, and which distances the tracker gives it (models/tracker.py)."""

from __future__ import annotations

import numpy as np
import pytest

from vision_factory.models.reid_calibration import PRIOR, VETO_MARGIN, OnlineCalibration
from vision_factory.models.tracker import Tracker, TrackerConfig
from vision_factory.results.boxes import Boxes


def test_the_prior_holds_until_enough_distances_of_each_kind_then_the_rule_applies():
    calibration = OnlineCalibration(min_samples=10)
    calibration.add([0.01] * 50, [0.2] * 9)  # plenty of one kind, not of the other
    assert not calibration.calibrated and calibration.values() == PRIOR
    assert calibration.values()["appearance_veto"] == 1.0 and calibration.values()["reentry_threshold"] == 0.0
    calibration.add([], [0.3])
    same, different = [0.01] * 50, [0.2] * 9 + [0.3]
    assert calibration.calibrated
    # the rule written out: links midway between the same p99 and the different p1, the veto at the latter
    same_99, different_1 = np.quantile(same, 0.99), np.quantile(different, 0.01)
    link = (same_99 + different_1) / 2
    assert calibration.values() == pytest.approx(
        {"appearance_threshold": link, "appearance_veto": different_1, "reentry_threshold": link}, abs=1e-4
    )
    report = calibration.report()
    assert report["state"] == "calibrated" and report["same count"] == 50 and report["different count"] == 10


def test_overlapping_kinds_leave_appearance_off():
    calibration = OnlineCalibration(min_samples=10)
    calibration.add(np.linspace(0, 0.2, 40).tolist(), np.linspace(0.1, 0.3, 40).tolist())
    assert calibration.calibrated and calibration.values() == PRIOR
    assert calibration.report()["state"] == "the kinds overlap: appearance off (motion only)"


def test_strangers_nearly_as_close_as_the_same_person_leave_links_calibrated_and_the_veto_off():
    """People who look alike (a different-people 1st percentile of 0.032 over a same-person 99th of 0.027, as the
    fall detector's tracks on a composed hand-over measured): under VETO_MARGIN times apart, the links are midway
    as ever but no veto (1); from VETO_MARGIN times apart on, the veto at the different-people 1st percentile."""
    same = np.linspace(0.005, 0.027, 100).tolist()
    for lowest, vetoed in ((0.032, False), (VETO_MARGIN * 0.027 + 0.001, True)):
        calibration = OnlineCalibration(min_samples=10)
        different = np.linspace(lowest, 0.25, 100).tolist()
        calibration.add(same, different)
        same_99, different_1 = np.quantile(same, 0.99), np.quantile(different, 0.01)
        link = (same_99 + different_1) / 2
        veto = different_1 if vetoed else 1.0
        assert calibration.values() == pytest.approx(
            {"appearance_threshold": link, "appearance_veto": veto, "reentry_threshold": link}, abs=1e-4
        )


def test_a_person_partly_hidden_keeps_their_track_though_lookalikes_are_about():
    """The stream measured lookalikes nearly as close as the same person (as above); then a person walking on, partly
    hidden (their crop 0.08 from their feature: a person behind a pillar at a view's edge, three times the
    same-person 99th) keeps their ID on the box that follows their track. A veto at 0.032 refused that pair, and
    each next frame the new track's too: a new ID every other frame (issue 31)."""
    calibration = OnlineCalibration(min_samples=10)
    tracker = Tracker(TrackerConfig(), calibration)
    calibration.add(np.linspace(0.005, 0.027, 100).tolist(), np.linspace(0.032, 0.25, 100).tolist())
    whole = np.eye(4, dtype=np.float32)[:1]
    angle = np.arccos(1 - 2 * 0.08)  # appearance distance (1 - cos) / 2 = 0.08
    hidden = np.array([[np.cos(angle), np.sin(angle), 0, 0]], np.float32)
    ids = [tracker.update(_box(100 + 3 * frame), whole)[0] for frame in range(5)]
    ids += [tracker.update(_box(115 + 3 * frame), hidden)[0] for frame in range(5)]
    assert ids == [ids[0]] * 10 and ids[0] is not None, ids
    assert tracker.config.appearance_veto == 1.0


def test_only_the_last_window_of_distances_is_kept_and_reset_forgets_them():
    calibration = OnlineCalibration(window=20, min_samples=5)
    calibration.add([0.5] * 100, [0.9] * 100)  # an early scene
    calibration.add([0.01] * 20, [0.2] * 20)  # the scene now: the early one is gone
    assert len(calibration.same) == len(calibration.different) == 20
    assert calibration.values()["appearance_veto"] == pytest.approx(0.2)
    calibration.reset()
    assert not calibration.calibrated and calibration.report()["same count"] == 0


def test_a_calibration_names_only_known_thresholds():
    with pytest.raises(ValueError, match="match_threshold"):
        OnlineCalibration(["match_threshold"])
    only = OnlineCalibration(["appearance_veto"], min_samples=1)
    assert only.values() == {"appearance_veto": 1.0}


def _box(x: float, score: float = 0.9) -> Boxes:
    return Boxes([(x, 100.0, x + 50.0, 200.0)], [score], [0], ["person"])


def test_the_tracker_measures_same_and_different_where_motion_is_sure_and_uses_the_thresholds():
    """Two people apart, each with their own feature (orthogonal unit vectors): from the second frame each continuing
    track gives one same distance (its detection against its feature: 0) and one different distance (against the
    other's: (1 - 0) / 2 = 0.5); a box overlapped by another high-score box gives no same distance; once measured,
    the config holds the rule's values (links midway, 0.25; the veto at 0.5)."""
    calibration = OnlineCalibration(min_samples=4)
    tracker = Tracker(TrackerConfig(), calibration)
    assert tracker.config.appearance_veto == 1.0  # the prior before any frame
    features = np.eye(4, dtype=np.float32)[:2]
    for frame in range(6):
        tracker.update(Boxes.join([_box(10 + 2 * frame), _box(300 - 2 * frame)]), features)
    # frame 1 starts both tracks; frames 2-6: two same and two different distances each
    assert list(calibration.same) == pytest.approx([0.0] * 10, abs=1e-6)
    assert list(calibration.different) == pytest.approx([0.5] * 10, abs=1e-6)
    config = tracker.config  # calibrated since frame 4 (4 of each after frame 3): each frame takes them at its start

    assert (config.appearance_threshold, config.appearance_veto, config.reentry_threshold) == (0.25, 0.5, 0.25)
    # a third box over the first person's: her crop may show someone else, so no same distance of hers
    before = len(calibration.same)
    tracker.update(Boxes.join([_box(24), _box(286), _box(40, 0.8)]), np.eye(4, dtype=np.float32)[[0, 1, 0]])
    assert len(calibration.same) == before + 1  # only the second person's


def test_lost_tracks_wait_for_re_entry_past_the_track_buffer_only_with_embeddings():
    """track_buffer 2, reentry_buffer 6: hidden 4 frames, a person comes back far from where motion expects them
    and gets their ID by appearance; without embeddings the track is gone after 2 frames."""
    config = TrackerConfig(track_buffer=2, reentry_buffer=6, reentry_threshold=0.05)
    feature = np.eye(4, dtype=np.float32)[:1]
    for with_features in (True, False):
        tracker = Tracker(config)
        for x in (100, 110, 120):
            (first,) = tracker.update(_box(x), feature if with_features else None)
        for _ in range(4):  # hidden
            tracker.update(Boxes.empty())
        (back,) = tracker.update(_box(20), feature if with_features else None)  # back, far behind
        if with_features:
            assert back == first
        else:
            assert back is None and [track.id for track in tracker.tracks] == [0]  # a new, unconfirmed track
