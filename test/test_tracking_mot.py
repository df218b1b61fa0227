"""The tracker by motion alone on real trajectories: the TUD-Campus and TUD-Stadtmitte ground truth (motmetrics'
data) turned into detections (tools/mot.noisy_detections, seeded), tracked (tools/track.track_detections) and
scored against that truth (tools/mot.evaluate).

The bounds follow from what the tracker is given, not from its output:

- exact boxes, score 1: every reported box is a truth box, so there is no false positive; a truth box goes
  unreported only while its track is unconfirmed, which lasts one frame for a track that starts after frame 1
  (tracks of frame 1 are confirmed at once), so misses <= the truth tracks starting after frame 1 ("late"); with
  nothing ambiguous in the input there should be no ID switch. Then MOTA = 1 - misses / N >= 1 - late / N, and
  IDF1 = 2 (N - misses) / (2N - misses) >= 1 - late / N.
- 10 % of boxes missed (5 % jitter, scores 0.5..1): each missed box is one miss that no tracker can avoid (10 %);
  the track is re-found the next frame (lost tracks take part in the first matching), so nothing else is lost but
  rare confirmation delays (a score under the new-track threshold 0.6, a missed second frame) and rare switches.
  Another 10 % covers those: MOTA >= 0.8 and IDF1 >= 0.8 (IDF1 cannot exceed about 0.95 here: 10 % of IDTP gone).
- plus 1 false box a frame, scored 0.1..0.6: under the new-track threshold, such a box never starts a track; it is
  reported only when a track that lost its own box this frame takes it in the low-score matching (IoU >= 0.5 with
  the prediction), which uniform placement makes rare: at most 5 % of them are reported (at least 1 allowed: a
  jittered true box, a several-sigma draw, can fall under IoU 0.5 with its truth and count as one), and MOTA stays
  >= 0.8.
"""

from __future__ import annotations

from pathlib import Path

import motmetrics
import numpy as np
import pytest

from vision_factory.tools.mot import evaluate, noisy_detections
from vision_factory.tools.mot_files import read_mot
from vision_factory.tools.track import track_detections

TUD = Path(motmetrics.__file__).parent / "data"
SEEDS = range(3)


def _scores(sequence: str, seeds=SEEDS, **noise) -> tuple[list[dict], int]:
    truth = read_mot(TUD / sequence / "gt.txt")
    runs = [evaluate(truth, track_detections(noisy_detections(truth, seed=s, **noise)[0])) for s in seeds]
    return [run.metrics for run in runs], len(truth)


def _late_starts(sequence: str) -> int:
    truth = read_mot(TUD / sequence / "gt.txt")
    return sum(int(truth.frames[truth.ids == track].min() > 1) for track in np.unique(truth.ids))


CAMPUS_COASTING = (
    "TUD-Campus frames 28-33: the track of truth ID 6, lost at frame 9 and coasting at its last velocity (kept "
    "track_buffer = 30 frames, in the first matching with the tracked ones), reaches truth 5's box and fits it better "
    "than truth 5's own track, whose hand-drawn box changed width: 4 switches with exact boxes (models/tracker.py)"
)


@pytest.mark.parametrize(
    "sequence",
    [pytest.param("TUD-Campus", marks=pytest.mark.xfail(strict=True, reason=CAMPUS_COASTING)), "TUD-Stadtmitte"],
)
def test_exact_boxes_are_tracked_without_error(sequence):
    (metrics,), boxes = _scores(sequence, seeds=[0], jitter=0.0, true_scores=(1.0, 1.0))
    late = _late_starts(sequence)
    assert metrics["false_positives"] == 0
    assert metrics["misses"] <= late
    assert metrics["id_switches"] == 0
    assert metrics["MOTA"] >= 1 - late / boxes and metrics["IDF1"] >= 1 - late / boxes


def test_exact_campus_errs_only_by_switches():
    # What does hold on TUD-Campus with exact boxes (the switches aside, see CAMPUS_COASTING).
    (metrics,), boxes = _scores("TUD-Campus", seeds=[0], jitter=0.0, true_scores=(1.0, 1.0))
    assert metrics["false_positives"] == 0 and metrics["misses"] <= _late_starts("TUD-Campus")


@pytest.mark.parametrize("sequence", ["TUD-Campus", "TUD-Stadtmitte"])
@pytest.mark.parametrize("false_positives", [0.0, 1.0])
def test_missed_boxes_cost_little_more_than_themselves(sequence, false_positives):
    runs, _ = _scores(sequence, jitter=0.05, miss_rate=0.1, false_positives=false_positives)
    assert np.mean([run["MOTA"] for run in runs]) >= 0.8
    assert np.mean([run["IDF1"] for run in runs]) >= 0.8
    truth = read_mot(TUD / sequence / "gt.txt")
    injected = false_positives * len(np.unique(truth.frames))
    assert np.mean([run["false_positives"] for run in runs]) <= max(0.05 * injected, 1.0)
