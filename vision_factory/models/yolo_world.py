"""YOLO-World and YOLOE exports that take the prompt as text embeddings (models/open_vocab_interface.py's
``yolo_text`` layout), with a separate CLIP text encoder run once per prompt, as Ultralytics' ``set_classes`` /
``get_text_pe`` runs CLIP once per class list.

The prompt, encoded once (``encode``; ``set_prompt`` keeps the last one and encodes only a new one): each phrase
tokenized by the export's own CLIP tokenizer (models/tokenizer_file.py: <|startoftext|> phrase <|endoftext|>, the
rows padded with 0 to the longest, or to the text encoder's fixed length, attention mask 0 there; CLIP's tower is
causal and pools at <|endoftext|>, so what pads does not change it), one run of the text encoder (``input_ids``,
``attention_mask`` [N, T] -> ``text_embeds`` [N, D]), each row L2-normalised as Ultralytics' ``CLIP.encode_text``
leaves them (YOLOE's graph applies its reprta block and normalises again inside, as ``YOLOEDetect.get_tpe``). An
export of fixed K takes the prompt's phrases then the last phrase's embedding again up to K: the classes are scored
apart and YOLO-World's attention takes a max over the phrases, so a repeated phrase changes nothing of the others
(the padded classes are not read). A prompt of more than K phrases, a phrase over the encoder's tokens, a text
encoder of another width than the model's input is refused.

The frame and the head are Ultralytics' (models/yolo.py's YoloDetector: letterbox, class-aware NMS), over the
prompt's phrases: class id the phrase's index, class name the phrase.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..results.boxes import Boxes
from ..runtime.runner import Runner, TensorInfo, fixed_dim, tensor_text, tensors_text
from .geometry import FrameFit
from .interface import Interface
from .open_vocab import PromptedDetector, check_threshold
from .open_vocab_interface import OPEN_VOCAB, TEXT_FEATURES, YOLO_TEXT
from .owl import check_tokenizer
from .tokenizer_file import TokenizerFile, find_beside
from .yolo import YoloDetector

TEXT_ENCODER_NAMES = ("text_encoder.onnx",)  # looked for beside the model (or above its onnx/ folder)
CLIP_TOKENS = 77  # CLIP's context length: the tokens a phrase may have when the encoder's input does not fix it
TEXT_INPUTS = ("input_ids", "attention_mask")
TEXT_OUTPUT = "text_embeds"


def text_encoder_beside(model_path: str | os.PathLike, given: str | os.PathLike | None) -> str:
    """The text encoder given, else TEXT_ENCODER_NAMES beside the model (or above its onnx/ folder: where the
    tokenizer is looked for); a ValueError naming every path looked at when there is none."""
    fix = (
        "a YOLO-World / YOLOE export taking txt_feats or tpe needs the CLIP text encoder it was trained with as ONNX "
        "(input_ids, attention_mask -> text_embeds): put it beside the model or give its path (text_encoder_path, "
        "--text-encoder)"
    )
    return str(find_beside(model_path, given, TEXT_ENCODER_NAMES, "text encoder", fix))


@dataclass(frozen=True)
class EmbeddedPrompt:
    """A prompt encoded for a text-embedding export: its phrases and the model's text input [1, K, D]."""

    phrases: tuple[str, ...]
    feeds: dict[str, np.ndarray]


class YoloTextDetector(PromptedDetector):
    """A YOLO-World or YOLOE export taking ``txt_feats`` / ``tpe``, with its CLIP text encoder and tokenizer."""

    def __init__(
        self,
        runner: Runner,
        text_encoder: Runner,
        tokenizer: TokenizerFile,
        confidence: float = 0.25,
        iou: float = 0.7,
        max_detections: int = 300,
        prompt: str | Sequence[str] | None = None,
        encoder_name: str = "the text encoder",  # how errors name it (its path)
    ):
        recognition = OPEN_VOCAB.recognise(Interface.of(runner))
        if recognition is None or recognition.details["head"] != YOLO_TEXT:
            raise ValueError(
                f"not a YOLO-World or YOLOE model taking text embeddings (inputs {tensors_text(runner.inputs)}, "
                f"outputs {tensors_text(runner.outputs)}): it needs {OPEN_VOCAB.needs}"
            )
        check_tokenizer(tokenizer)
        check_threshold("confidence", confidence)
        check_threshold("iou", iou)
        self.runner, self.text_encoder, self.tokenizer = runner, text_encoder, tokenizer
        self.text_runs = 0  # runs of the text encoder: one per prompt encoded
        inputs = {tensor.name: tensor for tensor in runner.inputs}
        self._text = inputs[str(recognition.details["text"])]
        self.phrases_max = fixed_dim(self._text.shape[1])  # K of an export of fixed K, else None
        self.width = fixed_dim(self._text.shape[2])
        self._encoder = encoder_interface(text_encoder, encoder_name, self.width, self._text)
        image = inputs[str(recognition.details["image"])]
        # the head and the frame as YoloDetector takes them, on the image side of the model alone
        self.yolo = YoloDetector(
            Interface((image,), tuple(runner.outputs), dict(runner.metadata)),  # type: ignore[arg-type]
            confidence=confidence,
            iou=iou,
            max_detections=max_detections,
            image_size=0,  # a dynamic-size export: its recorded imgsz, as Ultralytics
        )
        self._image = image.name
        self.prompt: EmbeddedPrompt | None = None
        if prompt is not None:
            self.set_prompt(prompt)

    @property
    def head_note(self) -> str:
        kind = TEXT_FEATURES[self._text.name]
        size = f"{self.yolo.size[1]}x{self.yolo.size[0]}"
        return f"{kind} with a text-embedding input ({self._text.name}); input {size}, NMS as Ultralytics'"

    def _encode(self, phrases: tuple[str, ...]) -> EmbeddedPrompt:
        """The phrases through the tokenizer and the text encoder (one run), L2-normalised, padded to K."""
        if self.phrases_max and len(phrases) > self.phrases_max:
            raise ValueError(
                f"the prompt has {len(phrases)} phrases, more than the {self.phrases_max} this export takes (its "
                f"{tensor_text(self._text)}): give fewer, or export it with more"
            )
        ids, mask = self._tokens(phrases)
        tokens = dict(zip(TEXT_INPUTS, (ids, mask)))
        outputs = self.text_encoder.run(
            {name: tokens[name].astype(self._encoder.dtypes[name]) for name in self._encoder.inputs}
        )
        self.text_runs += 1
        embeds = np.asarray(outputs[self._encoder.output], np.float32).reshape(len(phrases), -1)
        embeds = embeds / np.maximum(np.linalg.norm(embeds, axis=1, keepdims=True), np.float32(1e-12))
        if self.phrases_max:
            embeds = np.concatenate([embeds, np.repeat(embeds[-1:], self.phrases_max - len(phrases), axis=0)])
        feats = np.ascontiguousarray(embeds[None], self._text.dtype or "float32")
        return EmbeddedPrompt(phrases, {self._text.name: feats})

    def _tokens(self, phrases: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """input_ids and attention_mask [N, T]: each phrase a row, padded with 0 to the longest (or T fixed)."""
        limit = self._encoder.tokens or CLIP_TOKENS
        return self.tokenizer.phrase_rows(phrases, limit, "the text encoder", length=self._encoder.tokens)

    def preprocess(self, image_bgr: np.ndarray) -> tuple[dict[str, np.ndarray], FrameFit]:  # type: ignore[override]
        """The letterboxed image input, and how it maps back to the frame (Ultralytics' predict)."""
        tensor, fit = self.yolo.preprocess(image_bgr)
        return {self._image: tensor}, fit

    def decode(self, outputs: list[np.ndarray], size: FrameFit, prompt: EmbeddedPrompt) -> Boxes:  # type: ignore[override]
        """The head's outputs -> the prompt's phrases' detections (the padded classes not read), after NMS."""
        self.yolo.class_count, self.yolo.names = len(prompt.phrases), list(prompt.phrases)
        return self.yolo.decode(self.yolo.row(outputs, 0), size).boxes

    def status_values(self) -> dict[str, str]:
        """/diagnostics' counts (ros/monitor.py): the text encoder's runs."""
        return {"text encoder runs": str(self.text_runs)}


@dataclass(frozen=True)
class EncoderInterface:
    """What the adapter feeds a text encoder and reads of it."""

    inputs: tuple[str, ...]  # input_ids, and attention_mask where it takes one
    dtypes: dict[str, str]
    output: int  # text_embeds' index
    tokens: int | None  # T of an encoder of fixed length


def encoder_interface(encoder: Runner, name: str, width: int | None, text: TensorInfo) -> EncoderInterface:
    """The text encoder's interface, checked: input_ids (and attention_mask) [N, T] in, text_embeds [N, D] out, D the
    model's text input width; a ValueError naming the file otherwise."""
    inputs = {tensor.name: tensor for tensor in encoder.inputs}
    outputs = [tensor.name for tensor in encoder.outputs]
    if "input_ids" not in inputs or set(inputs) - set(TEXT_INPUTS) or TEXT_OUTPUT not in outputs:
        raise ValueError(
            f"{name} is not a CLIP text encoder (inputs {tensors_text(encoder.inputs)}, outputs "
            f"{tensors_text(encoder.outputs)}): give the text encoder exported with the model, input_ids and "
            "attention_mask [N, T] in, text_embeds [N, D] out (transformers' CLIPTextModelWithProjection)"
        )
    output = outputs.index(TEXT_OUTPUT)
    embeds = encoder.outputs[output]
    found = fixed_dim(embeds.shape[-1]) if len(embeds.shape) == 2 else None
    if width is not None and found != width:
        raise ValueError(
            f"{name} gives {tensor_text(embeds)}, but the model's {tensor_text(text)} takes embeddings of {width}: "
            "give the text encoder the model was exported with (CLIP ViT-B/32's for YOLO-World, 512)"
        )
    ids = inputs["input_ids"]
    tokens = fixed_dim(ids.shape[1]) if len(ids.shape) == 2 else None
    names = tuple(name for name in TEXT_INPUTS if name in inputs)
    return EncoderInterface(names, {name: inputs[name].dtype or "int64" for name in names}, output, tokens)
