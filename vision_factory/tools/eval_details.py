"""What `eval` shows beside its COCO metrics, read from pycocotools' own evaluation (results/coco.py's
``coco_evaluation``): a table per class (AP, AP50, AP75, AR and, at IoU 0.5 and a score of at least MIN_SCORE, the
truths found and missed and the false detections), a precision-recall curve per class (IoU 0.5, pr_curve.png) and
the worst images (the most missed and false detections), each drawn with its truth dashed and its detections solid
(worst_images/worst_NN.png)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..files import output_folder, staged
from ..results.coco import MIN_SCORE
from ..results.colours import class_colour
from ..text import markdown_cell, untrusted
from .plots import precision_recall_axes, pyplot, save_figure

WORST_IMAGES = 6  # drawn by default (eval --worst)
WORST_FOLDER = "worst_images"
MIN_WIDTH = 512  # pixels: a worst image is drawn enlarged to at least this width
TRUTH_COLOUR, TRUTH_GAP = (255, 255, 255), (0, 0, 0)  # BGR: a truth's dashes, white on black, seen on any image
LEGEND_HEIGHT = 26  # pixels: the line below a worst image saying which style is which


@dataclass
class ImageErrors:
    """One image's truths missed and false detections at IoU 0.5 and a score of at least MIN_SCORE."""

    image_id: Any
    file_name: str
    missed: list[int] = field(default_factory=list)  # truth annotation ids
    false: list[int] = field(default_factory=list)  # detection ids (the evaluation's)
    found: int = 0

    @property
    def errors(self) -> int:
        return len(self.missed) + len(self.false)


@dataclass
class Details:
    """What eval adds to its report: eval.json's entries, eval.md's sections, the files written, warnings."""

    record: dict[str, Any] = field(default_factory=dict)
    markdown: list[str] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _mean(values: np.ndarray) -> float | None:
    """The mean of pycocotools' values that exist (-1: none, e.g. a class without truths); None when none does."""
    kept = values[values > -1]
    return float(kept.mean()) if kept.size else None


def image_errors(evaluation: Any, min_score: float = MIN_SCORE) -> dict[Any, ImageErrors]:
    """Each image's errors, from the evaluation's per-image matching (every area, the most detections): a truth
    (not crowd, not ignored) is missed when no detection scoring ``min_score`` or more matches it at IoU 0.5, a
    detection scoring that is false when it matches no truth (and is not ignored: on a crowd region). pycocotools
    matches greedily by score, so the detections under ``min_score`` change none of these matches."""
    images = evaluation.cocoGt.imgs
    found: dict[Any, ImageErrors] = {
        image_id: ImageErrors(image_id, str(image.get("file_name", ""))) for image_id, image in images.items()
    }
    whole = evaluation.params.areaRng[0]
    for entry in evaluation.evalImgs:
        if entry is None or list(entry["aRng"]) != list(whole):
            continue
        errors = found[entry["image_id"]]
        scores = dict(zip(entry["dtIds"], entry["dtScores"]))
        for truth_id, match, ignored in zip(entry["gtIds"], entry["gtMatches"][0], entry["gtIgnore"]):
            if ignored:
                continue
            if match and scores.get(int(match), 0.0) >= min_score:
                errors.found += 1
            else:
                errors.missed.append(int(truth_id))
        for detection_id, score, match, ignored in zip(
            entry["dtIds"], entry["dtScores"], entry["dtMatches"][0], entry["dtIgnore"][0]
        ):
            if score >= min_score and not match and not ignored:
                errors.false.append(int(detection_id))
    return found


def class_rows(evaluation: Any, errors: dict[Any, ImageErrors]) -> list[dict[str, Any]]:
    """A row per category: its name, truths (not crowd), detections, AP (0.50:0.95), AP50, AP75, AR (the most
    detections; None for a class without truths) and at IoU 0.5 and MIN_SCORE its truths found and missed and its
    false detections."""
    truth, results = evaluation.cocoGt, evaluation.cocoDt
    precision, recall = evaluation.eval["precision"], evaluation.eval["recall"]  # [T, R, K, A, M], [T, K, A, M]
    missed = [truth.anns[i]["category_id"] for image in errors.values() for i in image.missed]
    false = [results.anns[i]["category_id"] for image in errors.values() for i in image.false]
    rows = []
    for k, category in enumerate(evaluation.params.catIds):
        truths = sum(1 for a in truth.anns.values() if a["category_id"] == category and not a.get("iscrowd", 0))
        rows.append(
            {
                "category_id": category,
                "name": truth.cats[category]["name"],
                "truths": truths,
                "detections": sum(1 for a in results.anns.values() if a["category_id"] == category),
                "AP": _mean(precision[:, :, k, 0, -1]),
                "AP50": _mean(precision[0, :, k, 0, -1]),
                "AP75": _mean(precision[5, :, k, 0, -1]),
                "AR": _mean(recall[:, k, 0, -1]),
                "found": truths - missed.count(category),
                "missed": missed.count(category),
                "false": false.count(category),
            }
        )
    return rows


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def class_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The per-class rows as a Markdown table (names from the truth file: escaped)."""
    lines = [
        f"| class | truths | detections | AP | AP50 | AP75 | AR | found | missed | false (score ≥ {MIN_SCORE:g}) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        numbers = " | ".join(_cell(row[name]) for name in ("AP", "AP50", "AP75", "AR"))
        lines.append(
            f"| {markdown_cell(untrusted(row['name'], 60))} | {row['truths']} | {row['detections']} | {numbers} | "
            f"{row['found']} | {row['missed']} | {row['false']} |"
        )
    return lines


def pr_curves(evaluation: Any) -> dict[Any, list[float]]:
    """Category id -> its precision at pycocotools' recall steps (0, 0.01, ... 1) at IoU 0.5 (the most detections,
    every area) up to the highest recall its detections reach; [] for a class without truths."""
    precision = evaluation.eval["precision"][0, :, :, 0, -1]  # [R, K]
    reached = evaluation.eval["recall"][0, :, 0, -1]  # [K]
    steps = evaluation.params.recThrs
    curves = {}
    for k, category in enumerate(evaluation.params.catIds):
        kept = precision[steps <= reached[k] + 1e-9, k] if reached[k] > -1 else np.zeros(0)
        curves[category] = [float(value) for value in kept]
    return curves


def rgb(colour: Sequence[int]) -> tuple[float, float, float]:
    """A BGR colour in 0..255 (OpenCV's) as matplotlib's RGB in 0..1."""
    blue, green, red = colour[:3]
    return red / 255, green / 255, blue / 255


LEGEND_CLASSES = 20  # classes named in the curve's legend; more: only the mean is


def plot_pr_curves(path: Path, evaluation: Any, rows: Sequence[dict[str, Any]], inputs: Sequence = ()) -> Path:
    """pr_curve.png: each class's precision over recall at IoU 0.5 in its class's colour (results/colours.py, as
    in every picture), the mean over the classes in black; the legend names each class with its AP50."""
    plt = pyplot()
    recalls = evaluation.params.recThrs
    figure, axes = plt.subplots(figsize=(6.4, 5))
    curves = pr_curves(evaluation)
    for index, row in enumerate(rows):
        curve = curves[row["category_id"]]
        shown = f"{untrusted(row['name'], 30)} {_cell(row['AP50'])}" if len(rows) <= LEGEND_CLASSES else None
        axes.plot(recalls[: len(curve)], curve, color=rgb(class_colour(index)), linewidth=1.5, label=shown)
    every = evaluation.eval["precision"][0, :, :, 0, -1]  # [R, K]: the mean over the classes with truths
    with_truths = every[:, (every > -1).any(axis=0)]
    if with_truths.size:
        overall = f"all classes {_cell(_mean(with_truths))}"
        axes.plot(recalls, with_truths.mean(axis=1), color="black", linewidth=3, label=overall)
    precision_recall_axes(axes, "precision-recall per class at IoU 0.5 (legend: AP50)")
    axes.legend(loc="lower left", fontsize=8)
    return save_figure(figure, path, inputs, "--out")


def worst(errors: dict[Any, ImageErrors], count: int) -> list[ImageErrors]:
    """The ``count`` images with the most errors (missed and false), at least one each; ties in the truth's order."""
    order = sorted(errors.values(), key=lambda image: -image.errors)
    return [image for image in order if image.errors][:count]


def draw_worst(image: np.ndarray, evaluation: Any, errors: ImageErrors, class_index: dict[Any, int]) -> np.ndarray:
    """An image enlarged to at least MIN_WIDTH wide with its truths dashed white on black (a missed one labelled
    "missed <class>") and its detections scoring MIN_SCORE or more solid in their class's colour (labelled
    "<class> <score>", a false one "false <class> <score>"), every label placed clear of the others, and a legend
    line below it."""
    import cv2

    from ..results.drawing import FONT, OUTLINE, draw_dashed_box, draw_labels

    scale = max(1.0, MIN_WIDTH / image.shape[1])
    canvas = image if image.ndim == 3 else cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    canvas = cv2.resize(canvas, None, fx=scale, fy=scale, interpolation=cv2.INTER_LINEAR)
    boxes, texts, colours = [], [], []
    truth, results = evaluation.cocoGt, evaluation.cocoDt
    for annotation in truth.imgToAnns.get(errors.image_id, []):
        x, y, w, h = (v * scale for v in annotation["bbox"])
        draw_dashed_box(canvas, (x, y, x + w, y + h), TRUTH_COLOUR, TRUTH_GAP)
        if annotation["id"] in errors.missed:
            name = untrusted(truth.cats[annotation["category_id"]]["name"], 40)
            boxes.append((x, y, x + w, y + h))
            texts.append(f"missed {name}")
            colours.append(TRUTH_COLOUR)
    for detection in results.imgToAnns.get(errors.image_id, []):
        if detection["score"] < MIN_SCORE:
            continue
        x, y, w, h = (v * scale for v in detection["bbox"])
        colour = class_colour(class_index.get(detection["category_id"], -1))
        cv2.rectangle(canvas, (int(round(x)), int(round(y))), (int(round(x + w)), int(round(y + h))), colour, OUTLINE)
        name = untrusted(truth.cats.get(detection["category_id"], {}).get("name", detection["category_id"]), 40)
        boxes.append((x, y, x + w, y + h))
        texts.append(f"{'false ' if detection['id'] in errors.false else ''}{name} {detection['score']:.2f}")
        colours.append(colour)
    draw_labels(canvas, boxes, texts, colours)
    canvas = cv2.copyMakeBorder(canvas, 0, LEGEND_HEIGHT, 0, 0, cv2.BORDER_CONSTANT, value=(32, 32, 32))
    legend = (
        f"truth dashed, detections (score >= {MIN_SCORE:g}) solid: {len(errors.missed)} missed, "
        f"{len(errors.false)} false"
    )
    cv2.putText(canvas, legend, (6, canvas.shape[0] - 8), FONT, 0.45, (255, 255, 255), 1, cv2.LINE_AA)
    return canvas


def write_worst(
    out_dir: Path, evaluation: Any, images: Sequence[ImageErrors], annotations: Path, inputs: Sequence = ()
) -> tuple[list[dict[str, Any]], list[str]]:
    """The worst images drawn as OUT/worst_images/worst_NN.png (an earlier run's worst_NN.png there removed
    first): a record per image and the warnings (an image not found beside the annotations is not drawn)."""
    import cv2

    from .sources import image_file, read_image

    folder = output_folder(out_dir, WORST_FOLDER, "--out")
    for earlier in folder.glob("worst_*.png"):
        if earlier.is_file() and not earlier.is_symlink():
            earlier.unlink()
    class_index = {category: index for index, category in enumerate(evaluation.params.catIds)}
    record, unread = [], []
    for rank, errors in enumerate(images, start=1):
        entry = {"image_id": errors.image_id, "file_name": errors.file_name, "missed": len(errors.missed)}
        entry |= {"false": len(errors.false), "found": errors.found}
        path = image_file(annotations, errors.file_name) if errors.file_name else None
        frame = read_image(path) if path else None
        if frame is None:
            unread.append(untrusted(errors.file_name, 80))
        else:
            picture = folder / f"worst_{rank:02d}.png"
            with staged(picture, inputs, "--out") as fresh:
                cv2.imwrite(str(fresh), draw_worst(frame, evaluation, errors, class_index))
            entry["picture"] = f"{WORST_FOLDER}/{picture.name}"
        record.append(entry)
    warnings = []
    if unread:
        warnings.append(
            f"{len(unread)} of the worst images not drawn, not found or unreadable beside the annotations "
            f"(first: {unread[0]}): put the images beside the annotation file or under images/ there"
        )
    return record, warnings


def details(
    evaluation: Any, annotations: Path, out_dir: Path, worst_count: int = WORST_IMAGES, inputs: Sequence = ()
) -> Details:
    """eval's per-class table, PR curve and worst images of ``evaluation`` (None: no detections, nothing to show),
    written into ``out_dir`` (never onto one of ``inputs``)."""
    found = Details()
    if evaluation is None:
        return found
    errors = image_errors(evaluation)
    rows = class_rows(evaluation, errors)
    found.record["classes"] = rows
    found.markdown += [
        "",
        f"## Per class (found, missed, false: IoU 0.5, score ≥ {MIN_SCORE:g})",
        "",
        *class_table(rows),
    ]
    found.files["pr_curve"] = plot_pr_curves(out_dir / "pr_curve.png", evaluation, rows, inputs)
    found.markdown += ["", "![precision-recall per class](pr_curve.png)"]
    chosen = worst(errors, worst_count)
    if chosen:
        listed, found.warnings = write_worst(out_dir, evaluation, chosen, annotations, inputs)
        found.record["worst_images"] = listed
        found.markdown += [
            "",
            "## Worst images (truth dashed, detections solid)",
            "",
            "| image | missed | false | found | picture |",
            "|---|---|---|---|---|",
        ]
        for entry in listed:
            picture = f"![{entry['picture']}]({entry['picture']})" if "picture" in entry else "not found"
            name = markdown_cell(untrusted(entry["file_name"], 80))
            found.markdown.append(f"| {name} | {entry['missed']} | {entry['false']} | {entry['found']} | {picture} |")
        found.files |= {f"worst {index}": out_dir / e["picture"] for index, e in enumerate(listed, 1) if "picture" in e}
    return found
