"""Two configurations' results side by side: metric differences with verdicts, and output differences."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

VERDICTS = ((0.001, "excellent"), (0.01, "good"))


def verdict(difference: float) -> str:
    """below 0.001 excellent, below 0.01 good, else warning."""
    return next((name for limit, name in VERDICTS if abs(difference) < limit), "warning")


def metric_differences(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, Any]:
    """Per metric: both values, B - A and its verdict; and the overall verdict naming any warning."""
    rows = {name: {"a": a[name], "b": b[name], "difference": b[name] - a[name]} for name in a}
    for row in rows.values():
        row["verdict"] = verdict(row["difference"])
    warnings = [name for name, row in rows.items() if row["verdict"] == "warning"]
    if warnings:
        overall = f"warning: {', '.join(warnings)} differ by 0.01 or more"
    else:
        overall = "good" if any(row["verdict"] == "good" for row in rows.values()) else "excellent"
    return {"metrics": rows, "verdict": overall}


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of xywh boxes."""
    a_xyxy = np.concatenate([a[:, :2], a[:, :2] + a[:, 2:]], axis=1)
    b_xyxy = np.concatenate([b[:, :2], b[:, :2] + b[:, 2:]], axis=1)
    top_left = np.maximum(a_xyxy[:, None, :2], b_xyxy[None, :, :2])
    bottom_right = np.minimum(a_xyxy[:, None, 2:], b_xyxy[None, :, 2:])
    intersection = np.prod((bottom_right - top_left).clip(0), axis=2)
    union = np.prod(a[:, 2:], axis=1)[:, None] + np.prod(b[:, 2:], axis=1)[None] - intersection
    return intersection / np.maximum(union, 1e-9)


def detection_differences(a: list[dict], b: list[dict], min_score: float = 0.25, min_iou: float = 0.5) -> dict:
    """Detections of A and B (COCO results) matched per image and class by IoU, greedily by A's score.

    Reports matched and unmatched counts and the largest box (px), score and keypoint (px)
    differences of matched pairs; detections below ``min_score`` are left out.
    """

    def by_image(results):
        grouped: dict[tuple[int, int], list[dict]] = {}
        for result in results:
            if result["score"] >= min_score:
                grouped.setdefault((result["image_id"], result["category_id"]), []).append(result)
        return grouped

    group_a, group_b = by_image(a), by_image(b)
    matched, box_delta, score_delta, keypoint_delta = 0, 0.0, 0.0, 0.0
    unmatched_a = unmatched_b = 0
    for key in set(group_a) | set(group_b):
        items_a = sorted(group_a.get(key, []), key=lambda r: -r["score"])
        items_b = group_b.get(key, [])
        free = list(range(len(items_b)))
        for item in items_a:
            if not free:
                unmatched_a += 1
                continue
            ious = _iou(np.array([item["bbox"]]), np.array([items_b[j]["bbox"] for j in free]))[0]
            best = int(np.argmax(ious))
            if ious[best] < min_iou:
                unmatched_a += 1
                continue
            other = items_b[free.pop(best)]
            matched += 1
            box_delta = max(box_delta, float(np.abs(np.subtract(item["bbox"], other["bbox"])).max()))
            score_delta = max(score_delta, abs(item["score"] - other["score"]))
            if "keypoints" in item:
                points = np.reshape(item["keypoints"], (-1, 3))[:, :2] - np.reshape(other["keypoints"], (-1, 3))[:, :2]
                keypoint_delta = max(keypoint_delta, float(np.hypot(points[:, 0], points[:, 1]).max()))
        unmatched_b += len(free)
    record = {"matched": matched, "only_in_a": unmatched_a, "only_in_b": unmatched_b}
    record |= {"box_delta_max_px": box_delta, "score_delta_max": score_delta}
    if any("keypoints" in result for result in a):
        record["keypoint_delta_max_px"] = keypoint_delta
    return record
