"""verify's frame by frame comparison: the node's answers to a frame against the model's offline ones, paired by
class (FrameResult.compare: results/part.py), within the tolerance of the backend (``TOLERANCES``), and when they
differ the likely cause, tested where it can be (the model on colour-swapped frames, a consistent scale and shift,
keypoints with left and right exchanged)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..results.frame import FrameResult
from ..results.part import Compared, Tolerance, largest_difference, pair_nearest
from ..text import untrusted

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
    result: FrameResult


@dataclass
class FrameCheck:
    frame: int
    answered: bool
    deviation_px: float  # largest coordinate difference of the paired rows
    score_deviation: float
    unpaired: int  # rows of one side without a partner of the same class on the other
    node_count: int
    model_count: int
    keypoints: int = 0  # keypoints compared (those of the paired rows)
    masks: int = 0  # instance masks compared (those of the paired rows)
    mask_iou_min: float = 1.0  # the smallest IoU of a paired row's mask with the model's

    def within(self, tolerance: Tolerance) -> bool:
        return self.unpaired == 0 and self.deviation_px <= tolerance.px and self.score_deviation <= tolerance.score

    def severity(self) -> float:
        return float("inf") if self.unpaired else self.deviation_px


def compare(index: int, answer: Answer | None, expected: FrameResult) -> FrameCheck:
    if answer is None:
        return FrameCheck(index, False, 0.0, 0.0, 0, 0, len(expected.compared()))
    found = answer.result.compare(expected)
    return FrameCheck(
        index,
        True,
        found.deviation_px,
        found.score_deviation,
        found.unpaired,
        found.count_a,
        found.count_b,
        found.keypoints,
        found.masks,
        found.mask_iou_min,
    )


def match(node: FrameResult, model: FrameResult) -> tuple[Compared, Compared, list[tuple[int, int]]]:
    """What is compared of the node's result and the model's, and their rows paired (FrameResult.compare's)."""
    a, b = node.compared(), model.compared()
    return a, b, pair_nearest(a, b)


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
    pairs = []  # (node's positions, model's, node's score, model's, node's keypoint scores, model's)
    for check in bad:
        if check.unpaired:
            return None
        a, b, found = match(paired[check.frame].result, expected[check.frame])
        pairs += [
            (a.positions[i], b.positions[j], a.scores[i], b.scores[j], a.point_scores[i], b.point_scores[j])
            for i, j in found
        ]
    if not pairs or any(node.size <= 4 for node, *_ in pairs):
        return None
    boxes = [float(np.max(np.abs(node[:4] - model[:4]))) for node, model, *_ in pairs]
    if any(box > tolerance.px or abs(a - b) > tolerance.score for box, (_, _, a, b, _, _) in zip(boxes, pairs)):
        return None
    worst = max(pairs, key=lambda pair: np.max(np.abs(pair[0][4:] - pair[1][4:])))
    difference = np.abs(worst[0][4:] - worst[1][4:]).reshape(-1, 2).max(axis=1)
    index = int(np.argmax(difference))
    name = untrusted(names[index], 40) if index < len(names) else f"keypoint {index}"
    mirror = _left_right(names, len(difference))
    if mirror is not None and all(
        largest_difference(_reordered(node, mirror), model) <= tolerance.px
        and float(np.max(np.abs(node_scores[mirror] - model_scores), initial=0.0)) <= tolerance.score
        for node, model, _, _, node_scores, model_scores in pairs
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


def _reordered(positions: np.ndarray, order: np.ndarray) -> np.ndarray:
    """A row's positions (box corners, then keypoints x, y) with its keypoints in ``order``."""
    return np.concatenate([positions[:4], positions[4:].reshape(-1, 2)[order].ravel()])


def _much_closer(again: list[FrameCheck], before: list[FrameCheck]) -> bool:
    """The swapped frames explain the node's answers far better: every answer paired, within a tenth of the
    difference there was."""
    if any(check.unpaired for check in again):
        return False
    return max(check.deviation_px for check in again) <= 0.1 * max(check.deviation_px for check in before)


def _consistent_fit(bad: list[FrameCheck], paired: dict[int, Answer], expected: list[FrameResult], size):
    """Per axis, node = scale * model + shift for most paired positions of the failing frames (a robust fit:
    answers of a model fed a distorted image are noisy, some pairs wrong, boxes clipped at the image's border),
    when that is not the identity; else None. ``size``: the frames' (height, width)."""
    axes: list[list[tuple[float, float]]] = [[], []]
    for check in bad:
        a, b, found = match(paired[check.frame].result, expected[check.frame])
        for i, j in found:
            for axis in (0, 1):
                limit = size[1 - axis]
                for model, node in zip(b.positions[j][axis::2], a.positions[i][axis::2]):
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
