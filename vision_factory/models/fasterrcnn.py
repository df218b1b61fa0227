"""Detectors with post-processing inside the model: separate boxes, scores and labels outputs.

That is the layout of torchvision's Faster R-CNN / RetinaNet / SSD exports (``boxes`` [N, 4] in
input pixels, ``labels`` [N] int64, ``scores`` [N]; input [3, H, W] that the model resizes and
normalises itself), of TensorFlow / TFLite detection exports (``location``, ``score``, ``category``,
boxes normalised) and of many vendor models built on them: NMS is done, so decoding is only
thresholding and mapping boxes back to the frame.

Pre-processing, the convention all of these share: BGR -> RGB, values 0..1 (``/255``) for a float
input and 0..255 for a uint8 one, no mean/std (models that need one normalise inside, as
torchvision's do), NCHW unless the input's last dimension is 3 (NHWC). The frame is fitted to the
input size by a plain resize (``stretch``, INTER_LINEAR): these models are trained on resized,
not letterboxed, images, and normalised boxes then map back with one scale per axis. ``letterbox``
(Ultralytics' arithmetic, padding 114) and ``none`` (the frame as it is, for dynamic inputs of
models that resize inside, such as torchvision's) are the alternatives. A dynamic input without an
``input_size`` defaults to ``none``, a fixed one (or a given ``input_size``) to ``stretch``.

What the adapter recognises, and the parameter that overrides it:
- which output is which (``boxes_output``, ``scores_output``, ``labels_output``): by name
  (``DETECTION_ROLES``), else by shape and type (last dimension 4; integer labels; float scores).
  An optional fourth output named like ``num_detections`` limits the rows read.
- ``box_units``: ``auto`` reads a frame's boxes as normalised when the median coordinate of the
  confident boxes' centres is at most 1.5 (a pixel box centred that close to the corner is no
  detection; normalised boxes, even unclipped low-score ones, centre on the image), else as input
  pixels; or ``normalized`` / ``pixels``.
- ``box_format``: ``xyxy`` (x1, y1, x2, y2), or ``yxyx`` as TensorFlow writes them.
- ``label_offset``: the label of class 0; 1 (the default) for models where 0 is the background,
  as torchvision's and TensorFlow's are, 0 for labels that count from 0.
- class names: ``names`` (a labels list), else the model's metadata ``names`` (Ultralytics' literal)
  or ``labels`` (a literal list, or one name per line), else ``class_<id>``.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..results.boxes import Boxes
from ..results.frame import FrameResult
from ..runtime.runner import Runner, TensorInfo, fixed_dim, tensor_text, tensors_text
from .bounds import MAX_CLASSES, check_count, check_input_size
from .fasterrcnn_interface import COUNT_NAMES, DETECTION_ROLES
from .geometry import RESIZE_MODES, FrameFit, fit_frame
from .ultralytics import class_names

BOX_UNITS = ("auto", "normalized", "pixels")
BOX_FORMATS = ("xyxy", "yxyx")
NORMALIZED_LIMIT = 1.5  # auto box units: normalised when the median box-centre coordinate is at most this

_LAYOUT_HINT = (
    "a fasterrcnn-style model has separate outputs for boxes [B, N, 4] (or [N, 4]), scores [B, N] and labels [B, N]"
)


def _is_int(info: TensorInfo) -> bool:
    return info.dtype.startswith(("int", "uint"))


def metadata_labels(metadata: dict[str, str]) -> list[str]:
    """Class names from the model's metadata: ``names`` (Ultralytics' literal) or ``labels``; [] when absent."""
    names = class_names(metadata)
    if names or "labels" not in metadata:
        return names
    text = metadata["labels"]
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        value = None
    if isinstance(value, dict):
        return class_names({"names": text})
    if isinstance(value, list | tuple):
        labels = [str(name) for name in value]
    else:
        labels = [line.strip() for line in text.splitlines() if line.strip()]
    check_count("metadata labels: the number of class names", len(labels), MAX_CLASSES, minimum=0)
    return labels


@dataclass(frozen=True)
class ImageInput:
    """How the model takes its one image: name, layout, batch axis, fixed size, element type."""

    name: str
    channels_last: bool  # NHWC / HWC
    batched: bool  # a leading batch axis
    size: tuple[int, int] | None  # (height, width) when fixed
    dtype: str

    @classmethod
    def of(cls, runner: Runner, family: str) -> ImageInput:
        if len(runner.inputs) != 1:
            raise ValueError(
                f"a {family} model takes one image input, this one takes {tensors_text(runner.inputs)}; "
                "export it with a single image input"
            )
        info = runner.inputs[0]
        shape = info.shape
        if len(shape) not in (3, 4):
            raise ValueError(
                f"input {tensor_text(info)} is not an image: expected [B, 3, H, W], [3, H, W] or [B, H, W, 3]"
            )
        channel_first, channel_last = shape[-3] == 3, shape[-1] == 3
        channels_last = channel_last and not channel_first
        if not (channel_first or channel_last):
            if fixed_dim(shape[-3]) or fixed_dim(shape[-1]):
                raise ValueError(
                    f"input {tensor_text(info)} has no axis of 3 colour channels; give the model an RGB input"
                )
        spatial = shape[-3:-1] if channels_last else shape[-2:]
        height, width = (fixed_dim(d) for d in spatial)
        size = (height, width) if height and width else None
        if size is not None:  # the frame is resized to it
            check_input_size(f"input {tensor_text(info)}: the fixed size", height, width)
        return cls(info.name, channels_last, len(shape) == 4, size, info.dtype)

    def tensor(self, image_bgr: np.ndarray, rgb: bool = True) -> np.ndarray:
        """The HWC BGR uint8 image as this input's tensor: RGB (unless ``rgb`` is False), 0..1 for floats."""
        image = image_bgr[..., ::-1] if rgb else image_bgr
        if not self.channels_last:
            image = image.transpose(2, 0, 1)
        if self.batched:
            image = image[None]
        if self.dtype.startswith(("int", "uint")):
            return np.ascontiguousarray(image.astype(self.dtype))
        dtype = self.dtype if self.dtype in ("float16", "float64") else "float32"
        return np.ascontiguousarray(image.astype(np.float32) / 255).astype(dtype, copy=False)


@dataclass(frozen=True)
class RawDetections:
    """The model's rows for one frame: boxes [N, 4] as output, scores [N], labels [N] as integers."""

    boxes: np.ndarray
    scores: np.ndarray
    labels: np.ndarray


class FasterRCNNDetector:
    """A detector whose model outputs final boxes, scores and labels (NMS inside), on a Runner."""

    def __init__(
        self,
        runner: Runner,
        confidence: float = 0.25,
        max_detections: int = 300,
        classes: Sequence[int] | None = None,
        names: Sequence[str] | None = None,
        boxes_output: str | None = None,
        scores_output: str | None = None,
        labels_output: str | None = None,
        box_units: str = "auto",
        box_format: str = "xyxy",
        label_offset: int = 1,
        input_size: tuple[int, int] | None = None,
        resize: str | None = None,
        rgb: bool = True,
    ):
        if box_units not in BOX_UNITS:
            raise ValueError(f"box_units {box_units!r} is not one of {', '.join(BOX_UNITS)}")
        if box_format not in BOX_FORMATS:
            raise ValueError(f"box_format {box_format!r} is not one of {', '.join(BOX_FORMATS)}")
        if resize is not None and resize not in RESIZE_MODES:
            raise ValueError(f"resize {resize!r} is not one of {', '.join(RESIZE_MODES)}")
        self.runner = runner
        self.input = ImageInput.of(runner, "fasterrcnn")
        if input_size is not None and self.input.size is not None and tuple(input_size) != self.input.size:
            fixed = f"{self.input.size[1]}x{self.input.size[0]}"
            raise ValueError(
                f"input_size {input_size[1]}x{input_size[0]} (width x height) differs from the model's fixed "
                f"input {fixed}; leave input_size unset for a fixed-size model"
            )
        self.size = self.input.size or (tuple(input_size) if input_size is not None else None)
        self.resize = resize or ("stretch" if self.size is not None else "none")
        if self.resize != "none" and self.size is None:
            raise ValueError(
                f"resize {self.resize!r} needs an input size, but input {self.input.name} is dynamic: "
                "set input_size (height, width), or resize 'none' to feed frames as they are"
            )
        self.confidence, self.max_detections = confidence, max_detections
        self.keep_classes(classes)
        self.box_units, self.box_format, self.label_offset, self.rgb = box_units, box_format, label_offset, rgb
        self._roles = self._find_outputs(runner.outputs, boxes_output, scores_output, labels_output)
        self.names = list(names) if names else metadata_labels(runner.metadata)
        self.keypoint_names: list[str] = []

    def keep_classes(self, classes: Sequence[int] | None) -> None:
        """Report only these class ids from now on; None: every class."""
        self.classes = None if classes is None else np.asarray(list(classes), dtype=np.int64)

    @staticmethod
    def _find_outputs(
        outputs: Sequence[TensorInfo], boxes: str | None, scores: str | None, labels: str | None
    ) -> dict[str, int]:
        """Output index of boxes, scores, labels (and count when there is one)."""
        if len(outputs) < 3:
            raise ValueError(
                f"{_LAYOUT_HINT}, but this model has {len(outputs)} output(s): {tensors_text(outputs)}; give a model "
                "with NMS inside (`vision-factory inspect MODEL` tells which family a model looks like)"
            )
        index = {info.name: i for i, info in enumerate(outputs)}
        roles: dict[str, int] = {}
        for role, name in (("boxes", boxes), ("scores", scores), ("labels", labels)):
            if name is None:
                continue
            if name not in index:
                raise ValueError(
                    f"{role}_output {name!r} is not an output of the model; its outputs are {tensors_text(outputs)}"
                )
            roles[role] = index[name]
        for role, names in DETECTION_ROLES.items():
            if role not in roles:
                matches = [i for i, info in enumerate(outputs) if info.name.lower() in names]
                if len(matches) == 1 and matches[0] not in roles.values():
                    roles[role] = matches[0]
        free = [i for i, info in enumerate(outputs) if i not in roles.values() and info.name.lower() not in COUNT_NAMES]
        by_shape = {
            "boxes": lambda info: len(info.shape) in (2, 3) and info.shape[-1] == 4,
            "labels": lambda info: len(info.shape) in (1, 2) and _is_int(info),
            "scores": lambda info: len(info.shape) in (1, 2) and not _is_int(info),
        }
        for role, fits in by_shape.items():
            if role in roles:
                continue
            candidates = [i for i in free if fits(outputs[i]) and i not in roles.values()]
            if len(candidates) == 1:
                roles[role] = candidates[0]
        missing = [role for role in ("boxes", "scores", "labels") if role not in roles]
        if missing:
            raise ValueError(
                f"cannot tell which output holds the {' and '.join(missing)}: {_LAYOUT_HINT}; this model's outputs "
                f"are {tensors_text(outputs)}; name them with {', '.join(f'{r}_output' for r in missing)}"
            )
        boxes_info, scores_info, labels_info = (outputs[roles[r]] for r in ("boxes", "scores", "labels"))
        last = fixed_dim(boxes_info.shape[-1]) if boxes_info.shape else None
        if len(boxes_info.shape) not in (2, 3) or last not in (4, None):
            raise ValueError(
                f"boxes output {tensor_text(boxes_info)} is not [B, N, 4] or [N, 4]: {_LAYOUT_HINT}; "
                "choose the right one with boxes_output"
            )
        for info in (scores_info, labels_info):
            if len(info.shape) != len(boxes_info.shape) - 1:
                expected = "[B, N]" if len(boxes_info.shape) == 3 else "[N]"
                raise ValueError(
                    f"output {tensor_text(info)} does not fit boxes {tensor_text(boxes_info)}: "
                    f"scores and labels must be {expected}; {_LAYOUT_HINT}"
                )
        count = [i for i, info in enumerate(outputs) if info.name.lower() in COUNT_NAMES and i not in roles.values()]
        if count:
            roles["count"] = count[0]
        return roles

    @property
    def output_names(self) -> dict[str, str]:
        """Which output plays which role, by name."""
        return {role: self.runner.outputs[i].name for role, i in self._roles.items()}

    def __call__(self, image_bgr: np.ndarray) -> FrameResult:
        """The frame's result (``detect``): an adapter is a function from a frame to its result."""
        return self.detect(image_bgr)

    def detect(self, image_bgr: np.ndarray) -> FrameResult:
        tensor, fit = self.preprocess(image_bgr)
        return self.decode(self.infer(tensor), fit)

    def preprocess(self, image_bgr: np.ndarray) -> tuple[np.ndarray, tuple[FrameFit, tuple[int, int]]]:
        """The input tensor, and how the frame was fitted: the mapping back and the fitted (height, width)."""
        fitted, box, size = fit_frame(image_bgr, self.size, self.resize)
        if self.input.size is not None and fitted.shape[:2] != self.input.size:
            raise ValueError(
                f"a {fitted.shape[1]}x{fitted.shape[0]} frame does not fit the model's fixed input "
                f"{self.input.size[1]}x{self.input.size[0]}; use resize 'stretch' or 'letterbox'"
            )
        return self.input.tensor(fitted, self.rgb), (box, size)

    def infer(self, tensor: np.ndarray) -> RawDetections:
        """The model's boxes, scores and labels for one frame, batch axis dropped, cut to the count output."""
        outputs = self.runner.run({self.input.name: tensor})
        boxes, scores, labels = (np.asarray(outputs[self._roles[role]]) for role in ("boxes", "scores", "labels"))
        if boxes.ndim == 3:
            boxes, scores, labels = boxes[0], scores[0], labels[0]
        names = self.output_names
        if boxes.ndim != 2 or boxes.shape[1] != 4 or scores.shape != boxes.shape[:1] or labels.shape != scores.shape:
            raise ValueError(
                f"the model returned boxes {list(boxes.shape)}, scores {list(scores.shape)} and labels "
                f"{list(labels.shape)} (outputs {names['boxes']}, {names['scores']}, {names['labels']}): "
                f"expected N x 4, N and N; {_LAYOUT_HINT}"
            )
        if "count" in self._roles:
            count = int(np.asarray(outputs[self._roles["count"]]).ravel()[0])
            boxes, scores, labels = boxes[:count], scores[:count], labels[:count]
        labels = np.rint(labels).astype(np.int64) if labels.dtype.kind == "f" else labels.astype(np.int64)
        return RawDetections(boxes.astype(np.float64), scores.astype(np.float64), labels)

    def decode(self, raw: RawDetections, fit: tuple[FrameFit, tuple[int, int]]) -> FrameResult:
        """Rows above the threshold, of wanted classes, best first, as the frame's detections in frame pixels (a
        class past the names: class_<id>)."""
        box, tensor_size = fit
        class_ids = raw.labels - self.label_offset
        mask = (raw.scores > self.confidence) & (class_ids >= 0)
        if self.classes is not None:
            mask &= np.isin(class_ids, self.classes)
        kept = np.flatnonzero(mask)
        kept = kept[np.argsort(-raw.scores[kept], kind="stable")][: self.max_detections]
        boxes = raw.boxes[kept]
        if self.box_format == "yxyx":
            boxes = boxes[:, [1, 0, 3, 2]]
        if self._normalized(boxes):
            boxes = boxes * np.array([tensor_size[1], tensor_size[0]] * 2, dtype=np.float64)
        corners = box.to_frame(boxes.reshape(-1, 2, 2)).reshape(-1, 4)
        found = Boxes.of(corners, raw.scores[kept], class_ids[kept], self.names)
        return FrameResult(int(box.width), int(box.height), found)

    def _normalized(self, boxes: np.ndarray) -> bool:
        if self.box_units != "auto":
            return self.box_units == "normalized"
        centres = (boxes[:, :2] + boxes[:, 2:]) / 2
        return bool(len(boxes)) and float(np.median(np.abs(centres))) <= NORMALIZED_LIMIT
