"""verify's pictures (tools/verify_pictures.py), read from the drawn pixels, not against a reference picture: the
frame of the largest disagreement chosen (on a pass the one with most answers, not frame 0), the model's answers
solid in their class's colour and the node's dashed white on black over them, both masks outlined, the maps beside
the frame, and on a failure the model's and the node's answers side by side."""

from __future__ import annotations

from dataclasses import replace

import cv2
import numpy as np

from vision_factory.results.boxes import Boxes
from vision_factory.results.colours import class_colour
from vision_factory.results.dense import DenseMap
from vision_factory.results.frame import FrameResult
from vision_factory.results.masks import InstanceMask, Masks
from vision_factory.tools.verify_frames import FrameCheck
from vision_factory.tools.verify_pictures import BAND, MIN_WIDTH, largest_disagreement, side_by_side, worst_picture

HEIGHT, WIDTH = 240, 320  # drawn twice as large: MIN_WIDTH 640
GREY = 90


def _check(frame, answered=True, deviation=0.0, unpaired=0, count=0, score=0.0):
    return FrameCheck(frame, answered, deviation, score, unpaired, count, count)


def test_the_largest_disagreement_comes_first_and_on_a_pass_the_frame_with_most_answers():
    passed = [_check(0, count=0), _check(1, count=3), _check(2, count=5), _check(3, count=5)]
    assert [check.frame for check in largest_disagreement(passed)] == [2, 3, 1, 0]  # not frame 0, empty
    differing = [*passed, _check(4, deviation=0.2, count=1), _check(5, deviation=0.7, count=1)]
    assert [check.frame for check in largest_disagreement(differing)][:2] == [5, 4]
    unpaired = [*differing, _check(6, unpaired=1, count=2), _check(7, answered=False, count=2)]
    assert [check.frame for check in largest_disagreement(unpaired)][:3] == [7, 6, 5]


def _grey() -> np.ndarray:
    return np.full((HEIGHT, WIDTH, 3), GREY, np.uint8)


def _detection(box, mask_left) -> FrameResult:
    """One square (class 1) at ``box``, its mask a rectangle inside it from column ``mask_left``."""
    bits = np.ones((60, 50), bool)
    boxes = Boxes(np.asarray([box], np.float64), np.asarray([0.9]), np.asarray([1]), ("square",))
    return FrameResult(WIDTH, HEIGHT, boxes, masks=Masks([InstanceMask(mask_left, 60, bits, WIDTH, HEIGHT)]))


MODEL_BOX, NODE_BOX = (40, 40, 140, 160), (46, 44, 146, 164)


def _near(pixels: np.ndarray, colour) -> np.ndarray:
    return np.abs(pixels.astype(int) - np.array(colour)).max(axis=-1) <= 2


def test_the_model_is_drawn_solid_in_its_class_colour_and_the_node_dashed_over_it_masks_outlined():
    model, node = _detection(MODEL_BOX, 60), _detection(NODE_BOX, 70)
    node = replace(node, width=0, height=0)  # as verify reads a node's answer from its message: no frame size
    picture = worst_picture(_grey(), node, model, "frame 3")
    assert picture.shape[1] == MIN_WIDTH and picture.shape[0] == 2 * HEIGHT + BAND  # the legend below
    colour = class_colour(1)
    # The model's box: its left edge (x 40, drawn at 80) solid in its class's colour, below its label.
    assert _near(picture[200:300, 80], colour).all()
    # The node's box: its left edge (x 46, at 92) in white and black dashes, several of each.
    edge = picture[200:300, 92]
    white, black = _near(edge, (255, 255, 255)), _near(edge, (0, 0, 0))
    assert (white | black).all() and white.sum() > 20 and black.sum() > 20
    assert np.count_nonzero(np.diff(white.astype(int))) >= 6
    # Across the masks half-way down (y 90, at 180): the model's outline in its colour at its left column (60, at
    # 120), the node's outline in white at its own (70, at 140), the model's fill between them.
    row = picture[180]
    assert _near(row[118:123], colour).any() and not _near(row[118:123], (255, 255, 255)).any()
    assert _near(row[138:143], (255, 255, 255)).any()
    fill = row[128:134].astype(int)
    assert (fill != GREY).any(axis=1).all()  # blended with the class's colour, not the bare frame


def test_a_frame_the_node_did_not_answer_shows_the_model_alone():
    model = _detection(MODEL_BOX, 60)
    picture = worst_picture(_grey(), None, model, "frame 0")
    assert _near(picture[200:300, 80], class_colour(1)).all()
    assert not _near(picture[: 2 * HEIGHT], (255, 255, 255)).any()  # no white dash of a node anywhere on the frame


def _depth(offset: float) -> FrameResult:
    values = np.tile(np.linspace(1.0, 5.0, WIDTH, dtype=np.float32), (HEIGHT, 1)) + offset
    return FrameResult(WIDTH, HEIGHT, dense=DenseMap(values, "m", "depth"))


def test_maps_are_drawn_beside_the_frame_model_then_node_each_with_its_colour_bar():
    model, node = _depth(0.0), _depth(0.5)
    picture = worst_picture(_grey(), node, model, "frame 1")
    height = 2 * HEIGHT
    for index, result in enumerate((model, node)):
        drawn = result.dense.draw()  # the map with its colour bar (results/dense.py; test_drawing reads its bar)
        width = round(drawn.shape[1] * height / drawn.shape[0])
        left = MIN_WIDTH + 4 + index * (width + 4)
        expected = cv2.resize(drawn, (width, height), interpolation=cv2.INTER_NEAREST)
        assert np.array_equal(picture[:height, left : left + width], expected), f"map {index}"
    assert picture.shape[1] == MIN_WIDTH + 2 * (width + 4) + 4


def test_a_failure_is_drawn_side_by_side_model_left_node_right():
    model, node = _detection(MODEL_BOX, 60), _detection((160, 40, 260, 160), 180)
    picture = side_by_side(_grey(), node, model, "frame 2")
    panel = MIN_WIDTH + 4
    assert picture.shape[1] == 2 * panel and picture.shape[0] == BAND + 2 * HEIGHT + BAND
    colour = class_colour(1)
    top = BAND  # each panel's title above its frame
    left, right = picture[:, :panel], picture[:, panel:]
    # Each side in the same (solid) style: the model's box on the left at x 40 (80), the node's on the right at
    # x 160 (320), and neither where only the other has one.
    assert (
        _near(left[top + 200 : top + 300, 80], colour).all()
        and not _near(left[top + 200 : top + 300, 320], colour).any()
    )
    assert (
        _near(right[top + 200 : top + 300, 320], colour).all()
        and not _near(right[top + 200 : top + 300, 80], colour).any()
    )
