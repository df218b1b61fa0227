"""Ultralytics-style YOLO detection and pose on any Runner: letterbox, decoding, class-aware NMS.

Pre-processing follows Ultralytics' own ``predict``: r = min(S/h, S/w); resize to
(round(w*r), round(h*r)), at least 1 pixel, with INTER_LINEAR; the leftover split as round(d/2 - 0.1) before and
round(d/2 + 0.1) after, padded with 114; BGR->RGB, /255, NCHW float32. A fixed-size model gets
the full S x S letterbox; a model with dynamic spatial input pads only up to a multiple of 32.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from ..runtime.runner import Runner, fixed_dim
from .detections import Detection, keypoint_names, nms

STRIDE = 32
PAD_VALUE = 114


@dataclass(frozen=True)
class Letterbox:
    """How a frame was fitted into the model input; maps input coordinates back to the frame."""

    scale_x: float  # resized width / frame width
    scale_y: float
    left: int
    top: int
    width: int  # of the frame
    height: int

    def to_frame(self, xy: np.ndarray) -> np.ndarray:
        """[..., 2] input-space points -> frame pixels, clipped to the frame."""
        x = ((xy[..., 0] - self.left) / self.scale_x).clip(0, self.width)
        y = ((xy[..., 1] - self.top) / self.scale_y).clip(0, self.height)
        return np.stack([x, y], axis=-1)


def letterbox(image_bgr: np.ndarray, size: tuple[int, int], dynamic: bool) -> tuple[np.ndarray, Letterbox]:
    """The NCHW float32 input for ``size`` (height, width), and the mapping back to the frame."""
    padded, box = letterbox_image(image_bgr, size, dynamic)
    tensor = np.empty((1, 3, *padded.shape[:2]), np.float32)
    for channel in range(3):  # RGB from BGR, /255 straight into the NCHW tensor: no intermediate copies
        np.divide(padded[..., 2 - channel], np.float32(255), out=tensor[0, channel])
    return tensor, box


def letterbox_image(image_bgr: np.ndarray, size: tuple[int, int], dynamic: bool) -> tuple[np.ndarray, Letterbox]:
    """The frame resized and padded for ``size`` (height, width), still HWC BGR uint8, and the mapping back."""
    height, width = image_bgr.shape[:2]
    ratio = min(size[0] / height, size[1] / width)
    # At least one pixel: a 1x20000 frame would round to 0 rows (Ultralytics' own resize fails there).
    new_w, new_h = max(1, round(width * ratio)), max(1, round(height * ratio))
    pad_w, pad_h = size[1] - new_w, size[0] - new_h
    if dynamic:
        pad_w, pad_h = pad_w % STRIDE, pad_h % STRIDE
    if (new_w, new_h) != (width, height):
        image_bgr = cv2.resize(image_bgr, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    top, bottom = round(pad_h / 2 - 0.1), round(pad_h / 2 + 0.1)
    left, right = round(pad_w / 2 - 0.1), round(pad_w / 2 + 0.1)
    padded = cv2.copyMakeBorder(image_bgr, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(PAD_VALUE,) * 3)
    return padded, Letterbox(new_w / width, new_h / height, left, top, width, height)


def metadata_literal(metadata: dict[str, str], key: str) -> object:
    """A Python literal Ultralytics wrote into the model's metadata, parsed without running code; None if absent."""
    text = metadata.get(key)
    if text is None:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def class_names(metadata: dict[str, str]) -> list[str]:
    """Ultralytics' ``names``, "{0: 'person', 1: 'bicycle'}", as a list in class order; [] when absent."""
    names = metadata_literal(metadata, "names")
    if isinstance(names, dict) and all(isinstance(key, int) for key in names):
        return [str(names[key]) for key in sorted(names)]
    if isinstance(names, list | tuple):
        return [str(name) for name in names]
    return []


class YoloDetector:
    """YOLO detection (output [1, 4+nc, N] or [1, N, 4+nc]) or pose (4 + 1 + K*3 channels) on a Runner."""

    def __init__(
        self,
        runner: Runner,
        pose: bool = False,
        confidence: float = 0.25,
        iou: float = 0.7,
        max_detections: int = 300,
        classes: Sequence[int] | None = None,
        image_size: int = 640,  # of models with dynamic input; 0: the model's metadata imgsz, else 640
        names: Sequence[str] | None = None,
    ):
        self.runner = runner
        shape = runner.inputs[0].shape
        fixed = [fixed_dim(d) for d in shape[2:4]]
        self.dynamic = None in fixed
        if image_size <= 0:  # the size it was exported for, as Ultralytics recorded it
            recorded = metadata_literal(runner.metadata, "imgsz")
            sizes = [v for v in (recorded if isinstance(recorded, list | tuple) else [recorded]) if isinstance(v, int)]
            image_size = max(sizes, default=640)
        self.size = (image_size, image_size) if self.dynamic else (fixed[0], fixed[1])
        self.pose, self.confidence, self.iou = pose, confidence, iou
        self.max_detections, self.classes = max_detections, classes
        kpt_shape = (metadata_literal(runner.metadata, "kpt_shape") or [17, 3]) if pose else [0, 0]
        self.keypoint_count, self.keypoint_dims = int(kpt_shape[0]), int(kpt_shape[1])
        channels = runner.outputs[0].shape[1:]
        extra = self.keypoint_count * self.keypoint_dims
        known = [c for c in channels if isinstance(c, int)]
        if not known:
            raise ValueError("the model's output shape is unknown: expected [1, 4+classes, N]")
        self.channels = min(known)  # 4 + nc (+ keypoints) is smaller than the anchor count
        self.class_count = self.channels - 4 - extra
        if self.class_count < 1:
            raise ValueError(f"output has {self.channels} channels: too few for 4 box values plus classes")
        names = list(names or class_names(runner.metadata))
        if names and len(names) != self.class_count:
            raise ValueError(f"{len(names)} class names given for a model with {self.class_count} classes")
        self.names = names or [f"class_{i}" for i in range(self.class_count)]
        self.keypoint_names = keypoint_names(self.keypoint_count) if pose else []
        self._input = runner.inputs[0].name

    def detect(self, image_bgr: np.ndarray) -> list[Detection]:
        tensor, box = self.preprocess(image_bgr)
        return self.decode(self.infer(tensor), box)

    def preprocess(self, image_bgr: np.ndarray) -> tuple[np.ndarray, Letterbox]:
        return letterbox(image_bgr, self.size, self.dynamic)

    def infer(self, tensor: np.ndarray) -> np.ndarray:
        """The raw output as [C, N]."""
        output = self.runner.run({self._input: tensor})[0][0]
        return output if output.shape[0] == self.channels else output.T  # [N, C] exports

    def decode(self, output: np.ndarray, box: Letterbox) -> list[Detection]:
        """[C, N] raw output -> detections in frame pixels."""
        scores_all = output[4 : 4 + self.class_count]
        candidates = np.flatnonzero(scores_all.max(axis=0) > self.confidence)
        class_ids = scores_all[:, candidates].argmax(axis=0)  # only where it counts: N is large
        if self.classes is not None:
            wanted = np.isin(class_ids, self.classes)
            candidates, class_ids = candidates[wanted], class_ids[wanted]
        scores = scores_all[class_ids, candidates]
        centre, half = output[0:2, candidates].T, output[2:4, candidates].T / 2
        boxes = np.concatenate([centre - half, centre + half], axis=1)
        order = nms(boxes, scores, class_ids, self.iou, limit=self.max_detections)
        corners = box.to_frame(boxes[order].reshape(-1, 2, 2)).reshape(-1, 4).tolist()
        keypoints = [None] * len(order)
        if self.pose:
            kept = candidates[order]
            points = output[4 + self.class_count :, kept].T.reshape(len(kept), self.keypoint_count, self.keypoint_dims)
            confidence = points[..., 2:3] if self.keypoint_dims == 3 else np.ones((*points.shape[:2], 1))
            keypoints = list(np.concatenate([box.to_frame(points[..., :2]), confidence], axis=-1))  # [K, 3] each
        names = self.names
        return [
            Detection(tuple(xyxy), score, class_id, names[class_id], points)
            for xyxy, score, class_id, points in zip(
                corners, scores[order].tolist(), class_ids[order].tolist(), keypoints
            )
        ]
