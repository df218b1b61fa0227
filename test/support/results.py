"""A frame's result as the tests read its detections: each row's file record (FrameResult.record's)."""

from __future__ import annotations

from vision_factory.results.frame import FrameResult


def detections_of(found: FrameResult) -> list[dict]:
    """The result's detections as their file records: xyxy, score, class_id, class_name, keypoints, mask (COCO
    run-length encoding)."""
    return found.record("", 0)["detections"]


def full_mask(row: dict):
    """A row's instance mask (its record's run-length encoding) as a frame-sized bool array."""
    from pycocotools import mask as coco_mask

    rle = row["mask"]
    return coco_mask.decode({"size": rle["size"], "counts": rle["counts"].encode("ascii")}).astype(bool)
