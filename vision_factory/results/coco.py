"""Detections in COCO's terms: a frame's result as COCO results (``coco_results``), their metrics against COCO
annotations with pycocotools (``coco_metrics``: AP, AP50, AP75, AR100 or AR20 for keypoints), and how two
configurations' COCO results differ (``differences``: what compare and quantize report). Reading the files and
running the models is tools/coco_eval.py's."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .boxes import Boxes
from .frame import FrameResult
from .keypoints import Keypoints, keypoint_names
from .masks import Masks, from_rle, mask_rle

MIN_SCORE, MIN_IOU = 0.25, 0.5  # differences: detections scoring under MIN_SCORE left out; pairs overlap by MIN_IOU


def category_ids(names: Sequence[str], categories: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """Class id -> COCO category id: by name when any class name is a category's, else by position.

    A class with no category (its name is none of the categories' while others' are, or its id is past the last
    category) is absent: its detections are not scored rather than given another class's category."""
    by_name = {category["name"]: category["id"] for category in categories}
    if any(name in by_name for name in names):
        return {class_id: by_name[name] for class_id, name in enumerate(names) if name in by_name}
    return {class_id: category["id"] for class_id, category in enumerate(categories[: len(names)])}


def coco_results(image_id: Any, result: FrameResult, category_of: Mapping[int, int], keypoints: bool = False):
    """The result's detections as COCO results of image ``image_id`` (their category by ``category_of``): box as
    x, y, width, height, with ``keypoints`` the keypoints flat, an instance mask as ``segmentation`` (run-length
    encoded); and the rows whose class has no category (their class id and name)."""
    found, skipped = [], []
    boxes = result.boxes
    for row, (xyxy, score, class_id) in enumerate(zip(boxes.xyxy.tolist(), boxes.scores.tolist(), boxes.class_ids)):
        category = category_of.get(int(class_id))
        if category is None:
            skipped.append((int(class_id), boxes.labels[row]))
            continue
        x1, y1, x2, y2 = xyxy
        entry = {"image_id": image_id, "category_id": category, "score": score, "bbox": [x1, y1, x2 - x1, y2 - y1]}
        if keypoints:
            entry["keypoints"] = result.keypoints.points[row].ravel().tolist()
        mask = result.masks.masks[row] if result.masks is not None else None
        if mask is not None:
            entry["segmentation"] = mask_rle(mask)
        found.append(entry)
    return found, skipped


def coco_evaluation(truth: dict[str, Any], results: list[dict[str, Any]], iou_type: str) -> Any:
    """pycocotools' evaluation (COCOeval, evaluated, accumulated and summarised) of COCO ``results`` against the COCO
    annotations ``truth`` (checked by tools/coco_eval.py) for ``iou_type`` (bbox, keypoints, segm); None without
    results. Its per-image matches and per-class curves are what tools/eval_details.py reports."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    if not results:
        return None
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
        ground_truth = COCO()
        ground_truth.dataset = truth
        ground_truth.createIndex()
        evaluation = COCOeval(ground_truth, ground_truth.loadRes(results), iou_type)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return evaluation


def evaluation_metrics(evaluation: Any, iou_type: str) -> dict[str, float]:
    """AP, AP50, AP75 and AR100 (keypoints: AR20) of a ``coco_evaluation`` (None: every one 0)."""
    names = ("AP", "AP50", "AP75", "AR20") if iou_type == "keypoints" else ("AP", "AP50", "AP75", "AR100")
    if evaluation is None:
        return dict.fromkeys(names, 0.0)
    stats = evaluation.stats
    # summarize() order: bbox and segm AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ...; keypoints AP, AP50,
    # AP75, APm, APl, AR20, ...
    indices = (0, 1, 2, 5) if iou_type == "keypoints" else (0, 1, 2, 8)
    return {name: max(0.0, float(stats[index])) for name, index in zip(names, indices)}


def coco_metrics(truth: dict[str, Any], results: list[dict[str, Any]], iou_type: str) -> dict[str, float]:
    """pycocotools' metrics of COCO ``results`` against the COCO annotations ``truth`` (checked by tools/coco_eval.py)
    for ``iou_type`` (bbox, keypoints, segm): AP, AP50, AP75 and AR100 (keypoints: AR20)."""
    return evaluation_metrics(coco_evaluation(truth, results, iou_type), iou_type)


def _frame(results: Sequence[Mapping[str, Any]]) -> FrameResult:
    """One image's COCO results as a result whose labels are their categories (rows pair within a category)."""
    xyxy = [[x, y, x + w, y + h] for x, y, w, h in (result["bbox"] for result in results)]
    scores = [result["score"] for result in results]
    boxes = Boxes(xyxy, scores, [-1] * len(results), [str(result["category_id"]) for result in results])
    found = FrameResult(0, 0, boxes)
    if results and "keypoints" in results[0]:
        points = np.reshape([result["keypoints"] for result in results], (len(results), -1, 3))
        found.keypoints = Keypoints(points, keypoint_names(points.shape[1]))
    if any("segmentation" in result for result in results):
        found.masks = Masks([from_rle(r["segmentation"]) if "segmentation" in r else None for r in results])
    return found


def differences(a: list[dict], b: list[dict], min_score: float = MIN_SCORE, min_iou: float = MIN_IOU) -> dict:
    """How two configurations' detections differ (what compare and quantize report): those of A and B (COCO
    results) paired per image and category by IoU at least ``min_iou``, greedily by A's score (FrameResult.compare),
    those scoring under ``min_score`` left out. Reports the paired and unpaired counts and over the pairs the largest
    box (x, y, width, height: px), score and keypoint (px) differences, and with instance masks (``segmentation``)
    the smallest mask IoU."""
    images: dict[Any, tuple[list, list]] = {}
    for side, results in enumerate((a, b)):
        for result in results:
            images.setdefault(result["image_id"], ([], []))[side].append(result)
    found = [_frame(mine).compare(_frame(theirs), min_iou, min_score) for mine, theirs in images.values()]
    record = {
        "matched": sum(len(one.pairs) for one in found),
        "only_in_a": sum(one.only_in_a for one in found),
        "only_in_b": sum(one.only_in_b for one in found),
        "box_delta_max_px": max((one.box_px for one in found), default=0.0),
        "score_delta_max": max((one.detection_score for one in found), default=0.0),
    }
    if any("keypoints" in result for result in a):
        record["keypoint_delta_max_px"] = max((one.keypoint_px for one in found), default=0.0)
    if any("segmentation" in result for result in a):
        record["mask_iou_min"] = min((one.mask_iou_min for one in found), default=1.0)
    return record
