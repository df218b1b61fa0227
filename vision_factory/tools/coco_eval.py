"""COCO detection, keypoint and instance mask metrics with pycocotools: AP (0.50:0.95), AP50, AP75, AR100 (AR20 for
keypoints); a segmentation model's masks (COCO results with ``segmentation``) are also scored as iouType segm, their
metrics named mask_AP, mask_AP50, ... beside the boxes'."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..families.prompts import SEPARATOR, BoxesPrompt
from ..families.registry import FAMILIES, SINGLE_MODEL_DETECTORS, family
from ..files import output_folder, write_text
from ..progress import Progress, counted
from ..results.coco import category_ids, coco_evaluation, coco_metrics, coco_results, evaluation_metrics
from ..results.coco import differences as output_differences
from ..results.frame import FrameResult
from ..text import shown_path, untrusted
from .coco_masks import image_size_problem, segmentation_problem
from .coco_prompts import eval_detector, prompted_ious, truth_boxes, truth_instances
from .commands import CommandReport, UsageError
from .compare import configuration_name, describe_comparison, metric_differences, save_comparison
from .eval_details import WORST_IMAGES, Details, details
from .sources import image_file, read_image

# model family -> COCO iouType
IOU_TYPES = {name: spec.result.iou_type for name, spec in FAMILIES.items() if spec.result and spec.result.iou_type}
# Families run_and_score can run from one model file (rtmpose needs a person detector too).
SINGLE_MODEL_FAMILIES = tuple(name for name in SINGLE_MODEL_DETECTORS if name in IOU_TYPES)


def _load_json(path: Path, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ValueError(f"{what} not found: {shown_path(path)}") from None
    except IsADirectoryError:
        raise ValueError(f"{what} {shown_path(path)} is a folder: give the JSON file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what} {shown_path(path)} is not valid JSON: {untrusted(exc)}") from None


class CocoFormatError(ValueError):
    """A COCO annotation or results file whose structure pycocotools would trip on, or score wrongly."""


def _entry(path: Path, where: str, problem: str) -> CocoFormatError:
    return CocoFormatError(f"{shown_path(path)}: {where} {problem}")


def _field(entry: Any, path: Path, where: str, name: str) -> Any:
    """``entry[name]``; an error naming the file, the entry and the field when the entry is no object or lacks it."""
    if not isinstance(entry, dict):
        raise _entry(path, where, f"is {untrusted(type(entry).__name__)}, not an object {{...}}")
    if name not in entry:
        raise _entry(path, where, f"has no '{name}' field")
    return entry[name]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _id(entry: Any, path: Path, where: str, name: str = "id") -> int | str:
    value = _field(entry, path, where, name)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _entry(path, where, f"'{name}' is {untrusted(value, 60)}: COCO ids are whole numbers (or text)")
    return value


def _finite(entry: Any, path: Path, where: str, name: str, length: int | None = None) -> list[float]:
    """The list of finite numbers ``entry[name]`` (of ``length`` numbers, or a multiple of 3 when None)."""
    values = _field(entry, path, where, name)
    sized = isinstance(values, list) and (len(values) == length if length else len(values) % 3 == 0)
    if not sized or not all(_is_number(value) for value in values):
        shape = f"{length} numbers" if length else "x, y, v numbers (3 per keypoint)"
        raise _entry(path, where, f"'{name}' is {untrusted(values, 80)}, not a list of {shape}")
    if not all(np.isfinite(values)):
        raise _entry(path, where, f"'{name}' {untrusted(values, 80)} is not finite (NaN or infinity): fix or drop it")
    if name == "bbox" and (values[2] < 0 or values[3] < 0):
        raise _entry(path, where, f"'bbox' {values} has a negative width or height (COCO boxes are x, y, w, h)")
    return values


def _unique(ids: list[int | str], path: Path, section: str) -> None:
    seen: dict[int | str, int] = {}
    for index, value in enumerate(ids):
        if value in seen:
            raise _entry(
                path, f"{section}[{index}]", f"repeats the id {untrusted(value, 40)} of {section}[{seen[value]}]"
            )
        seen[value] = index


def check_truth(truth: Any, path: Path, iou_type: str) -> dict[str, Any]:
    """``truth`` when it is a COCO annotation file pycocotools can score for ``iou_type`` (bbox, keypoints or segm:
    every segmentation a mask of its image, coco_masks.py); else a CocoFormatError naming the file, the entry (e.g.
    annotations[3]) and the field."""
    sections = ("images", "annotations", "categories")
    if not isinstance(truth, dict) or not set(sections) <= set(truth):
        raise CocoFormatError(
            f"{shown_path(path)} is not a COCO annotation file: it needs images, annotations and categories"
        )
    for section in sections:
        if not isinstance(truth[section], list):
            raise CocoFormatError(f"{shown_path(path)}: '{section}' is {type(truth[section]).__name__}, not a list")
    for index, image in enumerate(truth["images"]):
        for size in ("width", "height"):
            if isinstance(image, dict) and size in image:
                value = image[size]
                if not (_is_number(value) and value > 0):
                    raise _entry(path, f"images[{index}]", f"'{size}' is {untrusted(value, 40)}, not a positive size")
    image_ids = [_id(image, path, f"images[{index}]") for index, image in enumerate(truth["images"])]
    _unique(image_ids, path, "images")
    sizes = _image_sizes(truth, path) if iou_type == "segm" else {}
    categories = [_id(category, path, f"categories[{index}]") for index, category in enumerate(truth["categories"])]
    _unique(categories, path, "categories")
    for index, category in enumerate(truth["categories"]):
        if not isinstance(_field(category, path, f"categories[{index}]", "name"), str):
            raise _entry(path, f"categories[{index}]", "'name' is not text")
    images, ids = set(image_ids), []
    for index, annotation in enumerate(truth["annotations"]):
        where = f"annotations[{index}]"
        ids.append(_id(annotation, path, where))
        if _id(annotation, path, where, "image_id") not in images:
            raise _entry(path, where, f"'image_id' {untrusted(annotation['image_id'], 40)} is no image of 'images'")
        _id(annotation, path, where, "category_id")
        _finite(annotation, path, where, "bbox", 4)
        area = _field(annotation, path, where, "area")
        if not (_is_number(area) and np.isfinite(area) and area >= 0):
            raise _entry(path, where, f"'area' is {untrusted(area, 40)}, not a finite number >= 0")
        if _field(annotation, path, where, "iscrowd") not in (0, 1):
            raise _entry(path, where, f"'iscrowd' is {untrusted(annotation['iscrowd'], 40)}, not 0 or 1")
        if iou_type == "keypoints":
            _finite(annotation, path, where, "keypoints")
            if not isinstance(_field(annotation, path, where, "num_keypoints"), int):
                raise _entry(path, where, "'num_keypoints' is not a whole number")
        if iou_type == "segm":
            segmentation = _field(annotation, path, where, "segmentation")
            problem = segmentation_problem(segmentation, *sizes[annotation["image_id"]])
            if problem:
                shown = f"{where} (id {untrusted(annotation['id'], 40)}, image {untrusted(annotation['image_id'], 40)})"
                raise _entry(path, shown, f"'segmentation' {problem}: fix the mask or drop the annotation")
    _unique(ids, path, "annotations")
    return truth


def _image_sizes(truth: dict[str, Any], path: Path) -> dict[int | str, tuple[int, int]]:
    """Image id -> (width, height) of each image of ``truth``, every one a size masks can have (coco_masks)."""
    sizes = {}
    for index, image in enumerate(truth["images"]):
        width = _field(image, path, f"images[{index}]", "width")
        problem = image_size_problem(width, _field(image, path, f"images[{index}]", "height"))
        if problem:
            raise _entry(path, f"images[{index}] (id {untrusted(image['id'], 40)})", problem)
        sizes[image["id"]] = (int(image["width"]), int(image["height"]))
    return sizes


def check_results(results: Any, path: Path, iou_type: str, truth: dict[str, Any], truth_path: Path) -> list:
    """``results`` when it is a list of COCO detections of ``truth``'s images, with finite boxes (and keypoints, and
    for segm each a run-length encoding of its image's mask); else a CocoFormatError naming the file, the entry and
    the field (pycocotools scores a NaN box as a match)."""
    if not isinstance(results, list):
        raise CocoFormatError(f"{shown_path(path)} is not a COCO results file: it must be a list of detections")
    images = {image["id"] for image in truth["images"]}
    sizes = _image_sizes(truth, truth_path) if iou_type == "segm" else {}
    for index, result in enumerate(results):
        where = f"[{index}] (detection {index + 1})"
        _id(result, path, where, "image_id")
        _id(result, path, where, "category_id")
        score = _field(result, path, where, "score")
        if not (_is_number(score) and np.isfinite(score)):
            raise _entry(path, where, f"'score' is {untrusted(score, 40)}, not a finite number")
        if iou_type == "bbox" or "bbox" in result:
            _finite(result, path, where, "bbox", 4)
        if iou_type == "keypoints":
            _finite(result, path, where, "keypoints")
        if iou_type == "segm":
            segmentation = _field(result, path, where, "segmentation")
            size = sizes.get(result["image_id"])
            problem = segmentation_problem(segmentation, *size, compressed_only=True) if size else ""
            if problem:
                fix = "write each mask as pycocotools' mask.encode gives it, at its image's size"
                raise _entry(path, where, f"'segmentation' {problem}: {fix}")
    unknown = {result["image_id"] for result in results} - images
    if unknown:
        shown = untrusted(sorted(unknown, key=str)[:5], 120)
        raise CocoFormatError(
            f"{shown_path(path)} has detections for image ids {shown} not in {shown_path(truth_path)}"
        )
    return results


def _checked(truth_path: Path, results_path: Path, iou_type: str) -> tuple[dict[str, Any], list]:
    """A COCO annotation file and a COCO results file of it, read and checked for ``iou_type``."""
    truth = check_truth(_load_json(truth_path, "COCO annotations"), truth_path, iou_type)
    return truth, check_results(_load_json(results_path, "COCO results"), results_path, iou_type, truth, truth_path)


def evaluate_coco(truth_path: Path, results_path: Path, iou_type: str) -> dict[str, float]:
    """Metrics of a COCO results file (a list of detections) against a COCO annotation file (results/coco.py)."""
    return coco_metrics(*_checked(truth_path, results_path, iou_type), iou_type)


def with_masks(results_path: Path) -> bool:
    """Whether a COCO results file holds instance masks (its first detection a ``segmentation``)."""
    results = _load_json(results_path, "COCO results")
    return isinstance(results, list) and bool(results) and isinstance(results[0], dict) and "segmentation" in results[0]


@dataclass
class Scoring:
    metrics: dict[str, float]
    truth: dict[str, Any]  # the COCO annotations, checked
    evaluation: Any  # pycocotools' COCOeval for the family's iou_type (None without detections): eval_details.py


def score_all(truth_path: Path, results_path: Path, iou_type: str) -> Scoring:
    """``evaluate_coco``'s metrics for ``iou_type`` and, when the results hold instance masks, the masks' (iouType
    segm) as mask_AP, mask_AP50, mask_AP75, mask_AR100; with the evaluation they come from."""
    truth, results = _checked(truth_path, results_path, iou_type)
    evaluation = coco_evaluation(truth, results, iou_type)
    metrics = evaluation_metrics(evaluation, iou_type)
    if iou_type == "bbox" and with_masks(results_path):
        masks = evaluate_coco(truth_path, results_path, "segm")
        metrics |= {f"mask_{name}": value for name, value in masks.items()}
    return Scoring(metrics, truth, evaluation)


def evaluate_all(truth_path: Path, results_path: Path, iou_type: str) -> dict[str, float]:
    """``score_all``'s metrics."""
    return score_all(truth_path, results_path, iou_type).metrics


def annotation_file(data: Path) -> Path:
    """The COCO annotation JSON of ``data``: the file itself, or DIR/annotations.json."""
    path = Path(data) / "annotations.json" if Path(data).is_dir() else Path(data)
    if not path.is_file():
        raise ValueError(
            f"no COCO annotations at {shown_path(path)}: give the JSON file or a folder with annotations.json"
        )
    return path


def coco_truth(data: Path, iou_type: str) -> tuple[dict[str, Any], Path]:
    """The checked COCO annotations of ``data`` (a JSON file or a folder with annotations.json, ``annotation_file``)
    for ``iou_type``, and the file they were read from."""
    path = annotation_file(data)
    return check_truth(_load_json(path, "COCO annotations"), path, iou_type), path


@dataclass
class CocoPredictions:
    results: list[dict[str, Any]]  # COCO results
    skipped: Counter = field(default_factory=Counter)  # (class id, class name) -> detections without a category
    prompted_ious: list[float] | None = None  # a family segmenting its truth box prompts (sam): each instance's IoU

    def with_miou(self, metrics: dict[str, float]) -> dict[str, float]:
        """``metrics`` with mask_mIoU (``prompted_ious``' mean: each truth instance's mask against the mask its box
        prompted) where there is one."""
        if self.prompted_ious is None:
            return metrics
        return metrics | {"mask_mIoU": float(np.mean(self.prompted_ious)) if self.prompted_ious else 0.0}

    @property
    def skipped_count(self) -> int:
        return sum(self.skipped.values())

    def skipped_note(self, data: Path) -> str:
        """A warning naming the classes whose detections were skipped; '' when none were."""
        if not self.skipped:
            return ""
        counts = self.skipped.items()
        classes = ", ".join(f"'{untrusted(name, 60)}' (id {class_id}): {count}" for (class_id, name), count in counts)
        return (
            f"{self.skipped_count} detections skipped, their class has no category in {shown_path(data)}: {classes}; "
            "give the model's class names (labels) as the data set's category names"
        )


def predict_coco(
    detector, data: Path, iou_type: str, progress: Progress | None = None, boxes: BoxesPrompt | None = None
) -> CocoPredictions:
    """COCO results of ``detector`` (any Detector) over every image of the data set.

    Images are looked up beside the annotation file, directly or under images/. Classes map to
    categories as ``category_ids`` says; detections of a class without one are counted, not kept.
    ``boxes``: the detector's family is prompted with boxes (sam), each image's truth boxes given to it
    (``truth_boxes``) as its family gives it another node's (BoxesPrompt.run), their class the category's; where
    they carry their IDs to masks (BoxesPrompt.ids: each box's place), each instance's IoU with its prompted mask is
    kept (``prompted_ious``: eval's mask_mIoU).
    ``progress`` (progress.py): the images run, of the data set's.
    """
    truth, annotations = coco_truth(data, iou_type)
    names = [category["name"] for category in truth["categories"]] if boxes else list(detector.names)
    category_of = category_ids(names, truth["categories"])
    predictions = CocoPredictions([])
    prompts = truth_boxes(truth) if boxes else {}
    instances = truth_instances(truth) if boxes and boxes.ids else None
    predictions.prompted_ious = [] if instances is not None else None
    for index, image in enumerate(counted(truth["images"], progress, f"{data.name}: images")):
        if not isinstance(_field(image, annotations, f"images[{index}]", "file_name"), str):
            raise _entry(annotations, f"images[{index}]", "'file_name' is not text")
        path = image_file(annotations, image["file_name"])
        frame = read_image(path) if path else None
        if frame is None:
            raise ValueError(
                f"image {untrusted(image['file_name'])} of {shown_path(annotations)} not found or unreadable beside it"
            )
        if boxes is None:
            result = detector.detect(frame)
        else:
            given = prompts[image["id"]]
            if instances is not None:  # each box's place as its ID, carried to its mask
                given = given.tracked(range(len(given)))
            result = boxes.run(detector, frame, FrameResult.of(frame, boxes=given))
            if instances is not None:
                height, width = frame.shape[:2]
                predictions.prompted_ious += prompted_ious(result, instances[image["id"]], height, width)
        found, skipped = coco_results(image["id"], result, category_of, iou_type == "keypoints")
        predictions.results += found
        predictions.skipped.update(skipped)
    return predictions


@dataclass
class ScoredRun:
    predictions: CocoPredictions
    metrics: dict[str, float]
    runs_on: str  # the runner's description
    names: list[str] = field(default_factory=list)  # the detector's class names (a prompted family's: its phrases)


def run_model(
    model_type: str,
    model: Path,
    target: str,
    data: Path,
    predictions: Path,
    progress: Progress | None = None,
    options: Mapping[str, Any] | None = None,
) -> tuple[CocoPredictions, str, list[str]]:
    """A single-model detector family's ``model`` on ``target`` over the data set at validation confidence (0.001;
    a prompted family's prompt options in ``options``: ``eval_detector``): its COCO results (also written to
    ``predictions``), what it ran on and its class names (a prompted family's: its phrases)."""
    from ..runtime.backends import load_target

    if model_type not in SINGLE_MODEL_FAMILIES:
        raise ValueError(f"{model_type} cannot run over a data set on its own: give its predictions instead")
    truth, truth_path = coco_truth(data, IOU_TYPES[model_type])
    runner = load_target(target, model)
    detector = eval_detector(model_type, model, runner, target, truth, truth_path, options)
    found = predict_coco(detector, data, IOU_TYPES[model_type], progress, family(model_type).boxes_prompt)
    write_text(predictions, json.dumps(found.results), [model, data])
    return found, runner.describe(), list(detector.names)


def run_and_score(model_type: str, model: Path, target: str, data: Path, predictions: Path, **given: Any) -> ScoredRun:
    """``run_model``'s COCO results (``given``: its progress and options), their metrics, what it ran on and its
    class names."""
    found, runs_on, names = run_model(model_type, model, target, data, predictions, **given)
    metrics = evaluate_all(annotation_file(data), predictions, IOU_TYPES[model_type])
    return ScoredRun(found, found.with_miou(metrics), runs_on, names)


def write_report(out_dir: Path, record: dict[str, Any], details: Details | None = None) -> CommandReport:
    """OUT/eval.json (``record``: model_type, data, predictions, metrics, ..., and ``details``' classes and worst
    images) and OUT/eval.md, a table of the metrics then ``details``' sections; shown: the table, the files."""
    details = details or Details()
    metrics = record["metrics"]
    files = {"json": out_dir / "eval.json", "markdown": out_dir / "eval.md"}
    inputs = [record["data"], record["predictions"]]
    write_text(files["json"], json.dumps(record | details.record, indent=2, default=str) + "\n", inputs)
    header = " | ".join(metrics)
    values = " | ".join(f"{value:.4f}" for value in metrics.values())
    table = f"| {header} |\n|{'---|' * len(metrics)}\n| {values} |\n"
    title = f"# {record['model_type']}: {record['predictions']}\n\nAgainst `{record['data']}` (pycocotools).\n\n"
    write_text(files["markdown"], title + table + "\n".join(details.markdown) + "\n", inputs)
    return CommandReport(table, files | details.files, details.warnings)


def evaluate_detections(
    model_type: str,
    data: Path,
    out_dir: Path,
    predictions: Path | None = None,
    model: Path | None = None,
    target: str = "onnx:cpu",
    progress: Progress | None = None,
    worst: int = WORST_IMAGES,
    options: Mapping[str, Any] | None = None,
) -> CommandReport:
    """`eval` for detection and pose: a COCO results file, or a ``model`` run over the data set (a prompted family's
    prompt options in ``options``, by option: ``eval_detector``), scored against its annotations; the report written
    in ``out_dir``: the metrics, a table per class, a precision-recall curve per class and the ``worst`` images drawn
    (tools/eval_details.py)."""
    output_folder(out_dir, option="--out")
    skipped, warnings, found = {}, [], CocoPredictions([])
    if predictions is not None:
        pass
    elif model is not None and model_type in SINGLE_MODEL_FAMILIES:
        predictions = out_dir / "predictions.json"
        found, _, names = run_model(model_type, model, target, data, predictions, progress, options)
        skipped = {"skipped_detections": found.skipped_count}
        if family(model_type).text_prompt is not None:  # the phrases the model was prompted with
            skipped["prompt"] = SEPARATOR.join(names)
        warnings = [note for note in (found.skipped_note(data),) if note]
    else:
        raise UsageError(
            "give --predictions (a COCO results JSON), or --model for "
            f"{' / '.join(SINGLE_MODEL_FAMILIES)} to run it over --data"
        )
    annotations = annotation_file(data)
    scoring = score_all(annotations, predictions, IOU_TYPES[model_type])
    shown = details(scoring.evaluation, annotations, out_dir, worst, [data, predictions, model])
    metrics = found.with_miou(scoring.metrics)  # a box-prompted segmenter run here: mask_mIoU
    record = {"model_type": model_type, "data": str(data), "predictions": str(predictions), "metrics": metrics}
    report = write_report(out_dir, record | skipped, shown)
    report.warnings = warnings + report.warnings
    return report


def compare_detections(
    model_type: str,
    configurations: Sequence[tuple[Path, str]],
    data: Path | None,
    out_dir: Path,
    progress: Progress | None = None,
    options: Mapping[str, Any] | None = None,
) -> CommandReport:
    """`compare` for detection and pose: two (model, target) configurations over one COCO data set (a prompted
    family's prompt options in ``options``: ``eval_detector``), their predictions and metrics side by side; the
    report is saved in ``out_dir``."""
    if data is None:
        raise UsageError(f"{model_type} needs --data, the COCO data set both configurations run over")
    output_folder(out_dir, option="--out")
    runs = [
        run_and_score(
            model_type,
            path,
            target,
            data,
            out_dir / f"predictions_{configuration_name(path, target)}.json",
            progress=progress,
            options=options,
        )
        for path, target in configurations
    ]
    warnings = [f"{name}: {note}" for name, run in zip("AB", runs) if (note := run.predictions.skipped_note(data))]
    differences = {
        "outputs": output_differences(*(run.predictions.results for run in runs)),
        **metric_differences(*(run.metrics for run in runs)),
    }
    report, path = save_comparison(configurations, [run.runs_on for run in runs], ("data", data), differences, out_dir)
    return CommandReport(describe_comparison(report, path), warnings=warnings)


def evaluate_command(model_type: str, options: Mapping[str, Any]) -> CommandReport:
    """`eval` of detections: ``evaluate_detections`` with eval's options (by name)."""
    o = options
    return evaluate_detections(
        model_type, o["data"], o["out_dir"], o["predictions"], o["model"], o["target"], o.get("progress"),
        o.get("worst", WORST_IMAGES), o.get("prompts"),
    )  # fmt: skip


def compare_command(model_type: str, configurations: Sequence[tuple[Path, str]], options: Mapping[str, Any]):
    """`compare` of detections: ``compare_detections`` over compare's --data."""
    o = options
    return compare_detections(model_type, configurations, o["data"], o["out_dir"], o.get("progress"), o.get("prompts"))
