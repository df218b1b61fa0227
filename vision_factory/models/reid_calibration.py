"""The tracker's appearance thresholds, chosen from distances: measured offline on ground truth (`reid-tune`,
tools/reid_tune.py: ``choose``) or online from the stream itself, with no truth (``OnlineCalibration``).

Both measure what the tracker compares, the appearance distance (1 - cos) / 2 of a detection's feature and a
track's running feature (models/tracker.py), in two kinds:

- **same**: a detection against its own person's feature, before the detection joins it;
- **different**: a detection against the feature of another person.

"Nearly all" is 99 % (``MARGIN``): the same-person 99th and the different-people 1st percentile.

Offline (``choose``, on truth boxes, partly hidden ones included): appearance and re-entry link a pair by
appearance, even against motion, so they sit at the safe end, the same-person 99th percentile, which must be under
nearly all different-people distances; the veto refuses a pair, so it sits above nearly all same-person distances
and under nearly all different-people ones, midway between the two when they leave a gap. When they overlap, the
veto takes the same-person 99th percentile (it breaks nearly no true track) and appearance and re-entry the
different-people 1st (they link nearly no stranger); between the two the tracker goes by motion.

Online (``OnlineCalibration``), with no truth, the tracker itself tells the kinds apart where motion alone is sure
of them (``Tracker._measure``): a confirmed track matched in the previous frame and again in this frame's first
stage, to a high-score detection that overlaps its predicted box by ``SURE_IOU`` or more, is one person: that
detection against the track's feature is a same-person distance when no other high-score detection overlaps it
(its crop shows no one else). Two such tracks in one frame are two people: each one's detection against the
other's feature is a different-people distance. Only the most recent ``WINDOW`` distances of each kind are kept
(bounded memory; the thresholds follow the scene). Those same-person distances are the easy ones, whole and moving
as predicted; the person coming back from behind a pillar, turned or partly hidden, is further from their feature.
So the online rule (``online_rule``) leans the other way: appearance and re-entry midway between the same-person
99th and the different-people 1st percentile (as far from both as the data allows), the veto at the
different-people 1st percentile (it stops nearly every stranger and nothing closer) when that is at least
``VETO_MARGIN`` times the same-person 99th, else no veto (strangers nearly as close as the easy same-person
distances: a veto there would also refuse a partly hidden person their own track). When the two kinds overlap the
stream cannot tell people apart by appearance: the ``PRIOR``. Until ``MIN_SAMPLES`` of each kind have been
seen the thresholds are the ``PRIOR`` too: appearance off (threshold 0, veto 1, no re-entry), the tracker by motion
alone, as without re-identification.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

MARGIN = 0.01  # "nearly all": the 1st / 99th percentile
# The tracker's appearance thresholds (TrackerConfig fields), as the tracking parameters name them.
FIELDS = {
    "appearance_threshold": "track_appearance_threshold",
    "appearance_veto": "track_appearance_veto",
    "reentry_threshold": "track_reentry_threshold",
}
PRIOR = {"appearance_threshold": 0.0, "appearance_veto": 1.0, "reentry_threshold": 0.0}  # appearance off
WINDOW = 2000  # distances kept of each kind, the most recent
MIN_SAMPLES = 10  # of each kind, before the measured thresholds replace the prior
SURE_IOU = 0.5  # a detection continues its track by motion alone when it overlaps the prediction this much
REPORTED = (1, 50, 99)  # percentiles reported
# The veto (online) only where the different-people 1st percentile is this many times the same-person 99th: the
# same-person distances measured are the easy ones, and a person partly hidden or turned is 3-4 times further from
# their own feature than those (0.08-0.11 against a 99th percentile of 0.027, on composed hand-overs with the fall
# detector); where strangers come as close as that (people who look alike), a veto there would refuse the person
# their own track, and each next frame the new one (issue 31). Then the tracker goes without a veto, as when the
# two kinds overlap.
VETO_MARGIN = 1.5


@dataclass
class Choice:
    thresholds: dict[str, float]  # tracking parameter -> value
    overlap: bool  # the same-person 99th percentile is not under the different-people 1st
    split: float  # the distance with the fewest errors (reported, not a threshold)
    errors: tuple[int, int]  # (same-person pairs over the split, different-people pairs at or under it)


def choose(same: np.ndarray, different: np.ndarray) -> Choice:
    """The three thresholds (by tracking parameter name) by the module's rule, and the split with fewest errors."""
    values, overlap = rule(same, different)
    split, errors = least_error_split(same, different)
    return Choice(values, overlap, split, errors)


def rule(same: np.ndarray, different: np.ndarray) -> tuple[dict[str, float], bool]:
    """The three thresholds (by tracking parameter name) by the module's rule; whether the two kinds overlap."""
    same_high = float(np.quantile(same, 1 - MARGIN))
    different_low = float(np.quantile(different, MARGIN))
    overlap = same_high >= different_low
    veto = same_high if overlap else (same_high + different_low) / 2
    link = min(same_high, different_low)
    values = {
        "track_appearance_threshold": round(link, 4),
        "track_appearance_veto": round(veto, 4),
        "track_reentry_threshold": round(link, 4),
    }
    return values, overlap


def least_error_split(same: np.ndarray, different: np.ndarray) -> tuple[float, tuple[int, int]]:
    """The distance t minimising (same > t) / len(same) + (different <= t) / len(different), midway between the
    neighbouring distances; with the counts on the wrong side."""
    candidates = np.unique(np.concatenate([same, different]))
    same_sorted, different_sorted = np.sort(same), np.sort(different)
    over = len(same) - np.searchsorted(same_sorted, candidates, side="right")
    under = np.searchsorted(different_sorted, candidates, side="right")
    cost = over / len(same) + under / len(different)
    best = int(np.argmin(cost))
    split = candidates[best] if best + 1 == len(candidates) else (candidates[best] + candidates[best + 1]) / 2
    return float(split), (int(over[best]), int(under[best]))


def online_rule(same: np.ndarray, different: np.ndarray) -> dict[str, float]:
    """The thresholds (TrackerConfig fields) from the stream's distances: apart, appearance and re-entry midway
    between the same-person 99th and the different-people 1st percentile, the veto at the latter (off, 1, under
    VETO_MARGIN times the former); overlapping, the PRIOR (see the module)."""
    same_high = float(np.quantile(same, 1 - MARGIN))
    different_low = float(np.quantile(different, MARGIN))
    if same_high >= different_low:
        return dict(PRIOR)
    link = round((same_high + different_low) / 2, 4)
    veto = round(different_low, 4) if different_low >= VETO_MARGIN * same_high else PRIOR["appearance_veto"]
    return {"appearance_threshold": link, "appearance_veto": veto, "reentry_threshold": link}


class OnlineCalibration:
    """The appearance thresholds ``fields`` (TrackerConfig field names; the others are fixed elsewhere) measured
    from the stream: ``add`` each frame's distances, ``values()`` the thresholds in use now. Bounded: ``window``
    distances of each kind."""

    def __init__(self, fields: Iterable[str] = tuple(FIELDS), window: int = WINDOW, min_samples: int = MIN_SAMPLES):
        self.fields = tuple(fields)
        unknown = set(self.fields) - set(FIELDS)
        if unknown:
            raise ValueError(f"no appearance threshold {sorted(unknown)}: calibrate some of {', '.join(FIELDS)}")
        if min_samples < 1 or window < min_samples:
            raise ValueError(f"window ({window}) must hold at least min_samples ({min_samples}) >= 1 distances")
        self.window, self.min_samples = window, min_samples
        self._lock = threading.Lock()  # the tracker adds on the inference thread; /diagnostics reads on another
        self.reset()

    def reset(self) -> None:
        """Forget every distance: the prior again."""
        with self._lock:
            self.same: deque[float] = deque(maxlen=self.window)
            self.different: deque[float] = deque(maxlen=self.window)
            self._measured: dict[str, float] | None = None  # the thresholds of the distances kept, once computed

    def add(self, same: Sequence[float], different: Sequence[float]) -> None:
        """One frame's same-person and different-people distances."""
        if len(same) or len(different):
            with self._lock:
                self.same.extend(same)
                self.different.extend(different)
                self._measured = None

    @property
    def calibrated(self) -> bool:
        return min(len(self.same), len(self.different)) >= self.min_samples

    def values(self) -> dict[str, float]:
        """The thresholds of ``fields`` in use now: measured once both kinds have ``min_samples``, else PRIOR."""
        if not self.calibrated:
            return {name: PRIOR[name] for name in self.fields}
        with self._lock:
            if self._measured is None:
                self._measured = online_rule(np.asarray(self.same), np.asarray(self.different))
            return {name: self._measured[name] for name in self.fields}

    def report(self) -> dict[str, object]:
        """What is measured: the state, and the count and percentiles of both kinds."""
        with self._lock:
            kinds = {"same": np.asarray(self.same), "different": np.asarray(self.different)}
        if not self.calibrated:
            state = f"prior (motion only) until {self.min_samples} distances of each kind"
        elif self.values() == {name: PRIOR[name] for name in self.fields}:
            state = "the kinds overlap: appearance off (motion only)"
        else:
            state = "calibrated"
        report: dict[str, object] = {"state": state}
        for kind, values in kinds.items():
            report[f"{kind} count"] = len(values)
            if len(values):
                points = np.percentile(values, REPORTED)
                report[f"{kind} p1/p50/p99"] = " / ".join(f"{point:.4f}" for point in points)
        return report
