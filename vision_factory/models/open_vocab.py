"""What the open-vocabulary adapters (models/grounding_dino.py, models/owl.py) share: the prompt's life (encoded once
per new phrases, counted, used by every frame after), their result, the one function that makes it, and the image
size a text-prompted export runs at.

The result is a small object of plain arrays for now: boxes x1, y1, x2, y2 in the frame's pixels, scores, the
phrase's index in the prompt as ``class_ids`` and the phrase as ``class_names``, best first. ``phrase_detections``
is the one place that makes it (when results/ has its Boxes part, that function is what changes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime.runner import Runner, TensorInfo, fixed_dim, tensor_text
from .bounds import check_input_size
from .open_vocab_interface import parse_phrases

Size = tuple[int, int]  # the frame's (width, height)


@dataclass(frozen=True)
class PhraseDetections:
    """One frame's detections of a prompt's phrases, best first."""

    boxes: np.ndarray  # [N, 4] float64 x1, y1, x2, y2 in the frame's pixels (not clipped, as the exporters')
    scores: np.ndarray  # [N] float32
    class_ids: np.ndarray  # [N] int64: the phrase's index in the prompt
    class_names: tuple[str, ...]  # the phrase of each

    def __len__(self) -> int:
        return len(self.scores)


class PromptedDetector:
    """A detector of a prompt's phrases: ``set_prompt`` encodes the phrases once (``encodings`` counts it) and keeps
    them for every frame ``detect`` is given after; a prompt of the same phrases (as text or list) is not encoded
    again. The adapter gives ``_encode`` (phrases -> an encoded prompt with ``phrases`` and the model's text
    ``feeds``), ``preprocess`` (frame -> image feeds, (width, height)) and ``decode``."""

    runner: Runner
    encodings: int = 0  # prompts encoded: once per new prompt, never per frame
    prompt: Any = None

    def set_prompt(self, prompt: str | Sequence[str]) -> Any:
        """The prompt every frame is detected with from now on; encoded only when its phrases are new."""
        phrases = parse_phrases(prompt)
        if self.prompt is None or self.prompt.phrases != phrases:
            self.prompt = self.encode(phrases)
        return self.prompt

    def encode(self, prompt: str | Sequence[str]) -> Any:
        """The prompt encoded for this model (counted in ``encodings``)."""
        encoded = self._encode(parse_phrases(prompt))
        self.encodings += 1
        return encoded

    def detect(self, image_bgr: np.ndarray, prompt: str | Sequence[str] | None = None) -> PhraseDetections:
        """The frame's detections of ``prompt`` (the one set before when None)."""
        encoded = self.set_prompt(prompt) if prompt is not None else self.prompt
        if encoded is None:
            raise ValueError("no prompt: give the phrases to detect, e.g. 'a cat. a remote control.'")
        feeds, size = self.preprocess(image_bgr)
        return self.decode(self.runner.run(feeds | encoded.feeds), size, encoded)

    def _encode(self, phrases: tuple[str, ...]) -> Any:
        raise NotImplementedError

    def preprocess(self, image_bgr: np.ndarray) -> tuple[dict[str, np.ndarray], Size]:
        raise NotImplementedError

    def decode(self, outputs: list[np.ndarray], size: Size, prompt: Any) -> PhraseDetections:
        raise NotImplementedError


def phrase_detections(
    boxes: np.ndarray, scores: np.ndarray, phrase_ids: np.ndarray, phrases: Sequence[str], max_detections: int
) -> PhraseDetections:
    """The result of boxes (x1, y1, x2, y2, frame pixels), their scores and phrases: best first (ties in the
    model's order), the first ``max_detections``."""
    order = np.argsort(-np.asarray(scores, np.float32), kind="stable")[:max_detections]
    class_ids = np.asarray(phrase_ids, np.int64)[order]
    return PhraseDetections(
        np.asarray(boxes, np.float64).reshape(-1, 4)[order],
        np.asarray(scores, np.float32)[order],
        class_ids,
        tuple(phrases[i] for i in class_ids.tolist()),
    )


def corners(boxes: np.ndarray, width: float, height: float) -> np.ndarray:
    """Normalised cx, cy, w, h -> x1, y1, x2, y2 scaled by ``width`` and ``height`` (transformers'
    center_to_corners_format, then the target size)."""
    boxes = np.asarray(boxes, np.float64)
    half = boxes[:, 2:4] / 2
    return np.concatenate([boxes[:, :2] - half, boxes[:, :2] + half], axis=1) * np.array([width, height] * 2)


def sigmoid(values: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x) in float32, -inf to 0 (the padding positions of Grounding DINO's logits)."""
    values = np.asarray(values, np.float32)
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-values))).astype(np.float32)


def check_threshold(name: str, value: float) -> None:
    """A ValueError naming ``name`` unless ``value`` is a score threshold, 0 to 1."""
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} {value!r} is not a score threshold: give one from 0 to 1")


def input_size(image: TensorInfo, image_size: Size | None) -> tuple[int, int]:
    """(height, width) the model's image input runs at: its fixed size, else ``image_size`` (width, height) given.

    A text-prompted export with a dynamic image size is refused without it: a Swin or ViT traced at one size keeps
    that size's window padding and patch grid as constants, and gives other boxes at another (a Grounding DINO export
    made at 320x320 and fed 256x384 gave boxes off by 0.86 of the frame: benchmarks/make_open_vocab.py)."""
    height, width = (fixed_dim(dim) for dim in image.shape[2:4])
    if height and width:
        return height, width
    if image_size is None:
        raise ValueError(
            f"input {tensor_text(image)} has a dynamic height and width, but such an export gives right boxes only "
            "at the size it was exported at: give that size (image_size WIDTHxHEIGHT), or export it with a fixed "
            "size"
        )
    check_input_size("image_size", image_size[1], image_size[0])
    return image_size[1], image_size[0]
