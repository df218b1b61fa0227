"""The tracker by motion alone on real trajectories: the TUD-Campus and TUD-Stadtmitte ground truth that motmetrics
ships, turned into a detector's output at several noise levels (tools/mot.noisy_detections: seeded jitter of centre
and size, missed boxes, Poisson false positives per frame), tracked (tools/track.track_detections, one class) and
scored against the same ground truth (tools/mot.evaluate).

    python benchmarks/bench_tracking_mot.py [--seeds 5] [--markdown]

Prints, per sequence and noise level, the mean over the seeds of HOTA, MOTA, IDF1 and the ID switches. A
benchmark, not a test: nothing is asserted here (test/test_tracking_mot.py asserts bounds on some levels).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from vision_factory.tools.mot import evaluate, noisy_detections
from vision_factory.tools.mot_files import read_mot
from vision_factory.tools.track import track_detections


def tud_folder() -> Path:
    import motmetrics

    return Path(motmetrics.__file__).parent / "data"


SEQUENCES = ("TUD-Campus", "TUD-Stadtmitte")
# name: noisy_detections arguments. Scores: a detector's spread (0.5..1 for true boxes, 0.1..0.6 for false ones),
# except "exact", every box as it is with score 1.
LEVELS = {
    "exact": {"jitter": 0.0, "true_scores": (1.0, 1.0)},
    "jitter 5%": {"jitter": 0.05},
    "jitter 5%, 10% missed": {"jitter": 0.05, "miss_rate": 0.1},
    "jitter 5%, 10% missed, 1 FP/frame": {"jitter": 0.05, "miss_rate": 0.1, "false_positives": 1.0},
    "jitter 10%, 20% missed, 2 FP/frame": {"jitter": 0.1, "miss_rate": 0.2, "false_positives": 2.0},
    "jitter 10%, 30% missed, 3 FP/frame": {"jitter": 0.1, "miss_rate": 0.3, "false_positives": 3.0},
}
SHOWN = ("HOTA", "MOTA", "IDF1", "id_switches", "false_positives", "misses")


def score(sequence: str, level: dict, seed: int) -> dict[str, float]:
    truth = read_mot(tud_folder() / sequence / "gt.txt")
    detections, _ = noisy_detections(truth, seed=seed, **level)
    return evaluate(truth, track_detections(detections)).metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5, help="noise seeds averaged per level")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    if args.markdown:
        print("| sequence | detections | HOTA | MOTA | IDF1 | ID switches | FP | misses |")
        print("|---|---|---|---|---|---|---|---|")
    for sequence in SEQUENCES:
        for name, level in LEVELS.items():
            runs = [score(sequence, level, seed) for seed in range(args.seeds)]
            mean = {key: float(np.mean([run[key] for run in runs])) for key in SHOWN}
            if args.markdown:
                print(
                    f"| {sequence} | {name} | {mean['HOTA']:.3f} | {mean['MOTA']:.3f} | {mean['IDF1']:.3f} | "
                    f"{mean['id_switches']:.1f} | {mean['false_positives']:.1f} | {mean['misses']:.1f} |"
                )
            else:
                shown = "  ".join(f"{key} {mean[key]:.3f}" for key in SHOWN)
                print(f"{sequence:15s} {name:38s} {shown}")


if __name__ == "__main__":
    main()
