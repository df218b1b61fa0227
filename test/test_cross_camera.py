"""Identities across cameras (``cross_camera_reid``, models/global_ids.py): one global ID per person over every
camera of a node. The gallery's rules on features the test writes (unit vectors at chosen angles); then a composed
hand-over (tools/compose.py's HANDOVER: two crops of one scene as two cameras, real people from photos walking from
one camera's view into the other's, the global truth IDs the scene's) through the PyPI fall detector, the shipped
MobileNetV2 embedder and each camera's tracker, scored over both cameras together (tools/mot.evaluate); and a node
of two cameras over real DDS that publishes one global ID for the person on both."""

from __future__ import annotations

import numpy as np
import pytest

from vision_factory.families.tracking import cross_camera
from vision_factory.models.global_ids import GlobalIdentities


def _unit(angle_degrees: float) -> np.ndarray:
    """A unit feature at ``angle_degrees`` in a plane: two features' distance (1 - cos) / 2 is set by the angle."""
    angle = np.radians(angle_degrees)
    return np.array([np.cos(angle), np.sin(angle), 0.0], np.float32)


# distance (1 - cos) / 2: 10 degrees 0.0076, 30 degrees 0.067, 90 degrees 0.5
NEAR, FAR, THRESHOLD = 10, 90, 0.1


def test_a_track_on_another_camera_with_the_same_appearance_gets_the_same_global_id():
    ids = GlobalIdentities(settle=1)
    assert ids.update("left", 0.0, [(1, _unit(0)), (2, _unit(FAR))], THRESHOLD) == {1: 1, 2: 2}
    # later the right camera sees someone like left's track 2, and someone unlike anyone seen
    assert ids.update("right", 1.0, [(7, _unit(FAR + NEAR)), (8, _unit(-FAR))], THRESHOLD) == {7: 2, 8: 3}
    # both keep them; a camera's track keeps its global ID even when it comes to look like someone else
    assert ids.update("right", 1.1, [(7, _unit(0)), (8, _unit(-FAR))], THRESHOLD) == {7: 2, 8: 3}


def test_two_tracks_of_one_camera_at_once_never_share_a_global_id():
    ids = GlobalIdentities(settle=1)
    ids.update("left", 0.0, [(1, _unit(0))], THRESHOLD)
    # a new track of the left camera that looks like track 1's person, while track 1 holds them: a new identity
    assert ids.update("left", 0.1, [(1, _unit(0)), (3, _unit(3 * NEAR))], THRESHOLD) == {1: 1, 3: 2}
    # two new tracks on the right both look like identity 1 only (40 degrees or more from 2): the nearer gets it,
    # the other a new identity
    found = ids.update("right", 1.0, [(4, _unit(-2 * NEAR)), (5, _unit(-NEAR))], THRESHOLD)
    assert found == {4: 3, 5: 1}


def test_a_young_identity_joins_the_earlier_one_it_comes_to_match():
    ids = GlobalIdentities(settle=5)
    ids.update("left", 0.0, [(1, _unit(0))], THRESHOLD)
    # a person walking in at the right camera's edge: their first crops look like no one
    assert ids.update("right", 1.0, [(2, _unit(FAR))], THRESHOLD) == {2: 2}
    assert ids.update("right", 1.1, [(2, _unit(NEAR))], THRESHOLD) == {2: 1}  # now like left's person: joins them
    assert 2 not in ids.identities  # the young identity is gone, never given again
    # past settle appearances a track of an identity of its own keeps it, whatever it comes to look like
    for step in range(5):
        assert ids.update("left", 2.0 + step, [(9, _unit(-FAR))], THRESHOLD) == {9: 3}
    assert ids.update("left", 8.0, [(9, _unit(0))], THRESHOLD) == {9: 3}


def test_the_gallery_is_bounded_in_time_and_size_and_a_new_stream_forgets_the_camera_tracks():
    ids = GlobalIdentities(window_s=10.0, gallery_size=3, settle=1)
    for step in range(6):
        ids.update("left", float(step), [(1, _unit(0))], THRESHOLD)
    assert len(ids.identities[1].gallery) == 3
    # 20 s later the person's appearances are out of the window: someone like them is a new identity
    assert ids.update("right", 20.0, [(1, _unit(NEAR))], THRESHOLD) == {1: 2}
    assert list(ids.identities) == [2]
    # the right camera's stream starts anew: its track 1 is someone else now, matched afresh
    ids.forget("right")
    assert ids.update("right", 20.1, [(1, _unit(FAR))], THRESHOLD) == {1: 3}
    # at most max_identities, the least recently seen forgotten first
    few = GlobalIdentities(max_identities=2, settle=1)
    for track in range(1, 4):
        few.update("left", float(track), [(track, _unit(60 * track))], THRESHOLD)
    assert list(few.identities) == [2, 3]


def test_no_threshold_links_nobody_and_a_track_without_appearance_gets_a_new_identity():
    ids = GlobalIdentities(settle=1)
    ids.update("left", 0.0, [(1, _unit(0))], THRESHOLD)
    assert ids.update("right", 1.0, [(1, _unit(0))], 0.0) == {1: 2}  # 0: the re-entry threshold is off
    assert ids.update("right", 1.0, [(2, None)], THRESHOLD) == {2: 3}


def test_cross_camera_reid_needs_tracking_a_reid_model_and_several_cameras():
    values = {"cross_camera_reid": True, "tracking": True, "reid_model_path": "reid.onnx"}
    assert isinstance(cross_camera(values, ("front", "left")), GlobalIdentities)
    assert cross_camera({**values, "cross_camera_reid": False}, ("front", "left")) is None
    with pytest.raises(ValueError, match=r"needs a reid_model_path .* and two cameras or more in cameras"):
        cross_camera({**values, "reid_model_path": ""}, ("front",))
    with pytest.raises(ValueError, match="needs tracking: true; set them, or set it false"):
        cross_camera({**values, "tracking": False}, ("front", "left"))
