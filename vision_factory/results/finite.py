"""Non-finite values: a damaged model, an FP16 export that overflows, or another node's message can give NaN or
infinite boxes, scores and keypoints. ``finite`` is the one check every frame's detections pass on their way to a
message or a file (families/pipeline.py's DetectionPipeline, predict, the nodes that read another node's
detections): the bad part left out and counted, the good part kept."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from . import MODEL_FIX
from .frame import FrameResult

NON_FINITE_PARTS = {  # part -> what is done with it
    "box": "a NaN or infinite box: left out, the others kept",
    "score": "a NaN or infinite score: left out, the others kept",
    "keypoint": "a NaN or infinite value: set to 0, 0, score 0 (not seen)",
    "mask": "a mask of NaN or infinite values: kept without a mask",
}
MESSAGE_FIX = "its publisher sends NaN or infinite values"  # detections from another node


def finite_box(xyxy: Sequence[float]) -> bool:
    """Whether each of a box's four values is finite."""
    return all(math.isfinite(value) for value in xyxy)


def non_finite_kind(part: str, source: str = "") -> str:
    """The problem-log kind of a non-finite ``part`` (NON_FINITE_PARTS) of detections from ``source`` ("": the
    model; else the input named, e.g. "person detections")."""
    return f"non-finite {part}" + (f" in {source}" if source else "")


class Finite(NamedTuple):
    """What ``finite`` keeps of a frame's detections, and what it found."""

    result: FrameResult  # those kept (a keypoint of a NaN or infinite value set to 0, 0, 0), its problems said
    problems: dict[str, str]  # problem-log kind (non_finite_kind) -> the detail to log once; {}: all finite
    kept: list[int]  # the index of each kept one among those given


def finite(found: FrameResult, source: str = "", fix: str = MODEL_FIX, masks: bool = False) -> Finite:
    """``found`` but its detections whose box or score is NaN or infinite, each keypoint of a NaN or infinite value
    set to (0, 0, 0) (COCO's "not labelled"); with ``masks`` (a segmentation model's detections), a detection
    without its mask is one whose mask values were not finite (models/masks.py). The problems (also the result's
    ``problems``) say how many of the frame's detections (or keypoints) from ``source`` ("": the model's output) and
    the ``fix``; every value finite is the usual case, known from one sum over them. A result without detections
    is kept as it is."""
    boxes, keypoints = found.boxes, found.keypoints
    count = len(found)
    if boxes is None or not count:
        return Finite(found, {}, list(range(count)))
    with np.errstate(over="ignore", invalid="ignore"):  # inf - inf is NaN, quietly
        total = float(np.sum(boxes.scores)) + float(np.sum(boxes.xyxy)) + float(np.sum(boxes.turns()))
        if keypoints is not None:
            total += float(np.sum(keypoints.points))
    unmasked = masks and (found.masks is None or any(mask is None for mask in found.masks.masks))
    if math.isfinite(total) and not unmasked:
        return Finite(found, {}, list(range(count)))  # a finite sum: all finite
    counts = dict.fromkeys(NON_FINITE_PARTS, 0)  # (a sum of finite values may overflow: then each is looked at)
    box_ok = np.isfinite(boxes.xyxy).all(axis=1) & np.isfinite(boxes.turns())  # an oriented box's angle too
    score_ok = np.isfinite(boxes.scores)
    counts["box"], counts["score"] = int(np.sum(~box_ok)), int(np.sum(box_ok & ~score_ok))
    kept = np.flatnonzero(box_ok & score_ok)
    result = found[kept]
    if result.keypoints is not None and len(result.keypoints):
        bad = ~np.isfinite(result.keypoints.points).all(axis=-1)
        if bad.any():
            counts["keypoint"] = int(bad.sum())
            points = result.keypoints.points.copy()
            points[bad] = 0.0
            result = result.with_parts(keypoints=replace(result.keypoints, points=points))
    if masks:
        counts["mask"] = len(result) if result.masks is None else sum(mask is None for mask in result.masks.masks)
    where = source or "the model's output"
    problems = {}
    for part, number in counts.items():
        if number:
            of = f"{number} keypoints" if part == "keypoint" else f"{number} of {count} detections"
            problems[non_finite_kind(part, source)] = f"{of} in {where} with {NON_FINITE_PARTS[part]}; {fix}"
    return Finite(result.with_parts(problems={**found.problems, **problems}), problems, kept.tolist())
