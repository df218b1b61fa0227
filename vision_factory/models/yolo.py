"""Ultralytics-style YOLO detection, oriented boxes (OBB), pose and instance segmentation on any Runner: letterbox,
decoding, class-aware NMS (an OBB model's over its rotated boxes' probiou, results/rotated.py); a segmentation
model's masks as models/masks.py decodes them.

Each head (models/yolo_interface.py's ``yolo_head``) is decoded as its exporting project does: a raw head as
Ultralytics' ``non_max_suppression``; an end-to-end head as its end-to-end branch (rows scoring above the
threshold, in the model's order, the first ``max_detections``; no NMS); an objectness head as YOLOv5's
``non_max_suppression`` (candidates with objectness above the threshold, score = objectness x class
probability, best class only, above the threshold, at most 30000 by score into class-aware NMS).

Pre-processing follows Ultralytics' own ``predict`` (models/geometry.py's ``letterbox``): BGR->RGB,
/255, NCHW float32. A fixed-size model gets the full S x S letterbox; a model with dynamic spatial
input pads only up to a multiple of 32.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..results.boxes import Boxes, nms
from ..results.finite import finite_box
from ..results.frame import FrameResult
from ..results.keypoints import Keypoints, keypoint_names
from ..results.masks import Masks
from ..results.rotated import rotated_nms
from ..runtime.runner import Runner, fixed_dim, shape_text
from ..text import untrusted
from .bounds import MAX_CLASSES, check_count
from .geometry import STRIDE, FrameFit, letterbox
from .interface import Interface
from .masks import instance_masks
from .ultralytics import class_names, head_channels, keypoint_shape, recorded_imgsz, unsupported_task
from .yolo_interface import END2END, OBJECTNESS, yolo_head

YOLOV5_MAX_NMS = 30000  # YOLOv5's max_nms: candidates by score into NMS


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
    """YOLO detection (output [1, 4+nc, N] or [1, N, 4+nc]), oriented boxes (Ultralytics task obb: 4 + nc + 1 angle
    channels), pose (4 + 1 + K*3 channels) or instance segmentation (4 + nc + M channels, and the prototypes
    [1, M, H/4, W/4]) on a Runner."""

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
        unsupported = unsupported_task(runner.metadata)
        if unsupported:  # the line inspect, generate and quantize give
            raise ValueError(unsupported)
        shape = runner.inputs[0].shape
        fixed = [fixed_dim(d) for d in shape[2:4]]
        self.dynamic = None in fixed
        if self.dynamic and image_size <= 0:  # the size it was exported for, as Ultralytics recorded it
            image_size = recorded_imgsz(runner.metadata)
        self.size = (image_size, image_size) if self.dynamic else (fixed[0], fixed[1])
        self.pose, self.confidence, self.iou = pose, confidence, iou
        self.max_detections = max_detections
        self.masks_s = 0.0  # the last decode's time spent on instance masks (bench's stage split)
        self.keep_classes(classes)
        kpt_shape = (keypoint_shape(runner.metadata) or (17, 3)) if pose else (0, 0)
        self.keypoint_count, self.keypoint_dims = kpt_shape
        channels = runner.outputs[0].shape[1:]
        self.head = yolo_head(Interface.of(runner))
        # segmentation (the prototypes beside the head): mask coefficients per detection after its classes (raw
        # head) or after its score and class (end-to-end rows)
        self.mask_channels = 0 if pose else mask_channels(runner)
        # an oriented-box model's angle: one channel after its classes
        self.rotated = not pose and runner.metadata.get("task") == "obb"
        extra = self.keypoint_count * self.keypoint_dims + self.mask_channels + int(self.rotated)
        if self.head == END2END:
            self._end2end(names, extra)
            return
        known = [c for c in channels if isinstance(c, int)]
        recorded = head_channels(runner.metadata, self.mask_channels)
        if channels and not isinstance(channels[0], int) and recorded is not None:
            known = [recorded]  # a dynamic export without onnxslim: its metadata's task and names say how many
        if not known:
            raise ValueError(
                f"the model's output shape {shape_text(runner.outputs[0].shape)} is unknown and its metadata names no "
                "Ultralytics task and classes to read it by: expected [1, 4+classes, N] (export with simplify=True, "
                "or give the model's metadata)"
            )
        self.channels = min(known)  # 4 + nc (+ keypoints) is smaller than the anchor count
        self.class_count = self.channels - (5 if self.head == OBJECTNESS else 4) - extra
        if self.class_count < 1:
            raise ValueError(f"output has {self.channels} channels: too few for 4 box values plus classes")
        check_count(f"the classes of the output's {self.channels} channels", self.class_count, MAX_CLASSES)
        names = list(names or class_names(runner.metadata))
        if names and len(names) != self.class_count:
            raise ValueError(f"{len(names)} class names given for a model with {self.class_count} classes")
        self.names = names or [f"class_{i}" for i in range(self.class_count)]
        self.keypoint_names = keypoint_names(self.keypoint_count) if pose else []
        self._input = runner.inputs[0].name

    def _end2end(self, names: Sequence[str] | None, extra: int) -> None:
        """An end-to-end head's [1, N, 6 + extra] rows: its class count is the names'."""
        shape = self.runner.outputs[0].shape
        self.channels = 6 + extra
        if shape[-1] != self.channels:
            found = shape_text(shape)
            raise ValueError(
                f"the end-to-end output {found} is not [1, N, {self.channels}] (x1, y1, x2, y2, score, class"
                f"{', keypoints' if self.pose else ', mask coefficients' if extra else ''}): a model exported "
                "end-to-end for another task "
                f"(metadata task {untrusted(self.runner.metadata.get('task'), 40)}), which "
                f"{'yolo_pose' if self.pose else 'yolo'} does not decode"
            )
        names = list(names or class_names(self.runner.metadata))
        if not names:
            raise ValueError(
                "an end-to-end output does not say how many classes the model has and its metadata names none: "
                "give the class names (labels_path, predict --names)"
            )
        check_count("the model's class names", len(names), MAX_CLASSES)
        self.class_count, self.names = len(names), names
        self.keypoint_names = keypoint_names(self.keypoint_count) if self.pose else []
        self._input = self.runner.inputs[0].name

    @property
    def head_note(self) -> str | None:
        """What a node says once at start-up about the head, where its parameters read differently; else None."""
        if self.head == END2END:
            iou = f"iou_threshold {self.iou} does not apply"
            return f"end-to-end head: its rows are final detections, no NMS is run ({iou})"
        return None

    def keep_classes(self, classes: Sequence[int] | None) -> None:
        """Report only these class ids from now on; None: every class."""
        self.classes = classes

    def __call__(self, image_bgr: np.ndarray) -> FrameResult:
        """The frame's result (``detect``): an adapter is a function from a frame to its result."""
        return self.detect(image_bgr)

    def detect(self, image_bgr: np.ndarray) -> FrameResult:
        tensor, box = self.preprocess(image_bgr)
        return self.decode(self.infer(tensor), box)

    def preprocess(self, image_bgr: np.ndarray) -> tuple[np.ndarray, FrameFit]:
        return letterbox(image_bgr, self.size, self.dynamic)

    def infer(self, tensor: np.ndarray) -> np.ndarray | Segmented:
        """The raw output as [C, N]; a segmentation model's with its prototypes (Segmented)."""
        return self.row(self.runner.run({self._input: tensor}), 0)

    def row(self, outputs: list[np.ndarray], index: int) -> np.ndarray | Segmented:
        """Frame ``index``'s raw output as [C, N] from the outputs of a run of several frames (cameras.py)."""
        output = outputs[0][index]
        output = output if output.shape[0] == self.channels else output.T  # [N, C] exports
        return Segmented(output, outputs[1][index]) if self.mask_channels else output

    def decode(self, output: np.ndarray | Segmented, box: FrameFit) -> FrameResult:
        """[C, N] raw output (Segmented: with prototypes) -> the frame's detections, in frame pixels."""
        prototypes = None
        if isinstance(output, Segmented):
            output, prototypes = output
        if self.head == END2END:
            return self._decode_end2end(output, box, prototypes)
        if self.head == OBJECTNESS:
            objectness = output[4]
            candidates = np.flatnonzero(objectness > self.confidence)
            probabilities = output[5 : 5 + self.class_count, candidates] * objectness[candidates]
            class_ids = probabilities.argmax(axis=0)
            scores = probabilities[class_ids, np.arange(len(candidates))]
            confident = scores > self.confidence
            candidates, class_ids, scores = candidates[confident], class_ids[confident], scores[confident]
            if self.classes is not None:
                wanted = np.isin(class_ids, self.classes)
                candidates, class_ids, scores = candidates[wanted], class_ids[wanted], scores[wanted]
            best = np.argsort(-scores, kind="stable")[:YOLOV5_MAX_NMS]
            candidates, class_ids, scores = candidates[best], class_ids[best], scores[best]
            box = self._yolov5_fit(box)
        else:
            scores_all = output[4 : 4 + self.class_count]
            candidates = np.flatnonzero(scores_all.max(axis=0) > self.confidence)
            class_ids = scores_all[:, candidates].argmax(axis=0)  # only where it counts: N is large
            if self.classes is not None:
                wanted = np.isin(class_ids, self.classes)
                candidates, class_ids = candidates[wanted], class_ids[wanted]
            scores = scores_all[class_ids, candidates]
        if self.rotated:  # cx, cy, w, h and the angle after the classes
            angle = 4 + self.class_count
            xywhr = np.concatenate([output[0:4, candidates], output[angle : angle + 1, candidates]]).T
            order = rotated_nms(xywhr, scores, class_ids, self.iou, limit=self.max_detections)
            return self._oriented(box, xywhr[order], scores[order], class_ids[order])
        centre, half = output[0:2, candidates].T, output[2:4, candidates].T / 2
        boxes = np.concatenate([centre - half, centre + half], axis=1)
        order = nms(boxes, scores, class_ids, self.iou, limit=self.max_detections)
        kept = candidates[order]
        return self._detections(output, box, boxes[order], scores[order], class_ids[order], kept, prototypes)

    def _yolov5_fit(self, fit: FrameFit) -> FrameFit:
        """The mapping back as YOLOv5's ``scale_boxes`` makes it: one gain (the smaller of the two ratios) and the
        padding as the fractional half of what is left, where Ultralytics' own uses each side's rounded scale and
        the integer padding (up to a pixel or two apart on a frame a few times the input)."""
        height, width = self.size
        fitted_w, fitted_h = round(fit.width * fit.scale_x), round(fit.height * fit.scale_y)
        pad_w, pad_h = width - fitted_w, height - fitted_h
        if self.dynamic:  # padded up to the stride only
            pad_w, pad_h = pad_w % STRIDE, pad_h % STRIDE
        input_w, input_h = fitted_w + pad_w, fitted_h + pad_h
        gain = min(input_h / fit.height, input_w / fit.width)
        left, top = (input_w - fit.width * gain) / 2, (input_h - fit.height * gain) / 2
        return FrameFit(gain, gain, left, top, fit.width, fit.height)  # type: ignore[arg-type]  # fractional pads

    def _oriented(self, fit: FrameFit, xywhr: np.ndarray, scores: np.ndarray, class_ids: np.ndarray) -> FrameResult:
        """Oriented boxes in input pixels -> frame pixels as Ultralytics' ``scale_boxes(xywh=True)`` maps them: the
        centre less the padding, centre and size over each axis's scale, not clipped; the angle as it is."""
        frame = xywhr.astype(np.float64)
        frame[:, 0] = (frame[:, 0] - fit.left) / fit.scale_x
        frame[:, 1] = (frame[:, 1] - fit.top) / fit.scale_y
        frame[:, 2] /= fit.scale_x
        frame[:, 3] /= fit.scale_y
        boxes = Boxes.rotated(frame, scores, class_ids, self.names)
        return FrameResult(int(fit.width), int(fit.height), boxes)

    def _decode_end2end(self, output: np.ndarray, box: FrameFit, prototypes: np.ndarray | None = None) -> FrameResult:
        """Rows scoring above the threshold (of a wanted class), in the model's order, the first max_detections
        (Ultralytics' ``non_max_suppression`` with ``end2end``); a segmentation model's with their masks."""
        scores, classes = output[4], output[5]
        known = np.isfinite(classes) & (classes >= 0) & (classes < self.class_count)  # a damaged row names no class
        keep = (scores > self.confidence) & known
        class_ids = np.where(known, classes, -1).astype(np.int64)
        if self.classes is not None:
            keep &= np.isin(class_ids, self.classes)
        kept = np.flatnonzero(keep)[: self.max_detections]
        return self._detections(output, box, output[0:4, kept].T, scores[kept], class_ids[kept], kept, prototypes)

    def _detections(
        self,
        output: np.ndarray,
        box: FrameFit,
        boxes: np.ndarray,
        scores: np.ndarray,
        class_ids: np.ndarray,
        kept: np.ndarray,
        prototypes: np.ndarray | None = None,
    ) -> FrameResult:
        """The frame's detections from the kept columns of ``output``: boxes in input pixels (x1, y1, x2, y2) to frame
        pixels, keypoints (after the head's box, score and class channels) or instance masks (``prototypes``) with
        them."""
        corners = box.to_frame(boxes.reshape(-1, 2, 2)).reshape(-1, 4)
        keypoints = None
        if self.pose:
            first = self.channels - self.keypoint_count * self.keypoint_dims
            points = output[first:, kept].T.reshape(len(kept), self.keypoint_count, self.keypoint_dims)
            confidence = points[..., 2:3] if self.keypoint_dims == 3 else np.ones((*points.shape[:2], 1))
            keypoints = np.concatenate([box.to_frame(points[..., :2]), confidence], axis=-1)  # [N, K, 3]
        masks = None
        if prototypes is not None:
            start = time.perf_counter()
            masks = self.masks(output, prototypes, kept, corners, box)
            self.masks_s = time.perf_counter() - start
            # only the detections whose mask has a pixel, as Ultralytics' segmentation predictor keeps them; and
            # those of a non-finite box or mask (None), which results/finite.py counts and leaves out or reports
            shown = [i for i, mask in enumerate(masks) if mask is None or mask.bits.any() or not finite_box(corners[i])]
            if len(shown) < len(masks):
                masks, corners, scores, class_ids = (
                    [masks[i] for i in shown],
                    corners[shown],
                    scores[shown],
                    class_ids[shown],
                )
                keypoints = None if keypoints is None else keypoints[shown]
        return FrameResult(
            int(box.width),
            int(box.height),
            Boxes.of(corners, scores, class_ids, self.names),
            None if keypoints is None else Keypoints.of(keypoints, self.keypoint_names),
            None if masks is None else Masks(masks),
        )

    def masks(self, output: np.ndarray, prototypes: np.ndarray, kept: np.ndarray, corners: list, box: FrameFit):
        """The instance masks of the ``kept`` anchors, whose boxes in frame pixels are ``corners``."""
        coefficients = output[self.channels - self.mask_channels : self.channels, kept].T  # the last channels
        frame_boxes = np.asarray(corners, np.float64).reshape(-1, 4)
        return instance_masks(prototypes, coefficients, frame_boxes, (box.height, box.width))
