"""Ultralytics YOLO image classification (``task: classify`` exports: one image input [B, 3, S, S], one output
[B, classes] of probabilities, the softmax inside the model) on any Runner.

Pre-processing follows Ultralytics' own ``predict`` of an exported model (``classify_transforms``): the shorter
side resized to S with Pillow's bilinear filter (torchvision's ``Resize`` of a PIL image; the longer side
int(S x long / short)), the centre S x S cropped (its offsets rounded as torchvision's ``CenterCrop``), RGB / 255 (its
mean 0 and standard deviation 1), NCHW float32. Post-processing is its ``Probs``: the classes by probability, best
first (``top5``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..results.classes import TOP, Classes
from ..results.frame import FrameResult
from ..runtime.runner import Runner, fixed_dim, shape_text
from .bounds import MAX_CLASSES, check_count
from .geometry import rgb_tensor
from .ultralytics import class_names, recorded_imgsz


def classify_crop(image_bgr: np.ndarray, size: int) -> np.ndarray:
    """``image_bgr`` (HWC uint8) as Ultralytics' classify_transforms fits it: shorter side to ``size`` (Pillow
    bilinear), the centre ``size`` x ``size`` cropped; still HWC BGR uint8 (the filter works channel by channel)."""
    from PIL import Image

    height, width = image_bgr.shape[:2]
    if width <= height:
        new_w, new_h = size, int(size * height / width)
    else:
        new_w, new_h = int(size * width / height), size
    if (new_w, new_h) != (width, height):
        resized = Image.fromarray(np.ascontiguousarray(image_bgr)).resize((new_w, new_h), Image.Resampling.BILINEAR)
        image_bgr = np.asarray(resized)
    top, left = int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))
    return image_bgr[top : top + size, left : left + size]


class YoloClassifier:
    """A YOLO classify export on a Runner: each frame's ``top`` classes (results/classes.py's Classes)."""

    keypoint_names: list[str] = []

    def __init__(
        self,
        runner: Runner,
        top: int = TOP,
        image_size: int = 0,  # of a model with dynamic input; 0: the model's metadata imgsz, else 640
        names: Sequence[str] | None = None,
    ):
        self.runner, self.top = runner, top
        shape = runner.inputs[0].shape
        fixed = [fixed_dim(d) for d in shape[2:4]]
        self.dynamic = None in fixed
        if self.dynamic:
            self.size = image_size if image_size > 0 else recorded_imgsz(runner.metadata)
        elif fixed[0] != fixed[1]:
            raise ValueError(
                f"the classifier's input {shape_text(shape)} is not square: Ultralytics exports classify models at "
                "a square imgsz"
            )
        else:
            self.size = fixed[0]
        output = runner.outputs[0].shape
        metadata_names = class_names(runner.metadata)
        count = fixed_dim(output[-1]) if len(output) == 2 else None
        if len(output) != 2:
            raise ValueError(f"the classifier's output {shape_text(output)} is not [1, classes] of probabilities")
        names = list(names or metadata_names)
        count = count or len(names)  # a symbolic class dimension: the names say how many
        if not count:
            raise ValueError(
                "the classifier's output does not say how many classes it has and its metadata names none: give the "
                "class names (labels_path, predict --labels)"
            )
        check_count("the classes of the classifier's output", count, MAX_CLASSES)
        if names and len(names) != count:
            raise ValueError(
                f"{len(names)} class names given for a classifier of {count} classes: give one name per class "
                "(labels_path, predict --labels)"
            )
        self.class_count = count
        self.names = names or [f"class_{i}" for i in range(count)]
        self.classes: Sequence[int] | None = None
        self._input = runner.inputs[0].name

    def keep_classes(self, classes: Sequence[int] | None) -> None:
        """List only these class ids from now on; None: every class."""
        self.classes = classes

    def __call__(self, image_bgr: np.ndarray) -> FrameResult:
        return self.detect(image_bgr)

    def detect(self, image_bgr: np.ndarray) -> FrameResult:
        """The frame's best classes (a detector's ``detect``: the node and the tools call every adapter so)."""
        tensor = self.preprocess(image_bgr)
        return self.decode(self.runner.run({self._input: tensor})[0][0], image_bgr.shape)

    def preprocess(self, image_bgr: np.ndarray) -> np.ndarray:
        return rgb_tensor(classify_crop(image_bgr, self.size))

    def decode(self, probabilities: np.ndarray, shape: Sequence[int]) -> FrameResult:
        """[classes] probabilities -> the frame's result (``shape``: the frame's, height and width first)."""
        classes = Classes.of(probabilities, self.names, self.top, self.classes)
        return FrameResult(int(shape[1]), int(shape[0]), classes=classes)
