"""Multi-object tracking with optional re-identification: detections of each frame in, a track ID per detection out.

ByteTrack's association (Zhang et al., 2022) with BoT-SORT's appearance fusion (Aharon et al., 2022), no ROS:

- motion: a constant-velocity Kalman filter per track on the box as (centre x, centre y, width, height) and
  their velocities, with noise proportional to the box size (BoT-SORT's xywh filter; position weight 1/20,
  velocity 1/160). Lost tracks keep being predicted, their size held still;
- stage 1: confirmed and lost tracks against the high-score detections (score >= ``high_threshold``). Cost: the
  IoU distance (1 - IoU) of the predicted box and the detection, times the score (1 - IoU x score, ByteTrack's
  ``fuse_score``); with embeddings, the appearance distance (1 - cosine similarity) / 2 of the detection and the
  track's feature counts where both it is under ``appearance_threshold`` and the IoU distance under
  ``proximity_threshold``, and the cost is the smaller of the two (BoT-SORT): appearance alone never links boxes
  far from the prediction. Where both have a feature and they are clearly different (appearance distance over
  ``appearance_veto``: cosine under 0.2 by default) the pair is not made at all, as DeepSORT gates by appearance:
  a box that overlaps the prediction does not take the ID of someone else who is hiding (BoT-SORT has no such
  veto; 1 turns it off);
- stage 2: the confirmed tracks still unmatched against the low-score detections (``low_threshold`` <= score <
  ``high_threshold``), by IoU only: occluded, blurred detections keep their track alive. Tracks still unmatched
  become lost;
- stage 3, re-entry (only with embeddings): high-score detections still unmatched against the tracks that were
  lost before this frame, by appearance alone, with the strict ``reentry_threshold``: someone who comes back far
  from where the motion model expects them (they stopped or turned behind an occluder, or left the picture)
  gets their ID back. The track's filter restarts at the detection;
- stage 4: the tracks born last frame (unconfirmed) against the high-score detections left, as stage 1; matched
  ones are confirmed and get their ID, the others are dropped;
- new tracks: high-score detections left with score >= ``new_track_threshold`` start unconfirmed (on the first
  frame of a stream they are confirmed at once); a track gets its ID when confirmed;
- a lost track is dropped once it has gone unmatched for more than ``track_buffer`` frames; with embeddings, one
  unmatched for more than ``track_buffer`` but at most ``reentry_buffer`` frames is kept for re-entry alone (stage
  3, by appearance): past the time its motion says anything, someone hidden longer (2 s at 30 fps by default)
  still gets their ID back.

Every assignment is optimal (scipy's ``linear_sum_assignment``) with a cost limit: a pair costing more than the
stage's threshold is never made, and leaving a row and a column unmatched costs the threshold, as ByteTrack's
``lap.lapjv(cost_limit=...)``. A track takes detections of any class (as Ultralytics' trackers and BoxMOT's by default):
a detector whose classes are states of one object (a fall detector's Normal / Fall) or that hesitates between classes
does not split a person's track; with ``per_class`` on (BoxMOT's option) a track only takes detections of its own
class. IDs are positive integers,
counted per stream from 1 and never reused in it; ``reset()`` starts a new stream.

Appearance: ``embeddings`` [N, D] of unit rows (models/reid.py), one per detection; a row of zeros (a box with
nothing in the frame) means "no appearance" for that detection. A track's feature is the exponential moving
average (``ema_alpha``) of the features of its high-score detections, renormalised; low-score detections (often
occluded) do not change it. Without embeddings the tracker is ByteTrack, motion only.

Unlike ByteTrack, a lost track that overlaps a tracked one is not dropped as a duplicate: a person hidden behind
another is exactly the track re-identification should keep.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from scipy.optimize import linear_sum_assignment

from ..results.boxes import Boxes
from .reid_calibration import SURE_IOU, OnlineCalibration

POSITION_WEIGHT = 1 / 20  # Kalman noise, relative to the box size (BoT-SORT's)
VELOCITY_WEIGHT = 1 / 160
HISTORY = 60  # centres kept per track, for drawing its recent path

NEW, TRACKED, LOST = "new", "tracked", "lost"


@dataclass(frozen=True)
class TrackerConfig:
    high_threshold: float = 0.5  # detections at or above: stage 1; ByteTrack's track_thresh
    low_threshold: float = 0.1  # detections below are ignored; between the two: stage 2
    new_track_threshold: float = 0.6  # an unmatched detection at or above starts a track
    match_threshold: float = 0.8  # stage 1 cost limit
    low_match_threshold: float = 0.5  # stage 2 (IoU distance) limit
    unconfirmed_match_threshold: float = 0.7  # stage 4 cost limit
    track_buffer: int = 30  # frames a lost track is kept
    proximity_threshold: float = 0.5  # IoU distance under which appearance counts
    appearance_threshold: float = 0.25  # appearance distance, (1 - cosine) / 2, under which it counts
    appearance_veto: float = 0.4  # appearance distance over which a pair is never made (stages 1 and 4); 1: off
    reentry_threshold: float = 0.1  # appearance distance for re-entry of lost tracks; 0: no re-entry
    reentry_buffer: int = 60  # with embeddings: frames a lost track is kept for re-entry (stage 3) at least
    ema_alpha: float = 0.9  # weight of a track's feature against a new detection's
    fuse_score: bool = True  # stage 1 and 4 IoU similarity times the detection score
    per_class: bool = False  # True: a track only takes detections of its class; False (as Ultralytics' and BoxMOT's
    # trackers): any class, so a detector that changes its mind (a fall detector's Normal / Fall) does not split tracks

    def __post_init__(self) -> None:
        if not 0 <= self.low_threshold <= self.high_threshold:
            raise ValueError(
                f"the thresholds must satisfy 0 <= low ({self.low_threshold}) <= high ({self.high_threshold})"
            )
        if self.track_buffer < 0 or self.reentry_buffer < 0:
            raise ValueError(
                f"track_buffer ({self.track_buffer}) and reentry_buffer ({self.reentry_buffer}) must be 0 or more "
                "frames"
            )
        if not 0 <= self.ema_alpha <= 1:
            raise ValueError(f"ema_alpha must be in 0..1, not {self.ema_alpha}")


@dataclass(eq=False)
class Track:
    class_id: int
    mean: np.ndarray  # [8] cx, cy, w, h and their velocities
    covariance: np.ndarray  # [8, 8]
    score: float
    start_frame: int
    last_frame: int  # the last frame it was matched
    state: str = NEW
    id: int = 0  # 0 until confirmed
    feature: np.ndarray | None = None  # unit EMA of its detections' features
    history: deque = field(default_factory=lambda: deque(maxlen=HISTORY))  # (frame, cx, cy) of its detections

    @property
    def xyxy(self) -> tuple[float, float, float, float]:
        """The filter's box (after this frame's update, or predicted when unmatched)."""
        cx, cy, w, h = self.mean[:4]
        return (float(cx - w / 2), float(cy - h / 2), float(cx + w / 2), float(cy + h / 2))


def xyxy_to_xywh(boxes: np.ndarray) -> np.ndarray:
    return np.concatenate([(boxes[:, :2] + boxes[:, 2:]) / 2, boxes[:, 2:] - boxes[:, :2]], axis=1)


def xywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    return np.concatenate([boxes[:, :2] - boxes[:, 2:] / 2, boxes[:, :2] + boxes[:, 2:] / 2], axis=1)


def iou_xyxy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[A, B] IoU of boxes as x1, y1, x2, y2 (corners; ``tools.mot.iou_ltwh`` takes MOT's left, top, w, h)."""
    top_left = np.maximum(a[:, None, :2], b[None, :, :2])
    bottom_right = np.minimum(a[:, None, 2:], b[None, :, 2:])
    intersection = np.prod((bottom_right - top_left).clip(0), axis=2)
    area_a = np.prod((a[:, 2:] - a[:, :2]).clip(0), axis=1)
    area_b = np.prod((b[:, 2:] - b[:, :2]).clip(0), axis=1)
    return intersection / (area_a[:, None] + area_b[None, :] - intersection + 1e-9)


def assign(cost: np.ndarray, limit: float) -> list[tuple[int, int]]:
    """Optimal (row, column) pairs of ``cost`` [R, C], each costing at most ``limit``; leaving a row and a column
    unmatched costs ``limit`` (half each), so a pair is made only where it is cheaper than that."""
    rows, columns = cost.shape
    if not rows or not columns:
        return []
    blocked = limit * 2 + 1  # dearer than leaving both unmatched: never chosen
    extended = np.full((rows + columns, rows + columns), limit / 2)
    extended[:rows, :columns] = np.where(np.isfinite(cost) & (cost <= limit), cost, blocked)
    extended[rows:, columns:] = 0
    chosen_rows, chosen_columns = linear_sum_assignment(extended)
    real = (chosen_rows < rows) & (chosen_columns < columns)
    pairs = zip(chosen_rows[real].tolist(), chosen_columns[real].tolist())
    return [(row, column) for row, column in pairs if cost[row, column] <= limit]


def appearance_distance(tracks: np.ndarray, detections: np.ndarray) -> np.ndarray:
    """[T, N] appearance distance (1 - cosine similarity) / 2, in 0..1, of unit features [T, D] and [N, D]: what
    ``appearance_threshold``, ``appearance_veto`` and ``reentry_threshold`` are compared with."""
    return ((1 - tracks @ detections.T) / 2).clip(0, 1)


def blend_features(old: np.ndarray, fresh: np.ndarray, alpha: float) -> np.ndarray:
    """Tracks' features [K, D] after taking the unit features ``fresh`` [K, D] of their new detections: the
    exponential moving average ``alpha`` x old + (1 - alpha) x fresh, renormalised to unit length."""
    blended = alpha * old + (1 - alpha) * fresh
    return blended / np.maximum(np.linalg.norm(blended, axis=1, keepdims=True), 1e-12)


class KalmanXYWH:
    """The constant-velocity filter of every track at once: stacked means [T, 8] and covariances [T, 8, 8]."""

    transition = np.eye(8) + np.eye(8, k=4)
    eye8, eye4 = np.eye(8), np.eye(4)

    @classmethod
    def initiate(cls, boxes_xywh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        size = boxes_xywh[:, [2, 3, 2, 3]].clip(1)  # w, h, w, h
        std = np.concatenate([2 * POSITION_WEIGHT * size, 10 * VELOCITY_WEIGHT * size], axis=1)
        means = np.concatenate([boxes_xywh, np.zeros_like(boxes_xywh)], axis=1)
        return means, (std**2)[:, :, None] * cls.eye8

    @classmethod
    def predict(cls, means: np.ndarray, covariances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        size = means[:, [2, 3, 2, 3]].clip(1)
        std = np.concatenate([POSITION_WEIGHT * size, VELOCITY_WEIGHT * size], axis=1)
        means = means @ cls.transition.T
        covariances = cls.transition @ covariances @ cls.transition.T + (std**2)[:, :, None] * cls.eye8
        return means, covariances

    @classmethod
    def update(
        cls, means: np.ndarray, covariances: np.ndarray, boxes_xywh: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        noise = (POSITION_WEIGHT * means[:, [2, 3, 2, 3]].clip(1)) ** 2
        innovation_cov = covariances[:, :4, :4] + noise[:, :, None] * cls.eye4
        # gain = P H^T S^-1, with S symmetric: solve S X = (P H^T)^T
        gain = np.linalg.solve(innovation_cov, np.transpose(covariances[:, :, :4], (0, 2, 1))).transpose(0, 2, 1)
        innovation = boxes_xywh - means[:, :4]
        means = means + np.einsum("tij,tj->ti", gain, innovation)
        covariances = covariances - gain @ innovation_cov @ np.transpose(gain, (0, 2, 1))
        return means, covariances


class Tracker:
    """``update(detections, embeddings)`` once per frame, in order -> the track ID of each detection (None: not
    part of a confirmed track). ``reset()`` before a new stream.

    With ``calibration`` (models/reid_calibration.py) the appearance thresholds it names are measured from the stream
    itself: each frame takes its current values (``config`` holds the ones in use), and the distances motion alone
    is sure of (same track, tracks seen at once) feed it."""

    def __init__(self, config: TrackerConfig | None = None, calibration: OnlineCalibration | None = None):
        self.given = config or TrackerConfig()
        self.calibration = calibration
        self.reset()

    def reset(self) -> None:
        """Forget every track (and the calibration's distances); the next frame is the first of a new stream, whose
        IDs count from 1 again."""
        self.frame = 0
        self.tracks: list[Track] = []
        self._next_id = 1
        self._embedded = False  # embeddings came in this stream: lost tracks wait for re-entry
        if self.calibration is not None:
            self.calibration.reset()
        self._calibrated()

    def retune(self, config: TrackerConfig) -> None:
        """Track with ``config`` from the next frame on (the tracks and the calibration go on)."""
        self.given = config
        self._calibrated()

    def _calibrated(self) -> None:
        """``config``: the given one with the calibration's thresholds in use now (``measured``: measured ones, not
        the prior)."""
        self.measured = self.calibration is not None and self.calibration.calibrated
        values = self.calibration.values() if self.calibration is not None else {}
        self.config = dataclasses.replace(self.given, **values) if values else self.given

    @property
    def active(self) -> list[Track]:
        """The confirmed tracks matched in the last frame."""
        return [track for track in self.tracks if track.state == TRACKED and track.last_frame == self.frame]

    def update(self, detections: Boxes, embeddings: np.ndarray | None = None) -> list[int | None]:
        """The track ID of each of a frame's ``detections`` (None: not part of a confirmed track); ``embeddings``:
        their appearance features, one row each."""
        if self.calibration is not None:
            self._calibrated()
        config = self.config
        self.frame += 1
        count = len(detections)
        boxes, scores, classes = detections.xyxy, detections.scores, detections.class_ids
        features = self._features(embeddings, count)
        ids: list[int | None] = [None] * count

        tracked = [track for track in self.tracks if track.state == TRACKED]
        lost = [track for track in self.tracks if track.state == LOST]
        unconfirmed = [track for track in self.tracks if track.state == NEW]
        self._predict(self.tracks)

        high = np.flatnonzero(scores >= config.high_threshold)
        low = np.flatnonzero((scores >= config.low_threshold) & (scores < config.high_threshold))

        # Stage 1: confirmed and lost tracks, high-score detections, IoU fused with appearance.
        pool = tracked + [track for track in lost if self.frame - 1 - track.last_frame <= config.track_buffer]
        matched_tracks: set[int] = set()  # id() of tracks matched this frame
        # (track, detection, whether its filter takes the box): the filter and feature updates, made together once
        # the stages are done (no stage reads a track matched before it).
        self._measured: list[tuple[Track, int, bool]] = []
        continued = []  # (track, detection) of stage 1: tracks matched last frame, matched again
        for row, column in assign(self._cost(pool, boxes, scores, classes, features, high), config.match_threshold):
            if pool[row].state == TRACKED and pool[row].feature is not None:
                continued.append((pool[row], high[column]))
            self._match(pool[row], high[column], boxes, scores, ids, matched_tracks)
        left_high = [index for index in high if ids[index] is None]

        # Stage 2: confirmed tracks still unmatched, low-score detections, IoU only.
        remaining = [track for track in tracked if id(track) not in matched_tracks]
        cost = 1 - self._iou(remaining, boxes[low])
        cost[self._other_class(remaining, classes[low])] = np.inf
        for row, column in assign(cost, config.low_match_threshold):
            self._match(remaining[row], low[column], boxes, scores, ids, matched_tracks)
        for track in remaining:
            if id(track) not in matched_tracks:
                track.state = LOST

        # Stage 3: re-entry of tracks lost before this frame, by appearance alone (strict).
        left_high = np.array([index for index in left_high if ids[index] is None], np.int64)
        if features is not None and config.reentry_threshold > 0 and len(left_high):
            gone = [track for track in lost if id(track) not in matched_tracks and track.feature is not None]
            cost = self._appearance(gone, features[left_high])
            cost[self._other_class(gone, classes[left_high])] = np.inf
            for row, column in assign(cost, config.reentry_threshold):
                track, index = gone[row], left_high[column]
                means, covariances = KalmanXYWH.initiate(xyxy_to_xywh(boxes[index : index + 1]))
                track.mean, track.covariance = means[0], covariances[0]  # far from the prediction: start again
                self._match(track, index, boxes, scores, ids, matched_tracks, update_filter=False)
            left_high = np.array([index for index in left_high if ids[index] is None], np.int64)

        # Stage 4: tracks born last frame, high-score detections left.
        cost = self._cost(unconfirmed, boxes, scores, classes, features, left_high)
        for row, column in assign(cost, config.unconfirmed_match_threshold):
            self._match(unconfirmed[row], left_high[column], boxes, scores, ids, matched_tracks)
        dropped = {id(track) for track in unconfirmed if id(track) not in matched_tracks}

        # New tracks; then lost tracks past the buffer are dropped.
        born = [index for index in left_high if ids[index] is None and scores[index] >= config.new_track_threshold]
        self.tracks = [track for track in self.tracks if id(track) not in dropped]
        self._embedded = self._embedded or features is not None  # a frame without boxes has no embeddings
        keep = max(config.track_buffer, config.reentry_buffer if self._embedded else 0)
        self.tracks = [t for t in self.tracks if t.state != LOST or self.frame - t.last_frame <= keep]
        if born:
            means, covariances = KalmanXYWH.initiate(xyxy_to_xywh(boxes[born]))
            for index, mean, covariance in zip(born, means, covariances):
                track = Track(int(classes[index]), mean, covariance, float(scores[index]), self.frame, self.frame)
                self._remember(track, index, boxes, update_filter=False)
                if self.frame == 1:
                    self._confirm(track)
                    ids[index] = track.id
                self.tracks.append(track)
        if self.calibration is not None and features is not None and continued:
            self._measure(continued, boxes, scores, features)
        self._apply_measurements(boxes, scores, features)
        return ids

    def _measure(self, continued: list[tuple[Track, int]], boxes: np.ndarray, scores: np.ndarray, features) -> None:
        """The calibration's distances of this frame (models/reid_calibration.py), before the feature updates: of the
        tracks that continue (``continued``), those whose detection has a feature and overlaps their prediction by
        SURE_IOU or more; each detection against every other such track's feature (different), and against its own
        track's (same) when no other high-score detection overlaps it at all."""
        considered = np.flatnonzero(scores >= self.config.high_threshold)
        overlap = iou_xyxy(boxes, boxes[considered])
        overlap[considered, np.arange(len(considered))] = 0  # a box with itself
        alone = overlap.max(axis=1, initial=0) <= 0
        present = np.einsum("nd,nd->n", features, features) > 0.25
        sure = [(track, index) for track, index in continued if present[index]]
        if not sure:
            return
        tracks = [track for track, _ in sure]
        indices = np.array([index for _, index in sure])
        follows = np.diag(self._iou(tracks, boxes[indices])) >= SURE_IOU
        tracks, indices = [track for track, keep in zip(tracks, follows) if keep], indices[follows]
        if not tracks:
            return
        rows = features[indices] / np.linalg.norm(features[indices], axis=1, keepdims=True)
        distance = appearance_distance(np.stack([track.feature for track in tracks]), rows)
        others = ~np.eye(len(tracks), dtype=bool)
        self.calibration.add(distance.diagonal()[alone[indices]].tolist(), distance[others].tolist())

    def _features(self, embeddings: np.ndarray | None, count: int) -> np.ndarray | None:
        if embeddings is None:
            return None
        features = np.asarray(embeddings, dtype=np.float32)
        if features.ndim != 2 or len(features) != count:
            raise ValueError(f"embeddings {list(features.shape)} for {count} detections: give one row [N, D] each")
        return features

    @staticmethod
    def _predict(tracks: list[Track]) -> None:
        if not tracks:
            return
        means = np.stack([track.mean for track in tracks])
        for row, track in enumerate(tracks):
            if track.state != TRACKED:
                means[row, 6:8] = 0  # a lost or new track keeps its size
        means, covariances = KalmanXYWH.predict(means, np.stack([track.covariance for track in tracks]))
        for track, mean, covariance in zip(tracks, means, covariances):
            track.mean, track.covariance = mean, covariance

    @staticmethod
    def _iou(tracks: list[Track], boxes: np.ndarray) -> np.ndarray:
        if not tracks or not len(boxes):
            return np.zeros((len(tracks), len(boxes)))
        return iou_xyxy(xywh_to_xyxy(np.stack([track.mean[:4] for track in tracks])), boxes)

    def _other_class(self, tracks: list[Track], classes: np.ndarray) -> np.ndarray:
        """[T, N] True where the pair is refused for its classes (never, unless ``per_class``)."""
        other = np.array([track.class_id for track in tracks], np.int64)[:, None] != classes[None, :]
        return other if self.config.per_class else np.zeros_like(other)

    @staticmethod
    def _appearance(tracks: list[Track], features: np.ndarray) -> np.ndarray:
        """[T, N] appearance distance (1 - cosine) / 2 in 0..1; NaN where either side has no feature."""
        cost = np.full((len(tracks), len(features)), np.nan)
        with_feature = [row for row, track in enumerate(tracks) if track.feature is not None]
        present = np.flatnonzero(np.linalg.norm(features, axis=1) > 0.5)
        if with_feature and len(present):
            track_features = np.stack([tracks[row].feature for row in with_feature])
            cost[np.ix_(with_feature, present)] = appearance_distance(track_features, features[present])
        return cost

    def _cost(
        self,
        tracks: list[Track],
        boxes: np.ndarray,
        scores: np.ndarray,
        classes: np.ndarray,
        features: np.ndarray | None,
        columns: np.ndarray,
    ) -> np.ndarray:
        """Stage 1 and 4's cost of ``tracks`` against the detections ``columns``: fused IoU and appearance."""
        config = self.config
        iou = self._iou(tracks, boxes[columns])
        cost = 1 - iou * scores[columns][None, :] if config.fuse_score else 1 - iou
        if features is not None and tracks and len(columns):
            appearance = self._appearance(tracks, features[columns])
            known = ~np.isnan(appearance)
            vetoed = known & (np.where(known, appearance, 0) > config.appearance_veto)
            far = ~known | (1 - iou > config.proximity_threshold)
            appearance[far | (np.where(known, appearance, 1) > config.appearance_threshold)] = 1
            cost = np.minimum(cost, appearance)
            cost[vetoed] = np.inf
        cost[self._other_class(tracks, classes[columns])] = np.inf
        return cost

    def _match(
        self,
        track: Track,
        index: int,
        boxes: np.ndarray,
        scores: np.ndarray,
        ids: list[int | None],
        matched: set[int],
        update_filter: bool = True,
    ) -> None:
        if track.state == NEW:
            self._confirm(track)
        track.state, track.last_frame, track.score = TRACKED, self.frame, float(scores[index])
        self._remember(track, index, boxes, update_filter)
        matched.add(id(track))
        ids[index] = track.id

    def _confirm(self, track: Track) -> None:
        track.id, self._next_id = self._next_id, self._next_id + 1
        track.state = TRACKED

    def _remember(self, track: Track, index: int, boxes: np.ndarray, update_filter: bool) -> None:
        """The detection's centre in the track's path; its box and feature for ``_apply_measurements``."""
        box = boxes[index]
        track.history.append((self.frame, float(box[0] + box[2]) / 2, float(box[1] + box[3]) / 2))
        self._measured.append((track, index, update_filter))

    def _apply_measurements(self, boxes: np.ndarray, scores: np.ndarray, features: np.ndarray | None) -> None:
        """Every matched track's Kalman update, at once; the features of high-score detections in their tracks'
        averages (a detection with a zero row has no appearance)."""
        measured, self._measured = self._measured, []
        filtered = [(track, index) for track, index, update_filter in measured if update_filter]
        if filtered:
            tracks = [track for track, _ in filtered]
            means, covariances = KalmanXYWH.update(
                np.stack([track.mean for track in tracks]),
                np.stack([track.covariance for track in tracks]),
                xyxy_to_xywh(boxes[[index for _, index in filtered]]),
            )
            for track, mean, covariance in zip(tracks, means, covariances):
                track.mean, track.covariance = mean, covariance
        if features is None or not measured:
            return
        indices = np.array([index for _, index, _ in measured])
        rows = features[indices]
        norms = np.sqrt(np.einsum("nd,nd->n", rows, rows))
        learn = (norms >= 0.5) & (scores[indices] >= self.config.high_threshold)
        learners = [track for (track, _, _), keep in zip(measured, learn) if keep]
        fresh = rows[learn] / norms[learn, None]
        known = np.array([track.feature is not None for track in learners], bool)
        if known.any():
            old = np.stack([track.feature for track, has in zip(learners, known) if has])
            fresh[known] = blend_features(old, fresh[known], self.config.ema_alpha)
        for track, feature in zip(learners, fresh):
            track.feature = feature


class Embedder(Protocol):
    def embed(self, image_bgr: np.ndarray, boxes: Sequence[Sequence[float]]) -> np.ndarray: ...


@dataclass
class Tracking:
    """What a node or tool runs per frame to give detections track IDs: the tracker, and the re-identification
    embedder whose features it uses (None: motion only)."""

    tracker: Tracker
    embedder: Embedder | None = None
    from_model: dict[str, float] = field(default_factory=dict)  # thresholds taken from the re-id model's metadata

    def update(self, frame_bgr: np.ndarray, detections: Boxes) -> list[int | None]:
        """The track ID of each of a frame's detections (None: not part of a confirmed track)."""
        embeddings = None
        if self.embedder is not None and len(detections):
            embeddings = self.embedder.embed(frame_bgr, detections.xyxy)
        return self.tracker.update(detections, embeddings)

    def reset(self) -> None:
        self.tracker.reset()
