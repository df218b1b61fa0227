"""OWLv2 and OWL-ViT on any Runner, fed and decoded as Hugging Face transformers' processors and
``post_process_grounded_object_detection`` do (models/open_vocab_interface.py: the ``owl`` layout and its
``variant``).

The prompt, encoded once (``encode``; ``set_prompt`` keeps the last one and encodes only a new one): each phrase its
own row, tokenized by the export's own CLIP tokenizer (models/tokenizer_file.py: <|startoftext|> phrase
<|endoftext|>) and padded to 16 tokens with id 0 ('!', OWL's pad token; the text tower is causal and pools at
<|endoftext|>, so what pads does not change the result) and attention mask 0; a phrase of more than 16 tokens is
refused (the processor would not pad the rows to one length).

The frame, as the processors' PIL paths take it:
- OWLv2 (``Owlv2ImageProcessorPil``): RGB / 255, padded with zeros to a square at the bottom and right, smoothed
  and resized to the input as scikit-image's ``resize`` does it (scipy's ``gaussian_filter`` of sigma
  max(0, (scale - 1) / 2) and ``zoom``, linear, mirrored edges, grid mode; clipped to the padded image's range),
  then CLIP's mean and std;
- OWL-ViT (``OwlViTImageProcessorPil``): stretched to the input by Pillow's bicubic resize, RGB / 255, CLIP's mean
  and std.

Decoding: each image patch's best phrase (the highest logit over the phrases) and score (its sigmoid), those above
``confidence`` (transformers' ``threshold``); boxes x the padded square's side (OWLv2) or the frame's width and
height (OWL-ViT), not clipped (as transformers').
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image
from scipy import ndimage

from ..results.boxes import Boxes
from ..runtime.runner import Runner, fixed_dim, tensors_text
from ..text import untrusted
from .detr import pil_resize
from .geometry import rgb_tensor
from .interface import Interface
from .open_vocab import (
    PromptedDetector,
    Size,
    check_threshold,
    corners,
    input_size,
    phrase_detections,
    sigmoid,
)
from .open_vocab_interface import CLIP_MEAN, CLIP_STD, OPEN_VOCAB, OWL, OWL_TOKENS, OWLV2, OWLVIT
from .tokenizer_file import BPE, TOKENIZER_JSON, TokenizerFile

TOKENIZER_NAMES = (TOKENIZER_JSON,)  # looked for beside the model
START, END = "<|startoftext|>", "<|endoftext|>"
VARIANTS = ("auto", OWLV2, OWLVIT)
MEAN = np.array(CLIP_MEAN, np.float32)
STD = np.array(CLIP_STD, np.float32)


@dataclass(frozen=True)
class OwlPrompt:
    """A prompt encoded for an OWL export: one row of tokens a phrase."""

    phrases: tuple[str, ...]
    feeds: dict[str, np.ndarray]  # input_ids and attention_mask [N, 16]


class OwlDetector(PromptedDetector):
    """An OWLv2 or OWL-ViT export on a Runner, with the export's own tokenizer."""

    def __init__(
        self,
        runner: Runner,
        tokenizer: TokenizerFile,
        confidence: float = 0.1,  # transformers' threshold
        max_detections: int = 300,
        image_size: Size | None = None,  # (width, height) of an export of dynamic size: the size it was made at
        variant: str = "auto",  # owlv2, owlvit, or auto: as the file says (else OWLv2, said in head_note)
        prompt: str | Sequence[str] | None = None,
    ):
        recognition = OPEN_VOCAB.recognise(Interface.of(runner))
        if recognition is None or recognition.details["head"] != OWL:
            raise ValueError(
                f"not an OWLv2 or OWL-ViT model (inputs {tensors_text(runner.inputs)}, outputs "
                f"{tensors_text(runner.outputs)}): it needs {OPEN_VOCAB.needs}"
            )
        if variant not in VARIANTS:
            raise ValueError(f"variant '{untrusted(variant)}': give one of {', '.join(VARIANTS)}")
        check_tokenizer(tokenizer)
        check_threshold("confidence", confidence)
        self.runner, self.tokenizer = runner, tokenizer
        self.confidence, self.max_detections = confidence, max_detections
        found = recognition.details["variant"]
        self.variant = variant if variant != "auto" else found or OWLV2
        self.assumed = variant == "auto" and found is None
        self._image = str(recognition.details["image"])
        inputs = {tensor.name: tensor for tensor in runner.inputs}
        self.size = input_size(inputs[self._image], image_size)
        self._dtypes = {name: inputs[name].dtype for name in ("input_ids", "attention_mask")}
        self.rows = fixed_dim(inputs["input_ids"].shape[0])  # phrases an export of fixed rows takes, else None
        self._outputs = {tensor.name: i for i, tensor in enumerate(runner.outputs)}
        self.prompt: OwlPrompt | None = None
        if prompt is not None:
            self.set_prompt(prompt)

    @property
    def head_note(self) -> str:
        name = "OWLv2 (the frame padded to a square)" if self.variant == OWLV2 else "OWL-ViT (the frame stretched)"
        if self.assumed:
            name += ", assumed: the file's metadata has no model_type and its input side is no published one's"
        return f"{name}; input {self.size[1]}x{self.size[0]}"

    def _encode(self, phrases: tuple[str, ...]) -> OwlPrompt:
        """One row of tokens a phrase; for an export of fixed rows, rows of zeros after them (a row whose first
        token is 0 is a padded query to OWL: its logits are the lowest, never a patch's best)."""
        if self.rows and len(phrases) > self.rows:
            raise ValueError(
                f"the prompt has {len(phrases)} phrases, more than the {self.rows} this export takes: give fewer"
            )
        ids, mask = self.tokenizer.phrase_rows(phrases, OWL_TOKENS, "OWL", length=OWL_TOKENS, rows=self.rows)
        feeds = {"input_ids": ids, "attention_mask": mask}
        return OwlPrompt(phrases, {name: value.astype(self._dtypes[name]) for name, value in feeds.items()})

    def preprocess(self, image_bgr: np.ndarray) -> tuple[dict[str, np.ndarray], Size]:
        """The image input for the frame, and the frame's (width, height)."""
        height, width = self.size
        if self.variant == OWLVIT:
            tensor = rgb_tensor(pil_resize(image_bgr, width, height, Image.Resampling.BICUBIC))
            tensor = (tensor - MEAN.reshape(1, 3, 1, 1)) / STD.reshape(1, 3, 1, 1)
        else:
            resized = square_resize(image_bgr, height, width)
            tensor = ((resized - MEAN) / STD).transpose(2, 0, 1)[None]
        return {self._image: np.ascontiguousarray(tensor, np.float32)}, (image_bgr.shape[1], image_bgr.shape[0])

    def decode(self, outputs: list[np.ndarray], size: Size, prompt: OwlPrompt) -> Boxes:
        """The model's outputs for one frame -> the patches above ``confidence``, best first."""
        logits = np.asarray(outputs[self._outputs["logits"]])[0][:, : len(prompt.phrases)]  # not the padded rows
        boxes = np.asarray(outputs[self._outputs["pred_boxes"]])[0]
        phrase_ids = logits.argmax(axis=1)
        scores = sigmoid(logits[np.arange(len(logits)), phrase_ids])
        kept = np.flatnonzero(scores > self.confidence)
        scale = (max(size),) * 2 if self.variant == OWLV2 else size  # OWLv2: the padded square's side
        found = corners(boxes[kept], *scale)
        return phrase_detections(found, scores[kept], phrase_ids[kept], prompt.phrases, self.max_detections)


def square_resize(image_bgr: np.ndarray, height: int, width: int) -> np.ndarray:
    """The frame as Owlv2ImageProcessorPil gives it before normalising: RGB / 255 (float32), padded with zeros to a
    square at the bottom and right, Gaussian-smoothed and zoomed to ``height`` x ``width`` as its ``resize`` (and
    scikit-image's) does, clipped to the padded image's range; HWC."""
    rows, columns = image_bgr.shape[:2]
    side = max(rows, columns)
    padded = np.zeros((side, side, 3), np.float32)
    padded[:rows, :columns] = (image_bgr[..., ::-1].astype(np.float64) * (1 / 255)).astype(np.float32)
    factors = np.divide(padded.shape, (height, width, 3))
    filtered = ndimage.gaussian_filter(padded, np.maximum(0, (factors - 1) / 2), cval=0, mode="mirror")
    out = ndimage.zoom(filtered, 1 / factors, order=1, mode="mirror", cval=0, grid_mode=True)
    return np.clip(out, padded.min(), padded.max())


def check_tokenizer(tokenizer: TokenizerFile) -> None:
    """A ValueError naming the file when it is not a CLIP BPE tokenizer as OWL's text tower reads it: its
    <|endoftext|> the highest id (the tower pools at the highest id), [<|startoftext|> text <|endoftext|>]."""
    fix = "give the export's own tokenizer.json (CLIP's for OWLv2 and OWL-ViT)"
    tokenizer.require(tokenizer.algorithm == BPE, f"is a {tokenizer.algorithm} tokenizer, not CLIP's BPE", fix)
    start, end = (tokenizer.tokenizer.token_to_id(token) for token in (START, END))
    tokenizer.require(start is not None and end is not None, f"has no {START} or no {END}", fix)
    last = tokenizer.tokenizer.get_vocab_size() - 1
    tokenizer.require(end == last, f"gives {END} the id {end}, not its highest ({last}), where OWL pools", fix)
    ids = tokenizer.tokenizer.encode("a").ids
    tokenizer.require(ids[:1] == [start] and ids[-1:] == [end], f"does not add {START} and {END} to a text", fix)
