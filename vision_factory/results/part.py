"""What every part of a frame's result is (``Part``), and how two results of one frame are compared (``compare``).

A part is one typed piece of a frame's result over arrays (results/boxes.py's Boxes, keypoints.py's Keypoints,
masks.py's Masks, ball.py's Ball, dense.py's DenseMap, text.py's Text), held by the frame's FrameResult
(results/frame.py). A part of rows (boxes, keypoints, masks: one row per detection) is indexed by rows as its
siblings are; a part of the frame (the ball, a map, a text) is one thing.

Comparison: each part says what of it is compared (``rows``: per row its label, its positions in pixels, its
score and its points' scores), the rows of two results are paired within a label (the Hungarian assignment on the
largest position difference, as verify pairs a node's answers with the model's; or greedily by score with an IoU
of the boxes at least ``min_iou``, as compare pairs two configurations' detections), and ``Difference`` says how
far the pairs are apart and how many rows found no partner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Part(Protocol):
    """One typed part of a frame's result. ``frame``: the FrameResult it belongs to (its size and its sibling
    parts: the part that owns a message or a record reads its siblings from it, as Boxes writes the keypoints into
    its Detection2DArray)."""

    key: ClassVar[str]  # its field of FrameResult: boxes, keypoints, masks, ball, dense, text

    def record(self) -> Any:
        """Its file record: a list of one dict per row (keys of its own; the frame merges its parts' rows), or a
        dict of the frame's (e.g. a map's kind, unit and range)."""

    def to_message(self, header: Any, frame: Any) -> Any:
        """Its ROS message, stamped with ``header``; None where it travels in a sibling's (keypoints in boxes')."""

    def rows(self) -> Compared:
        """What of it is compared (``compare``)."""

    def draw(self, image: np.ndarray, frame: Any) -> np.ndarray:
        """``image`` (BGR, the frame's size) with the part drawn on it, in place."""

    def describe(self) -> str:
        """A few words for a line of text about the frame (``predict``'s); '' where it says nothing."""


def same(a: Any, b: Any) -> bool:
    """Whether two values are equal, arrays (NaN included) and dataclasses (field by field) too: the parts' ``==``."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f" == b.dtype.kind))
    if is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b)


class Equal:
    """Value equality for a part or a result over arrays (``same``); such a value has no hash."""

    def __eq__(self, other: object) -> bool:
        return same(self, other)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Tolerance:
    px: float  # boxes, keypoints, ball positions, map values: in image pixels (a map's: its unit)
    score: float  # detection and keypoint scores


@dataclass
class Compared:
    """What is compared of a part's rows: each row's label (rows pair within a label), its positions (px; rows
    of unequal lengths never pair: e.g. a ball seen and one not), its score and its points' scores ([N, 0]
    without), its track ID (-1 none; None: not tracked), its instance mask (None: none) and its box (xyxy, for
    pairing by IoU; None: not a box)."""

    labels: list[str]
    positions: list[np.ndarray]  # per row, [P]
    scores: np.ndarray  # [N]
    point_scores: list[np.ndarray] = field(default_factory=list)  # per row, [K]
    tracks: np.ndarray | None = None
    masks: list[Any] | None = None
    boxes: np.ndarray | None = None  # [N, 4]

    def __len__(self) -> int:
        return len(self.labels)

    def joined(self, other: Compared) -> Compared:
        """This part's rows with a sibling's of the same rows (keypoints after boxes): positions and point scores
        appended, its masks, tracks and boxes where this one has none."""
        positions = [np.concatenate([a, b]) for a, b in zip(self.positions, other.positions)]
        point_scores = [np.concatenate([a, b]) for a, b in zip(self.point_scores, other.point_scores)]
        masks = self.masks if self.masks is not None else other.masks
        tracks = self.tracks if self.tracks is not None else other.tracks
        boxes = self.boxes if self.boxes is not None else other.boxes
        return Compared(self.labels, positions, self.scores, point_scores, tracks, masks, boxes)


@dataclass
class Difference:
    """How two results of one frame differ (a's rows against b's): the pairs (row of a, row of b), the rows left
    without a partner, and over the pairs the largest position difference (px), score difference, and with
    keypoints the largest keypoint distance (px), with masks the smallest mask IoU."""

    pairs: list[tuple[int, int]]
    unpaired: int
    count_a: int
    count_b: int
    deviation_px: float = 0.0  # the largest difference of a paired position (box corner, keypoint, ball, value)
    box_px: float = 0.0  # ... of a paired box's x, y, width or height
    score_deviation: float = 0.0  # the largest difference of a paired score or point (keypoint) score
    detection_score: float = 0.0  # ... of a paired score alone
    keypoints: int = 0  # keypoints compared (those of the pairs)
    keypoint_px: float = 0.0  # the largest distance of a paired keypoint
    masks: int = 0  # masks compared (the pairs' where b has one)
    mask_iou_min: float = 1.0

    def within(self, tolerance: Tolerance) -> bool:
        return self.unpaired == 0 and self.deviation_px <= tolerance.px and self.score_deviation <= tolerance.score

    @property
    def only_in_a(self) -> int:
        return self.count_a - len(self.pairs)

    @property
    def only_in_b(self) -> int:
        return self.count_b - len(self.pairs)


def _point_scores(rows: Compared, index: int) -> np.ndarray:
    return rows.point_scores[index] if rows.point_scores else np.zeros(0)


def _xywh(box: np.ndarray) -> np.ndarray:
    """A box's x, y, width and height: compare reports its largest difference (a shift or a resize alike)."""
    return np.concatenate([box[:2], box[2:] - box[:2]])


def largest_difference(a: np.ndarray, b: np.ndarray) -> float:
    """The largest coordinate difference of two rows' positions; inf when their lengths differ (never paired)."""
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def pair_nearest(a: Compared, b: Compared) -> list[tuple[int, int]]:
    """a's rows paired with b's of the same label: the Hungarian assignment on the largest position difference
    (rows of unequal lengths never pair)."""
    from scipy.optimize import linear_sum_assignment

    pairs = []
    for label in {*a.labels} | {*b.labels}:
        mine = [i for i, name in enumerate(a.labels) if name == label]
        theirs = [j for j, name in enumerate(b.labels) if name == label]
        if not mine or not theirs:
            continue
        cost = np.array([[largest_difference(a.positions[i], b.positions[j]) for j in theirs] for i in mine])
        rows, columns = linear_sum_assignment(np.where(np.isfinite(cost), cost, 1e12))
        pairs += [(mine[r], theirs[c]) for r, c in zip(rows, columns) if np.isfinite(cost[r, c])]
    return sorted(pairs)


def pair_by_iou(a: Compared, b: Compared, min_iou: float, box_iou: Callable) -> list[tuple[int, int]]:
    """a's rows, highest score first, each paired with the free row of b of its label whose box overlaps it most,
    when that IoU is at least ``min_iou`` (compare's matching of two configurations' detections)."""
    free = {label: [j for j, name in enumerate(b.labels) if name == label] for label in {*b.labels}}
    pairs = []
    for i in np.argsort(-np.asarray(a.scores), kind="stable"):
        candidates = free.get(a.labels[i], [])
        if not candidates:
            continue
        ious = box_iou(a.boxes[i], b.boxes[candidates])
        best = int(np.argmax(ious))
        if ious[best] >= min_iou:
            pairs.append((int(i), candidates.pop(best)))
    return pairs


def compare(a: Compared, b: Compared, pairs: Sequence[tuple[int, int]], mask_iou: Callable | None = None) -> Difference:
    """How far the ``pairs`` of a's and b's rows are apart (``Difference``); a mask pair's IoU by ``mask_iou``."""
    found = Difference(list(pairs), len(a) + len(b) - 2 * len(pairs), len(a), len(b))
    for i, j in pairs:
        found.deviation_px = max(found.deviation_px, largest_difference(a.positions[i], b.positions[j]))
        found.detection_score = max(found.detection_score, abs(float(a.scores[i]) - float(b.scores[j])))
        found.score_deviation = max(found.score_deviation, found.detection_score)
        mine, theirs = _point_scores(a, i), _point_scores(b, j)
        if mine.size:
            scores = np.abs(mine - theirs) if mine.shape == theirs.shape else np.array([np.inf])
            found.score_deviation = max(found.score_deviation, float(np.max(scores)))
        if a.boxes is not None and b.boxes is not None:
            found.box_px = max(found.box_px, float(np.max(np.abs(_xywh(a.boxes[i]) - _xywh(b.boxes[j])))))
        found.keypoints += theirs.size
        if theirs.size and a.positions[i].shape == b.positions[j].shape:
            moved = (a.positions[i][-2 * theirs.size :] - b.positions[j][-2 * theirs.size :]).reshape(-1, 2)
            found.keypoint_px = max(found.keypoint_px, float(np.hypot(moved[:, 0], moved[:, 1]).max()))
        if b.masks is not None and b.masks[j] is not None and mask_iou is not None:
            node = a.masks[i] if a.masks is not None else None
            found.masks += 1
            found.mask_iou_min = min(found.mask_iou_min, 0.0 if node is None else mask_iou(node, b.masks[j]))
    return found
