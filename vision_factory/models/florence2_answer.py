"""A Florence-2 answer: the generated tokens decoded and parsed as transformers' ``Florence2Processor.
post_process_generation`` parses them (transformers 5.24, checked on the same tokens: test/test_florence2.py), and
the small result object it is held in.

The tokens are decoded keeping the special ones (``<loc_i>``, ``<s>``, ``</s>``, ...), as ``batch_decode(...,
skip_special_tokens=False)``. Then, by the task's kind of answer (models/florence2_interface.py's TASK_ANSWERS):

- text (``pure_text``): the text without ``<s>`` and ``</s>``, stripped;
- boxes with their phrase (``description_with_bboxes``: <OD>, <DENSE_REGION_CAPTION>): each run of text followed by
  four or more ``<loc_>`` tokens is a phrase, each four of its ``<loc_>`` a box x1, y1, x2, y2; boxes without text
  (``bboxes``: <REGION_PROPOSAL>) likewise with empty phrases; phrase grounding: the same, the phrases the
  processor config bans dropped; the phrase reduced to its ASCII characters;
- quadrilaterals with text (``ocr``: <OCR_WITH_REGION>): text then eight ``<loc_>``, x1, y1, ... x4, y4;
- polygons (``polygons``, ``description_with_polygons``; <OPEN_VOCABULARY_DETECTION> gives polygons where the text
  holds ``<poly>``, else boxes).

A ``<loc_i>`` token is a bin of 1000 across the image: it maps back to int((i + 0.5) * size / 1000) pixels (the
width for x, the height for y), computed in float32 as transformers computes it on its tensors (in float64 a bin can
land one pixel off).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .florence2_interface import (
    BBOXES,
    BBOXES_OR_POLYGONS,
    BBOXES_WITH_TEXT,
    GROUNDING,
    OCR,
    POLYGONS,
    POLYGONS_WITH_TEXT,
    PURE_TEXT,
    Facts,
)

BINS = 1000  # Florence-2's coordinate bins a side (its <loc_0> ... <loc_999>)
Size = tuple[int, int]  # the frame's (width, height)

OCR_PATTERN = re.compile(
    r"(.+?)<loc_(\d+)><loc_(\d+)><loc_(\d+)><loc_(\d+)><loc_(\d+)><loc_(\d+)><loc_(\d+)><loc_(\d+)>"
)
PHRASE_PATTERN = re.compile(r"([^<]+(?:<loc_\d+>){4,})")
EMPTY_PHRASE_PATTERN = re.compile(r"(?:(?:<loc_\d+>){4,})")
TEXT_PATTERN = re.compile(r"^\s*(.*?)(?=<od>|</od>|<box>|</box>|<bbox>|</bbox>|<loc_)")
BOX_PATTERN = re.compile(r"<loc_(\d+)><loc_(\d+)><loc_(\d+)><loc_(\d+)>")
POLYGON_MARKS = r"<loc_\d+>|<sep>|<poly>|</poly>"
POLYGON_PHRASE_PATTERN = re.compile(rf"([^<]+(?:{POLYGON_MARKS}){{4,}})")
POLYGON_EMPTY_PATTERN = re.compile(rf"(?:(?:{POLYGON_MARKS}){{4,}})")
POLYGON_TEXT_PATTERN = re.compile(r"^\s*(.*?)(?=<od>|</od>|<box>|</box>|<bbox>|</bbox>|<loc_|<poly>)")
POLYGON_INSTANCE_PATTERN = re.compile(r"<poly>(.*?)</poly>")
POLYGON_BOX_PATTERN = re.compile(r"((?:<loc_\d+>)+)(?:<sep>|$)")
LOC_PATTERN = re.compile(r"<loc_(\d+)>")


@dataclass(frozen=True)
class Florence2Answer:
    """One frame's answer to one task: text for text tasks, boxes (x1, y1, x2, y2 in the frame's pixels) with their
    phrase, quadrilaterals (x1, y1, ..., x4, y4) with their text, or polygons with their phrase; and the tokens it was
    made from (the decoder's start token first, as transformers' ``generate`` returns them)."""

    task: str
    kind: str  # the task's kind of answer (florence2_interface.ANSWER_KINDS)
    tokens: tuple[int, ...]
    generated_text: str  # the tokens decoded, special tokens kept
    text: str = ""  # the answer of a text task
    boxes: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))  # [N, 4] float64, whole pixels
    labels: tuple[str, ...] = ()  # each box's phrase ('' for region proposals)
    quads: np.ndarray = field(default_factory=lambda: np.zeros((0, 8)))  # [M, 8] float64, whole pixels
    quad_labels: tuple[str, ...] = ()  # each quadrilateral's text
    polygons: tuple[tuple[np.ndarray, ...], ...] = ()  # each instance's polygons, [K, 2] float64 x, y each
    polygon_labels: tuple[str, ...] = ()
    stopped_at_eos: bool = True  # False: max_new_tokens ended it


def dequantize(bins: Sequence[int] | np.ndarray, size: float) -> np.ndarray:
    """``<loc_i>`` bins -> pixels across ``size``: int((i + 0.5) * (size / 1000)) in float32, as transformers'
    ``Florence2PostProcessor.dequantize`` computes it (an int64 tensor plus 0.5 is float32, times a Python float
    stays float32, then truncated)."""
    values = (np.asarray(bins, np.float32) + np.float32(0.5)) * np.float32(size / BINS)
    return values.astype(np.int32).astype(np.float64)


def _points(bins: list[int], size: Size) -> np.ndarray:
    """Bins in x, y pairs -> [K, 2] pixels."""
    pairs = np.asarray(bins, np.int64).reshape(-1, 2)
    return np.stack([dequantize(pairs[:, 0], size[0]), dequantize(pairs[:, 1], size[1])], axis=1)


def _boxes(bins: list[list[int]], size: Size) -> np.ndarray:
    corners = _points([v for box in bins for v in box], size)
    return corners.reshape(-1, 4)


def _ascii(text: str) -> str:
    return text.encode("ascii", "ignore").decode("ascii")


def _cleaned(text: str) -> str:
    return text.replace("<s>", "").replace("</s>", "").replace("<pad>", "")


def parse_boxes(text: str, size: Size, empty_phrases: bool, banned: frozenset[str] = frozenset()) -> list:
    """(phrase, boxes [N, 4]) of each phrase followed by four or more <loc_> tokens (transformers'
    ``parse_description_with_bboxes_from_text_and_spans``; with ``banned``, its phrase grounding parser)."""
    found = []
    pattern = EMPTY_PHRASE_PATTERN if empty_phrases else PHRASE_PATTERN
    for phrase_text in pattern.findall(_cleaned(text)):
        phrase_text = phrase_text.replace("<ground>", "", 1).replace("<obj>", "", 1)
        if not phrase_text and not empty_phrases:
            continue
        match = TEXT_PATTERN.search(phrase_text)
        if not match:
            continue
        phrase = match.group().strip()
        if phrase in banned:
            continue
        bins = [[int(m.group(j)) for j in range(1, 5)] for m in BOX_PATTERN.finditer(phrase_text)]
        if bins:
            found.append((_ascii(phrase), _boxes(bins, size)))
    return found


def parse_ocr(text: str, size: Size, area_threshold: float) -> list[tuple[str, np.ndarray]]:
    """(text, quadrilateral [8]) of each text followed by eight <loc_> tokens (transformers'
    ``parse_ocr_from_text_and_spans``, its shoelace area over three of the four edges, as written there)."""
    found = []
    for content, *quad in OCR_PATTERN.findall(_cleaned(text)):
        points = _points([int(v) for v in quad], size).ravel()
        if area_threshold > 0:
            xs, ys = points[0::2], points[1::2]
            area = 0.5 * abs(sum(xs[i] * ys[i + 1] - xs[i + 1] * ys[i] for i in range(3)))
            if area < size[0] * size[1] * area_threshold:
                continue
        found.append((content.strip(), points))
    return found


def parse_polygons(text: str, size: Size, empty_phrases: bool) -> list[tuple[str, tuple[np.ndarray, ...]]]:
    """(phrase, polygons) of each instance (transformers' ``parse_description_with_polygons_from_text_and_spans``
    with its defaults: <sep> between polygons, <poly> ... </poly> around an instance, no box first)."""
    found = []
    pattern = POLYGON_EMPTY_PATTERN if empty_phrases else POLYGON_PHRASE_PATTERN
    for phrase_text in pattern.findall(_cleaned(text)):
        stripped = re.sub(r"^<loc_\d+>", "", phrase_text, count=1)
        if not stripped and not empty_phrases:
            continue
        match = POLYGON_TEXT_PATTERN.search(stripped)
        if not match:
            continue
        phrase = match.group().strip()
        if "<poly>" in phrase_text and "</poly>" in phrase_text:
            instances = [m.group(1) for m in POLYGON_INSTANCE_PATTERN.finditer(phrase_text)]
        else:
            instances = [phrase_text]
        for instance in instances:
            polygons = []
            for polygon in POLYGON_BOX_PATTERN.finditer(instance):
                bins = [int(m.group(1)) for m in LOC_PATTERN.finditer(polygon.group(1))]
                polygons.append(_points(bins[: len(bins) // 2 * 2], size))
            if polygons:
                found.append((phrase, tuple(polygons)))
    return found


def answer(
    task: str, kind: str, tokens: Sequence[int], generated_text: str, size: Size, facts: Facts, stopped_at_eos: bool
) -> Florence2Answer:
    """The one place a task's generated tokens become its answer (transformers' ``post_process_generation``):
    ``generated_text`` is the tokens decoded keeping special tokens, ``size`` the frame's (width, height)."""
    made = {"task": task, "kind": kind, "tokens": tuple(tokens), "generated_text": generated_text}
    made["stopped_at_eos"] = stopped_at_eos
    if kind == PURE_TEXT:
        return Florence2Answer(**made, text=generated_text.replace("<s>", "").replace("</s>", "").strip())
    if kind == OCR:
        quads = parse_ocr(generated_text, size, facts.ocr_area_threshold)
        return Florence2Answer(**made, quads=_stack([q for _, q in quads], 8), quad_labels=tuple(t for t, _ in quads))
    if kind in (POLYGONS, POLYGONS_WITH_TEXT) or (kind == BBOXES_OR_POLYGONS and "<poly>" in generated_text):
        polygons = parse_polygons(generated_text, size, empty_phrases=kind == POLYGONS)
        return Florence2Answer(
            **made, polygons=tuple(p for _, p in polygons), polygon_labels=tuple(label for label, _ in polygons)
        )
    phrases = parse_boxes(generated_text, size, kind == BBOXES, facts.banned if kind == GROUNDING else frozenset())
    labels = tuple(phrase for phrase, boxes in phrases for _ in boxes)
    boxes = _stack([box for _, found in phrases for box in found], 4)
    assert kind in (GROUNDING, BBOXES, BBOXES_WITH_TEXT, BBOXES_OR_POLYGONS), kind
    return Florence2Answer(**made, boxes=boxes, labels=labels)


def _stack(rows: list[np.ndarray], width: int) -> np.ndarray:
    return np.asarray(rows, np.float64).reshape(-1, width)
