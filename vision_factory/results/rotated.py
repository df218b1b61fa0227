"""Rotated boxes (an OBB model's: centre, width, height and an angle in radians, Ultralytics' ``xywhr``): their
corners, their probabilistic IoU and the NMS over it, as Ultralytics computes them.

``probiou``: each box is taken as a 2-D Gaussian (its covariance from width^2 / 12, height^2 / 12 rotated by its
angle), two boxes' overlap is 1 - the Hellinger distance of their Gaussians, from the Bhattacharyya distance
(Llerena et al. 2021, arXiv:2106.06072; Ultralytics' ``batch_probiou``: the distance clipped to [eps, 100], eps
1e-7 in its sums). ``rotated_nms``: Ultralytics' rotated ``non_max_suppression``, a fast NMS (Bolya et al. 2019): in
the order of the scores, a box is dropped when any higher-scoring box of its class overlaps it by more than the
threshold, whether or not that box was kept itself; computed in blocks, so that its memory stays bounded whatever
the count of candidates (Ultralytics' own takes the whole square of them)."""

from __future__ import annotations

import numpy as np

EPS = 1e-7  # Ultralytics' eps in batch_probiou
BLOCK = 512  # boxes a side of each block of overlaps NMS computes at once (2 MiB of float64)


def corners(xywhr: np.ndarray) -> np.ndarray:
    """[N, 5] boxes -> [N, 4, 2] corners, from the one at +w/2, +h/2 of the box's own frame (Ultralytics'
    ``xywhr2xyxyxyxy`` order)."""
    xywhr = np.asarray(xywhr, np.float64).reshape(-1, 5)
    centre, (w, h, angle) = xywhr[:, None, :2], (xywhr[:, i, None] for i in (2, 3, 4))
    cos, sin = np.cos(angle), np.sin(angle)
    along = np.concatenate([w / 2 * cos, w / 2 * sin], axis=1)[:, None]  # [N, 1, 2]
    across = np.concatenate([-h / 2 * sin, h / 2 * cos], axis=1)[:, None]
    signs = np.array([[1, 1], [1, -1], [-1, -1], [-1, 1]], np.float64)  # (along, across) of each corner
    return centre + signs[None, :, :1] * along + signs[None, :, 1:] * across


def _covariance(xywhr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each box's Gaussian covariance [[a, c], [c, b]]: (a, b, c), each [N]."""
    w2, h2, angle = xywhr[:, 2] ** 2 / 12, xywhr[:, 3] ** 2 / 12, xywhr[:, 4]
    cos, sin = np.cos(angle), np.sin(angle)
    return w2 * cos**2 + h2 * sin**2, w2 * sin**2 + h2 * cos**2, (w2 - h2) * cos * sin


def probiou(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The probabilistic IoU [N, M] of each of ``first`` [N, 5] with each of ``second`` [M, 5] (xywhr)."""
    first = np.asarray(first, np.float64).reshape(-1, 5)
    second = np.asarray(second, np.float64).reshape(-1, 5)
    a1, b1, c1 = (v[:, None] for v in _covariance(first))
    a2, b2, c2 = (v[None, :] for v in _covariance(second))
    dx = first[:, 0, None] - second[None, :, 0]
    dy = first[:, 1, None] - second[None, :, 1]
    a, b, c = a1 + a2, b1 + b2, c1 + c2
    determinant = a * b - c**2
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = (a * dy**2 + b * dx**2) / (determinant + EPS) * 0.25
        skew = (c * -dx * dy) / (determinant + EPS) * 0.5
        own = np.sqrt(np.clip(a1 * b1 - c1**2, 0, None) * np.clip(a2 * b2 - c2**2, 0, None))
        shape = np.log(determinant / (4 * own + EPS) + EPS) * 0.5
    distance = np.clip(spread + skew + shape, EPS, 100.0)
    return 1 - np.sqrt(1.0 - np.exp(-distance) + EPS)


def _fast_nms(xywhr: np.ndarray, iou_threshold: float, limit: int) -> np.ndarray:
    """Which of ``xywhr`` (one class's boxes, highest score first) fast NMS keeps, the first ``limit`` of them: the
    overlaps computed BLOCK x BLOCK at a time (memory bounded whatever the count), and no further than the block
    that holds the ``limit``-th box kept (a box's fate depends only on the boxes before it)."""
    count = len(xywhr)
    kept = np.zeros(count, bool)
    for start in range(0, count, BLOCK):
        stop = min(start + BLOCK, count)
        hit = np.zeros(stop - start, bool)
        for first in range(0, stop, BLOCK):
            last = min(first + BLOCK, stop)
            before = np.arange(first, last)[:, None] < np.arange(start, stop)[None, :]
            hit |= ((probiou(xywhr[first:last], xywhr[start:stop]) > iou_threshold) & before).any(axis=0)
        kept[start:stop] = ~hit
        if kept[:stop].sum() >= limit:
            break
    return np.flatnonzero(kept)[:limit]


def rotated_nms(
    xywhr: np.ndarray, scores: np.ndarray, class_ids: np.ndarray, iou_threshold: float, limit: int | None = None
) -> np.ndarray:
    """Indices kept, highest score first (ties: lower index first), at most ``limit``: a box is dropped when a
    higher-scoring box of its class has a probiou with it over ``iou_threshold`` (fast NMS, as Ultralytics').
    A box or score that is NaN or infinite takes no part: such boxes come after the kept ones (at most ``limit``),
    for results/finite.py to count and leave out, as ``nms`` does with them."""
    xywhr = np.asarray(xywhr, np.float64).reshape(-1, 5)
    scores = np.asarray(scores, np.float64).reshape(-1)
    if not len(xywhr):
        return np.zeros(0, np.int64)
    limit = len(xywhr) if limit is None else limit
    finite = np.isfinite(xywhr).all(axis=1) & np.isfinite(scores)
    bad = np.flatnonzero(~finite)
    order = np.flatnonzero(finite)
    order = order[np.argsort(-scores[order], kind="stable")]
    ids = np.asarray(class_ids)[order]
    chosen = []
    for class_id in np.unique(ids):  # boxes of other classes never suppress each other
        members = np.flatnonzero(ids == class_id)  # positions in the score order
        chosen.append(members[_fast_nms(xywhr[order[members]], iou_threshold, limit)])
    ranks = np.sort(np.concatenate([np.zeros(0, np.int64), *chosen]))[:limit]
    return np.concatenate([order[ranks], bad[:limit]]).astype(np.int64)
