"""DETR-family detection (RT-DETR, D-FINE) on any Runner, each layout decoded as its exporting project does
(models/detr_interface.py's ``head``); the queries are final detections: no NMS.

- ``ultralytics`` (RT-DETR by Ultralytics): the frame stretched to the input (no letterbox: RTDETRPredictor's
  ``LetterBox(auto=False, scale_fill=True)``, OpenCV INTER_LINEAR), RGB / 255. Rows of class scores (Ultralytics up
  to 8.3): each query's best class and its score; rows already selected (8.4: score, class). Either way the rows
  scoring above the threshold (of a wanted class) in the model's order, the first ``max_detections``, boxes cx, cy,
  w, h x the frame's width and height (RTDETRPredictor.postprocess).
- ``logits_boxes`` (Hugging Face transformers): the frame resized to the input with PIL's bilinear filter (as the
  image processor does: antialiased when it shrinks, which OpenCV's INTER_LINEAR is not), RGB / 255, no
  normalisation (RTDetrImageProcessor's defaults); scores = sigmoid(logits), the top queries-many of queries x
  classes, best first, each query's box for its class, those above the threshold
  (``post_process_object_detection`` with focal loss), boxes x the frame's size.
  DETR's softmax models (``scoring``: models/detr_interface.py) as DetrImageProcessor feeds and decodes them: the
  same resize, RGB / 255 then ImageNet's mean and std; scores = softmax over the classes and "no object", each
  query's best class but "no object", those above the threshold in query order.
- ``rfdetr`` (RF-DETR's export): as rfdetr's own ONNX reading (``preprocess_to_nchw``, ``decode_detections``)
  and ``RFDETR.predict``'s PostProcess: the frame resized bilinear with half-pixel centres and no antialias (on float
  pixels, as torchvision resizes its tensor), RGB / 255, ImageNet's mean and std; sigmoid, the top queries-many of
  queries x classes (every class slot kept, as PostProcess keeps them), best first, above the threshold; boxes x the
  frame's size, clipped to the frame (as RF-DETR clips them).
- ``deploy`` (the RT-DETR / D-FINE repositories' exports): the frame resized as above (their deploy reading:
  torchvision's ``Resize`` of a PIL image, ToTensor), the frame's width and height fed as ``orig_target_sizes``;
  the labels, boxes (frame pixels) and scores it returns, those above the threshold, in its order.

Boxes are the exporters' own: not clipped to the frame (but RF-DETR's, which it clips).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
from PIL import Image

from ..results.boxes import Boxes
from ..results.frame import FrameResult
from ..runtime.runner import Runner, fixed_dim, tensors_text
from ..text import untrusted
from .bounds import MAX_CLASSES, check_count, check_input_size
from .detr_interface import (
    DEPLOY,
    DEPLOY_OUTPUTS,
    DETR,
    LOGITS_BOXES,
    NO_NMS,
    RFDETR,
    RFDETR_OUTPUTS,
    SCORE_FUNCTIONS,
    SIGMOID,
    SIZES_INPUT,
    SOFTMAX,
    ULTRALYTICS,
    UNDECODED_MODEL_TYPES,
    scoring_of,
    scoring_text,
)
from .geometry import rgb_tensor
from .interface import Interface
from .ultralytics import class_names, recorded_imgsz

Size = tuple[int, int]  # the frame's (width, height)
# DetrImageProcessor's normalisation (transformers' IMAGENET_DEFAULT_MEAN / _STD), RGB, of its softmax models
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)


def pil_resize(
    image_bgr: np.ndarray, width: int, height: int, resample: Image.Resampling = Image.Resampling.BILINEAR
) -> np.ndarray:
    """The frame resized as PIL's ``Image.resize((width, height), resample)`` resizes it (BGR in, BGR out): as
    transformers' PIL image processors resize (bilinear for DETR and Grounding DINO, bicubic for OWL-ViT)."""
    if image_bgr.shape[:2] == (height, width):
        return image_bgr
    # The channels are resized alike and apart: BGR through PIL (read as RGB) is the RGB result, channels reversed.
    image = Image.fromarray(np.ascontiguousarray(image_bgr))
    return np.asarray(image.resize((width, height), resample))


class DetrDetector:
    """A DETR-family detector (models/detr_interface.py) on a Runner."""

    def __init__(
        self,
        runner: Runner,
        confidence: float = 0.25,
        max_detections: int = 300,
        classes: Sequence[int] | None = None,
        image_size: int = 0,  # of models with dynamic input; 0: the recorded imgsz (Ultralytics), else 640
        names: Sequence[str] | None = None,
        score_function: str = "auto",  # logits_boxes models: sigmoid, softmax, or auto: as the file (names) says
    ):
        recognition = DETR.recognise(Interface.of(runner))
        if recognition is None:
            raise ValueError(
                f"not a DETR-family model (inputs {tensors_text(runner.inputs)}, outputs "
                f"{tensors_text(runner.outputs)}): it needs {DETR.needs}"
            )
        self.runner, self.confidence, self.max_detections = runner, confidence, max_detections
        self.head, details = recognition.details["head"], recognition.details
        self.selected = bool(details.get("selected"))
        self.keep_classes(classes)
        image = next(tensor for tensor in runner.inputs if tensor.name != SIZES_INPUT)
        self._image = image.name
        height, width = (fixed_dim(d) for d in image.shape[2:4])
        if height is None or width is None:
            side = image_size if image_size > 0 else recorded_imgsz(runner.metadata)
            check_input_size("image_size", side, side)
            height, width = side, side
        self.size = (height, width)
        self._sizes = next((tensor for tensor in runner.inputs if tensor.name == SIZES_INPUT), None)
        self._outputs = {tensor.name: i for i, tensor in enumerate(runner.outputs)}
        names = list(names or class_names(runner.metadata))
        check_count("the model's class names", len(names), MAX_CLASSES, minimum=0)
        model_type = runner.metadata.get("model_type", "")
        self.scoring, self.assumed = self._scoring(details, names, model_type, score_function)
        count = details.get("classes")
        if self.head == LOGITS_BOXES:
            count = int(details["logits"]) - (self.scoring == SOFTMAX)
        if names and isinstance(count, int) and len(names) != count:
            raise ValueError(f"{len(names)} class names given for a model with {count} classes")
        self.class_count = count if isinstance(count, int) else len(names) or None
        if self.class_count is not None and self.class_count < 1:  # logits [1, Q, 0], or DETR's "no object" alone
            raise ValueError(
                f"the DETR model's outputs {tensors_text(runner.outputs)} score no class ({self.class_count}): the "
                "file is damaged or no detector"
            )
        if self.head == ULTRALYTICS and self.selected and not names:
            raise ValueError(
                "an Ultralytics RT-DETR export of selected rows does not say how many classes the model has and its "
                "metadata names none: give the class names (labels_path, predict --names)"
            )
        self.names = names or [f"class_{i}" for i in range(self.class_count or 0)]
        self.keypoint_names: list[str] = []

    @staticmethod
    def _scoring(details: dict, names: list[str], model_type: str, score_function: str) -> tuple[str, bool]:
        """How a logits_boxes model's logits are scored, and whether that is assumed (nothing said which)."""
        if score_function not in SCORE_FUNCTIONS:
            raise ValueError(f"score_function '{untrusted(score_function)}': give one of {', '.join(SCORE_FUNCTIONS)}")
        if details["head"] != LOGITS_BOXES:
            return SIGMOID, False
        if model_type in UNDECODED_MODEL_TYPES:
            raise ValueError(
                f"a transformers {model_type} export (metadata model_type): its image processor normalises the input "
                "and keeps its top 100 queries x classes, which this adapter does not decode"
            )
        if score_function != "auto":
            return score_function, False
        found = details.get("scoring") or (scoring_of(int(details["logits"]), names, "") or (None,))[0]
        return (found, False) if found else (SIGMOID, True)

    @property
    def head_note(self) -> str:
        """What a node says once at start-up: the layout, how it scores where it could be either, and that no NMS is
        run."""
        if self.head != LOGITS_BOXES:
            return f"DETR head ({self.head}): {NO_NMS}"
        scores = scoring_text(self.scoring)
        if self.assumed:
            scores += (
                ", assumed: the model records no model_type or class names that say; a DETR export (softmax, a last "
                '"no object" logit) needs score_function softmax or its class names'
            )
        return f"DETR head ({self.head}; {scores}): {NO_NMS}"

    def keep_classes(self, classes: Sequence[int] | None) -> None:
        """Report only these class ids from now on; None: every class."""
        self.classes = None if classes is None else np.asarray(list(classes), dtype=np.int64)

    def __call__(self, image_bgr: np.ndarray) -> FrameResult:
        """The frame's result (``detect``): an adapter is a function from a frame to its result."""
        return self.detect(image_bgr)

    def detect(self, image_bgr: np.ndarray) -> FrameResult:
        feeds, size = self.preprocess(image_bgr)
        return self.decode(self.infer(feeds), size)

    def preprocess(self, image_bgr: np.ndarray) -> tuple[dict[str, np.ndarray], Size]:
        """The model's inputs for the frame, and the frame's (width, height)."""
        height, width = self.size
        if self.head == RFDETR:  # torchvision's resize of the float tensor: bilinear, half-pixel, no antialias
            fitted = image_bgr.astype(np.float32)
            if image_bgr.shape[:2] != (height, width):
                fitted = cv2.resize(fitted, (width, height), interpolation=cv2.INTER_LINEAR)
        elif self.head == ULTRALYTICS:
            fitted = image_bgr
            if image_bgr.shape[:2] != (height, width):
                fitted = cv2.resize(image_bgr, (width, height), interpolation=cv2.INTER_LINEAR)
        else:
            fitted = pil_resize(image_bgr, width, height)
        tensor = rgb_tensor(fitted)
        if self.head == RFDETR or (self.head == LOGITS_BOXES and self.scoring == SOFTMAX):  # ImageNet mean and std
            tensor = (tensor - IMAGENET_MEAN) / IMAGENET_STD
        feeds = {self._image: tensor}
        size = (image_bgr.shape[1], image_bgr.shape[0])
        if self._sizes is not None:
            dtype = self._sizes.dtype if self._sizes.dtype.startswith(("int", "float")) else "int64"
            feeds[self._sizes.name] = np.array([size], dtype=dtype)
        return feeds, size

    def infer(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.runner.run(feeds)

    def decode(self, outputs: list[np.ndarray], size: Size) -> FrameResult:
        """The model's outputs for one frame (of ``size``: width, height) -> its detections in frame pixels, best
        first (the model's order where it has chosen them)."""
        if self.head == DEPLOY:
            labels, boxes, scores = (np.asarray(outputs[self._outputs[name]])[0] for name in DEPLOY_OUTPUTS)
            keep = np.flatnonzero(scores > self.confidence)
            return self._detections(boxes[keep].astype(np.float64), scores[keep], labels[keep].astype(np.int64), size)
        if self.head in (LOGITS_BOXES, RFDETR):
            names = ("logits", "pred_boxes") if self.head == LOGITS_BOXES else RFDETR_OUTPUTS[::-1]
            logits, boxes = (np.asarray(outputs[self._outputs[name]])[0] for name in names)
            if self.scoring == SOFTMAX:  # DetrImageProcessor: each query's best class but "no object", in query order
                shifted = np.exp(logits.astype(np.float32) - logits.max(axis=1, keepdims=True))
                probabilities = shifted[:, :-1] / shifted.sum(axis=1, keepdims=True)
                class_ids = probabilities.argmax(axis=1)
                scores = probabilities[np.arange(len(logits)), class_ids]
                keep = np.flatnonzero(scores > self.confidence)
                return self._detections(self._corners(boxes[keep], size), scores[keep], class_ids[keep], size)
            scores = 1.0 / (1.0 + np.exp(-logits.astype(np.float32)))
            flat = scores.ravel()
            candidates = np.flatnonzero(flat > self.confidence)
            candidates = candidates[np.argsort(-flat[candidates], kind="stable")][: logits.shape[0]]  # top-k
            queries, class_ids = np.divmod(candidates, logits.shape[1])
            corners = self._corners(boxes[queries], size)
            if self.head == RFDETR:
                corners = np.clip(corners, 0.0, np.array(size * 2, np.float64))
            return self._detections(corners, flat[candidates], class_ids, size)
        rows = np.asarray(outputs[0])[0]
        if self.selected:
            scores, labels = rows[:, 4], rows[:, 5]
            known = np.isfinite(labels) & (labels >= 0) & (labels < len(self.names))
            class_ids = np.where(known, labels, -1).astype(np.int64)
            keep = np.flatnonzero((scores > self.confidence) & known)
        else:
            class_scores = rows[:, 4:]
            class_ids = class_scores.argmax(axis=1)
            scores = class_scores[np.arange(len(rows)), class_ids]
            keep = np.flatnonzero(scores > self.confidence)
        return self._detections(self._corners(rows[keep, :4], size), scores[keep], class_ids[keep], size)

    @staticmethod
    def _corners(boxes: np.ndarray, size: Size) -> np.ndarray:
        """Normalised cx, cy, w, h -> x1, y1, x2, y2 in frame pixels."""
        centre, half = boxes[:, :2].astype(np.float64), boxes[:, 2:4].astype(np.float64) / 2
        return np.concatenate([centre - half, centre + half], axis=1) * np.array(size * 2, np.float64)

    def _detections(self, boxes: np.ndarray, scores: np.ndarray, class_ids: np.ndarray, size: Size) -> FrameResult:
        """Those of wanted classes, the first max_detections, as the frame's result (an id past the class names:
        class_<id>)."""
        if self.classes is not None:
            wanted = np.isin(class_ids, self.classes)
            boxes, scores, class_ids = boxes[wanted], scores[wanted], class_ids[wanted]
        most = self.max_detections
        return FrameResult(*size, Boxes.of(boxes[:most], scores[:most], class_ids[:most], self.names))
