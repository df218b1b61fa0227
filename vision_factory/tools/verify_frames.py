"""verify's frame by frame comparison: the node's answers to a frame against the model's offline ones, paired by
class (``match``), within the tolerance of the backend (``TOLERANCES``), and when they differ the likely cause,
tested where it can be (the model on colour-swapped frames, a consistent scale and shift, keypoints with left and
right exchanged)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..results import Item
from ..text import untrusted


@dataclass(frozen=True)
class Tolerance:
    px: float  # boxes, keypoints, ball positions, in image pixels
    score: float  # detection and keypoint scores


# How far a node may be from the model offline: ONNX Runtime on the CPU computes the same numbers in both, any
# other backend (GPU kernels, OpenVINO, TensorRT, reduced precision) may round differently: sub-pixel.
TOLERANCES = {"onnx:cpu": Tolerance(px=1e-3, score=1e-4)}
OTHER_BACKENDS = Tolerance(px=0.5, score=0.02)
# A paired detection's mask (as the node's ~/masks label image shows it) must overlap the model's at least so.
MASK_IOU = 0.9


def tolerance_for(backend: str) -> Tolerance:
    return TOLERANCES.get(backend.lower(), OTHER_BACKENDS)


@dataclass
class Answer:
    received_ns: int
    stamp: tuple[int, int]
    frame_id: str
    items: list[Item]


@dataclass
class FrameCheck:
    frame: int
    answered: bool
    deviation_px: float  # largest coordinate difference of the paired items
    score_deviation: float
    unpaired: int  # items of one side without a partner of the same class on the other
    node_count: int
    model_count: int
    keypoints: int = 0  # keypoints compared (those of the paired items)
    masks: int = 0  # instance masks compared (those of the paired items)
    mask_iou_min: float = 1.0  # the smallest IoU of a paired item's mask with the model's

    def within(self, tolerance: Tolerance) -> bool:
        return self.unpaired == 0 and self.deviation_px <= tolerance.px and self.score_deviation <= tolerance.score

    def severity(self) -> float:
        return float("inf") if self.unpaired else self.deviation_px


def distance(a: Item, b: Item) -> float:
    if a.points.shape != b.points.shape:
        return float("inf")
    return float(np.max(np.abs(a.points - b.points))) if a.points.size else 0.0


def compare(index: int, answer: Answer | None, expected: list[Item]) -> FrameCheck:
    if answer is None:
        return FrameCheck(index, False, 0.0, 0.0, 0, 0, len(expected))
    pairs, unpaired = match(answer.items, expected)
    deviation = max((distance(a, b) for a, b in pairs), default=0.0)
    scores = [abs(a.score - b.score) for a, b in pairs]
    scores += [float(np.max(np.abs(a.point_scores - b.point_scores))) for a, b in pairs if a.point_scores.size]
    keypoints = sum(b.point_scores.size for _, b in pairs)
    ious = [_mask_iou(a.mask, b.mask) for a, b in pairs if b.mask is not None]
    return FrameCheck(
        index,
        True,
        deviation,
        max(scores, default=0.0),
        unpaired,
        len(answer.items),
        len(expected),
        keypoints,
        len(ious),
        min(ious, default=1.0),
    )


def _mask_iou(node: Any, model: Any) -> float:
    """A paired detection's mask IoU; 0 when the node gave it none."""
    from ..results.masks import mask_iou

    return 0.0 if node is None else mask_iou(node, model)


def match(node: list[Item], model: list[Item]) -> tuple[list[tuple[Item, Item]], int]:
    """Node items paired with the model's of the same class (Hungarian on the largest coordinate difference);
    the count of items left without a partner on either side."""
    from scipy.optimize import linear_sum_assignment

    pairs = []
    for name in {item.name for item in node} | {item.name for item in model}:
        mine = [item for item in node if item.name == name]
        theirs = [item for item in model if item.name == name]
        if not mine or not theirs:
            continue
        cost = np.array([[distance(a, b) for b in theirs] for a in mine])
        rows, cols = linear_sum_assignment(np.where(np.isfinite(cost), cost, 1e12))
        pairs += [(mine[r], theirs[c]) for r, c in zip(rows, cols) if np.isfinite(cost[r, c])]
    return pairs, len(node) + len(model) - 2 * len(pairs)


def likely_cause(bad, paired, expected, tolerance, images, run_offline, other_classes: bool) -> str:
    """The likeliest cause of the differences, tested where it can be."""
    if other_classes:
        return "a different model: the node names classes this model does not have (check its model_path)"
    # The model on the colour-swapped frames: does it give the node's answers?
    frames = sorted({check.frame for check in bad})
    if images and images[0].ndim == 3:
        swapped = run_offline([image[..., ::-1].copy() for image in images])
        again = [compare(index, paired[index], swapped[index]) for index in frames]
        if all(check.within(tolerance) for check in again) or _much_closer(again, bad):
            return (
                "is the node given the image in the wrong colour order? The model on the RGB/BGR-swapped frames "
                "gives the node's answers: convert the image as its encoding says (bgr8 / rgb8) before the model"
            )
    fit = _consistent_fit(bad, paired, expected, images[0].shape[:2]) if images else None
    if fit is not None:
        (sx, tx), (sy, ty) = fit
        return (
            f"the node's positions are the model's scaled by ({sx:.3f}, {sy:.3f}) and shifted by ({tx:.1f}, "
            f"{ty:.1f}) px on every frame — a different letterbox or resize (padding, scale or stretch) than the "
            "model's pre-processing, or its inverse mapping back to the image"
        )
    paired_share = sum(c.model_count + c.node_count - c.unpaired for c in bad) / max(
        1, sum(c.model_count + c.node_count for c in bad)
    )
    if paired_share < 0.5:
        return (
            "the node and the model disagree on most answers — a different model (check model_path and its "
            "parameters, e.g. confidence_threshold, classes), or the image reaches the model very differently"
        )
    largest = max(check.deviation_px for check in bad)
    if largest <= 2.0:
        return (
            f"small differences only — another backend or precision than {tolerance.px:g} px allows (give the node's "
            "--backend), or slightly different pre-processing (interpolation, normalisation)"
        )
    return "the node's pre-processing or parameters differ from the model's (compare its parameters with -p)"


def keypoint_cause(bad, paired, expected, tolerance: Tolerance, names: list[str]) -> str | None:
    """When every answer is paired and the boxes and their scores agree but keypoints do not: which keypoint
    differs most, and whether the node's keypoints are the model's with left and right exchanged (tested: the
    node's reordered by the names' left_/right_ pairs). None when the boxes disagree too."""
    pairs = []
    for check in bad:
        if check.unpaired:
            return None
        pairs += match(paired[check.frame].items, expected[check.frame])[0]
    if not pairs or any(a.points.size <= 4 for a, _ in pairs):
        return None
    if any(_box_deviation(a, b) > tolerance.px or abs(a.score - b.score) > tolerance.score for a, b in pairs):
        return None
    worst = max(pairs, key=lambda pair: np.max(np.abs(pair[0].points[4:] - pair[1].points[4:])))
    difference = np.abs(worst[0].points[4:] - worst[1].points[4:]).reshape(-1, 2).max(axis=1)
    index = int(np.argmax(difference))
    name = untrusted(names[index], 40) if index < len(names) else f"keypoint {index}"
    mirror = _left_right(names, len(difference))
    if mirror is not None and all(
        distance(_reordered(a, mirror), b) <= tolerance.px
        and float(np.max(np.abs(a.point_scores[mirror] - b.point_scores), initial=0.0)) <= tolerance.score
        for a, b in pairs
    ):
        return (
            f"the boxes agree, the keypoints do not ({name} differs by {difference[index]:.1f} px): the node's "
            "keypoints are the model's with left and right exchanged (its left_* published as right_*) — it "
            "reorders them (a flip index, or another keypoint order than the model's): publish them in the "
            "model's order"
        )
    return (
        f"the boxes agree, the keypoints do not ({name} differs by {difference[index]:.1f} px) — the node decodes "
        "the keypoints differently from the model (their order, or their mapping back to the image)"
    )


def _box_deviation(a: Item, b: Item) -> float:
    return float(np.max(np.abs(a.points[:4] - b.points[:4])))


def _left_right(names: list[str], count: int) -> np.ndarray | None:
    """The keypoint order with each left_X and right_X exchanged; None without such pairs."""
    if len(names) != count:
        return None
    index = {name: i for i, name in enumerate(names)}
    order = np.arange(count)
    for i, name in enumerate(names):
        side, _, part = name.partition("_")
        other = {"left": "right", "right": "left"}.get(side)
        if other and f"{other}_{part}" in index:
            order[i] = index[f"{other}_{part}"]
    return order if (order != np.arange(count)).any() else None


def _reordered(item: Item, order: np.ndarray) -> Item:
    keypoints = item.points[4:].reshape(-1, 2)[order].ravel()
    return Item(item.name, item.score, np.concatenate([item.points[:4], keypoints]), item.point_scores[order])


def _much_closer(again: list[FrameCheck], before: list[FrameCheck]) -> bool:
    """The swapped frames explain the node's answers far better: every answer paired, within a tenth of the
    difference there was."""
    if any(check.unpaired for check in again):
        return False
    return max(check.deviation_px for check in again) <= 0.1 * max(check.deviation_px for check in before)


def _consistent_fit(bad: list[FrameCheck], paired: dict[int, Answer], expected: list[list[Item]], size):
    """Per axis, node = scale * model + shift for most paired positions of the failing frames (a robust fit:
    answers of a model fed a distorted image are noisy, some pairs wrong, boxes clipped at the image's border),
    when that is not the identity; else None. ``size``: the frames' (height, width)."""
    axes: list[list[tuple[float, float]]] = [[], []]
    for check in bad:
        for a, b in match(paired[check.frame].items, expected[check.frame])[0]:
            for axis in (0, 1):
                limit = size[1 - axis]
                for model, node in zip(b.points[axis::2], a.points[axis::2]):
                    if 0.5 < node < limit - 0.5 and 0.5 < model < limit - 0.5:  # clipped coordinates say nothing
                        axes[axis].append((float(model), float(node)))
    fits = [_robust_line(np.array(points), 0.04 * size[1 - axis]) for axis, points in enumerate(axes)]
    if any(fit is None for fit in fits):
        return None
    if all(abs(scale - 1) < 0.02 and abs(shift) < 2 for scale, shift in fits):
        return None
    return fits[0], fits[1]


def _robust_line(points: np.ndarray, within: float) -> tuple[float, float] | None:
    """(scale, shift) of node = scale * model + shift that most points follow within ``within`` px (each line
    through two points tried, then refit on its inliers), when at least 4 and 60 % of them do; else None."""
    if len(points) < 4:
        return None
    best = np.zeros(len(points), bool)
    for i in range(len(points)):
        for j in range(i + 1, len(points)):
            (x1, y1), (x2, y2) = points[i], points[j]
            if abs(x2 - x1) < 1e-6:
                continue
            scale = (y2 - y1) / (x2 - x1)
            inliers = np.abs(scale * points[:, 0] + (y1 - scale * x1) - points[:, 1]) <= within
            if inliers.sum() > best.sum():
                best = inliers
    if best.sum() < max(4, 0.6 * len(points)):
        return None
    model, node = points[best].T
    scale, shift = np.polyfit(model, node, 1)
    return float(scale), float(shift)
