"""MOTChallenge tracks: scoring tracks against ground truth (no ROS).

The file format (reading and writing) is tools/mot_files.py's.

Scores: CLEAR MOT (MOTA, MOTP, switches, fragmentations), identity (IDF1, IDP, IDR) and mostly tracked / partially
tracked / mostly lost from ``motmetrics``; HOTA (with DetA, AssA, LocA) from this module's implementation of Luiten
et al.'s definition with TrackEval's matching. Boxes match when IoU >= 0.5.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..files import output_folder, write_text
from ..text import shown_path
from .commands import CommandReport, UsageError
from .mot_files import DISTRACTOR_CLASSES, MotBoxes, boxes_from_rows, read_mot

MODEL_TYPE = "track"  # eval's --model-type for MOTChallenge tracks (not a model family)
MATCH_IOU = 0.5  # boxes match at IoU >= this (MOTChallenge's CLEAR MOT and identity threshold)
# Truth and predicted identities together: motmetrics' IDF1 assignment builds three square float64 matrices of that
# side (4096: 384 MiB) and solves an assignment over them. MOT20's sequences have at most about 1,200 truth tracks.
MAX_IDENTITIES = 4096
HOTA_ALPHAS = np.arange(1, 20) * 0.05  # localisation thresholds 0.05, 0.10, ..., 0.95
_EPS = np.finfo(float).eps


def iou_ltwh(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` [N, 4] with every box of ``b`` [M, 4], boxes as MOT's left, top, width, height
    (0 where they do not overlap, so two empty boxes are 0, not undefined; ``models.tracker.iou_xyxy`` takes
    corners)."""
    a, b = np.asarray(a, dtype=np.float64).reshape(-1, 4), np.asarray(b, dtype=np.float64).reshape(-1, 4)
    low = np.maximum(a[:, None, :2], b[None, :, :2])
    high = np.minimum(a[:, None, :2] + a[:, None, 2:], b[None, :, :2] + b[None, :, 2:])
    intersection = np.prod(np.maximum(high - low, 0.0), axis=-1)
    union = np.prod(a[:, 2:], axis=-1)[:, None] + np.prod(b[:, 2:], axis=-1)[None, :] - intersection
    return np.divide(intersection, union, out=np.zeros_like(intersection), where=intersection > 0)


@dataclass
class Scoring:
    """What is scored: the ground truth's scored boxes and the predictions left after ignore regions, and counts."""

    truth: MotBoxes
    predictions: MotBoxes
    truth_not_scored: int  # flag / conf 0
    distractor_boxes: int  # ignore regions (distractor classes)
    predictions_on_distractors: int  # dropped: they matched an ignore region

    def frames(self) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
        """Every frame either file has, in order: (frame, truth rows, prediction rows, IoU [truth, prediction])."""
        truth, predictions = self.truth.by_frame(), self.predictions.by_frame()
        empty = np.zeros(0, dtype=np.int64)
        for frame in sorted(truth.keys() | predictions.keys()):
            rows, found = truth.get(frame, empty), predictions.get(frame, empty)
            yield frame, rows, found, iou_ltwh(self.truth.boxes[rows], self.predictions.boxes[found])


def prepare(truth: MotBoxes, predictions: MotBoxes) -> Scoring:
    """The ground truth's scored boxes (flag / conf not 0, no distractor class) and the predictions that do not
    match a distractor box (one-to-one per frame at IoU >= MATCH_IOU, MOTChallenge's pre-processing)."""
    from scipy.optimize import linear_sum_assignment

    for boxes, what in ((truth, "ground truth"), (predictions, "predictions")):
        negative = np.flatnonzero(boxes.ids < 0)
        if negative.size:
            row = negative[0]
            raise ValueError(
                f"{boxes.path}:{boxes.lines[row]}: id {boxes.ids[row]} in the {what}: ids are whole numbers >= 0 "
                "(-1 marks a detections file, which has no tracks to score)"
            )
    distractor = np.isin(truth.classes, list(DISTRACTOR_CLASSES))
    scored = (truth.scores != 0) & ~distractor
    if not scored.any():
        raise ValueError(f"{shown_path(truth.path)} has no box to score (every box has flag 0 or a distractor class)")
    dropped = np.zeros(len(predictions), dtype=bool)
    if distractor.any() and len(predictions):
        # As TrackEval: each frame's predictions are matched one-to-one against all its truth boxes (IoU >= 0.5,
        # maximum total IoU); those whose match is a distractor are dropped. A prediction on a person beside a
        # distractor stays matched to the person.
        mine = predictions.by_frame()
        for frame, rows in truth.by_frame().items():
            if frame in mine and distractor[rows].any():
                overlap = iou_ltwh(truth.boxes[rows], predictions.boxes[mine[frame]])
                overlap[overlap < MATCH_IOU - _EPS] = 0.0
                matched_rows, matched_columns = linear_sum_assignment(-overlap)
                matched = overlap[matched_rows, matched_columns] > 0
                on_distractor = distractor[rows[matched_rows[matched]]]
                dropped[mine[frame][matched_columns[matched][on_distractor]]] = True
    return Scoring(
        truth.subset(scored),
        predictions.subset(~dropped),
        truth_not_scored=int(np.count_nonzero((truth.scores == 0) & ~distractor)),
        distractor_boxes=int(np.count_nonzero(distractor)),
        predictions_on_distractors=int(np.count_nonzero(dropped)),
    )


def check_identities(scoring: Scoring) -> None:
    """A ValueError when the truth and predicted identities scored number more than MAX_IDENTITIES together,
    before motmetrics allocates its IDF1 matrices (three of that side squared)."""
    truth, predicted = (len(np.unique(boxes.ids)) for boxes in (scoring.truth, scoring.predictions))
    total = truth + predicted
    if total > MAX_IDENTITIES:
        need = 3 * total**2 * 8 / 2**30
        raise ValueError(
            f"{shown_path(scoring.truth.path)} and {shown_path(scoring.predictions.path)} hold {truth} + "
            f"{predicted} = {total} identities, more than the bound of {MAX_IDENTITIES} identities together: IDF1's "
            f"assignment (motmetrics) would take {need:.1f} GiB; score a shorter sequence or split it"
        )


# motmetrics' metric name -> the name reported here; MOTP is turned into mean IoU (see clear_and_identity).
MOTMETRICS_NAMES = {
    "mota": "MOTA",
    "motp": "MOTP",
    "idf1": "IDF1",
    "idp": "IDP",
    "idr": "IDR",
    "precision": "precision",
    "recall": "recall",
    "num_switches": "id_switches",
    "num_fragmentations": "fragmentations",
    "num_false_positives": "false_positives",
    "num_misses": "misses",
    "num_detections": "matches",  # every matched truth box, switches included (motmetrics' num_matches leaves them out)
    "num_unique_objects": "truth_tracks",
    "mostly_tracked": "mostly_tracked",
    "partially_tracked": "partially_tracked",
    "mostly_lost": "mostly_lost",
    "num_objects": "truth_boxes",
    "num_predictions": "predicted_boxes",
    "num_frames": "frames",
}


def clear_and_identity(scoring: Scoring) -> dict[str, float]:
    """CLEAR MOT, identity and track-coverage metrics from motmetrics, over one sequence.

    motmetrics 1.4 meets numpy 2 and pandas 2+ here without any patch: it is given the distance matrices (its own
    ``distances.iou_matrix`` calls ``np.asfarray``, gone in numpy 2) and scores one accumulator with
    ``MetricsHost.compute`` (``compute_many`` and ``compute_overall`` merge accumulators with ``DataFrame.append``,
    gone in pandas 2). Its assignment solver is pinned to scipy for the call (by default it takes the first of
    lapsolver, lap, scipy... that is installed), so the result does not depend on what else is installed.
    MOTP is reported as MOTChallenge does, the mean IoU of matched boxes (higher is better); motmetrics' ``motp``
    is the mean distance 1 - IoU.
    """
    import motmetrics

    accumulator = motmetrics.MOTAccumulator(auto_id=False)
    with motmetrics.lap.set_default_solver("scipy"):
        for frame, rows, found, overlap in scoring.frames():
            distance = 1.0 - overlap
            distance[distance > 1.0 - MATCH_IOU] = np.nan  # motmetrics: NaN = may not be paired
            accumulator.update(scoring.truth.ids[rows], scoring.predictions.ids[found], distance, frameid=frame)
        summary = motmetrics.metrics.create().compute(accumulator, metrics=list(MOTMETRICS_NAMES), name="sequence")
    metrics: dict[str, float] = {}
    for key, name in MOTMETRICS_NAMES.items():
        value = summary[key].iloc[0]
        if isinstance(value, float | np.floating):  # 0 / 0 (no predicted box: precision, IDP) is 0, never NaN
            metrics[name] = 0.0 if math.isnan(value) else float(value)
        else:
            metrics[name] = int(value)
    metrics["MOTP"] = 1.0 - metrics["MOTP"] if metrics["matches"] else 0.0
    return metrics


def hota(scoring: Scoring) -> dict[str, Any]:
    """HOTA, DetA, AssA, DetRe, DetPr, AssRe, AssPr and LocA over the localisation thresholds HOTA_ALPHAS (their
    mean, and each threshold's HOTA, DetA and AssA).

    Luiten et al., "HOTA: A Higher Order Metric for Evaluating Multi-Object Tracking" (IJCV 2021), with TrackEval's
    matching: each frame's boxes are matched once, one-to-one, maximising IoU times the alignment of the two IDs
    over the whole sequence (the IDs' summed IoU shares over their joint box count); at threshold alpha the matched
    pairs with IoU >= alpha are the true positives. DetA = TP / (TP + FN + FP); AssA = the mean over true
    positives of the Jaccard index of their two tracks' matches, TPA / (TPA + FNA + FPA); HOTA = sqrt(DetA AssA).
    """
    from scipy.optimize import linear_sum_assignment

    truth, predictions = scoring.truth, scoring.predictions
    truth_ids, truth_index = np.unique(truth.ids, return_inverse=True)
    predicted_ids, predicted_index = np.unique(predictions.ids, return_inverse=True)
    width = max(len(predicted_ids), 1)  # a (truth, prediction) ID pair is coded truth * width + prediction
    truth_count = np.bincount(truth_index, minlength=len(truth_ids)).astype(np.float64)
    predicted_count = np.bincount(predicted_index, minlength=len(predicted_ids)).astype(np.float64)
    frames = [
        (truth_index[rows], predicted_index[found], overlap)
        for _, rows, found, overlap in scoring.frames()
        if rows.size and found.size
    ]
    # Alignment of every ID pair that ever overlaps: each frame shares out a pair's IoU against all their overlaps.
    codes, shares = [np.zeros(0, dtype=np.int64)], [np.zeros(0)]
    for gt, pred, overlap in frames:
        denominator = overlap.sum(axis=0)[None, :] + overlap.sum(axis=1)[:, None] - overlap
        share = np.divide(overlap, denominator, out=np.zeros_like(overlap), where=denominator > _EPS)
        codes.append((gt[:, None] * width + pred[None, :])[share > 0])
        shares.append(share[share > 0])
    pairs, inverse = np.unique(np.concatenate(codes), return_inverse=True)
    potential = np.bincount(inverse, weights=np.concatenate(shares), minlength=len(pairs))
    alignment = potential / (truth_count[pairs // width] + predicted_count[pairs % width] - potential)
    # One matching per frame; every threshold keeps the matched pairs at least that close.
    matched_codes, matched_iou = [np.zeros(0, dtype=np.int64)], [np.zeros(0)]
    for gt, pred, overlap in frames:
        code = gt[:, None] * width + pred[None, :]
        where = np.minimum(np.searchsorted(pairs, code), max(len(pairs) - 1, 0))
        aligned = np.where(pairs[where] == code, alignment[where], 0.0) if len(pairs) else np.zeros_like(overlap)
        rows, columns = linear_sum_assignment(-(aligned * overlap))
        matched_codes.append(code[rows, columns])
        matched_iou.append(overlap[rows, columns])
    matched_codes, matched_iou = np.concatenate(matched_codes), np.concatenate(matched_iou)
    per_alpha: dict[str, list[float]] = {
        name: [] for name in ("HOTA", "DetA", "AssA", "DetRe", "DetPr", "AssRe", "AssPr", "LocA")
    }
    for alpha in HOTA_ALPHAS:
        kept = matched_iou >= alpha - _EPS
        tp = int(np.count_nonzero(kept))
        fn, fp = len(truth) - tp, len(predictions) - tp
        pair, together = np.unique(matched_codes[kept], return_counts=True)
        together = together.astype(np.float64)
        with_truth, with_prediction = truth_count[pair // width], predicted_count[pair % width]
        # Each true positive counts its pair's score: the sum over pairs of (matches x score), over TP.
        per_alpha["AssA"].append(float(np.sum(together**2 / (with_truth + with_prediction - together)) / max(tp, 1)))
        per_alpha["AssRe"].append(float(np.sum(together**2 / with_truth) / max(tp, 1)))
        per_alpha["AssPr"].append(float(np.sum(together**2 / with_prediction) / max(tp, 1)))
        per_alpha["DetA"].append(tp / max(tp + fn + fp, 1))
        per_alpha["DetRe"].append(tp / max(tp + fn, 1))
        per_alpha["DetPr"].append(tp / max(tp + fp, 1))
        per_alpha["HOTA"].append(math.sqrt(per_alpha["DetA"][-1] * per_alpha["AssA"][-1]))
        per_alpha["LocA"].append(float(matched_iou[kept].sum() / tp) if tp else 1.0)
    result: dict[str, Any] = {name: float(np.mean(values)) for name, values in per_alpha.items()}
    result["per_alpha"] = {
        "alpha": [round(float(alpha), 2) for alpha in HOTA_ALPHAS],
        **{name: per_alpha[name] for name in ("HOTA", "DetA", "AssA")},
    }
    return result


@dataclass
class TrackMetrics:
    metrics: dict[str, float]  # HOTA, DetA, AssA, ..., MOTA, MOTP, IDF1, ... (see MOTMETRICS_NAMES)
    hota_per_alpha: dict[str, list[float]]
    scoring: Scoring


def evaluate(truth: MotBoxes, predictions: MotBoxes) -> TrackMetrics:
    """Every metric of ``predictions`` (a tracker's boxes) against ``truth`` (ground truth), over one sequence."""
    scoring = prepare(truth, predictions)
    check_identities(scoring)
    found = hota(scoring)
    per_alpha = found.pop("per_alpha")
    return TrackMetrics({**found, **clear_and_identity(scoring)}, per_alpha, scoring)


def evaluate_cameras(
    truth: Mapping[str, MotBoxes], predictions: Mapping[str, Iterable[tuple]], frames: int
) -> TrackMetrics:
    """Several cameras scored as one: each camera's ``truth`` (its boxes with the global truth IDs, one person's the
    same on every camera) and ``predictions`` (rows frame, ID, x, y, w, h, score: e.g. track.global_tracks'), the
    cameras' sequences of ``frames`` frames laid one after another. IDF1 over it scores identities over every camera
    together, as multi-camera IDF1 does: a person's ID on one camera must be theirs on the others."""
    cameras = list(truth)

    def together(rows_of: Mapping[str, Iterable[tuple]], name: str) -> MotBoxes:
        offset = {camera: index * frames for index, camera in enumerate(cameras)}
        rows = [(frame + offset[camera], *rest) for camera in cameras for frame, *rest in rows_of[camera]]
        return boxes_from_rows(rows, name)

    truth_rows = {
        camera: [(int(f), int(i), *map(float, box), 1.0) for f, i, box in zip(boxes.frames, boxes.ids, boxes.boxes)]
        for camera, boxes in truth.items()
    }
    return evaluate(together(truth_rows, "every camera's truth"), together(predictions, "every camera's tracks"))


SCORES = ("HOTA", "DetA", "AssA", "LocA", "MOTA", "MOTP", "IDF1", "IDP", "IDR", "precision", "recall")
COUNTS = (
    "id_switches", "fragmentations", "false_positives", "misses", "truth_tracks", "mostly_tracked",
    "partially_tracked", "mostly_lost", "truth_boxes", "predicted_boxes", "frames",
)  # fmt: skip


def evaluate_tracks(data: Path, predictions: Path | None, out_dir: Path) -> CommandReport:
    """`eval --model-type track`: MOTChallenge ``predictions`` (tracks.txt) scored against the MOTChallenge ground
    truth ``data`` (gt.txt); OUT/eval.json and OUT/eval.md, and the tables shown."""
    if predictions is None:
        raise UsageError(f"--model-type {MODEL_TYPE} scores a file: give --predictions, the tracks (MOTChallenge text)")
    result = evaluate(read_mot(data), read_mot(predictions))
    scoring = result.scoring
    output_folder(out_dir, option="--out")
    record = {
        "model_type": MODEL_TYPE,
        "data": str(data),
        "predictions": str(predictions),
        "match_iou": MATCH_IOU,
        "metrics": result.metrics,
        "ignored": {
            "truth_not_scored": scoring.truth_not_scored,
            "distractor_boxes": scoring.distractor_boxes,
            "predictions_on_distractors": scoring.predictions_on_distractors,
        },
        "hota_per_alpha": result.hota_per_alpha,
    }
    files = {"json": out_dir / "eval.json", "markdown": out_dir / "eval.md"}
    write_text(files["json"], json.dumps(record, indent=2) + "\n", [data, predictions])
    metrics = result.metrics
    tables = "\n".join(
        f"| {' | '.join(names)} |\n|{'---|' * len(names)}\n| {' | '.join(format(metrics[n], spec) for n in names)} |\n"
        for names, spec in ((SCORES, ".4f"), (COUNTS, "d"))
    )
    ignored = ""
    if scoring.truth_not_scored or scoring.distractor_boxes:
        ignored = (
            f"\nNot scored: {scoring.truth_not_scored} truth boxes with flag 0, {scoring.distractor_boxes} "
            f"distractor boxes, {scoring.predictions_on_distractors} predicted boxes on distractors.\n"
        )
    title = (
        f"# Tracks: {shown_path(predictions)}\n\nAgainst `{shown_path(data)}`: boxes match at IoU >= "
        f"{MATCH_IOU}; CLEAR MOT, IDF1 and MT/PT/ML from motmetrics, HOTA averaged over IoU thresholds 0.05-0.95; "
        "MOTP is the matched boxes' mean IoU.\n\n"
    )
    write_text(files["markdown"], title + tables + ignored, [data, predictions])
    return CommandReport(tables + ignored, files)


def noisy_detections(
    truth: MotBoxes,
    *,
    jitter: float = 0.05,
    miss_rate: float = 0.0,
    false_positives: float = 0.0,
    frame_size: tuple[int, int] | None = None,
    seed: int = 0,
    true_scores: tuple[float, float] = (0.5, 1.0),
    false_scores: tuple[float, float] = (0.1, 0.6),
) -> tuple[MotBoxes, np.ndarray]:
    """Detections made from ground-truth boxes, as a detector might give them (seeded, reproducible).

    Each truth box is dropped with probability ``miss_rate``; a kept one moves its centre by Gaussian noise of
    standard deviation ``jitter`` times its width and height, and scales its width and height by 1 + the same noise
    (at least 1 px), with a score uniform in ``true_scores``. Each frame gets a Poisson(``false_positives``) number
    of false boxes, sized like a random truth box, placed uniformly inside ``frame_size`` (default: the truth
    boxes' extent), with scores uniform in ``false_scores``. The detections' ids are -1 (a detections file); the
    second result gives, for each detection, the truth row it came from, or -1 for a false positive.
    """
    if not 0.0 <= miss_rate <= 1.0 or jitter < 0 or false_positives < 0:
        raise ValueError("miss_rate must be in [0, 1]; jitter and false_positives >= 0")
    random = np.random.default_rng(seed)
    if frame_size is None:
        corners = truth.boxes[:, :2] + truth.boxes[:, 2:]
        frame_size = (float(corners[:, 0].max(initial=1.0)), float(corners[:, 1].max(initial=1.0)))
    rows, origins = [], []
    for frame, indices in truth.by_frame().items():
        for index in indices[random.random(len(indices)) >= miss_rate]:
            x, y, w, h = truth.boxes[index]
            noise = random.normal(0.0, jitter, 4)
            new_w, new_h = max(1.0, w * (1 + noise[2])), max(1.0, h * (1 + noise[3]))
            # The centre moves by the noise; written from the corner so that no noise leaves the box exactly as it is.
            left, top = x + noise[0] * w + (w - new_w) / 2, y + noise[1] * h + (h - new_h) / 2
            score = random.uniform(*true_scores)
            rows.append((frame, -1, left, top, new_w, new_h, score))
            origins.append(index)
        for _ in range(random.poisson(false_positives)):
            w, h = truth.boxes[random.integers(len(truth))][2:]
            x = random.uniform(0.0, max(frame_size[0] - w, 0.0))
            y = random.uniform(0.0, max(frame_size[1] - h, 0.0))
            rows.append((frame, -1, x, y, w, h, random.uniform(*false_scores)))
            origins.append(-1)
    return boxes_from_rows(rows, f"{shown_path(truth.path)} (noisy detections, seed {seed})"), np.asarray(
        origins, dtype=np.int64
    )
