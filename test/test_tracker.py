"""The tracker (models/tracker.py) on scenes with known answers: boxes moving at constant velocity, hiding, coming
back, changing score, of different classes, with and without appearance features.

Every scene is written as each object's box per frame (None: not detected); the expected IDs follow from the
scene, not from the tracker.
"""

from __future__ import annotations

import numpy as np
import pytest

from vision_factory.models.tracker import Tracker, TrackerConfig, assign, iou_xyxy
from vision_factory.results.boxes import Boxes

W, H = 40, 80  # box size


def box(x: float, y: float = 100) -> tuple[float, float, float, float]:
    return (x, y, x + W, y + H)


def detection(xyxy, score: float = 0.9, class_id: int = 0) -> Boxes:
    """One detection: a row of boxes."""
    return Boxes([xyxy], [score], [class_id], [{0: "person", 2: "car"}.get(class_id, str(class_id))])


def run(tracker: Tracker, frames, features=None) -> list[list[int | None]]:
    """``frames``: per frame, one entry per object: its detection (``detection``) or None (not detected). Returns
    per frame the ID given to each object (None when not detected or not tracked). ``features``: per object, its
    feature."""
    result = []
    for objects in frames:
        present = [i for i, d in enumerate(objects) if d is not None]
        embeddings = None if features is None else np.asarray(features)[present]
        ids = tracker.update(Boxes.join([objects[i] for i in present]), embeddings)
        per_object: list[int | None] = [None] * len(objects)
        for i, track_id in zip(present, ids):
            per_object[i] = track_id
        result.append(per_object)
    return result


def identities(count: int, dim: int = 64, noise: float = 0.0, seed: int = 0) -> np.ndarray:
    """Clearly distinct unit features, one per object: basis vectors, with a little noise."""
    rng = np.random.default_rng(seed)
    features = np.eye(dim)[:count] + noise * rng.standard_normal((count, dim))
    return features / np.linalg.norm(features, axis=1, keepdims=True)


def column(ids, index: int) -> list[int | None]:
    return [frame[index] for frame in ids]


def test_two_boxes_crossing_at_constant_velocity_keep_their_ids():
    frames = [[detection(box(10 * t, 100)), detection(box(300 - 10 * t, 110))] for t in range(31)]
    ids = run(Tracker(), frames)
    assert column(ids, 0) == [1] * 31 and column(ids, 1) == [2] * 31


@pytest.mark.parametrize(("missing", "same"), [(3, True), (5, True), (6, False)])
def test_a_box_hidden_for_up_to_track_buffer_frames_on_its_path_keeps_its_id(missing, same):
    """Moving at 10 px a frame, undetected for ``missing`` frames, back where constant velocity puts it: the same
    ID while missing <= track_buffer (5), a new one (2, given on its second frame) beyond."""
    frames = [[detection(box(10 * t))] for t in range(10)]
    frames += [[None]] * missing
    frames += [[detection(box(10 * t))] for t in range(10 + missing, 20 + missing)]
    ids = column(run(Tracker(TrackerConfig(track_buffer=5)), frames), 0)
    assert ids[:10] == [1] * 10 and ids[10 : 10 + missing] == [None] * missing
    back = ids[10 + missing :]
    assert back == ([1] * 10 if same else [None] + [2] * 9)


def test_low_score_detections_keep_a_track_alive():
    """ByteTrack's second stage: 15 frames at score 0.3 (under high_threshold 0.5) keep the ID, though the buffer is
    5 frames; ignoring them (low_threshold above 0.3) loses it."""
    scores = [0.9] * 5 + [0.3] * 15 + [0.9] * 5
    frames = [[detection(box(10 * t), score)] for t, score in enumerate(scores)]
    ids = column(run(Tracker(TrackerConfig(track_buffer=5)), frames), 0)
    assert ids == [1] * 25
    ignored = column(run(Tracker(TrackerConfig(track_buffer=5, low_threshold=0.4)), frames), 0)
    assert ignored[:5] == [1] * 5 and ignored[5:20] == [None] * 15 and ignored[20:] == [None] + [2] * 4


def test_a_low_score_detection_alone_never_starts_a_track():
    ids = column(run(Tracker(), [[detection(box(10 * t), 0.3)] for t in range(10)]), 0)
    assert ids == [None] * 10


def test_tracks_are_per_class_when_asked():
    """A person and a car on the same box keep separate IDs; a car where the hidden person is expected does not
    take the person's ID, and the person coming back on its path does."""
    frames = [[detection(box(10 * t), class_id=0), detection(box(10 * t), class_id=2), None] for t in range(5)]
    frames += [[None, detection(box(10 * t), class_id=2), detection(box(10 * t, 300), class_id=2)] for t in (5,)]
    frames += [[None, detection(box(10 * t), class_id=2), None] for t in (6, 7)]
    frames += [[detection(box(10 * t), class_id=0), detection(box(10 * t), class_id=2), None] for t in (8, 9)]
    ids = run(Tracker(TrackerConfig(per_class=True)), frames)
    assert column(ids, 0) == [1] * 5 + [None] * 3 + [1, 1]
    assert column(ids, 1) == [2] * 10
    # The second car starts a track on frame 5 (unconfirmed: no ID) and is gone the next frame: it never gets one.
    assert column(ids, 2) == [None] * 10


def test_without_per_class_a_track_follows_its_object_whatever_the_class():
    """A fall detector's person, called Normal (0) in some frames and Fall (1) in others. Per class, a change of
    class leaves the other class's track lost: Fall starts track 2 (confirmed on its second frame), and back to
    Normal, track 1, kept on its path, takes the box again. With per_class off: one track."""
    classes = [0] * 4 + [1] * 4 + [0] * 4
    frames = [[detection(box(10 * t), class_id=class_id)] for t, class_id in enumerate(classes)]
    assert column(run(Tracker(), frames), 0) == [1] * 12  # the default
    assert column(run(Tracker(TrackerConfig(per_class=True)), frames), 0) == [1] * 4 + [None] + [2] * 3 + [1] * 4


def test_ids_are_never_reused_in_a_stream_and_reset_starts_a_new_one():
    tracker = Tracker(TrackerConfig(track_buffer=2))
    first = run(tracker, [[detection(box(0))]] * 3 + [[None]] * 3)  # gone beyond the buffer: dropped
    again = run(tracker, [[detection(box(0))]] * 3)  # the same place, a new object for the tracker
    other = run(tracker, [[detection(box(0)), detection(box(200))]] * 2)
    assert column(first, 0) == [1, 1, 1, None, None, None]
    assert column(again, 0) == [None, 2, 2]  # born unconfirmed, confirmed with a new ID
    assert column(other, 0) == [2, 2] and column(other, 1) == [None, 3]
    assert not [track for track in tracker.tracks if track.id == 1]
    tracker.reset()
    assert tracker.tracks == [] and tracker.frame == 0
    after = run(tracker, [[detection(box(200)), detection(box(0))]] * 2)
    assert after == [[1, 2], [1, 2]]  # a new stream: its first frame's tracks confirmed at once, IDs from 1


def meet_and_turn_back():
    """A (moving right) and B (moving left) meet, their boxes overlapping (IoU 0.82), and both turn back: where
    constant velocity carries each on through the other (A predicted at about 130, B at 120: IoU 0.6 with each
    other), each box comes back exactly at the other's prediction."""
    frames = [[detection(box(100 + 3 * t)), detection(box(150 - 3 * t))] for t in range(10)]  # A to 127, B to 123
    frames += [[detection(box(120 - 3 * t)), detection(box(130 + 3 * t))] for t in range(8)]
    return frames


@pytest.mark.parametrize("veto", [0.4, 1.0])
def test_appearance_keeps_identities_where_motion_alone_swaps_them(veto):
    """Motion gives each the other's ID; clearly distinct features keep them, by BoT-SORT's fusion alone (the right
    pairs overlap enough, IoU 0.6, for appearance to count; veto 1: off), and with the veto."""
    frames = meet_and_turn_back()
    motion = run(Tracker(), frames)
    assert column(motion, 0) == [1] * 10 + [2] * 8 and column(motion, 1) == [2] * 10 + [1] * 8  # swapped
    appearance = run(Tracker(TrackerConfig(appearance_veto=veto)), frames, identities(2, noise=0.05))
    assert column(appearance, 0) == [1] * 18 and column(appearance, 1) == [2] * 18


def turn_back_behind_an_occluder():
    """A walks right, B walks left, both hidden for 8 frames, during which both turned back: A comes out at 140
    going left, B at 180 going right. The filters, still short of 10 px a frame, predict A at about 164 and B at
    156: each box overlaps the other's prediction (IoU 0.43) more than its own (0.25)."""
    frames = [[detection(box(10 * t)), detection(box(320 - 10 * t))] for t in range(10)]  # A to 90, B to 230
    frames += [[None, None]] * 8
    frames += [[detection(box(140 - 10 * t)), detection(box(180 + 10 * t))] for t in range(6)]
    return frames


def test_appearance_vetoes_a_swap_behind_an_occluder_and_reidentifies_both():
    frames = turn_back_behind_an_occluder()
    motion = run(Tracker(), frames)
    assert column(motion, 0)[18:] == [2] * 6 and column(motion, 1)[18:] == [1] * 6  # swapped
    appearance = run(Tracker(), frames, identities(2, noise=0.05))
    assert column(appearance, 0)[18:] == [1] * 6 and column(appearance, 1)[18:] == [2] * 6
    # Without the veto (BoT-SORT as published), IoU 1.0 with the wrong prediction wins: swapped again.
    no_veto = run(Tracker(TrackerConfig(appearance_veto=1)), frames, identities(2, noise=0.05))
    assert column(no_veto, 0)[18:] == [2] * 6


def test_reentry_far_from_the_prediction_is_reidentified_by_appearance():
    """A stops behind an occluder while its prediction walks on: it comes back about 75 px behind it (IoU 0). Motion
    alone gives it a new ID; its features give its own back at once. Someone who looks different, arriving there
    after A has left, does not get it."""
    frames = [[detection(box(10 * t)), None] for t in range(10)]  # to 90
    frames += [[None, None]] * 8
    frames += [[detection(box(95)), None] for _ in range(3)]
    frames += [[None, detection(box(95))] for _ in range(3)]  # someone else, where A came back
    features = identities(2, noise=0.05)
    motion = column(run(Tracker(), frames), 0)
    assert motion[18:21] == [None, 2, 2]
    tracked = run(Tracker(), frames, features)
    assert column(tracked, 0)[18:21] == [1, 1, 1]
    assert column(tracked, 1)[21:] == [None, 2, 2]  # a new person: vetoed against A, a new ID
    # Appearance alone never links a far box outside re-entry: with re-entry off, A gets a new ID too.
    no_reentry = run(Tracker(TrackerConfig(reentry_threshold=0)), frames, features)
    assert column(no_reentry, 0)[18:21] == [None, 2, 2]


def test_features_of_boxes_outside_the_frame_and_of_low_scores_are_not_learned():
    tracker = Tracker()
    feature = identities(2)
    tracker.update(detection(box(0)), np.zeros((1, 64)))  # a zero row: no appearance
    assert tracker.tracks[0].feature is None
    tracker.update(detection(box(0), 0.3), feature[:1])  # low score: the track does not learn from it
    assert tracker.tracks[0].feature is None
    tracker.update(detection(box(0)), feature[:1])
    np.testing.assert_allclose(tracker.tracks[0].feature, feature[0])
    similar = (feature[0] + 0.5 * feature[1]) / np.linalg.norm(feature[0] + 0.5 * feature[1])  # cosine 0.89
    tracker.update(detection(box(0)), similar[None])  # EMA: 0.9 of the old, 0.1 of the new, renormalised
    expected = 0.9 * feature[0] + 0.1 * similar
    np.testing.assert_allclose(tracker.tracks[0].feature, expected / np.linalg.norm(expected), atol=1e-6)
    with pytest.raises(ValueError, match=r"embeddings \[2, 64\] for 1 detections"):
        tracker.update(detection(box(0)), feature)


def test_assignment_with_a_cost_limit_is_lapjvs():
    """A pair is made only where it is cheaper than leaving its row and column unmatched (the limit)."""
    cost = np.array([[0.1, 0.7], [0.7, np.inf]])
    assert assign(cost, 0.8) == [(0, 0)]  # 0.1 + one row and one column unmatched (0.8) < 0.7 + 0.7
    assert sorted(assign(np.array([[0.3, 0.2], [0.2, 0.9]]), 0.8)) == [(0, 1), (1, 0)]
    assert assign(np.zeros((0, 3)), 0.8) == [] and assign(np.array([[0.9]]), 0.8) == []


def test_iou_xyxy():
    a = np.array([[0, 0, 10, 10], [0, 0, 0, 0]], float)
    b = np.array([[5, 0, 15, 10], [20, 20, 30, 30]], float)
    np.testing.assert_allclose(iou_xyxy(a, b), [[50 / 150, 0], [0, 0]], atol=1e-9)
