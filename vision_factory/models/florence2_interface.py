"""What a Florence-2 export is: its folder, its graphs' interfaces, the facts its configs state, and the rule that
recognises its graphs (models/florence2.py runs it).

The export is a folder as onnx-community publishes Florence-2 for transformers.js: ``tokenizer.json`` and the
configs (``config.json``, ``generation_config.json``, ``preprocessor_config.json``; transformers 5's
``processor_config.json`` too where there is one) at its top, the graphs in its ``onnx/`` folder (or a flat folder,
all in one):

- ``vision_encoder.onnx``: ``pixel_values`` [B, 3, 768, 768] -> ``image_features`` [B, 577, D] (the DaViT and the
  projector: 24 x 24 patches and their mean);
- ``embed_tokens.onnx``: ``input_ids`` [B, T] -> ``inputs_embeds`` [B, T, D];
- ``encoder_model.onnx``: ``inputs_embeds`` (the image features, then the prompt's embeddings), ``attention_mask``
  -> ``last_hidden_state``;
- ``decoder_model_merged.onnx``: ``encoder_attention_mask``, ``encoder_hidden_states``, ``inputs_embeds``,
  ``past_key_values.{i}.{decoder,encoder}.{key,value}`` [B, heads, length, head size], ``use_cache_branch`` [1]
  -> ``logits``, ``present.*`` (optimum's merge: its first step runs with use_cache_branch false and empty pasts,
  the steps after reuse the first step's encoder keys and values);
- or, in its place, optimum's pair: ``decoder_model.onnx`` (the first step, no pasts) and
  ``decoder_with_past_model.onnx`` (the steps after: the pasts in, the decoder's own presents out).

A folder with both decoders runs the merged one. Where a config is absent its facts are the published
Florence-2's (DEFAULTS); what it states is read within bounds and checked, a wrong value refused naming the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..files import UnreadableFile, read_limited
from ..runtime.runner import TensorInfo, shape_text
from ..text import shown_path, untrusted
from .interface import Interface, Recognition, Rule

NAME = "florence2"
VISION, EMBED, ENCODER = "vision_encoder.onnx", "embed_tokens.onnx", "encoder_model.onnx"
MERGED, FIRST, WITH_PAST = "decoder_model_merged.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx"
TOKENIZER, CONFIG, GENERATION = "tokenizer.json", "config.json", "generation_config.json"
PREPROCESSOR, PROCESSOR = "preprocessor_config.json", "processor_config.json"
MERGED_LAYOUT, PAIR_LAYOUT = "merged", "pair"
MAX_CONFIG_BYTES = 1 << 20  # Florence-2's configs are 5 KB at most (config.json)
MAX_POSITIONS = 4096  # a decoder's positions (Florence-2: 1024): bounds max_new_tokens and the key-value cache
MAX_BEAMS = 8  # beams a search keeps at most (the published config: 3): each a row of the decoder and its cache
PAST, PRESENT = "past_key_values.", "present."
NEEDS = (
    "a Florence-2 export folder as onnx-community publishes it: tokenizer.json and the configs at its top, "
    f"onnx/{VISION}, onnx/{EMBED}, onnx/{ENCODER} and onnx/{MERGED} (or onnx/{FIRST} with onnx/{WITH_PAST}) "
    "beside it (or all in one folder)"
)

# Florence2Processor's tables (transformers 5.24), which the published preprocessor_config.json repeats: each task's
# question, and how its answer is parsed.
TASK_PROMPTS_WITHOUT_INPUTS = {
    "<OCR>": "What is the text in the image?",
    "<OCR_WITH_REGION>": "What is the text in the image, with regions?",
    "<CAPTION>": "What does the image describe?",
    "<DETAILED_CAPTION>": "Describe in detail what is shown in the image.",
    "<MORE_DETAILED_CAPTION>": "Describe with a paragraph what is shown in the image.",
    "<OD>": "Locate the objects with category name in the image.",
    "<DENSE_REGION_CAPTION>": "Locate the objects in the image, with their descriptions.",
    "<REGION_PROPOSAL>": "Locate the region proposals in the image.",
}
TASK_PROMPTS_WITH_INPUT = {
    "<CAPTION_TO_PHRASE_GROUNDING>": "Locate the phrases in the caption: {input}",
    "<REFERRING_EXPRESSION_SEGMENTATION>": "Locate {input} in the image with mask",
    "<REGION_TO_SEGMENTATION>": "What is the polygon mask of region {input}",
    "<OPEN_VOCABULARY_DETECTION>": "Locate {input} in the image.",
    "<REGION_TO_CATEGORY>": "What is the region {input}?",
    "<REGION_TO_DESCRIPTION>": "What does the region {input} describe?",
    "<REGION_TO_OCR>": "What text is in the region {input}?",
}
PURE_TEXT, OCR, GROUNDING = "pure_text", "ocr", "phrase_grounding"
BBOXES_WITH_TEXT, BBOXES, POLYGONS = "description_with_bboxes", "bboxes", "polygons"
POLYGONS_WITH_TEXT, BBOXES_OR_POLYGONS = "description_with_polygons", "description_with_bboxes_or_polygons"
ANSWER_KINDS = (PURE_TEXT, OCR, GROUNDING, BBOXES_WITH_TEXT, BBOXES, POLYGONS, POLYGONS_WITH_TEXT, BBOXES_OR_POLYGONS)
TASK_ANSWERS = {
    "<OCR>": PURE_TEXT,
    "<OCR_WITH_REGION>": OCR,
    "<CAPTION>": PURE_TEXT,
    "<DETAILED_CAPTION>": PURE_TEXT,
    "<MORE_DETAILED_CAPTION>": PURE_TEXT,
    "<OD>": BBOXES_WITH_TEXT,
    "<DENSE_REGION_CAPTION>": BBOXES_WITH_TEXT,
    "<CAPTION_TO_PHRASE_GROUNDING>": GROUNDING,
    "<REFERRING_EXPRESSION_SEGMENTATION>": POLYGONS,
    "<REGION_TO_SEGMENTATION>": POLYGONS,
    "<OPEN_VOCABULARY_DETECTION>": BBOXES_OR_POLYGONS,
    "<REGION_TO_CATEGORY>": PURE_TEXT,
    "<REGION_TO_DESCRIPTION>": PURE_TEXT,
    "<REGION_TO_OCR>": PURE_TEXT,
    "<REGION_PROPOSAL>": BBOXES,
}
# The phrases grounding drops where the export has no processor_config.json: Florence-2's original processor's list,
# which transformers' conversion writes there (post_processor_config.phrase_grounding.banned_grounding_tokens).
BANNED_GROUNDING = frozenset(
    "it I me mine you your yours he him his she her hers they them their theirs one oneself we us our ours its "
    "myself yourself himself herself itself ourselves yourselves themselves this that these those who whom whose "
    "which what all another any anybody anyone anything each everybody everyone everything few many nobody none "
    "several some somebody someone something image images the a an lots".split()
) | {"each other", "one another", "the image", "a group", "other objects", "a set"}
# Generation settings with no form in the decoding here (greedy, beam search: models/florence2_beams.py): an export
# whose generation_config.json sets one to other than its neutral value is refused (its answers would differ from
# transformers').
UNSUPPORTED_GENERATION = {
    "do_sample": False,
    "num_beam_groups": 1,
    "diversity_penalty": 0.0,
    "constraints": None,
    "force_words_ids": None,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "min_length": 0,
    "min_new_tokens": None,
    "bad_words_ids": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "encoder_no_repeat_ngram_size": 0,
    "exponential_decay_length_penalty": None,
    "sequence_bias": None,
    "forced_decoder_ids": None,
}


@dataclass(frozen=True)
class Facts:
    """What the export's configs state (or the published Florence-2's, where a config is absent)."""

    size: tuple[int, int] = (768, 768)  # (height, width) the image is stretched to
    resample: int = 3  # PIL's filter code: 3 bicubic (the published), 2 bilinear
    rescale: float = 1 / 255
    mean: tuple[float, float, float] = (0.485, 0.456, 0.406)  # ImageNet's
    std: tuple[float, float, float] = (0.229, 0.224, 0.225)
    image_tokens: int = 577  # image_seq_length: the vision encoder's positions
    prompts_without_inputs: Mapping[str, str] = field(default_factory=lambda: dict(TASK_PROMPTS_WITHOUT_INPUTS))
    prompts_with_input: Mapping[str, str] = field(default_factory=lambda: dict(TASK_PROMPTS_WITH_INPUT))
    answers: Mapping[str, str] = field(default_factory=lambda: dict(TASK_ANSWERS))
    banned: frozenset[str] = BANNED_GROUNDING
    ocr_area_threshold: float = 0.0
    decoder_start: int = 2
    forced_bos: int | None = 0
    forced_eos: int | None = 2
    eos: tuple[int, ...] = (2,)
    no_repeat_ngram_size: int = 3
    num_beams: int = 3  # the published config's: transformers' generate searches 3 beams unless told otherwise
    length_penalty: float = 1.0  # a finished beam's score: its log-probability over its length ** length_penalty
    early_stopping: bool | str = True  # True: stop once num_beams are finished; False, "never": transformers' rules
    max_new_tokens: int | None = None  # generation_config.json's, where it states one
    positions: int = 1024  # the decoder's (and encoder's) learned positions: max_position_embeddings
    heads: int | None = None  # the decoder's attention heads and width (config.json), for graphs that leave them open
    width: int | None = None
    absent: tuple[str, ...] = ()  # the configs the folder lacks (their facts are the published ones)


@dataclass(frozen=True)
class Export:
    """A Florence-2 export folder: its top, where its graphs are, which decoder layout it runs, and its facts."""

    top: Path
    graphs: Mapping[str, Path]  # VISION, EMBED, ENCODER and MERGED, or FIRST and WITH_PAST -> the file
    layout: str  # MERGED_LAYOUT or PAIR_LAYOUT
    tokenizer: Path
    facts: Facts

    @property
    def reason(self) -> str:
        place = "onnx/" if self.graphs[VISION].parent != self.top else ""
        decoder = f"{place}{MERGED}" if self.layout == MERGED_LAYOUT else f"{place}{FIRST} and {place}{WITH_PAST}"
        absent = f"; no {', '.join(self.facts.absent)}: the published Florence-2's values" if self.facts.absent else ""
        return (
            f"a Florence-2 export ({'onnx-community' if place else 'flat'} layout): {place}{VISION}, {place}{EMBED}, "
            f"{place}{ENCODER} and {decoder}, {TOKENIZER} at the top{absent}"
        )


def find_export(path: str | os.PathLike, layout: str = MERGED_LAYOUT) -> Export:
    """The export at ``path`` (its folder, its onnx/ folder, or a file in either), its facts read; a ValueError
    naming what is missing or wrong and the fix. A folder with both decoder layouts runs ``layout``'s."""
    given = Path(path)
    if not given.exists():
        raise ValueError(f"Florence-2 export {shown_path(given)} not found: give the export's folder")
    folder = given if given.is_dir() else given.parent
    top = folder.parent if folder.name == "onnx" and not (folder / TOKENIZER).exists() else folder
    graph_folder = top / "onnx" if (top / "onnx" / VISION).exists() or not (top / VISION).exists() else top
    present = {name for name in (VISION, EMBED, ENCODER, MERGED, FIRST, WITH_PAST) if (graph_folder / name).is_file()}
    missing = [name for name in (VISION, EMBED, ENCODER) if name not in present]
    pair = FIRST in present and WITH_PAST in present
    if MERGED in present and (layout == MERGED_LAYOUT or not pair):
        layout = MERGED_LAYOUT
    elif pair:
        layout = PAIR_LAYOUT
    else:
        layout = ""
        missing += [MERGED] if FIRST not in present and WITH_PAST not in present else []
        missing += [
            name for name in (FIRST, WITH_PAST) if name not in present and (FIRST in present) != (WITH_PAST in present)
        ]
    if not (top / TOKENIZER).is_file():
        missing.append(TOKENIZER)
    if missing:
        names = ", ".join(shown_path(top / name if name == TOKENIZER else graph_folder / name) for name in missing)
        decoder = f"{MERGED}, or {FIRST} with {WITH_PAST}"
        raise ValueError(
            f"Florence-2 export {shown_path(top)} lacks {names}: it needs {VISION}, {EMBED}, {ENCODER} and "
            f"{decoder} (in onnx/ or beside {TOKENIZER}), and {TOKENIZER} at its top; copy the missing files from "
            "the export (fp32 decoders: onnx-community's fp16 merged decoder does not load in ONNX Runtime)"
        )
    names = (VISION, EMBED, ENCODER, *((MERGED,) if layout == MERGED_LAYOUT else (FIRST, WITH_PAST)))
    return Export(top, {name: graph_folder / name for name in names}, layout, top / TOKENIZER, read_facts(top))


# --- the configs --------------------------------------------------------------------------------------------------


def read_config(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path`` (None where there is no such file); a ValueError naming it when it is not one."""
    if not path.exists():
        return None
    fix = "give the export's own file, or remove it to use the published Florence-2's values"
    try:
        value = json.loads(read_limited(path, MAX_CONFIG_BYTES).decode("utf-8"))
    except UnreadableFile as error:
        raise ValueError(f"{shown_path(path)} {error}: {fix}") from None
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"{shown_path(path)} is not JSON ({untrusted(error, 120)}): {fix}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{shown_path(path)} is not a JSON object: {fix}")
    return value


class _Reader:
    """Values from one config, each checked; a wrong one refused naming the file and the key."""

    def __init__(self, path: Path, values: Mapping[str, Any]):
        self.path, self.values = path, values

    def refuse(self, key: str, value: object, wanted: str) -> ValueError:
        return ValueError(
            f"{shown_path(self.path)}: {untrusted(key, 60)} {untrusted(json.dumps(value), 80)} is not {wanted}: "
            "give the export's own file, or remove the key to use the published Florence-2's value"
        )

    def integer(self, key: str, default: int | None, low: int, high: int, values: Mapping | None = None) -> int | None:
        value = (self.values if values is None else values).get(key, default)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.refuse(key, value, f"a whole number from {low} to {high}")
        return value

    def number(self, key: str, default: float, low: float, high: float) -> float:
        value = self.values.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise self.refuse(key, value, f"a number from {low} to {high}")
        return float(value)

    def triple(self, key: str, default: tuple[float, float, float], low: float) -> tuple[float, float, float]:
        value = self.values.get(key, default)
        if not isinstance(value, (list, tuple)) or len(value) != 3:
            raise self.refuse(key, value, "three numbers (R, G, B)")
        return tuple(self.number_of(key, item, low) for item in value)  # type: ignore[return-value]

    def number_of(self, key: str, value: object, low: float) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= 1e3:
            raise self.refuse(key, value, f"a number from {low} to 1000")
        return float(value)

    def table(self, key: str, default: Mapping[str, str]) -> dict[str, str]:
        value = self.values.get(key, default)
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise self.refuse(key, "{...}", "a table of task tokens and texts")
        if len(value) > 1000 or any(len(k) > 200 or len(v) > 2000 for k, v in value.items()):
            raise self.refuse(key, "{...}", "a table of at most 1000 tasks of short texts")
        return dict(value)


def read_facts(top: Path) -> Facts:
    """The facts of the export whose configs are in ``top``."""
    configs = {name: read_config(top / name) for name in (CONFIG, GENERATION, PREPROCESSOR, PROCESSOR)}
    absent = tuple(name for name in (CONFIG, GENERATION, PREPROCESSOR) if configs[name] is None)
    facts: dict[str, Any] = {"absent": absent}
    defaults = Facts()
    if configs[PREPROCESSOR] is not None:
        facts |= _preprocessor(_Reader(top / PREPROCESSOR, configs[PREPROCESSOR]), defaults)
    if configs[PROCESSOR] is not None:
        facts |= _processor(_Reader(top / PROCESSOR, configs[PROCESSOR]), defaults)
    if configs[CONFIG] is not None:
        facts |= _model_config(_Reader(top / CONFIG, configs[CONFIG]), defaults)
    if configs[GENERATION] is not None:
        facts |= _generation(_Reader(top / GENERATION, configs[GENERATION]), defaults, facts)
    return Facts(**facts)


def _preprocessor(config: _Reader, defaults: Facts) -> dict[str, Any]:
    size = config.values.get("size", {"height": defaults.size[0], "width": defaults.size[1]})
    if not isinstance(size, dict):
        raise config.refuse("size", size, "a height and a width")
    height = config.integer("height", None, 1, 8192, size)
    width = config.integer("width", None, 1, 8192, size)
    if height is None or width is None:
        raise config.refuse("size", size, "a height and a width (Florence-2 stretches the image to 768 x 768)")
    for key in ("do_center_crop", "do_pad"):
        if config.values.get(key):
            raise config.refuse(key, config.values[key], "false (Florence-2 stretches the whole image)")
    resample = config.integer("resample", defaults.resample, 0, 5)
    if resample not in (2, 3):
        raise config.refuse("resample", resample, "2 (bilinear) or 3 (bicubic)")
    rescale = (
        config.number("rescale_factor", defaults.rescale, 0.0, 1.0) if config.values.get("do_rescale", True) else 1.0
    )
    normalize = config.values.get("do_normalize", True)
    mean = config.triple("image_mean", defaults.mean, -1e3) if normalize else (0.0, 0.0, 0.0)
    std = config.triple("image_std", defaults.std, 1e-6) if normalize else (1.0, 1.0, 1.0)
    without = config.table("task_prompts_without_inputs", defaults.prompts_without_inputs)
    with_input = config.table("task_prompts_with_input", defaults.prompts_with_input)
    answers = config.table("tasks_answer_post_processing_type", defaults.answers)
    unknown = sorted({kind for kind in answers.values() if kind not in ANSWER_KINDS})
    if unknown:
        raise config.refuse("tasks_answer_post_processing_type", unknown[0], f"one of {', '.join(ANSWER_KINDS)}")
    if any(text.count("{input}") != 1 for text in with_input.values()):
        raise config.refuse("task_prompts_with_input", "{...}", "texts that each hold {input} once")
    return {
        "size": (height, width),
        "resample": resample,
        "rescale": rescale,
        "mean": mean,
        "std": std,
        "image_tokens": config.integer("image_seq_length", defaults.image_tokens, 1, 1 << 16),
        "prompts_without_inputs": without,
        "prompts_with_input": with_input,
        "answers": answers,
    }


def _processor(config: _Reader, defaults: Facts) -> dict[str, Any]:
    """transformers 5's processor_config.json: the phrases grounding drops, OCR's area threshold. transformers'
    parser reads the upper-case keys PATTERN and AREA_THRESHOLD (its conversion writes lower-case ones, which it then
    does not read): so are they read here; a PATTERN is not taken from a file (a regular expression from a file is
    refused: Florence-2's own is used)."""
    post = config.values.get("post_processor_config") or {}
    if not isinstance(post, dict):
        raise config.refuse("post_processor_config", post, "a table of the answer kinds' settings")
    grounding = post.get(GROUNDING) or {}
    banned = grounding.get("banned_grounding_tokens", sorted(defaults.banned)) if isinstance(grounding, dict) else None
    if (
        not isinstance(banned, list)
        or not all(isinstance(p, str) and len(p) <= 200 for p in banned)
        or len(banned) > 10_000
    ):
        raise config.refuse("banned_grounding_tokens", "[...]", "a list of phrases")
    ocr = post.get(OCR) or {}
    if not isinstance(ocr, dict):
        raise config.refuse(OCR, ocr, "a table")
    if ocr.get("PATTERN") is not None:
        raise config.refuse("PATTERN", ocr["PATTERN"], "absent (Florence-2's own OCR pattern is used)")
    area = _Reader(config.path, ocr).number("AREA_THRESHOLD", defaults.ocr_area_threshold, 0.0, 1.0)
    return {"banned": frozenset(banned), "ocr_area_threshold": area}


def _model_config(config: _Reader, defaults: Facts) -> dict[str, Any]:
    """config.json: its text config's (BART's) positions, decoder heads and width; its decoder start token."""
    text = config.values.get("text_config", config.values)
    if not isinstance(text, dict):
        raise config.refuse("text_config", text, "a table")
    reader = _Reader(config.path, text)
    heads = reader.integer("decoder_attention_heads", None, 1, 1024)
    width = reader.integer("d_model", None, 1, 1 << 16)
    if heads and width and width % heads:
        raise config.refuse("d_model", width, f"a multiple of decoder_attention_heads {heads}")
    return {
        "positions": reader.integer("max_position_embeddings", defaults.positions, 1, MAX_POSITIONS),
        "decoder_start": reader.integer("decoder_start_token_id", defaults.decoder_start, 0, 1 << 24),
        "heads": heads,
        "width": width,
    }


def _generation(config: _Reader, defaults: Facts, known: Mapping[str, Any]) -> dict[str, Any]:
    """generation_config.json: the decoder's start token, the forced first and last tokens, the end tokens, the
    n-gram size never repeated, the beam search's settings; a setting the decoding here has no form of is refused."""
    for key, neutral in UNSUPPORTED_GENERATION.items():
        value = config.values.get(key)
        if value is not None and value != neutral and value not in ([], {}):
            raise ValueError(
                f"{shown_path(config.path)} sets {key} {untrusted(json.dumps(value), 60)}, which vision_factory's "
                "decoding does not apply (its answers would differ from transformers'): remove it from the file"
            )
    eos = config.values.get("eos_token_id", list(defaults.eos))
    eos_ids = eos if isinstance(eos, list) else [eos]
    if (
        not eos_ids
        or len(eos_ids) > 16
        or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 1 << 24 for i in eos_ids)
    ):
        raise config.refuse("eos_token_id", eos, "a token id or a list of them")
    top = 1 << 24
    return {
        "decoder_start": config.integer(
            "decoder_start_token_id", known.get("decoder_start", defaults.decoder_start), 0, top
        ),
        "forced_bos": config.integer("forced_bos_token_id", None, 0, top),
        "forced_eos": config.integer("forced_eos_token_id", None, 0, top),
        "eos": tuple(eos_ids),
        "no_repeat_ngram_size": config.integer("no_repeat_ngram_size", 0, 0, 64) or 0,
        "num_beams": config.integer("num_beams", 1, 1, MAX_BEAMS),
        "length_penalty": config.number("length_penalty", 1.0, -100.0, 100.0),
        "early_stopping": _early_stopping(config),
        "max_new_tokens": config.integer("max_new_tokens", None, 1, MAX_POSITIONS),
    }


def _early_stopping(config: _Reader) -> bool | str:
    """generation_config.json's early_stopping: true, false (transformers' default) or "never"."""
    value = config.values.get("early_stopping", False)
    if value not in (True, False, "never") or isinstance(value, int) and not isinstance(value, bool):
        raise config.refuse("early_stopping", value, 'true, false or "never"')
    return value


# --- the graphs ---------------------------------------------------------------------------------------------------


def _names(tensors: tuple[TensorInfo, ...]) -> set[str]:
    return {tensor.name for tensor in tensors}


def past_layers(model: Interface, prefix: str = PAST) -> int:
    """How many decoder layers' pasts (or presents) a graph takes (gives): the count of ``{prefix}{i}.decoder.key``."""
    names = _names(model.inputs if prefix == PAST else model.outputs)
    count = 0
    while f"{prefix}{count}.decoder.key" in names:
        count += 1
    return count


def decoder_kind(model: Interface) -> str:
    """MERGED, FIRST or WITH_PAST for a Florence-2 decoder graph, '' for any other."""
    inputs, outputs = _names(model.inputs), _names(model.outputs)
    if not {"inputs_embeds", "encoder_attention_mask"} <= inputs or "logits" not in outputs:
        return ""
    layers = past_layers(model)
    if "use_cache_branch" in inputs and layers and "encoder_hidden_states" in inputs:
        return MERGED
    if layers and f"{PRESENT}0.decoder.key" in outputs:
        return WITH_PAST
    if not layers and "encoder_hidden_states" in inputs and past_layers(model, PRESENT):
        return FIRST
    return ""


def _recognise(model: Interface) -> Recognition | None:
    kind = decoder_kind(model)
    if kind:
        layers = past_layers(model) or past_layers(model, PRESENT)
        more = "past_key_values.*" if kind != FIRST else "encoder_hidden_states"
        reason = (
            f"inputs inputs_embeds, encoder_attention_mask and {more}, "
            f"outputs logits and present.* ({layers} layers): a Florence-2 (BART) decoder, {kind}; it runs in its "
            "export folder, which is the model to give"
        )
        return Recognition(NAME, reason, {"part": kind, "layers": layers})
    inputs, outputs = _names(model.inputs), _names(model.outputs)
    if inputs == {"pixel_values"} and outputs == {"image_features"}:
        image = model.inputs[0]
        reason = (
            f"input pixel_values {shape_text(image.shape)}, output image_features: a Florence-2 vision encoder "
            f"({VISION}); it runs in its export folder, which is the model to give"
        )
        return Recognition(NAME, reason, {"part": VISION, "input_size": tuple(image.shape[2:4])})
    return None


FLORENCE2 = Rule(NAME, NEEDS, _recognise)
