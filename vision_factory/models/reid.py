"""Re-identification embeddings: one L2-normalised appearance feature per detection box, on any Runner.

Pre-processing, as DeepSORT's MobileNetV2 embedder and torchreid's OSNet take their crops:

- crop: the box (x1, y1, x2, y2, frame pixels) widened to whole pixels (floor of x1, y1, ceil of x2, y2) and
  clipped to the frame. A box with nothing left after clipping (outside the frame, zero width or height, not
  finite) is not run: its row of the result is all zeros, which has no direction, so the tracker treats it as
  "no appearance" (models/tracker.py);
- resize: the crop stretched to the model's input (H, W) with ``cv2.INTER_LINEAR`` (224x224 for the MobileNetV2
  embedder, 256x128 for OSNet); a model with a dynamic input size needs ``input_size``;
- BGR -> RGB, / 255, then (x - mean) / std per channel, NCHW float32. mean and std default to the model's metadata
  (``mean`` and ``std``: three numbers each, comma-separated, in 0..1 or 0..255), else ImageNet's; mean 0,0,0 and
  std 1,1,1 leave just the / 255;
- output [B, D] divided by its L2 norm.

Batching: every crop of a frame in as few runs as possible. A model exported with a fixed batch gets its input
padded with zeros to that batch and the output sliced back (more crops than the batch: several runs); a
dynamic-batch model gets the real count at once, or at most ``batch`` crops per run when that is set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import cv2
import numpy as np

from ..runtime.runner import Runner, fixed_dim, run_in_chunks, tensor_text, tensors_text
from ..text import untrusted
from .reid_interface import EMBEDDING_DIMS, NEEDS, embedding_dim

IMAGENET_MEAN = (0.485, 0.456, 0.406)  # RGB, 0..1
IMAGENET_STD = (0.229, 0.224, 0.225)


def crop_boxes(boxes_xyxy, width: int, height: int) -> np.ndarray:
    """[N, 4] whole-pixel crops (x1, y1, x2, y2) of ``boxes_xyxy`` in a ``width`` x ``height`` frame, clipped; a box
    with nothing left (or not finite) becomes (0, 0, 0, 0)."""
    boxes = np.asarray(boxes_xyxy, dtype=np.float64).reshape(-1, 4)
    finite = np.isfinite(boxes).all(axis=1)
    boxes = np.where(finite[:, None], boxes, 0.0)
    low = np.floor(boxes[:, :2]).clip(0, [width, height])
    high = np.ceil(boxes[:, 2:]).clip(0, [width, height])
    crops = np.concatenate([low, high], axis=1).astype(np.int64)
    empty = ~finite | (crops[:, 2] <= crops[:, 0]) | (crops[:, 3] <= crops[:, 1])
    crops[empty] = 0
    return crops


def metadata_triple(metadata: Mapping[str, str], key: str) -> tuple[float, float, float] | None:
    """Three numbers of the model's metadata ``key`` ('0.485, 0.456, 0.406'), in 0..1; None when absent."""
    if key not in metadata:
        return None
    return parse_triple(metadata[key], f"the model's metadata {key}", scale_255=True)


def parse_triple(text: str, name: str, scale_255: bool = False) -> tuple[float, float, float]:
    """'0.485,0.456,0.406' (also with brackets or spaces) -> three floats; 0..255 values / 255 if ``scale_255``."""
    items = [item for item in text.strip().strip("[]()").replace(",", " ").split() if item]
    try:
        values = tuple(float(item) for item in items)
    except ValueError:
        values = ()
    if len(values) != 3 or not all(np.isfinite(values)):
        raise ValueError(f"{name} {untrusted(repr(text), 100)} is not three numbers (R, G, B), e.g. 0.485,0.456,0.406")
    if scale_255 and max(values) > 1:
        values = tuple(value / 255 for value in values)
    return values  # type: ignore[return-value]


class ReidEmbedder:
    """Appearance features of the boxes of a BGR frame: ``embed(image, boxes)`` -> [N, D], rows of unit length."""

    def __init__(
        self,
        runner: Runner,
        input_size: tuple[int, int] | None = None,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        batch: int | None = None,
    ):
        self.runner = runner
        if len(runner.inputs) != 1 or len(runner.outputs) != 1:
            raise ValueError(
                f"{NEEDS} takes one input and gives one output; this one takes {tensors_text(runner.inputs)} and "
                f"gives {tensors_text(runner.outputs)}"
            )
        info, output = runner.inputs[0], runner.outputs[0]
        if len(info.shape) != 4 or info.shape[1] not in (3, None):
            raise ValueError(f"input {tensor_text(info)} is not [B, 3, H, W]: {NEEDS}")
        if len(output.shape) != 2 or (isinstance(output.shape[1], int) and embedding_dim(output) is None):
            raise ValueError(
                f"output {tensor_text(output)} is not [B, D] with D in {EMBEDDING_DIMS[0]}..{EMBEDDING_DIMS[1]}: "
                f"{NEEDS}"
            )
        self._input = info.name
        self._dtype = np.float16 if info.dtype == "float16" else np.float32
        self.size = self._input_size(info, input_size)
        self.dim = fixed_dim(output.shape[1])  # None: known after the first run
        self.fixed_batch = fixed_dim(info.shape[0])
        if batch is not None and batch < 0:
            raise ValueError(f"batch must be 0 (automatic) or positive, not {batch}")
        if batch and self.fixed_batch is not None and batch != self.fixed_batch:
            raise ValueError(
                f"batch {batch} differs from the model's fixed batch {self.fixed_batch} (input {tensor_text(info)}); "
                "leave batch 0"
            )
        self.batch = self.fixed_batch or batch or None  # crops per run at most; None: all at once
        metadata = runner.metadata
        self.mean = tuple(mean) if mean is not None else metadata_triple(metadata, "mean") or IMAGENET_MEAN
        self.std = tuple(std) if std is not None else metadata_triple(metadata, "std") or IMAGENET_STD
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            raise ValueError(f"mean {self.mean} and std {self.std} must be three numbers each, std positive")
        # (x / 255 - mean) / std as one multiply-add per channel, RGB order.
        self._scale = (1 / (255 * np.asarray(self.std, np.float32))).reshape(1, 1, 3)
        self._shift = (-np.asarray(self.mean, np.float32) / np.asarray(self.std, np.float32)).reshape(1, 1, 3)

    @staticmethod
    def _input_size(info, input_size: tuple[int, int] | None) -> tuple[int, int]:
        height, width = fixed_dim(info.shape[2]), fixed_dim(info.shape[3])
        if height and width:
            if input_size is not None and tuple(input_size) != (height, width):
                raise ValueError(
                    f"input_size {input_size[1]}x{input_size[0]} (width x height) differs from the model's fixed "
                    f"input {width}x{height} ({tensor_text(info)}); leave it unset"
                )
            return height, width
        if input_size is None:
            raise ValueError(
                f"input {tensor_text(info)} has a dynamic size: set the input size (WIDTHxHEIGHT), e.g. 128x256 "
                "for OSNet"
            )
        return int(input_size[0]), int(input_size[1])

    def embed(self, image_bgr: np.ndarray, boxes_xyxy) -> np.ndarray:
        """[N, D] float32 unit features of the boxes, in box order; an all-zero row for a box with nothing inside
        the frame. N = 0 runs nothing."""
        crops = crop_boxes(boxes_xyxy, image_bgr.shape[1], image_bgr.shape[0])
        valid = np.flatnonzero(crops[:, 2] > crops[:, 0])
        if not len(valid):
            return np.zeros((len(crops), self.dim or 0), np.float32)
        features = self.infer(self.preprocess(image_bgr, crops[valid]))
        result = np.zeros((len(crops), features.shape[1]), np.float32)
        norms = np.linalg.norm(features, axis=1, keepdims=True)
        result[valid] = features / np.maximum(norms, 1e-12)
        return result

    def preprocess(self, image_bgr: np.ndarray, crops: np.ndarray) -> np.ndarray:
        """[M, 3, H, W] normalised crops of the whole-pixel, non-empty ``crops`` (crop_boxes)."""
        height, width = self.size
        tensor = np.empty((len(crops), 3, height, width), self._dtype)
        for row, (x1, y1, x2, y2) in enumerate(crops):
            resized = cv2.resize(image_bgr[y1:y2, x1:x2], (width, height), interpolation=cv2.INTER_LINEAR)
            rgb = resized[..., ::-1].astype(np.float32) * self._scale + self._shift
            tensor[row] = rgb.transpose(2, 0, 1)
        return tensor

    def infer(self, tensor: np.ndarray) -> np.ndarray:
        """The model's raw [M, D] features of M > 0 crops, in as few runs as its batch allows."""
        (features,) = run_in_chunks(self.runner, self._input, tensor, self.batch, pad=self.fixed_batch is not None)
        if features.ndim != 2 or len(features) != len(tensor):
            raise ValueError(
                f"the model returned {self.runner.outputs[0].name} {list(features.shape)} for {len(tensor)} crops: "
                "expected [B, D]"
            )
        self.dim = features.shape[1]
        return features.astype(np.float32, copy=False)
