"""Florence-2 on ONNX: the export's four graphs (models/florence2_interface.py) run as transformers'
``Florence2ForConditionalGeneration.generate(do_sample=False)`` runs the model (greedy, or its beam search:
models/florence2_beams.py), and the answer parsed as its processor's ``post_process_generation``
(models/florence2_answer.py).

A frame's way through:
1. the image: RGB stretched to the configs' size (768 x 768) with Pillow's filter (bicubic), times 1/255, less
   ImageNet's mean, over its std (the processor's CLIPImageProcessorPil) -> ``vision_encoder`` -> image features;
2. the task: its token expanded into its question (``<OD>`` -> "Locate the objects with category name in the
   image.", ``<CAPTION_TO_PHRASE_GROUNDING>`` with its text -> "Locate the phrases in the caption: {text}"),
   tokenized with ``<s>`` ... ``</s>`` by the export's own tokenizer.json -> ``embed_tokens``; encoded once per
   task and text, not per frame (``encodings`` counts it);
3. ``encoder_model`` on the image features followed by the question's embeddings, its mask all ones: once a frame;
4. decoding with the key-value cache: from ``decoder_start_token_id``, ``<s>`` forced as the first new token
   (forced_bos), no n-gram of ``no_repeat_ngram_size`` twice in the sequence, ``</s>`` forced at the last step
   ``max_new_tokens`` allows (forced_eos), stopping at an end token. The merged decoder's first step runs with
   ``use_cache_branch`` false and empty pasts, the steps after with the first step's cross-attention keys and values
   and the last step's own; optimum's pair runs ``decoder_model`` once then ``decoder_with_past_model``. Greedy
   (``num_beams`` 1), or transformers' beam search of ``num_beams`` beams (models/florence2_beams.py: the beams one
   batch of the decoder, the cache reordered by beam); by default the export's generation_config.json's num_beams,
   as transformers' ``generate()`` takes it (3 in the published configs).

The answer is a FrameResult: its Text always (the answer of a text task; for the others the generated text without
``<s>``/``</s>``, its ``<loc_>`` tokens kept), with the generated token ids; Boxes for the tasks that give regions
(boxes with their phrase; OCR regions and polygons as their bounding boxes), each phrase a class; none for a text
task.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..results.boxes import Boxes
from ..results.frame import FrameResult
from ..results.text import Text
from ..runtime.runner import Runner, fixed_dim
from ..text import untrusted
from .florence2_answer import Florence2Answer, answer
from .florence2_beams import beam_search
from .florence2_interface import (
    EMBED,
    ENCODER,
    FIRST,
    MAX_BEAMS,
    MAX_POSITIONS,
    MERGED,
    MERGED_LAYOUT,
    PAST,
    PRESENT,
    PURE_TEXT,
    VISION,
    WITH_PAST,
    Export,
    past_layers,
)
from .tokenizer_file import TokenizerFile

log = logging.getLogger(__name__)  # a node shows its INFO lines in its own log (ros/spin.py)
ENCODED = "florence2: encoded the task "  # the line each task encoding logs: once per task, never per frame
DEFAULT_TASK = "<CAPTION>"
MAX_TEXT_CHARS = 1000  # a task's text (a caption to ground, a phrase): longer is refused


@dataclass(frozen=True)
class Task:
    """A task prompt as the model reads it: its token (``<OD>``), its text (grounding's caption, '' for none), the
    question's token ids and their embeddings, and the kind of answer it gives."""

    task: str
    text: str
    ids: tuple[int, ...]
    embeddings: np.ndarray  # [1, T, D]
    kind: str


def split_task(prompt: str) -> tuple[str, str]:
    """'<TASK>text' (or '<TASK> text') -> ('<TASK>', 'text'); a prompt without a task token -> ('', prompt)."""
    prompt = prompt.strip()
    if prompt.startswith("<") and ">" in prompt:
        end = prompt.index(">") + 1
        return prompt[:end], prompt[end:].strip()
    return "", prompt


class Florence2:
    """Florence-2's graphs on their runners (``runners``: florence2_interface's graph names -> Runner) with the
    export's facts and tokenizer: ``set_task`` encodes a task once, ``detect`` answers a frame with the task set."""

    keypoint_names: list[str] = []

    def __init__(
        self,
        runners: Mapping[str, Runner],
        export: Export,
        tokenizer: TokenizerFile,
        task: str = DEFAULT_TASK,
        max_new_tokens: int = 256,
        num_beams: int = 0,
    ):
        self.runners, self.export, self.facts, self.tokenizer = dict(runners), export, export.facts, tokenizer
        self.runner = self.runners[VISION]  # what tools ask of "the" runner (its backend, its image input)
        self.layout = export.layout
        decoder = self.runners[MERGED if self.layout == MERGED_LAYOUT else WITH_PAST]
        self.layers = past_layers(decoder)
        self.names_in = {name: [tensor.name for tensor in runner.inputs] for name, runner in self.runners.items()}
        self.past_shape = self._past_shape(decoder)
        self._check_widths()
        limit = min(MAX_POSITIONS, self.facts.positions)
        if not 1 <= int(max_new_tokens) <= limit - 1:
            raise ValueError(f"max_new_tokens {max_new_tokens} is out of range: give 1 to {limit - 1}")
        self.max_new_tokens = int(max_new_tokens)
        self.num_beams = int(num_beams) or self.facts.num_beams  # 0: the export's generation_config.json's
        if not 1 <= self.num_beams <= MAX_BEAMS:
            raise ValueError(f"num_beams {num_beams} is out of range: give 1 (greedy) to {MAX_BEAMS} (0: the export's)")
        self.encodings = 0  # tasks encoded: once per new task or text, never per frame
        self.task: Task | None = None
        self.tasks = sorted({*self.facts.prompts_without_inputs, *self.facts.prompts_with_input})
        self.set_task(task)

    # The class map: none fixed (a region task names its classes as it answers: each box's phrase is its label, in
    # its Detection2D's hypothesis; LabelInfo stays empty).
    names: list[str] = []

    def _check_widths(self) -> None:
        """The vision encoder's features and the token embeddings are joined as the encoder's input: their widths
        must be one (a graph of another export, or of another size, is refused at start naming both)."""
        features = fixed_dim(self.runners[VISION].outputs[0].shape[-1])
        embedded = fixed_dim(self.runners[EMBED].outputs[0].shape[-1])
        if features and embedded and features != embedded:
            graphs = self.export.graphs
            raise ValueError(
                f"{graphs[VISION].name} gives image features {features} wide but {graphs[EMBED].name} embeds tokens "
                f"{embedded} wide: the graphs are of different exports (or sizes); give one export's folder"
            )

    def _past_shape(self, decoder: Runner) -> tuple[int, int]:
        """(heads, head size) of the decoder's pasts: the graph's, else the config's."""
        shape = next(tensor.shape for tensor in decoder.inputs if tensor.name == f"{PAST}0.decoder.key")
        heads, size = fixed_dim(shape[1]), fixed_dim(shape[3])
        if heads and size:
            return heads, size
        if self.facts.heads and self.facts.width:
            return self.facts.heads, self.facts.width // self.facts.heads
        raise ValueError(
            f"{self.export.graphs[MERGED if self.layout == MERGED_LAYOUT else WITH_PAST].name}'s pasts leave the "
            "heads and head size open and config.json does not state them (decoder_attention_heads, d_model): put "
            "the export's config.json at its top"
        )

    # The task.
    def question(self, task: str, text: str) -> str:
        """The question a task (and its text) expands into, as Florence2Processor expands it."""
        if task in self.facts.prompts_without_inputs:
            if text:
                raise ValueError(f"task {task} takes no text (given '{untrusted(text, 80)}'): give the task alone")
            return self.facts.prompts_without_inputs[task]
        if task in self.facts.prompts_with_input:
            if not text:
                raise ValueError(f"task {task} needs a text after it, e.g. '{task}a person': give one")
            return self.facts.prompts_with_input[task].format(input=text)
        raise ValueError(
            f"task '{untrusted(task, 60)}' is not one of Florence-2's: give one of {', '.join(self.tasks)}"
        )

    def set_task(self, prompt: str, text: str | None = None) -> Task:
        """The task every frame is answered with from now on (``prompt``: '<TASK>' or '<TASK>text', or the task
        with ``text`` apart); encoded only when it or its text is new."""
        task, given = split_task(prompt)
        text = given if text is None else text.strip()
        if len(text) > MAX_TEXT_CHARS:
            raise ValueError(f"the task's text has {len(text)} characters, over {MAX_TEXT_CHARS}: give a shorter one")
        if self.task is not None and (self.task.task, self.task.text) == (task, text):
            return self.task
        question = self.question(task, text)
        ids = tuple(self.tokenizer.tokenizer.encode(question).ids)
        limit = self.facts.positions - self.facts.image_tokens
        if len(ids) > limit:
            raise ValueError(f"the task's question is {len(ids)} tokens, over the {limit} the model reads: shorten it")
        embeddings = self.embed(ids)
        self.task = Task(task, text, ids, embeddings, self.facts.answers.get(task, PURE_TEXT))
        self.encodings += 1
        log.info("%s%s '%s' (%d tokens)", ENCODED, task, untrusted(text, 200), len(ids))
        return self.task

    def embed(self, ids: Any) -> np.ndarray:
        return self.runners[EMBED].run({"input_ids": np.asarray([ids], np.int64)})[0]

    # A frame.
    def preprocess(self, image_bgr: np.ndarray) -> np.ndarray:
        """The frame as pixel_values [1, 3, H, W] float32: the processor's Pillow resize and normalisation."""
        from PIL import Image

        height, width = self.facts.size
        rgb = Image.fromarray(np.ascontiguousarray(image_bgr[:, :, ::-1]))
        resized = np.asarray(rgb.resize((width, height), resample=self.facts.resample), np.float32)
        mean = np.asarray(self.facts.mean, np.float32)
        std = np.asarray(self.facts.std, np.float32)
        pixels = (resized * np.float32(self.facts.rescale) - mean) / std
        return np.ascontiguousarray(pixels.transpose(2, 0, 1)[None], np.float32)

    def encode(self, image_bgr: np.ndarray, task: Task) -> tuple[np.ndarray, np.ndarray]:
        """The encoder's states and mask for the frame and the task: image features, then the question's."""
        features = self.runners[VISION].run({"pixel_values": self.preprocess(image_bgr)})[0]
        joined = np.concatenate([features.astype(np.float32), task.embeddings.astype(np.float32)], axis=1)
        mask = np.ones(joined.shape[:2], np.int64)
        states = self.runners[ENCODER].run({"inputs_embeds": joined, "attention_mask": mask})[0]
        return states, mask

    def generate(self, states: np.ndarray, mask: np.ndarray, max_new_tokens: int) -> tuple[list[int], bool]:
        """The answer's tokens (transformers' ``generate(num_beams=self.num_beams, do_sample=False)`` with the
        generation config's forced tokens, n-gram rule and beam settings): the sequence from the start token, and
        whether an end token ended it."""
        if self.num_beams > 1:
            return self.search(states, mask, max_new_tokens)
        facts = self.facts
        tokens = [facts.decoder_start]
        max_length = 1 + max_new_tokens
        pasts: dict[str, np.ndarray] = {}
        cross: dict[str, np.ndarray] = {}
        while len(tokens) < max_length:
            logits, presents = self.step(tokens[-1], states, mask, pasts, cross)
            scores = logits.astype(np.float32)
            self.ban_repeats(tokens, scores)
            forced = self.forced(len(tokens), max_length)
            chosen = forced if forced is not None else int(np.argmax(scores))
            tokens.append(chosen)
            if chosen in facts.eos:
                return tokens, True
            pasts = as_pasts(presents, "decoder")
            if not cross:
                cross = as_pasts(presents, "encoder")
        return tokens, False

    def forced(self, length: int, max_length: int) -> int | None:
        """The token forced after a sequence of ``length`` (forced_bos first, forced_eos at the last step a
        sequence of at most ``max_length`` allows), None where none is."""
        if length == max_length - 1 and self.facts.forced_eos is not None:
            return self.facts.forced_eos
        return self.facts.forced_bos if length == 1 else None

    def rules(self, tokens: list[int], max_length: int, log_probs: np.ndarray) -> np.ndarray:
        """A beam's log-probabilities under the generation config's rules (transformers' logits processors, in its
        order): no repeated n-gram, then a forced token's alone (0, the others -inf); in place."""
        self.ban_repeats(tokens, log_probs)
        forced = self.forced(len(tokens), max_length)
        if forced is not None:
            log_probs[:] = -np.inf
            log_probs[forced] = 0.0
        return log_probs

    def search(self, states: np.ndarray, mask: np.ndarray, max_new_tokens: int) -> tuple[list[int], bool]:
        """Beam search of ``num_beams`` beams (models/florence2_beams.py): the beams one batch of the decoder, the
        encoder's states repeated for each, the cache reordered by the beam each continues."""
        beams, facts = self.num_beams, self.facts
        states, mask = np.repeat(states, beams, axis=0), np.repeat(mask, beams, axis=0)

        def step(tokens: list[int], pasts: dict, cross: dict) -> tuple[np.ndarray, dict]:
            return self.step(tokens, states, mask, pasts, cross)

        cross: dict[str, np.ndarray] = {}

        def reorder(presents: dict[str, np.ndarray], rows: np.ndarray) -> tuple[dict, dict]:
            """The next step's pasts: the self-attention's of the beams continued (``rows``); the cross-attention's
            the first step's (every beam's the same: the encoder's states repeated)."""
            if not cross:
                cross.update(as_pasts(presents, "encoder"))
            return {name: value[rows] for name, value in as_pasts(presents, "decoder").items()}, cross

        max_length = 1 + max_new_tokens
        return beam_search(
            step,
            lambda tokens, log_probs: self.rules(tokens, max_length, log_probs),
            facts.decoder_start,
            frozenset(facts.eos),
            max_new_tokens,
            beams,
            facts.length_penalty,
            facts.early_stopping,
            reorder,
        )

    def step(
        self, token: int | list[int], states: np.ndarray, mask: np.ndarray, pasts: dict[str, np.ndarray], cross: dict
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """One decoding step: the last token's logits and the step's presents (by name); ``token`` a list (one per
        row of ``states``: a beam each) gives a row of logits per token."""
        rows = np.asarray(token, np.int64).reshape(-1, 1)
        embedded = self.runners[EMBED].run({"input_ids": rows})[0]
        feeds = {"encoder_attention_mask": mask, "encoder_hidden_states": states, "inputs_embeds": embedded}
        if self.layout == MERGED_LAYOUT:
            name, first = MERGED, not pasts
            if first:
                empty = np.zeros((len(rows), *self.past_shape[:1], 0, self.past_shape[1]), np.float32)
                feeds |= {
                    f"{PAST}{i}.{part}.{kv}": empty
                    for i in range(self.layers)
                    for part in ("decoder", "encoder")
                    for kv in ("key", "value")
                }
            else:
                feeds |= pasts | cross
            feeds["use_cache_branch"] = np.array([not first])
        else:
            name = FIRST if not pasts else WITH_PAST
            if pasts:
                feeds |= pasts | cross
        runner = self.runners[name]
        wanted = set(self.names_in[name])
        outputs = runner.run({key: value for key, value in feeds.items() if key in wanted})
        named = dict(zip((tensor.name for tensor in runner.outputs), outputs))
        presents = {key: value for key, value in named.items() if key.startswith(PRESENT)}
        logits = named["logits"][:, -1]
        return (logits if np.ndim(token) else logits[0]), presents

    def ban_repeats(self, tokens: list[int], scores: np.ndarray) -> None:
        """No n-gram twice (``no_repeat_ngram_size`` n): the tokens that would end a repeat of the last n - 1 get
        -inf (transformers' NoRepeatNGramLogitsProcessor, over the whole decoded sequence)."""
        size = self.facts.no_repeat_ngram_size
        if not size or len(tokens) + 1 < size:
            return
        prefix = tuple(tokens[len(tokens) - size + 1 :]) if size > 1 else ()
        banned = [
            tokens[i + size - 1] for i in range(len(tokens) - size + 1) if tuple(tokens[i : i + size - 1]) == prefix
        ]
        scores[banned] = -np.inf

    def answer(self, image_bgr: np.ndarray, max_new_tokens: int | None = None) -> Florence2Answer:
        """The frame's answer to the task set."""
        task = self.task
        assert task is not None
        states, mask = self.encode(image_bgr, task)
        tokens, ended = self.generate(states, mask, max_new_tokens or self.max_new_tokens)
        text = self.tokenizer.tokenizer.decode(tokens, skip_special_tokens=False)
        size = (int(image_bgr.shape[1]), int(image_bgr.shape[0]))
        return answer(task.task, task.kind, tokens, text, size, self.facts, ended)

    def detect(self, image_bgr: np.ndarray) -> FrameResult:
        return result_of(image_bgr, self.answer(image_bgr))

    def __call__(self, image_bgr: np.ndarray) -> FrameResult:
        return self.detect(image_bgr)


def as_pasts(presents: dict[str, np.ndarray], part: str) -> dict[str, np.ndarray]:
    """A step's ``present.{i}.{part}.*`` outputs as the next step's ``past_key_values.{i}.{part}.*`` inputs (``part``:
    decoder, the self-attention's, grown each step; encoder, the cross-attention's, the first step's for all)."""
    return {f"{PAST}{name[len(PRESENT) :]}": value for name, value in presents.items() if f".{part}." in name}


def result_of(image_bgr: np.ndarray, found: Florence2Answer) -> FrameResult:
    """The FrameResult of an answer: its Text (with the tokens), and Boxes where it gives regions (each phrase a
    class, in the order first seen)."""
    spoken = found.text if found.kind == PURE_TEXT else found.generated_text.replace("<s>", "").replace("</s>", "")
    text = Text(spoken.strip(), 1.0, tuple(found.tokens))
    if found.kind == PURE_TEXT:  # no regions: no detections (the node's detections message empty)
        return FrameResult.of(image_bgr, boxes=Boxes.empty([]), text=text)
    rows, labels = [found.boxes], list(found.labels)
    if len(found.quads):
        quads = found.quads.reshape(-1, 4, 2)
        rows.append(np.concatenate([quads.min(axis=1), quads.max(axis=1)], axis=1))
        labels += found.quad_labels
    for polygons, label in zip(found.polygons, found.polygon_labels):
        points = np.concatenate([np.asarray(p, np.float64).reshape(-1, 2) for p in polygons]) if polygons else None
        if points is not None and len(points):
            rows.append(np.concatenate([points.min(axis=0), points.max(axis=0)])[None])
            labels.append(label)
    names = list(dict.fromkeys(labels))
    xyxy = np.concatenate([np.asarray(r, np.float64).reshape(-1, 4) for r in rows]) if rows else np.zeros((0, 4))
    ids = np.array([names.index(label) for label in labels], np.int64)
    boxes = Boxes.of(xyxy, np.ones(len(labels), np.float32), ids, names)
    return FrameResult.of(image_bgr, boxes=boxes, text=text)
