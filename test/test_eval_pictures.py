"""What `eval` shows beside its COCO metrics (tools/eval_details.py), on a data set whose errors the test made: the
per-class table (truths found and missed, false detections, AP), the precision-recall curve drawn per class in the
class's colour, and the worst images drawn with the truth dashed and the detections solid; read from the files
and the drawn pixels, not against a reference picture."""

from __future__ import annotations

import json

import cv2
import numpy as np
from click.testing import CliRunner

from vision_factory.cli import main
from vision_factory.results.colours import class_colour

WIDTH, HEIGHT = 512, 384  # at least eval_details.MIN_WIDTH: drawn at their own size
GREY = 90
CATEGORIES = [{"id": 1, "name": "person"}, {"id": 2, "name": "ball"}]
# image id -> truths (category, x, y, w, h)
TRUTHS = {
    1: [(1, 40, 60, 120, 200), (2, 300, 100, 60, 60)],
    2: [(1, 40, 60, 120, 200), (2, 300, 100, 60, 60), (1, 200, 150, 80, 160)],
    3: [(1, 100, 100, 150, 150)],
}


def _data_set(tmp_path):
    images = tmp_path / "data" / "images"
    images.mkdir(parents=True)
    annotations = []
    for image_id, truths in TRUTHS.items():
        cv2.imwrite(str(images / f"{image_id}.png"), np.full((HEIGHT, WIDTH, 3), GREY, np.uint8))
        for category, x, y, w, h in truths:
            entry = {"id": len(annotations) + 1, "image_id": image_id, "category_id": category, "bbox": [x, y, w, h]}
            annotations.append(entry | {"area": w * h, "iscrowd": 0})
    truth = {
        "images": [{"id": i, "file_name": f"{i}.png", "width": WIDTH, "height": HEIGHT} for i in TRUTHS],
        "annotations": annotations,
        "categories": CATEGORIES,
    }
    (tmp_path / "data" / "annotations.json").write_text(json.dumps(truth))
    return tmp_path / "data"


def _detection(image_id, category, box, score):
    return {"image_id": image_id, "category_id": category, "bbox": list(box), "score": score}


# Image 1: both truths found. Image 2: the second person missed, a ball found, a false ball far from any truth
# (scoring above every ball found). Image 3: its person found; a false person scoring 0.1 (under 0.25: not
# counted as false).
FALSE_BALL = (420, 280, 50, 50)
RESULTS = [
    _detection(1, 1, (40, 60, 120, 200), 0.95),
    _detection(1, 2, (300, 100, 60, 60), 0.9),
    _detection(2, 1, (40, 60, 120, 200), 0.92),
    _detection(2, 2, (300, 100, 60, 60), 0.85),
    _detection(2, 2, FALSE_BALL, 0.97),
    _detection(3, 1, (100, 100, 150, 150), 0.9),
    _detection(3, 1, (380, 20, 40, 40), 0.1),
]


def _eval(tmp_path, *extra):
    data = _data_set(tmp_path)
    (tmp_path / "results.json").write_text(json.dumps(RESULTS))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["eval", "--model-type", "yolo", "--data", str(data), "--predictions", str(tmp_path / "results.json"),
         "--out", str(out), *extra],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out, json.loads((out / "eval.json").read_text()), result.output


def test_the_per_class_table_counts_the_truths_found_and_missed_and_the_false_detections(tmp_path):
    out, record, _ = _eval(tmp_path)
    rows = {row["name"]: row for row in record["classes"]}
    assert {name: (row["truths"], row["found"], row["missed"], row["false"]) for name, row in rows.items()} == {
        "person": (4, 3, 1, 0),  # the false person scores 0.1: under 0.25
        "ball": (2, 2, 0, 1),
    }
    assert rows["person"]["detections"] == 4 and rows["ball"]["detections"] == 3
    # person: 3 of 4 truths found, every one before any false detection: precision 1 up to recall 0.75, then none.
    assert abs(rows["person"]["AP50"] - 76 / 101) < 1e-9
    # ball: the false one first (0.97), then both found: precision 1/2 at recall 0.5, 2/3 at 1 (interpolated: 2/3).
    assert abs(rows["ball"]["AP"] - 2 / 3) < 1e-9 and rows["ball"]["AR"] == 1.0
    table = (out / "eval.md").read_text()
    assert "| person | 4 | 4 | " in table and "| 3 | 1 | 0 |" in table
    assert "| ball | 2 | 3 | 0.6667 | 0.6667 | 0.6667 | 1.0000 | 2 | 0 | 1 |" in table


def test_the_precision_recall_curve_is_drawn_in_each_classs_colour(tmp_path):
    out, _, output = _eval(tmp_path)
    assert "pr_curve" in output and "![precision-recall per class](pr_curve.png)" in (out / "eval.md").read_text()
    picture = cv2.imread(str(out / "pr_curve.png"))
    for index in range(len(CATEGORIES)):  # the classes' colours, in the truth's order (as in the worst images)
        close = np.abs(picture.astype(int) - np.array(class_colour(index))).max(axis=2) <= 8
        assert close.sum() > 100, f"class {index}'s colour {class_colour(index)} drawn at {close.sum()} pixels"


def test_the_worst_images_are_those_with_errors_truth_dashed_and_detections_solid(tmp_path):
    out, record, _ = _eval(tmp_path)
    # Image 2 (one missed, one false) alone has errors at a score of 0.25 or more: image 3's false one scores 0.1.
    picture = "worst_images/worst_01.png"
    assert record["worst_images"] == [
        {"image_id": 2, "file_name": "2.png", "missed": 1, "false": 1, "found": 2, "picture": picture}
    ]
    assert sorted(path.name for path in (out / "worst_images").iterdir()) == ["worst_01.png"]
    picture = cv2.imread(str(out / "worst_images" / "worst_01.png"))
    assert picture.shape[:2][1] == WIDTH and picture.shape[0] > HEIGHT  # a legend line below the image
    # The missed person's truth (200, 150, 80, 160): its left edge half-way down in white and black dashes.
    edge = picture[170:290, 200]
    white = (edge >= 250).all(axis=1)
    black = (edge <= 5).all(axis=1)
    assert white.sum() > 30 and black.sum() > 30 and (white | black).all()
    assert np.count_nonzero(np.diff(white.astype(int))) >= 8  # dashes, not one line
    # The false ball (a detection: solid in its class's colour, "ball" the second category) on its left edge.
    x, y, _, h = FALSE_BALL
    solid = picture[y + 15 : y + h - 5, x]
    assert (np.abs(solid.astype(int) - np.array(class_colour(1))) <= 1).all()
    # A found person: its truth dashed under its detection's solid edge, the detection's colour where they meet.
    assert (np.abs(picture[200:240, 40].astype(int) - np.array(class_colour(0))) <= 1).all()


def test_no_worst_images_with_worst_0(tmp_path):
    out, record, _ = _eval(tmp_path, "--worst", "0")
    assert "worst_images" not in record and not (out / "worst_images").exists()
    assert record["classes"] and (out / "pr_curve.png").is_file()
