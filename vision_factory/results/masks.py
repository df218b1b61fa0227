"""Instance masks at the source frame's size (``InstanceMask``: a box's pixels, bounded memory whatever the frame),
as the segmentation models' decoding gives them (models/masks.py), and what every consumer does with them: the
instance label image (``label_image``, ``labelled``: the node's ~/masks), IoU, COCO run-length encoding (``mask_rle``,
``rle_iou``) and drawing (``fill``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class InstanceMask:
    """One detection's mask at the source frame's size, stored as its box's pixels: ``bits`` [h, w] bool covers
    rows top..top+h and columns left..left+w of a frame of ``height`` x ``width``; every pixel outside is False."""

    left: int
    top: int
    bits: np.ndarray  # [h, w] bool
    width: int  # of the frame
    height: int

    @property
    def area(self) -> int:
        return int(np.count_nonzero(self.bits))

    def full(self) -> np.ndarray:
        """The mask as a frame-sized [height, width] bool array."""
        frame = np.zeros((self.height, self.width), bool)
        self.paint(frame, True)
        return frame

    def paint(self, image: np.ndarray, value) -> None:
        """Sets ``image``'s pixels under the mask (image: [height, width, ...]) to ``value``."""
        h, w = self.bits.shape
        image[self.top : self.top + h, self.left : self.left + w][self.bits] = value


def box_span(low: float, high: float, size: int) -> tuple[int, int]:
    """The pixel indices p with low <= p < high, within 0..size."""
    first = min(max(math.ceil(low), 0), size)
    return first, min(max(math.ceil(high), first), size)


def mask_iou(a: InstanceMask, b: InstanceMask) -> float:
    """The IoU of two masks of one frame (1.0 when both are empty)."""
    left, top = min(a.left, b.left), min(a.top, b.top)
    right = max(a.left + a.bits.shape[1], b.left + b.bits.shape[1])
    bottom = max(a.top + a.bits.shape[0], b.top + b.bits.shape[0])
    canvas = np.zeros((2, bottom - top, right - left), bool)
    for layer, mask in zip(canvas, (a, b)):
        h, w = mask.bits.shape
        layer[mask.top - top : mask.top - top + h, mask.left - left : mask.left - left + w] = mask.bits
    union = np.count_nonzero(canvas[0] | canvas[1])
    return float(np.count_nonzero(canvas[0] & canvas[1]) / union) if union else 1.0


def labelled(labels: np.ndarray, label: int, box: Sequence[float]) -> InstanceMask:
    """Where ``labels`` (a label image) is ``label`` within ``box`` (xyxy frame pixels), as an InstanceMask."""
    height, width = labels.shape
    first_x, last_x = box_span(box[0], box[2], width)
    first_y, last_y = box_span(box[1], box[3], height)
    return InstanceMask(first_x, first_y, labels[first_y:last_y, first_x:last_x] == label, width, height)


def label_image(masks: Sequence[InstanceMask | None], shape: tuple[int, int], dtype=np.uint16) -> np.ndarray:
    """The instance label image of ``shape`` (height, width): 0 background, k where the k-th mask (1-based) is; where
    masks overlap the earlier one (the higher score) wins."""
    labels = np.zeros(shape, dtype)
    for index in range(len(masks) - 1, -1, -1):  # the earliest painted last
        mask = masks[index]
        if mask is not None:
            mask.paint(labels, index + 1)
    return labels


def mask_rle(mask: InstanceMask) -> dict:
    """A mask as COCO run-length encoding (pycocotools' mask.encode): {"size": [height, width], "counts": text}, as
    COCO results' ``segmentation`` holds it."""
    from pycocotools import mask as coco_mask

    encoded = coco_mask.encode(np.asfortranarray(mask.full(), dtype=np.uint8))
    return {"size": [int(v) for v in encoded["size"]], "counts": encoded["counts"].decode("ascii")}


def rle_iou(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """The IoU of two masks in COCO run-length encoding (mask_rle); 0 for masks of different frame sizes."""
    from pycocotools import mask as coco_mask

    if list(a["size"]) != list(b["size"]):
        return 0.0
    return float(coco_mask.iou([dict(a)], [dict(b)], [0])[0][0])


MASK_OPACITY = 0.45  # of a mask's colour over the frame


def fill(image_bgr: np.ndarray, mask: InstanceMask, colour: tuple[int, int, int]) -> None:
    """Blends ``colour`` into the mask's pixels (only its box's region is touched)."""
    h, w = mask.bits.shape
    region = image_bgr[mask.top : mask.top + h, mask.left : mask.left + w]
    if region.shape[:2] != (h, w):  # a mask of another frame size: not drawn
        return
    pixels = region[mask.bits].astype(np.float32)
    region[mask.bits] = (pixels * (1 - MASK_OPACITY) + np.float32(colour) * MASK_OPACITY).astype(np.uint8)


MASK_LABELS = {"mono16": (np.dtype("<u2"), 65535), "mono8": (np.dtype("u1"), 255)}  # dtype, most labels
