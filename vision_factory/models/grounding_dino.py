"""Grounding DINO on any Runner, fed and decoded as Hugging Face transformers' processor and
``post_process_grounded_object_detection`` do, in both export layouts (models/open_vocab_interface.py's ``head``).

The prompt, encoded once (``encode``; ``set_prompt`` keeps the last one and encodes only a new one): its phrases
joined as the processor joins a list of them ("a cat. a remote control.": each phrase then '. ', the last '.'), so a
text prompt that does not end with '.' still closes its last phrase; tokenized by the export's own tokenizer
(models/tokenizer_file.py: [CLS] text [SEP], ``token_type_ids`` 0); each token's phrase from its characters ([CLS],
[SEP], '.' and '?', ids 101, 102, 1012, 1029, belong to none). For the IDEA / TAO layout also what its graph takes
from the host: the tokens padded to its length, and the phrase mask and position ids as transformers'
``generate_masks_with_special_tokens_and_transfer_map`` builds them (``phrase_masks``).

The frame: stretched to the input size by Pillow's bilinear resize (the processor's PIL path; OpenCV's moves boxes by
up to 40 px), RGB / 255, ImageNet's mean and std; ``pixel_mask`` ones. An export of dynamic size runs only at the
size it was made at (models/open_vocab.py's ``input_size``).

Decoding: a query's score is its highest sigmoid over the token positions; the queries scoring above ``confidence``
(transformers' ``threshold``) are kept; each one's phrase is the phrase holding its most probable word piece among
the phrases' tokens. Where no token of any phrase is above ``text_threshold``, transformers keeps the detection with
an empty label (or one of delimiters only: '.', '[SEP]'); here it is dropped, as it names nothing of the prompt.
Boxes x the frame's width and height, not clipped (as transformers').
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..runtime.runner import Runner, tensors_text
from ..text import untrusted
from .depth_interface import IMAGENET_MEAN, IMAGENET_STD
from .detr import pil_resize
from .geometry import rgb_tensor
from .interface import Interface
from .open_vocab import (
    PhraseDetections,
    PromptedDetector,
    Size,
    check_threshold,
    corners,
    input_size,
    phrase_detections,
    sigmoid,
)
from .open_vocab_interface import (
    DELIMITERS,
    GROUNDING_DINO_HF,
    GROUNDING_DINO_IDEA,
    MAX_TEXT_LEN,
    OPEN_VOCAB,
)
from .tokenizer_file import TOKENIZER_JSON, VOCAB_TXT, WORDPIECE, TokenizerFile

TOKENIZER_NAMES = (TOKENIZER_JSON, VOCAB_TXT)  # looked for beside the model, in this order
DELIMITER_IDS = np.array(sorted(DELIMITERS.values()), np.int64)
MEAN = np.array(IMAGENET_MEAN, np.float32).reshape(1, 3, 1, 1)
STD = np.array(IMAGENET_STD, np.float32).reshape(1, 3, 1, 1)


@dataclass(frozen=True)
class GroundingPrompt:
    """A prompt encoded for one Grounding DINO export: what every frame of it is fed and decoded with."""

    phrases: tuple[str, ...]
    text: str  # as tokenized
    input_ids: np.ndarray  # [T] the tokenizer's ids, [CLS] ... [SEP]
    owners: np.ndarray  # [L] the phrase of each logit position, -1 for none
    feeds: dict[str, np.ndarray]  # the export's text inputs


def joined(phrases: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """The text of ``phrases`` as transformers' processor joins a list of them ("a cat. a dog.") and each phrase's
    character span in it."""
    spans, text = [], ""
    for phrase in phrases:
        text += ". " if text else ""
        spans.append((len(text), len(text) + len(phrase)))
        text += phrase
    return text + ".", spans


def phrase_masks(input_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The phrase mask [T, T] (bool) and position ids [T] of ``input_ids`` [T], as transformers'
    ``generate_masks_with_special_tokens_and_transfer_map`` builds them: the tokens up to and with each delimiter
    after the first see each other, their positions counted from 0 after the delimiter before them; a block that the
    first or last token closes, and the tokens after the last delimiter, see themselves only, at position 0."""
    length = len(input_ids)
    index = np.arange(length)
    special = np.isin(input_ids, DELIMITER_IDS)
    before = np.maximum.accumulate(np.where(special, index, -1))
    before = np.concatenate([[-1], before[:-1]])  # the delimiter before each token
    after = np.minimum.accumulate(np.where(special, index, length)[::-1])[::-1]  # the first delimiter from each token
    valid = (after != 0) & (after != length - 1) & (after != length)
    mask = (after[:, None] == after[None, :]) & valid[None, :]
    mask |= np.eye(length, dtype=bool)
    positions = np.where(valid, index - before - 1, 0).clip(0)
    return mask, positions.astype(np.int64)


class GroundingDino(PromptedDetector):
    """A Grounding DINO export (either layout) on a Runner, with the export's own tokenizer."""

    def __init__(
        self,
        runner: Runner,
        tokenizer: TokenizerFile,
        confidence: float = 0.25,  # transformers' threshold (box threshold)
        text_threshold: float = 0.25,
        max_detections: int = 300,
        image_size: Size | None = None,  # (width, height) of an export of dynamic size: the size it was made at
        prompt: str | Sequence[str] | None = None,
    ):
        recognition = OPEN_VOCAB.recognise(Interface.of(runner))
        head = recognition.details["head"] if recognition else None
        if head not in (GROUNDING_DINO_HF, GROUNDING_DINO_IDEA):
            raise ValueError(
                f"not a Grounding DINO model (inputs {tensors_text(runner.inputs)}, outputs "
                f"{tensors_text(runner.outputs)}): it needs {OPEN_VOCAB.needs}"
            )
        check_tokenizer(tokenizer)
        check_threshold("confidence", confidence)
        check_threshold("text_threshold", text_threshold)
        self.runner, self.tokenizer, self.head = runner, tokenizer, head
        self.confidence, self.text_threshold, self.max_detections = confidence, text_threshold, max_detections
        details = recognition.details
        # L: the logits' token positions, where the file says (a traced export's may be dynamic): max_text_len
        self.positions = int(details["positions"] or MAX_TEXT_LEN)
        text_length = details["text_length"]
        self.text_length = text_length if isinstance(text_length, int) and text_length > 0 else None
        self._inputs = {tensor.name: tensor for tensor in runner.inputs}
        self._image = str(details["image"])
        self.size = input_size(self._inputs[self._image], image_size)
        self._outputs = {tensor.name: i for i, tensor in enumerate(runner.outputs)}
        self._logits = "logits" if head == GROUNDING_DINO_HF else "pred_logits"
        self.prompt: GroundingPrompt | None = None
        if prompt is not None:
            self.set_prompt(prompt)

    @property
    def head_note(self) -> str:
        return (
            f"Grounding DINO ({self.head}; input {self.size[1]}x{self.size[0]}): a detection whose phrases' tokens are "
            f"all at or below text_threshold {self.text_threshold} names no phrase and is dropped"
        )

    def _encode(self, phrases: tuple[str, ...]) -> GroundingPrompt:
        """The prompt's tokens, their phrases and the export's text inputs."""
        text, spans = joined(phrases)
        encoding = self.tokenizer.tokenizer.encode(text)
        ids = np.asarray(encoding.ids, np.int64)
        limit = min(self.positions, self.text_length or self.positions)
        if len(ids) > limit:
            raise ValueError(
                f"the prompt '{untrusted(text, 120)}' is {len(ids)} tokens, more than the {limit} this model reads: "
                "give fewer or shorter phrases"
            )
        owners = np.full(self.positions, -1, np.int64)
        for token, (token_id, (start, _)) in enumerate(zip(ids.tolist(), encoding.offsets)):
            if token_id not in DELIMITERS.values() and not encoding.special_tokens_mask[token]:
                owners[token] = next((i for i, (first, end) in enumerate(spans) if first <= start < end), -1)
        owners[[0, -1]] = -1  # transformers' label never reads the first and the last position
        return GroundingPrompt(phrases, text, ids, owners, self._text_feeds(ids))

    def _text_feeds(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        """The text inputs of the tokens: padded with [PAD] (0, attention 0) to a fixed length the file states (as
        Isaac ROS pads to 256), and for the IDEA layout the phrase mask and position ids of the padded tokens."""
        padded = np.zeros(self.text_length or len(ids), np.int64)
        padded[: len(ids)] = ids
        attention = np.arange(len(padded)) < len(ids)
        values = {"input_ids": padded, "attention_mask": attention, "token_type_ids": np.zeros_like(padded)}
        if self.head == GROUNDING_DINO_IDEA:
            values["text_token_mask"], values["position_ids"] = phrase_masks(padded)
        return {name: self._typed(name, value[None]) for name, value in values.items() if name in self._inputs}

    def _typed(self, name: str, value: np.ndarray) -> np.ndarray:
        """``value`` in the dtype the model's input ``name`` takes (bool or int64 masks, int32 ids)."""
        try:
            return np.ascontiguousarray(value, dtype=np.dtype(self._inputs[name].dtype))
        except TypeError:
            return value

    def preprocess(self, image_bgr: np.ndarray) -> tuple[dict[str, np.ndarray], Size]:
        """The image inputs for the frame, and the frame's (width, height)."""
        height, width = self.size
        tensor = (rgb_tensor(pil_resize(image_bgr, width, height)) - MEAN) / STD
        feeds = {self._image: tensor}
        if "pixel_mask" in self._inputs:
            feeds["pixel_mask"] = self._typed("pixel_mask", np.ones((1, height, width), np.int64))
        return feeds, (image_bgr.shape[1], image_bgr.shape[0])

    def decode(self, outputs: list[np.ndarray], size: Size, prompt: GroundingPrompt) -> PhraseDetections:
        """The model's outputs for one frame -> the detections that name a phrase, best first."""
        logits = np.asarray(outputs[self._outputs[self._logits]])[0]
        boxes = np.asarray(outputs[self._outputs["pred_boxes"]])[0]
        probs = sigmoid(logits)
        scores = probs.max(axis=1)
        kept = np.flatnonzero(scores > self.confidence)
        owners = prompt.owners
        if len(owners) != probs.shape[1]:  # a file that did not say its width: transformers' reading of this one
            owners = np.concatenate([owners, np.full(max(0, probs.shape[1] - len(owners)), -1)])[: probs.shape[1]]
            owners[-1:] = -1
        phrase_probs = np.where(owners[None] >= 0, probs[kept], -1.0)
        best = phrase_probs.argmax(axis=1) if len(kept) else np.zeros(0, np.int64)
        named = phrase_probs[np.arange(len(kept)), best] > self.text_threshold
        kept, best = kept[named], best[named]
        found = corners(boxes[kept], *size)
        return phrase_detections(found, scores[kept], owners[best], prompt.phrases, self.max_detections)


def check_tokenizer(tokenizer: TokenizerFile) -> None:
    """A ValueError naming the file when it is not the BERT WordPiece tokenizer a Grounding DINO graph reads: the
    graph takes ids 101, 102, 1012, 1029 as [CLS], [SEP], '.' and '?' (bert-base-uncased's)."""
    fix = "give the export's own tokenizer (bert-base-uncased's for Grounding DINO)"
    tokenizer.require(tokenizer.algorithm == WORDPIECE, f"is a {tokenizer.algorithm} tokenizer, not WordPiece", fix)
    for token, expected in DELIMITERS.items():
        found = tokenizer.tokenizer.token_to_id(token)
        tokenizer.require(found == expected, f"gives '{token}' the id {found}, not {expected} as the graph reads", fix)
    ids = tokenizer.tokenizer.encode("a.").ids
    tokenizer.require(ids[:1] == [101] and ids[-1:] == [102], "does not add [CLS] and [SEP] to a text", fix)
