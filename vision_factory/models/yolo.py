"""Ultralytics-style YOLO detection, pose and instance segmentation on any Runner: letterbox, decoding, class-aware
NMS; a segmentation model's masks as models/masks.py decodes them.

Pre-processing follows Ultralytics' own ``predict`` (models/geometry.py's ``letterbox``): BGR->RGB,
/255, NCHW float32. A fixed-size model gets the full S x S letterbox; a model with dynamic spatial
input pads only up to a multiple of 32.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..results.detections import Detection, keypoint_names, nms
from ..runtime.runner import Runner, fixed_dim
from .bounds import MAX_CLASSES, check_count
from .geometry import FrameFit, letterbox
from .masks import instance_masks
from .ultralytics import class_names, keypoint_shape, recorded_imgsz


class Segmented(NamedTuple):
    """A segmentation model's raw outputs: the head [C, N] (4 box + classes + mask coefficients) and the mask
    prototypes [M, H/4, W/4]."""

    head: np.ndarray
    prototypes: np.ndarray


def mask_channels(runner: Runner) -> int:
    """The mask coefficients per detection of a YOLO segmentation model (its second output, the prototypes
    [1, M, H/4, W/4]: M, e.g. 32); 0 for a model without."""
    if len(runner.outputs) < 2 or len(runner.outputs[1].shape) != 4:
        return 0
    channels = fixed_dim(runner.outputs[1].shape[1])
    if channels is None or channels < 1:
        raise ValueError("the model's mask prototypes output has no fixed channel count: expected [1, 32, H/4, W/4]")
    return channels


class YoloDetector:
    """YOLO detection (output [1, 4+nc, N] or [1, N, 4+nc]), pose (4 + 1 + K*3 channels) or instance segmentation
    (4 + nc + M channels, and the prototypes [1, M, H/4, W/4]) on a Runner."""

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
        if self.dynamic and image_size <= 0:  # the size it was exported for, as Ultralytics recorded it
            image_size = recorded_imgsz(runner.metadata)
        self.size = (image_size, image_size) if self.dynamic else (fixed[0], fixed[1])
        self.pose, self.confidence, self.iou = pose, confidence, iou
        self.max_detections = max_detections
        self.keep_classes(classes)
        kpt_shape = (keypoint_shape(runner.metadata) or (17, 3)) if pose else (0, 0)
        self.keypoint_count, self.keypoint_dims = kpt_shape
        channels = runner.outputs[0].shape[1:]
        self.mask_channels = 0 if pose else mask_channels(runner)  # segmentation: mask coefficients per detection
        extra = self.keypoint_count * self.keypoint_dims + self.mask_channels
        known = [c for c in channels if isinstance(c, int)]
        if not known:
            raise ValueError("the model's output shape is unknown: expected [1, 4+classes, N]")
        self.channels = min(known)  # 4 + nc (+ keypoints) is smaller than the anchor count
        self.class_count = self.channels - 4 - extra
        if self.class_count < 1:
            raise ValueError(f"output has {self.channels} channels: too few for 4 box values plus classes")
        check_count(f"the classes of the output's {self.channels} channels", self.class_count, MAX_CLASSES)
        names = list(names or class_names(runner.metadata))
        if names and len(names) != self.class_count:
            raise ValueError(f"{len(names)} class names given for a model with {self.class_count} classes")
        self.names = names or [f"class_{i}" for i in range(self.class_count)]
        self.keypoint_names = keypoint_names(self.keypoint_count) if pose else []
        self._input = runner.inputs[0].name

    def keep_classes(self, classes: Sequence[int] | None) -> None:
        """Report only these class ids from now on; None: every class."""
        self.classes = classes

    def detect(self, image_bgr: np.ndarray) -> list[Detection]:
        tensor, box = self.preprocess(image_bgr)
        return self.decode(self.infer(tensor), box)

    def preprocess(self, image_bgr: np.ndarray) -> tuple[np.ndarray, FrameFit]:
        return letterbox(image_bgr, self.size, self.dynamic)

    def infer(self, tensor: np.ndarray) -> np.ndarray | Segmented:
        """The raw output as [C, N]; a segmentation model's with its prototypes (Segmented)."""
        outputs = self.runner.run({self._input: tensor})
        output = outputs[0][0]
        output = output if output.shape[0] == self.channels else output.T  # [N, C] exports
        return Segmented(output, outputs[1][0]) if self.mask_channels else output

    def decode(self, output: np.ndarray | Segmented, box: FrameFit) -> list[Detection]:
        """[C, N] raw output (Segmented: with prototypes) -> detections in frame pixels."""
        prototypes = None
        if isinstance(output, Segmented):
            output, prototypes = output
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
        masks = [None] * len(order)
        if prototypes is not None:
            masks = self.masks(output, prototypes, candidates[order], corners, box)
        names = self.names
        return [
            Detection(tuple(xyxy), score, class_id, names[class_id], points, mask)
            for xyxy, score, class_id, points, mask in zip(
                corners, scores[order].tolist(), class_ids[order].tolist(), keypoints, masks
            )
        ]

    def masks(self, output: np.ndarray, prototypes: np.ndarray, kept: np.ndarray, corners: list, box: FrameFit):
        """The instance masks of the ``kept`` anchors, whose boxes in frame pixels are ``corners``."""
        coefficients = output[4 + self.class_count : 4 + self.class_count + self.mask_channels, kept].T
        frame_boxes = np.asarray(corners, np.float64).reshape(-1, 4)
        return instance_masks(prototypes, coefficients, frame_boxes, (box.height, box.width))
