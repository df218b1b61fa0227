"""MOTChallenge tracks: the file format, and `vision-factory eval --model-type track` on answers known beforehand.

Known answers: motmetrics' own expected results for the TUD-Campus and TUD-Stadtmitte data it ships (its
tests/test_metrics.py), TrackEval's HOTA run on the same data, ground truth scored against itself, and small
hand-built cases whose values are worked out below from the metrics' definitions.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
import types
from pathlib import Path

import motmetrics
import numpy as np
import pytest
from conftest import pypi_model
from support.cli import run_cli

from vision_factory.tools.mot import HOTA_ALPHAS, evaluate, noisy_detections, prepare
from vision_factory.tools.mot_files import MAX_LINE_CHARS, boxes_from_rows, mot_line, read_mot, write_mot

TUD = Path(motmetrics.__file__).parent / "data"
SEQUENCES = ("TUD-Campus", "TUD-Stadtmitte")
# motmetrics 1.4.0, tests/test_metrics.py::test_motchallenge_files: its expected values for test.txt against gt.txt
# (IoU distance, threshold 0.5), printed to 6 decimals; its motp is the mean distance 1 - IoU.
MOTMETRICS_EXPECTED = {
    "TUD-Campus": {
        "IDF1": 0.557659, "IDP": 0.729730, "IDR": 0.451253, "recall": 0.582173, "precision": 0.941441,
        "truth_tracks": 8, "mostly_tracked": 1, "partially_tracked": 6, "mostly_lost": 1, "false_positives": 13,
        "misses": 150, "id_switches": 7, "fragmentations": 7, "MOTA": 0.526462, "motp_distance": 0.277201,
    },
    "TUD-Stadtmitte": {
        "IDF1": 0.644619, "IDP": 0.819760, "IDR": 0.531142, "recall": 0.608997, "precision": 0.939920,
        "truth_tracks": 10, "mostly_tracked": 5, "partially_tracked": 4, "mostly_lost": 1, "false_positives": 45,
        "misses": 452, "id_switches": 7, "fragmentations": 6, "MOTA": 0.564014, "motp_distance": 0.345904,
    },
}  # fmt: skip
TRACKEVAL = ("trackeval", "1.3.0")
HOTA_FIELDS = ("HOTA", "DetA", "AssA", "DetRe", "DetPr", "AssRe", "AssPr", "LocA")

A, B, FAR = (0.0, 0.0, 10.0, 10.0), (50.0, 0.0, 10.0, 10.0), (200.0, 200.0, 10.0, 10.0)


def _tracks(*tracks: tuple[int, tuple[float, ...], range]) -> list[tuple]:
    """(id, box, frames) -> MOTChallenge rows (frame, id, x, y, w, h, score)."""
    return [(frame, track_id, *box, 1.0) for track_id, box, frames in tracks for frame in frames]


def _xywh(box: tuple[float, ...]) -> str:
    return ",".join(map(str, box))


def _score(truth_rows, predicted_rows) -> dict[str, float]:
    return evaluate(boxes_from_rows(truth_rows, "gt"), boxes_from_rows(predicted_rows, "tracks")).metrics


@pytest.mark.parametrize("sequence", SEQUENCES)
def test_tud_sequences_give_motmetrics_published_results(sequence):
    found = evaluate(read_mot(TUD / sequence / "gt.txt"), read_mot(TUD / sequence / "test.txt")).metrics
    expected = dict(MOTMETRICS_EXPECTED[sequence])
    assert found["MOTP"] == pytest.approx(1.0 - expected.pop("motp_distance"), abs=5e-7)
    for name, value in expected.items():
        if isinstance(value, int):
            assert found[name] == value, name
        else:
            assert found[name] == pytest.approx(value, abs=5e-7), name  # their 6 printed decimals


def _trackeval_modules():
    """TrackEval 1.3.0's HOTA metric and box IoU, as published (its wheel, without dependencies, cached like the
    test models). Its package __init__ files import every data set reader (one needs tabulate) and its wheel
    requires opencv-python, which cannot live beside this project's opencv-python-headless: the five modules HOTA
    and IoU need are loaded as they are, under bare packages of a private name."""
    files = [
        pypi_model(*TRACKEVAL, f"trackeval/{name}")
        for name in (
            "_timing.py",
            "utils.py",
            "metrics/_base_metric.py",
            "metrics/hota.py",
            "datasets/_base_dataset.py",
        )
    ]
    root = files[0].parent
    for name, folder in (("", root), (".metrics", root / "metrics"), (".datasets", root / "datasets")):
        package = types.ModuleType(f"_trackeval_reference{name}")
        package.__path__ = [str(folder)]
        sys.modules.setdefault(package.__name__, package)
    hota = importlib.import_module("_trackeval_reference.metrics.hota")
    datasets = importlib.import_module("_trackeval_reference.datasets._base_dataset")
    return hota.HOTA, datasets._BaseDataset._calculate_box_ious


def _trackeval_hota(truth, predictions) -> dict[str, float]:
    """TrackEval's HOTA of one sequence, its input built as its MOTChallenge reader does (IDs made contiguous from
    0, every frame from 1 to the last, IoU from its own function)."""
    hota, box_ious = _trackeval_modules()
    truth_index = np.unique(truth.ids, return_inverse=True)[1]
    predicted_index = np.unique(predictions.ids, return_inverse=True)[1]
    data = {"gt_ids": [], "tracker_ids": [], "similarity_scores": [], "num_gt_dets": len(truth)}
    data |= {"num_tracker_dets": len(predictions), "num_gt_ids": truth_index.max() + 1}
    data["num_tracker_ids"] = predicted_index.max() + 1
    for frame in range(1, max(truth.frames.max(), predictions.frames.max()) + 1):
        here, there = truth.frames == frame, predictions.frames == frame
        data["gt_ids"].append(truth_index[here])
        data["tracker_ids"].append(predicted_index[there])
        data["similarity_scores"].append(box_ious(truth.boxes[here], predictions.boxes[there]))
    result = hota().eval_sequence(data)
    return {name: float(np.mean(result[name])) for name in HOTA_FIELDS}


@pytest.mark.parametrize("sequence", SEQUENCES)
def test_hota_equals_trackeval_on_the_tud_sequences(sequence):
    truth, predictions = read_mot(TUD / sequence / "gt.txt"), read_mot(TUD / sequence / "test.txt")
    found = evaluate(truth, predictions).metrics
    reference = _trackeval_hota(truth, predictions)
    for name in HOTA_FIELDS:
        assert found[name] == pytest.approx(reference[name], abs=1e-12), name
    assert 0.3 < found["HOTA"] < 0.5  # neither trivially 0 nor 1


@pytest.mark.parametrize("sequence", SEQUENCES)
def test_ground_truth_against_itself_is_perfect(sequence):
    truth = read_mot(TUD / sequence / "gt.txt")
    found = evaluate(truth, truth).metrics
    for name in ("MOTA", "MOTP", "IDF1", "HOTA", "DetA", "AssA", "precision", "recall"):
        assert found[name] == 1.0, name
    assert found["id_switches"] == found["false_positives"] == found["misses"] == found["fragmentations"] == 0
    assert found["mostly_tracked"] == found["truth_tracks"] == len(np.unique(truth.ids))


def test_one_id_switch():
    """One person over 4 frames; the tracker calls it 7 in frames 1-2 and 8 in frames 3-4, boxes exact.
    CLEAR: 4 matches, 1 switch -> MOTA 1 - 1/4. Identity: the best one-to-one pairing (1-7 or 1-8) covers 2 of
    4 truth and 2 of 4 predicted boxes -> IDTP 2, IDFN 2, IDFP 2, IDF1 = 2*2 / (2*2 + 2 + 2). HOTA: every alpha
    has 4 TP, no FN or FP (DetA 1); each TP's pair matched 2 times against a truth track of 4 and a predicted
    track of 2 -> A = 2 / (4 + 2 - 2) = 0.5, AssA 0.5, HOTA sqrt(0.5); AssRe 2/4, AssPr 2/2."""
    found = _score(_tracks((1, A, range(1, 5))), _tracks((7, A, range(1, 3)), (8, A, range(3, 5))))
    assert found["id_switches"] == 1 and found["matches"] == 4
    assert found["false_positives"] == found["misses"] == found["fragmentations"] == 0
    assert found["MOTA"] == pytest.approx(0.75) and found["MOTP"] == pytest.approx(1.0)
    assert found["IDF1"] == pytest.approx(0.5) and found["IDP"] == pytest.approx(0.5) == found["IDR"]
    assert found["mostly_tracked"] == 1
    assert found["DetA"] == pytest.approx(1.0) and found["AssA"] == pytest.approx(0.5)
    assert found["HOTA"] == pytest.approx(math.sqrt(0.5))
    assert found["AssRe"] == pytest.approx(0.5) and found["AssPr"] == pytest.approx(1.0)


def test_a_missed_track():
    """Two people over 4 frames; the tracker follows only the first. CLEAR: 4 matches, 4 misses -> MOTA 1 - 4/8,
    recall 0.5, precision 1; identity: IDTP 4, IDFN 4, IDFP 0 -> IDF1 8/12; the second person is mostly lost.
    HOTA: TP 4, FN 4 -> DetA 4/8; the one pair's tracks agree fully -> AssA 1; HOTA sqrt(0.5)."""
    found = _score(_tracks((1, A, range(1, 5)), (2, B, range(1, 5))), _tracks((5, A, range(1, 5))))
    assert found["misses"] == 4 and found["false_positives"] == 0 and found["id_switches"] == 0
    assert found["MOTA"] == pytest.approx(0.5)
    assert found["recall"] == pytest.approx(0.5) and found["precision"] == pytest.approx(1.0)
    assert found["IDF1"] == pytest.approx(2 / 3) and found["IDR"] == pytest.approx(0.5) and found["IDP"] == 1.0
    assert (found["mostly_tracked"], found["partially_tracked"], found["mostly_lost"]) == (1, 0, 1)
    assert found["DetA"] == pytest.approx(0.5) and found["DetRe"] == pytest.approx(0.5) and found["DetPr"] == 1.0
    assert found["AssA"] == pytest.approx(1.0) and found["HOTA"] == pytest.approx(math.sqrt(0.5))


def test_a_false_positive():
    """One person over 4 frames, tracked exactly, and one extra box far away in frame 2. CLEAR: FP 1 -> MOTA
    1 - 1/4, precision 4/5; identity: IDTP 4, IDFP 1, IDFN 0 -> IDF1 8/9. HOTA: TP 4, FP 1 -> DetA 4/5, AssA 1,
    HOTA sqrt(0.8)."""
    found = _score(_tracks((1, A, range(1, 5))), _tracks((3, A, range(1, 5)), (9, FAR, range(2, 3))))
    assert found["false_positives"] == 1 and found["misses"] == 0 and found["id_switches"] == 0
    assert found["MOTA"] == pytest.approx(0.75) and found["precision"] == pytest.approx(0.8)
    assert found["IDF1"] == pytest.approx(8 / 9) and found["IDP"] == pytest.approx(0.8)
    assert found["DetA"] == pytest.approx(0.8) and found["AssA"] == pytest.approx(1.0)
    assert found["HOTA"] == pytest.approx(math.sqrt(0.8))


def test_hota_averages_over_localisation_thresholds():
    """One box, predicted with IoU 0.62 (the same x, y and w, 62% of the height): a true positive at the 12
    thresholds 0.05-0.60 (HOTA 1 there), nothing at the 7 above (HOTA 0) -> HOTA 12/19. CLEAR MOT matches it at
    IoU >= 0.5: MOTA 1, MOTP 0.62."""
    found = _score([(1, 1, *A, 1.0)], [(1, 4, 0.0, 0.0, 10.0, 6.2, 1.0)])
    assert found["HOTA"] == pytest.approx(12 / 19) and found["DetA"] == pytest.approx(12 / 19)
    assert found["MOTA"] == 1.0 and found["MOTP"] == pytest.approx(0.62)
    assert len(HOTA_ALPHAS) == 19


def test_mot16_flags_and_distractor_classes(tmp_path):
    """MOT16/17 ground truth (9 columns: flag, class, visibility): a flag-0 box is not scored (a prediction on it is
    a false positive); a distractor-class box (8) is an ignore region (the prediction on it is dropped)."""
    (tmp_path / "gt.txt").write_text(f"1,1,{_xywh(A)},1,1,0.9\n1,2,{_xywh(B)},0,1,0.5\n1,3,{_xywh(FAR)},0,8,1\n")
    write_mot(tmp_path / "tracks.txt", boxes_from_rows(_tracks((10, A, [1]), (11, B, [1]), (12, FAR, [1]))))
    truth = read_mot(tmp_path / "gt.txt")
    assert truth.classes.tolist() == [1, 1, 8] and truth.visibility.tolist() == [0.9, 0.5, 1.0]
    scoring = prepare(truth, read_mot(tmp_path / "tracks.txt"))
    assert (scoring.truth_not_scored, scoring.distractor_boxes, scoring.predictions_on_distractors) == (1, 1, 1)
    assert scoring.predictions.ids.tolist() == [10, 11]
    found = evaluate(truth, read_mot(tmp_path / "tracks.txt")).metrics
    assert (found["truth_boxes"], found["matches"], found["false_positives"]) == (1, 1, 1)
    # A prediction on a person beside a distractor (IoU 1 with the person, 0.67 with the distractor) is matched to
    # the person, as TrackEval matches against every truth box of the frame: a hit, nothing dropped.
    beside = (0.0, 2.0, 10.0, 10.0)
    (tmp_path / "gt.txt").write_text(f"1,1,{_xywh(A)},1,1,1\n1,2,{_xywh(beside)},0,7,1\n")
    scoring = prepare(read_mot(tmp_path / "gt.txt"), boxes_from_rows(_tracks((10, A, [1]))))
    assert scoring.predictions_on_distractors == 0 and scoring.predictions.ids.tolist() == [10]
    found = evaluate(read_mot(tmp_path / "gt.txt"), boxes_from_rows(_tracks((10, A, [1])))).metrics
    assert (found["matches"], found["misses"], found["false_positives"]) == (1, 0, 0)
    # The MOT15 layout (10 columns) has no class: column 8 is a world coordinate, never read as one.
    assert read_mot(TUD / "TUD-Campus" / "gt.txt").classes.max() == -1


def test_lines_are_written_as_motchallenge_and_read_back(tmp_path):
    assert mot_line(3, 7, (10.5, 20.0, 30.125, 40.0), 0.9) == "3,7,10.50,20.00,30.12,40.00,0.9000,-1,-1,-1"
    rows = [(2, 5, 1.5, 2.25, 30.0, 60.0, 0.75), (1, 4, 0.0, 0.0, 10.0, 10.0, 0.5), (1, 9, 5.0, 5.0, 8.0, 9.0, 1.0)]
    path = write_mot(tmp_path / "tracks.txt", boxes_from_rows(rows))
    assert path.read_text().splitlines()[0] == "1,4,0.00,0.00,10.00,10.00,0.5000,-1,-1,-1"  # frames in order
    back = read_mot(path)
    assert back.frames.tolist() == [1, 1, 2] and back.ids.tolist() == [4, 9, 5]
    assert back.boxes.tolist() == [[0, 0, 10, 10], [5, 5, 8, 9], [1.5, 2.25, 30, 60]]
    assert back.scores.tolist() == [0.5, 1.0, 0.75] and back.lines.tolist() == [1, 2, 3]
    # Whitespace-separated files and blank lines read as motmetrics reads them.
    (tmp_path / "spaces.txt").write_text("1 4 0 0 10 10 0.5 -1 -1 -1\n\n1\t9 5 5 8 9\n")
    assert read_mot(tmp_path / "spaces.txt").ids.tolist() == [4, 9]


@pytest.mark.parametrize(
    "content, problem",
    [
        ("1,1,0,0,10\n", "gt.txt:1: 5 fields"),
        ("1,1,0,0,10,10,1,-1,-1,-1,7\n", "gt.txt:1: 11 fields"),
        ("1,1,0,0,10,10\n1,2,0,zero,10,10\n", "gt.txt:2: column 4 is 'zero', not a number"),
        ("1,1,0,0,10,nan\n", "gt.txt:1: column 6 is nan, not a finite number"),
        ("0,1,0,0,10,10\n", "gt.txt:1: frame 0: MOTChallenge frames count from 1"),
        ("1.5,1,0,0,10,10\n", "gt.txt:1: frame (column 1) is 1.5, not a whole number"),
        ("1,1e30,0,0,10,10\n", "gt.txt:1: id (column 2) is 1e+30, too large"),
        ("1,1,0,0,-10,10\n", "gt.txt:1: negative box size -10x10"),
        ("1,3,0,0,10,10\n2,3,0,0,10,10\n1,3,5,5,10,10\n", "lines 1 and 3 both give frame 1 a box with id 3"),
        ("1,1,0,0,10,10," + "9" * MAX_LINE_CHARS + "\n", f"gt.txt:1: line longer than {MAX_LINE_CHARS} characters"),
        ("1,1,0,0,10,\x1b[31mred\n", "column 6 is '\\x1b[31mred', not a number"),
    ],
)
def test_malformed_files_name_the_file_line_and_problem(tmp_path, content, problem):
    (tmp_path / "gt.txt").write_text(content)
    with pytest.raises(ValueError) as error:
        read_mot(tmp_path / "gt.txt")
    assert problem in str(error.value) and "\x1b" not in str(error.value)


def test_unreadable_files_are_clear_errors(tmp_path):
    for path, problem in (
        (tmp_path / "missing.txt", "MOTChallenge file not found"),
        (tmp_path, "is a folder"),
    ):
        with pytest.raises(ValueError, match=problem):
            read_mot(path)
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00\x01" * 10)
    with pytest.raises(ValueError, match="not UTF-8 text"):
        read_mot(tmp_path / "binary.txt")
    detections = boxes_from_rows([(1, -1, *A, 0.9)], "det.txt")
    with pytest.raises(ValueError, match="det.txt:1: id -1 in the predictions.*detections file"):
        evaluate(boxes_from_rows([(1, 1, *A, 1.0)]), detections)
    with pytest.raises(ValueError, match="no box to score"):
        evaluate(boxes_from_rows([(1, 1, *A, 0.0)], "gt.txt"), boxes_from_rows([(1, 1, *A, 1.0)]))


def test_no_prediction_scores_zero_not_nan():
    found = _score(_tracks((1, A, range(1, 3))), [])
    assert found["misses"] == 2 and found["MOTA"] == 0.0 and found["HOTA"] == 0.0
    assert found["precision"] == 0.0 and found["IDP"] == 0.0 and found["MOTP"] == 0.0


def test_eval_command_writes_json_and_markdown(tmp_path):
    sequence = TUD / "TUD-Campus"
    out = tmp_path / "out"
    done = run_cli(
        "eval", "--model-type", "track", "--data", str(sequence / "gt.txt"),
        "--predictions", str(sequence / "test.txt"), "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "| HOTA | DetA | AssA |" in done.stdout and "| 0.5265 |" in done.stdout  # MOTA, shown
    record = json.loads((out / "eval.json").read_text())
    assert record["model_type"] == "track" and record["match_iou"] == 0.5
    assert record["metrics"]["IDF1"] == pytest.approx(0.557659, abs=5e-7)
    assert record["metrics"]["id_switches"] == 7 and len(record["hota_per_alpha"]["HOTA"]) == 19
    assert "| 7 | 7 | 13 | 150 | 8 | 1 | 6 | 1 |" in (out / "eval.md").read_text()


def test_eval_command_errors(tmp_path):
    (tmp_path / "gt.txt").write_text("1,1,0,0,10,10,1,-1,-1,-1\n")
    (tmp_path / "tracks.txt").write_text("1,1,0,0,10,10,1,-1,-1,-1\n2,1,0,zero,10,10,1,-1,-1,-1\n")
    done = run_cli("eval", "--model-type", "track", "--data", str(tmp_path / "gt.txt"), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "give --predictions" in done.stderr and "Traceback" not in done.stderr
    arguments = ("eval", "--model-type", "track", "--data", str(tmp_path / "gt.txt"), "--out", str(tmp_path / "o"))
    done = run_cli(*arguments, "--predictions", str(tmp_path / "tracks.txt"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"{tmp_path / 'tracks.txt'}:2: column 4 is 'zero', not a number" in done.stderr
    # eval's choices: the families it scores and track; never a family it cannot score.
    done = run_cli("eval", "--model-type", "nonsense", "--data", str(tmp_path / "gt.txt"))
    assert done.returncode == 2 and "'tracknet', 'yolo'" in done.stderr and "'track'" in done.stderr


def test_noisy_detections_are_seeded_and_follow_their_settings():
    truth = read_mot(TUD / "TUD-Stadtmitte" / "gt.txt")
    exact, origin = noisy_detections(truth, jitter=0.0)
    assert np.array_equal(origin, np.arange(len(truth)))  # truth.txt is in frame order
    assert np.array_equal(exact.boxes, truth.boxes) and (exact.ids == -1).all() and len(exact) == len(truth)
    settings = {"jitter": 0.1, "miss_rate": 0.2, "false_positives": 2.0, "frame_size": (640, 480), "seed": 3}
    first, origin = noisy_detections(truth, **settings)
    again, _ = noisy_detections(truth, **settings)
    other, _ = noisy_detections(truth, **(settings | {"seed": 4}))
    assert np.array_equal(first.boxes, again.boxes) and not np.array_equal(first.boxes[:50], other.boxes[:50])
    kept = origin[origin >= 0]
    assert 0.15 < 1 - len(kept) / len(truth) < 0.25  # miss rate 0.2 over 1156 boxes
    frames = len(np.unique(truth.frames))
    false = first.subset(origin < 0)
    assert 1.7 < len(false) / frames < 2.3  # Poisson mean 2 per frame over 179 frames
    assert (false.boxes[:, :2] >= 0).all() and (false.boxes[:, 0] + false.boxes[:, 2] <= 640).all()
    source = truth.boxes[kept]
    shift = first.boxes[origin >= 0, :2] + first.boxes[origin >= 0, 2:] / 2 - source[:, :2] - source[:, 2:] / 2
    assert 0.085 < np.std(shift[:, 0] / source[:, 2]) < 0.115  # centre noise: 0.1 of the width
    assert (first.scores[origin >= 0] >= 0.5).all() and (false.scores < 0.6).all()
    # As a tracker's input they are scored as what they are: detections without identities.
    with pytest.raises(ValueError, match="detections file"):
        evaluate(truth, first)
