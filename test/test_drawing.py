"""What the result parts draw (results/drawing.py and the parts' ``draw``), read from the drawn pixels, not against a
reference picture: a colour per class (per track when tracked), labels on a filled background inside the image and
clear of each other, masks outlined in their instance's colour, a depth map's colour bar with its range, a flat map
in one colour."""

from __future__ import annotations

import cv2
import numpy as np

from vision_factory.results.boxes import Boxes
from vision_factory.results.dense import DenseMap
from vision_factory.results.drawing import place_labels
from vision_factory.results.frame import FrameResult
from vision_factory.results.masks import InstanceMask, Masks

GREY = 90
HEIGHT, WIDTH = 240, 320


def _grey() -> np.ndarray:
    return np.full((HEIGHT, WIDTH, 3), GREY, np.uint8)


def _boxes(xyxy, class_ids, labels, track_ids=None) -> Boxes:
    count = len(xyxy)
    tracks = None if track_ids is None else np.asarray(track_ids, np.int64)
    return Boxes(
        np.asarray(xyxy, np.float64), np.linspace(0.9, 0.5, count), np.asarray(class_ids, np.int64), tuple(labels),
        track_ids=tracks,
    )  # fmt: skip


def _edge_colour(image: np.ndarray, box) -> tuple[int, ...]:
    """The colour of a box's left edge half-way down (clear of its label, which sits at its top or above it)."""
    x1, y1, _, y2 = box
    return tuple(int(c) for c in image[(y1 + y2) // 2, x1])


def _intersect(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_boxes_of_two_classes_are_drawn_in_two_colours_and_two_tracks_of_one_class_too():
    """Untracked: a box's edge is its class's colour, two classes two colours, one class one; tracked: its track's,
    two tracks of one class two colours."""
    xyxy = [(20, 60, 100, 200), (140, 60, 220, 200), (240, 60, 310, 200)]
    image = _grey()
    _boxes(xyxy, [0, 2, 0], ["person", "car", "person"]).draw(image)
    person, car, other_person = (_edge_colour(image, box) for box in xyxy)
    assert person != car and person == other_person
    assert person != (GREY,) * 3 and car != (GREY,) * 3  # the edges are drawn
    tracked = _grey()
    _boxes(xyxy, [0, 0, 0], ["person"] * 3, track_ids=[4, 7, 4]).draw(tracked)
    first, second, third = (_edge_colour(tracked, box) for box in xyxy)
    assert first != second and first == third


def test_a_label_of_a_box_at_the_top_edge_has_a_filled_background_inside_the_image():
    """A box touching the image's top: its label rectangle lies inside the image, and the drawn image has that
    rectangle filled with the box's colour (its text in black or white over it)."""
    box = (40, 0, 200, 120)
    boxes = _boxes([box], [0], ["person"])
    image = _grey()
    boxes.draw(image)
    (rect,) = place_labels(boxes.xyxy.tolist(), ["person 0.90"], image.shape)
    x1, y1, x2, y2 = rect
    assert 0 <= x1 < x2 <= WIDTH and 0 <= y1 < y2 <= HEIGHT and (x2 - x1) > 40 and (y2 - y1) > 10
    colour = np.array(_edge_colour(image, box), np.uint8)
    inside = image[y1:y2, x1:x2]
    filled = np.all(inside == colour, axis=2).mean()
    assert filled > 0.6, f"only {filled:.0%} of the label's rectangle is the box's colour"
    text = np.all(inside == 0, axis=2) | np.all(inside == 255, axis=2)
    assert text.any()  # its text, over the background


def test_labels_of_overlapping_boxes_do_not_cover_each_other():
    """Boxes whose tops are near each other (and one at the image's top): every label inside the image, no two
    intersecting; drawn, each label's background shows its own box's colour."""
    xyxy = [(30, 2, 170, 120), (40, 6, 180, 130), (35, 10, 160, 110), (250, 200, 318, 238)]
    texts = ["person 0.90", "car 0.80", "dog 0.70", "bicycle 0.60"]
    rects = place_labels(xyxy, texts, (HEIGHT, WIDTH, 3))
    for index, rect in enumerate(rects):
        assert 0 <= rect[0] < rect[2] <= WIDTH and 0 <= rect[1] < rect[3] <= HEIGHT, rect
        for other in rects[:index]:
            assert not _intersect(rect, other), (rect, other)
    boxes = _boxes(xyxy, [0, 2, 16, 1], ["person", "car", "dog", "bicycle"])
    image = _grey()
    boxes.draw(image)
    drawn = [f"{label} {score:.2f}" for label, score in zip(boxes.labels, boxes.scores)]  # as Boxes.draw writes them
    for index, (x1, y1, x2, y2) in enumerate(place_labels(xyxy, drawn, image.shape)):
        colour = np.array(boxes.colour(index), np.uint8)
        assert np.all(image[y1:y2, x1:x2] == colour, axis=2).mean() > 0.5, index


def _disc_mask() -> InstanceMask:
    bits = np.zeros((100, 120), bool)
    cv2.circle(bits.view(np.uint8), (60, 50), 40, 1, -1)
    return InstanceMask(left=80, top=60, bits=bits, width=WIDTH, height=HEIGHT)


def test_a_mask_is_outlined_in_its_instance_colour_at_full_strength_and_filled_see_through():
    """The mask's boundary pixels are its row's colour exactly; its inside is a blend of that colour and the frame."""
    mask = _disc_mask()
    boxes = _boxes([(80, 60, 200, 160)], [2], ["car"])
    frame = FrameResult(WIDTH, HEIGHT, boxes=boxes, masks=Masks([mask]))
    image = _grey()
    frame.masks.draw(image, frame)
    colour = np.array(boxes.colour(0), np.uint8)
    bits = mask.bits.astype(np.uint8)
    boundary = (bits - cv2.erode(bits, np.ones((3, 3), np.uint8))).astype(bool)
    region = image[60:160, 80:200]
    assert np.all(region[boundary] == colour, axis=1).mean() > 0.95
    centre = region[50, 60].astype(int)
    assert not np.array_equal(centre, colour) and not np.array_equal(centre, [GREY] * 3)


def _turbo_level(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each pixel's nearest level (0..255) of OpenCV's TURBO colour map, and its distance to that level's colour."""
    turbo = cv2.applyColorMap(np.arange(256, dtype=np.uint8).reshape(-1, 1), cv2.COLORMAP_TURBO)[:, 0].astype(int)
    distances = np.abs(pixels.astype(int)[:, None, :] - turbo[None, :, :]).sum(axis=2)
    return distances.argmin(axis=1), distances.min(axis=1)


def _colour_bar_column(picture: np.ndarray) -> np.ndarray | None:
    """The TURBO levels of the first column holding a colour bar: a run of 100+ pixels, each a TURBO colour, whose
    levels fall from top to bottom over most of the map's range."""
    for x in range(picture.shape[1]):
        levels, distances = _turbo_level(picture[:, x])
        run = levels[distances <= 6]
        if len(run) >= 100 and np.all(np.diff(run) <= 0) and run[0] - run[-1] > 200:
            return run
    return None


def test_a_depth_map_has_a_colour_bar_with_its_range_and_relative_depth_says_near_and_far():
    """A map in metres (1..9 m across its width: each of its own columns one colour) drawn with a column of TURBO
    colours falling top to bottom beside it, its legend the range in metres; relative depth's legend near/far."""
    values = np.tile(np.linspace(1.0, 9.0, 200, dtype=np.float32), (150, 1))
    metric = DenseMap(values, "m", "depth")
    picture = metric.draw()
    assert picture.shape[0] == 150 and picture.shape[1] > 200
    assert _colour_bar_column(picture) is not None
    top, bottom, title, flat = metric.legend(1.0, 9.0, False, True)
    assert (top, bottom, "(m)" in title, flat) == ("9", "1", True, False)
    relative = DenseMap(values, "relative", "depth")
    assert _colour_bar_column(relative.draw()) is not None
    top, bottom, title, _ = relative.legend(1.0, 9.0, False, True)
    assert (top, bottom, title) == ("near", "far", "relative")
    # into a frame-sized image (FrameResult.draw): the bar over the map's right edge, the image's size kept
    image = np.zeros((150, 200, 3), np.uint8)
    assert metric.draw(image) is image and _colour_bar_column(image) is not None


def test_a_flat_map_is_drawn_in_one_colour():
    """A map of 10 m everywhere, with float32 noise a millionth of it: one colour, not its noise stretched over
    the colour map; its legend says flat."""
    rng = np.random.default_rng(0)
    values = (10.0 + rng.uniform(-1e-5, 1e-5, (120, 160))).astype(np.float32)
    picture = DenseMap(values, "m", "depth").draw()
    assert len(np.unique(picture[:, :160].reshape(-1, 3), axis=0)) == 1
    assert _colour_bar_column(picture) is None  # a flat map's bar is one colour too
    low, high = float(values.min()), float(values.max())
    top, bottom, _, flat = DenseMap(values, "m", "depth").legend(low, high, True, True)
    assert (top, bottom, flat) == ("10", "flat", True)
