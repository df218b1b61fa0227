"""Every part of a frame's result implements the Part protocol (vision_factory/results/part.py): its file record and
its message go back and forth unchanged, it compares equal with itself and not with a changed copy, it draws on an
image of the frame's size. One case per part kind (results/frame.py's PARTS), each in a frame as its family makes
it (keypoints and masks beside their boxes)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from std_msgs.msg import Header

from vision_factory.results.ball import Ball
from vision_factory.results.boxes import Boxes
from vision_factory.results.classes import Classes
from vision_factory.results.dense import DenseMap
from vision_factory.results.frame import PARTS, FrameResult
from vision_factory.results.keypoints import COCO_KEYPOINTS, Keypoints
from vision_factory.results.masks import InstanceMask, Masks, same_frame_iou
from vision_factory.results.part import Part, Tolerance, compare, pair_nearest
from vision_factory.results.text import Text

WIDTH, HEIGHT = 64, 48
EXACT = Tolerance(px=0.0, score=0.0)


def _boxes() -> Boxes:
    names = ("person", "dog")
    return Boxes.of([[2.5, 3.0, 20.25, 40.0], [30.0, 5.5, 60.0, 25.0]], [0.875, 0.5], [0, 1], names, [7, -1])


def _keypoints() -> Keypoints:
    points = np.random.default_rng(0).uniform(1, 40, (2, 17, 3))
    points[..., 2] = np.linspace(0.05, 0.95, 17)
    return Keypoints.of(points, COCO_KEYPOINTS)


def _masks() -> Masks:
    bits = np.zeros((10, 8), bool)
    bits[2:8, 1:6] = True
    other = np.ones((6, 12), bool)
    return Masks([InstanceMask(4, 6, bits, WIDTH, HEIGHT), InstanceMask(31, 8, other, WIDTH, HEIGHT)])


def _dense() -> DenseMap:
    values = np.linspace(0.5, 9.5, WIDTH * HEIGHT, dtype=np.float32).reshape(HEIGHT, WIDTH)
    values[3, 4] = np.nan
    return DenseMap(values, "m", "depth")


# Each part kind in the frame its family makes: (the part's key, the frame's result).
FRAMES = {
    "boxes": FrameResult(WIDTH, HEIGHT, _boxes()),
    "keypoints": FrameResult(WIDTH, HEIGHT, _boxes(), keypoints=_keypoints()),
    "masks": FrameResult(WIDTH, HEIGHT, _boxes(), masks=_masks()),
    "ball": FrameResult(WIDTH, HEIGHT, ball=Ball(12.0, 30.0, True)),
    "dense": FrameResult(WIDTH, HEIGHT, dense=_dense()),
    "text": FrameResult(WIDTH, HEIGHT, text=Text("a dog and a person on a lawn", 0.75)),
    "classes": FrameResult(WIDTH, HEIGHT, classes=Classes.of([0.125, 0.625, 0.25], ("cat", "dog", "fox"), top=2)),
}


def _changed(part):
    """A copy of ``part`` that differs in what is compared of it."""
    if isinstance(part, Boxes):
        return dataclasses.replace(part, xyxy=part.xyxy + [0.0, 0.0, 1.5, 0.0])
    if isinstance(part, Keypoints):
        return dataclasses.replace(part, points=part.points + [2.0, 0.0, 0.0])
    if isinstance(part, Masks):
        first = part.masks[0]
        bits = first.bits.copy()
        bits[: bits.shape[0] // 2] = False
        return Masks([dataclasses.replace(first, bits=bits), *part.masks[1:]])
    if isinstance(part, Ball):
        return dataclasses.replace(part, x=part.x + 3)
    if isinstance(part, DenseMap):
        return dataclasses.replace(part, values=part.values * 1.01)
    if isinstance(part, Classes):
        return dataclasses.replace(part, scores=part.scores * 0.5)
    return dataclasses.replace(part, text=part.text + " again")


def _equal(a, b) -> bool:
    """Whether two parts compare equal: every row paired, nothing apart, masks whole."""
    rows_a, rows_b = a.rows(), b.rows()
    difference = compare(rows_a, rows_b, pair_nearest(rows_a, rows_b), same_frame_iou)
    return difference.within(EXACT) and difference.mask_iou_min == 1.0


def test_every_part_kind_is_covered_and_a_frames_fields_are_its_parts():
    assert sorted(FRAMES) == sorted(kind.key for kind in PARTS)
    assert [field.name for field in dataclasses.fields(FrameResult)][2:-2] == [kind.key for kind in PARTS]


@pytest.mark.parametrize("key", sorted(FRAMES))
def test_a_part_implements_the_protocol(key):
    frame = FRAMES[key]
    part = getattr(frame, key)
    assert isinstance(part, Part) and part.key == key
    # file record -> part -> file record (a map's values come from its .npy, which the record does not hold)
    record = frame.record(f"bag:{key}", 3)
    back = FrameResult.from_record(record, frame.dense.values if key == "dense" else None)
    assert back.record(f"bag:{key}", 3) == record and getattr(back, key) is not None
    # compared with itself: equal; with a changed copy: not
    assert _equal(part, part) and not _equal(part, _changed(part))
    assert frame.compare(frame).within(EXACT)
    # drawn on an image of the frame's size: that image, of that size
    image = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    drawn = part.draw(image, frame)
    assert drawn is image and drawn.shape == (HEIGHT, WIDTH, 3) and drawn.any()


@pytest.mark.parametrize("key", ["boxes", "keypoints", "masks", "ball", "dense"])
def test_message_part_message(key):
    """Its message and back: the boxes' Detection2DArray (keypoints and track IDs in it), the masks' label image
    (read within the boxes of the same frame), the ball's PointStamped, the map's 32FC1 Image."""
    frame = FRAMES[key]
    part = getattr(frame, key)
    header = Header(frame_id="camera")
    header.stamp.sec, header.stamp.nanosec = 12, 345
    if key == "masks":
        message = part.to_message(header, frame)
        assert Masks.from_message(message, frame.boxes).to_message(header, frame) == message
        assert Masks.from_message(message, frame.boxes) == part.published(frame.boxes)  # overlaps: the earlier's
        return
    message = frame.to_message(header)
    parts = tuple(field for field in ("boxes", "keypoints", "ball", "dense") if getattr(frame, field) is not None)
    measures = (part.kind, part.unit) if key == "dense" else ("", "")
    names = frame.boxes.names if frame.boxes is not None else ()
    back = FrameResult.from_message(parts, message, WIDTH, HEIGHT, names, tracked=True, measures=measures)
    assert back.to_message(header) == message and getattr(back, key) == part
    if key == "keypoints":
        assert part.to_message(header, frame) is None  # it travels in its boxes' message


def _has_classification() -> bool:
    import vision_msgs.msg

    return hasattr(vision_msgs.msg, "Classification")


@pytest.mark.skipif(
    not _has_classification(),
    reason="this vision_msgs has no Classification: built before it joined interfaces/vision_msgs (vision-factory "
    "install-vision-msgs --force builds it)",
)
def test_a_text_goes_through_its_classification_message():
    frame = FRAMES["text"]
    message = frame.to_message(Header(frame_id="camera"))
    assert message.results[0].class_id == frame.text.text and message.results[0].score == 0.75
    assert FrameResult.from_message(("text",), message).text == frame.text


@pytest.mark.skipif(not _has_classification(), reason="this vision_msgs has no Classification (as above)")
def test_classes_go_through_their_classification_message_best_first():
    frame = FRAMES["classes"]
    header = Header(frame_id="camera")
    message = frame.to_message(header)
    assert message.header == header
    assert [(r.class_id, r.score) for r in message.results] == [("dog", 0.625), ("fox", 0.25)]
    back = FrameResult.from_message(("classes",), message, WIDTH, HEIGHT, ("cat", "dog", "fox"))
    assert back.classes == frame.classes and back.to_message(header) == message


def test_a_tracked_rows_ids_travel_as_detection2d_ids():
    message = FRAMES["boxes"].to_message(Header())
    assert [item.id for item in message.detections] == ["7", ""]  # the second row has no confirmed track
    untracked = FrameResult(WIDTH, HEIGHT, dataclasses.replace(_boxes(), track_ids=None)).to_message(Header())
    assert [item.id for item in untracked.detections] == ["0", "1"]  # ranks
