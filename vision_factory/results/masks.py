"""The instance masks of a frame's detections (``Masks``: one per row of its Boxes, each an ``InstanceMask`` at the
source frame's size stored as its box's pixels: bounded memory whatever the frame), as the segmentation models'
decoding gives them (models/masks.py), and what every consumer does with them: the instance label image
(``label_image``, ``labelled``: the node's ~/masks, sensor_msgs/Image mono16 or mono8), IoU, COCO run-length
encoding (``mask_rle``: the file record), drawing (results/drawing.py's ``draw_mask``: fill and outline)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .colours import class_colour
from .part import Compared, Equal

if TYPE_CHECKING:
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header


@dataclass(frozen=True, eq=False)
class InstanceMask(Equal):
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
    """The pixel indices p with low <= p < high, within 0..size (none when either is NaN)."""
    if math.isnan(low) or math.isnan(high):
        return 0, 0
    first = math.ceil(min(max(low, 0), size))  # clipped first: an infinite side is the frame's edge
    return first, math.ceil(min(max(high, first), size))


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


def from_rle(rle: Mapping[str, Any]) -> InstanceMask:
    """A mask in COCO run-length encoding (``mask_rle``'s) as an InstanceMask: the pixels of its bounding box."""
    from pycocotools import mask as coco_mask

    full = coco_mask.decode({"size": list(rle["size"]), "counts": rle["counts"].encode("ascii")}).astype(bool)
    height, width = full.shape
    rows, columns = np.flatnonzero(full.any(axis=1)), np.flatnonzero(full.any(axis=0))
    if not rows.size:
        return InstanceMask(0, 0, np.zeros((0, 0), bool), width, height)
    top, left = int(rows[0]), int(columns[0])
    return InstanceMask(left, top, full[top : rows[-1] + 1, left : columns[-1] + 1].copy(), width, height)


def rle_iou(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """The IoU of two masks in COCO run-length encoding (mask_rle); 0 for masks of different frame sizes."""
    from pycocotools import mask as coco_mask

    if list(a["size"]) != list(b["size"]):
        return 0.0
    return float(coco_mask.iou([dict(a)], [dict(b)], [0])[0][0])


def same_frame_iou(a: InstanceMask, b: InstanceMask) -> float:
    """``mask_iou`` of two masks of one frame size; 0 for masks of different frame sizes."""
    return mask_iou(a, b) if (a.width, a.height) == (b.width, b.height) else 0.0


MASK_LABELS = {"mono16": (np.dtype("<u2"), 65535), "mono8": (np.dtype("u1"), 255)}  # dtype, most labels


class MaskImageError(ValueError):
    """An instance label image that cannot be read; ``kind``: the kind of problem (for counting, once per kind)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def label_rows(message: Image) -> np.ndarray:
    """The labels [height, width] of an instance label image (mono16 or mono8, either byte order), or a
    MaskImageError naming what is wrong."""
    from ..text import untrusted

    if message.encoding not in MASK_LABELS:
        raise MaskImageError(
            "masks encoding",
            f"masks is {untrusted(message.encoding, 40)}: an instance label image is mono16 or mono8 (a detection "
            "node's ~/masks)",
        )
    dtype = MASK_LABELS[message.encoding][0].newbyteorder(">" if message.is_bigendian else "<")
    if message.step < message.width * dtype.itemsize:
        raise MaskImageError("masks size", f"masks' step {message.step} is under its width x {dtype.itemsize} bytes")
    if len(message.data) < message.step * message.height:
        raise MaskImageError("masks size", f"masks has {len(message.data)} bytes, under step x height")
    rows = np.frombuffer(message.data, np.uint8, message.step * message.height).reshape(message.height, message.step)
    return np.ascontiguousarray(rows[:, : message.width * dtype.itemsize]).view(dtype)


@dataclass(frozen=True, eq=False)
class Masks(Equal):
    """Each detection's instance mask (None: none), in the rows' order of its Boxes."""

    key: ClassVar[str] = "masks"

    masks: tuple[InstanceMask | None, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "masks", tuple(self.masks))

    def __len__(self) -> int:
        return len(self.masks)

    def __getitem__(self, rows: Any) -> Masks:
        return Masks([self.masks[i] for i in np.arange(len(self))[rows].reshape(-1).tolist()])

    def record(self) -> list[dict[str, Any]]:
        """Each row's mask in COCO run-length encoding (none for a row without)."""
        return [{} if mask is None else {"mask": mask_rle(mask)} for mask in self.masks]

    @classmethod
    def from_record(cls, rows: Sequence[Mapping[str, Any]]) -> Masks | None:
        """The rows' masks; None when no row has one."""
        if not any("mask" in row for row in rows):
            return None
        return cls([from_rle(row["mask"]) if "mask" in row else None for row in rows])

    def describe(self) -> str:
        return ""

    def rows(self) -> Compared:
        count = len(self)
        return Compared([""] * count, [np.zeros(0)] * count, np.zeros(count), masks=list(self.masks))

    def to_message(self, header: Header, frame: Any = None, encoding: str = "mono16") -> Image:
        """The frame's instance label image (``frame``'s size, else the first mask's; ``encoding`` mono16 or
        mono8): 0 where no mask is, k where the k-th row's is (1-based: its Detection2D in the Detection2DArray
        of the same header; where masks overlap, the earlier row's); mono8 labels the first 255 rows, mono16
        65535."""
        from sensor_msgs.msg import Image

        dtype, most = MASK_LABELS[encoding]
        if frame is not None:
            shape = (frame.height, frame.width)
        else:
            shape = next(((m.height, m.width) for m in self.masks if m is not None), (0, 0))
        labels = label_image(self.masks[:most], shape, dtype)
        height, width = shape
        return Image(
            header=header,
            height=height,
            width=width,
            encoding=encoding,
            is_bigendian=0,
            step=width * dtype.itemsize,
            data=labels.tobytes(),
        )

    @classmethod
    def from_message(cls, message: Image, boxes: Any) -> Masks:
        """Each row of ``boxes`` (the Detection2DArray's of the same header) its mask from an instance label image
        (``to_message``'s): label k within the k-th box; a row beyond the encoding's labels has none. A label
        image that cannot be read is a MaskImageError."""
        labels = label_rows(message)
        most = MASK_LABELS[message.encoding][1]
        return cls([labelled(labels, i + 1, box) if i < most else None for i, box in enumerate(boxes.xyxy.tolist())])

    def published(self, boxes: Any, encoding: str = "mono16") -> Masks:
        """These masks as the node's instance label image (``to_message``) shows them, each read back within its
        row's box of ``boxes`` (``from_message``): where masks overlap, the earlier row's pixels."""
        shape = next(((mask.height, mask.width) for mask in self.masks if mask is not None), None)
        if shape is None:
            return self
        dtype, most = MASK_LABELS[encoding]
        labels = label_image(self.masks[:most], shape, dtype)
        return Masks([labelled(labels, i + 1, box) if i < most else None for i, box in enumerate(boxes.xyxy.tolist())])

    def draw(self, image: np.ndarray, frame: Any = None) -> np.ndarray:
        """Each mask filled, half see-through, and outlined in its row's colour (``frame``'s boxes': its class's or
        its track's, else the first class's)."""
        from .drawing import draw_mask

        boxes = getattr(frame, "boxes", None)
        for index, mask in enumerate(self.masks):
            if mask is not None:
                colour = boxes.colour(index) if boxes is not None else class_colour(0)
                draw_mask(image, mask.bits, mask.left, mask.top, colour)
        return image
