"""Segment Anything as a detector (``SamDetector``): a frame and its prompts in, the frame's FrameResult out, as the
segmentation family's (yolo -seg) result is: Boxes (each box the tight box of its mask, its score the predicted IoU,
its prompt's class and ID) and Masks (each row's InstanceMask at the frame's size), so the node publishes
``masks`` (the instance label image) and its detections as the segmentation family does, and the tools write each
mask as COCO RLE. The model work is models/sam.py's SamSegmenter (the image encoded once a frame, keyed by the
frame's content; the decoder once per batch of prompts).

Prompts come from another node's boxes (``segment_boxes``: a FrameResult of its detections, each row's class name,
class id and track ID carried to its mask), or are fixed (``prompted``: predict's --boxes and --points, parsed by
``parse_prompts``; the node's ``prompt``, both in one text, by ``parse_prompt``), or both (the fixed after the
boxes). A prompt whose mask is empty gives no detection; one whose mask logits are not finite gives none
either, said in the result's ``problems`` (once per kind, counted by the node).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from ..results.boxes import NO_TRACK, Boxes, id_text
from ..results.frame import FrameResult
from ..results.masks import InstanceMask, Masks
from ..runtime.runner import Runner
from ..text import untrusted
from .sam import MAX_POINTS, Prompt, SamResult, SamSegmenter

MAX_PROMPT_TEXT = 100_000  # characters of --boxes / --points text at most
POINTS_JOIN = "+"  # the points of one prompt: 'x,y,label+x,y,label'; prompts are separated by ';'


class SamDetector:
    """A SamSegmenter as a Detector: ``detect(frame)`` segments its fixed prompts (none: nothing found),
    ``segment_boxes(frame, boxes)`` those boxes; ``confidence``: a mask whose predicted IoU is below it is left out
    (0: none is)."""

    keypoint_names: list[str] = []

    def __init__(
        self,
        encoder: Runner,
        decoder: Runner,
        confidence: float = 0.0,
        prompts: Sequence[Prompt] = (),
        segmenter: SamSegmenter | None = None,
        **options: Any,
    ):
        """``options``: SamSegmenter's (encoder_name, decoder_name, max_prompts, cache_frames); ``segmenter``: one
        already built on these runners (its cache shared), which takes none."""
        self.sam = segmenter or SamSegmenter(encoder, decoder, **options)
        self.confidence = float(confidence)
        self.prompts = tuple(prompts)
        self.names = [prompt.class_name for prompt in self.prompts]  # class id: the fixed prompt's place
        self.runner = encoder  # what the node says it runs on
        self._lock = self.sam.lock  # one frame at a time through the segmenter's cache (cameras, detectors share it)

    @property
    def reason(self) -> str:
        return self.sam.reason

    def prompted(self, prompts: Sequence[Prompt]) -> SamDetector:
        """This model (its loaded files and cache) with fixed ``prompts``."""
        return SamDetector(self.runner, self.sam.decoder, self.confidence, prompts, self.sam)

    def detect(self, image_bgr: np.ndarray) -> FrameResult:
        return self.segment(image_bgr, self.prompts, tracked=False)

    __call__ = detect

    def segment_boxes(self, image_bgr: np.ndarray, boxes: FrameResult) -> FrameResult:
        """Masks for another node's detections ``boxes`` (a result of its Boxes): each row a box prompt carrying its
        class name and id and, where the boxes are tracked, its track ID; then the fixed prompts (the node's
        ``prompt``: boxes and points given on it), after them."""
        found = boxes.boxes if boxes.boxes is not None else Boxes.empty()
        tracks = found.track_ids
        prompts = [
            Prompt(
                box=tuple(float(v) for v in xyxy),
                class_id=int(class_id),
                class_name=label,
                id=id_text(None if tracks is None else int(tracks[row])),
            )
            for row, (xyxy, class_id, label) in enumerate(zip(found.xyxy, found.class_ids.tolist(), found.labels))
        ]
        return self.segment(image_bgr, [*prompts, *self.prompts], tracked=tracks is not None)

    def segment(self, image_bgr: np.ndarray, prompts: Sequence[Prompt], tracked: bool) -> FrameResult:
        """The frame's result for ``prompts``: a row per prompt whose mask is not empty, in the prompts' order;
        ``tracked``: each row's track ID is its prompt's id (a whole number, else none)."""
        with self._lock:
            result = self.sam.segment(frame_key(image_bgr), image_bgr, prompts)
        return self._result(image_bgr, result, tracked)

    def _result(self, image_bgr: np.ndarray, result: SamResult, tracked: bool) -> FrameResult:
        rows = [found for found in result.masks if found.mask is not None and found.mask.area > 0]
        rows = [found for found in rows if found.iou_score >= self.confidence]
        xyxy = [_tight_box(found.mask) for found in rows]
        scores = [found.iou_score for found in rows]
        class_ids = [found.prompt.class_id for found in rows]
        labels = [found.prompt.class_name for found in rows]
        track_ids = [int(p.id) if p.id.isdigit() else NO_TRACK for p in (found.prompt for found in rows)]
        boxes = Boxes(xyxy, scores, class_ids, labels, tuple(self.names) or None, track_ids if tracked else None)
        problems = {_kind(line): line for line in result.problems}
        return FrameResult.of(image_bgr, boxes=boxes, masks=Masks([found.mask for found in rows]), problems=problems)

    def status_values(self) -> dict[str, str]:
        """/diagnostics' counts (ros/monitor.py): the encoder's runs (one a frame) and the decoder's."""
        return {"sam encoder runs": str(self.sam.encoder_runs), "sam decoder runs": str(self.sam.decoder_runs)}


def frame_key(image_bgr: np.ndarray) -> Hashable:
    """A frame's cache key: its size and a digest of its pixels (the same image again reuses its embedding)."""
    pixels = np.ascontiguousarray(image_bgr)
    return (pixels.shape, hashlib.blake2b(pixels.data, digest_size=16).digest())


def _tight_box(mask: InstanceMask) -> tuple[float, float, float, float]:
    """The box of a mask's pixels (InstanceMask keeps its bits cropped to them): pixel edges, x2 and y2 exclusive."""
    height, width = mask.bits.shape
    return (float(mask.left), float(mask.top), float(mask.left + width), float(mask.top + height))


def _kind(problem: str) -> str:
    """A SamResult problem line without its count ('3 prompts: why' -> 'sam: why'): the kind logged once."""
    return "sam: " + re.sub(r"^\d+ prompts?: ", "", problem)


def parse_prompts(boxes: str = "", points: str = "", names: tuple[str, str] = ("--boxes", "--points")) -> list[Prompt]:
    """Fixed prompts from text: ``boxes`` 'x1,y1,x2,y2;...' (a prompt each) then ``points`` 'x,y,label;...' (a
    prompt each; the points of one prompt joined by '+': 'x,y,1+x,y,0'; label 1 on the object, 0 off it, 1 when
    left out). Each prompt's class id is its place among them, its class name 'box N' or 'points N'. A ValueError
    names the part that is wrong (``names``: what the texts are called, predict's options) and the form."""
    for text, option in zip((boxes, points), names):
        if len(text) > MAX_PROMPT_TEXT:
            raise ValueError(f"{option} has {len(text)} characters, over {MAX_PROMPT_TEXT}: give fewer prompts")
    box_option, points_option = names
    prompts: list[Prompt] = []
    for item in _items(boxes):
        values = _numbers(item, box_option, "x1,y1,x2,y2")
        if len(values) != 4 or not (values[0] < values[2] and values[1] < values[3]):
            raise ValueError(
                f"{box_option}: '{untrusted(item, 100)}' is not a box x1,y1,x2,y2 with x1 < x2 and y1 < y2 (frame "
                "pixels)"
            )
        prompts.append(Prompt(box=tuple(values), class_id=len(prompts), class_name=f"box {len(prompts)}"))
    for item in _items(points):
        clicks = []
        for point in item.split(POINTS_JOIN):
            values = _numbers(point, points_option, "x,y,label")
            if len(values) == 2:
                values.append(1.0)
            if len(values) != 3 or values[2] not in (0.0, 1.0):
                raise ValueError(
                    f"{points_option}: '{untrusted(point, 100)}' is not a point x,y,label with label 1 (on the "
                    "object) or 0 (off it)"
                )
            clicks.append((values[0], values[1], int(values[2])))
        if len(clicks) > MAX_POINTS:
            raise ValueError(f"{points_option}: a prompt of {len(clicks)} points, over {MAX_POINTS}: give fewer")
        prompts.append(Prompt(points=tuple(clicks), class_id=len(prompts), class_name=f"points {len(prompts)}"))
    return prompts


def parse_prompt(text: str) -> list[Prompt]:
    """The node's prompt (its ``prompt`` parameter, ~/set_prompt, ~/prompt): predict's --boxes and --points in one
    text, prompts separated by ';', each a box 'x1,y1,x2,y2' (four numbers, no '+') or points 'x,y,label' ('+'
    joining the points of one prompt), read by ``parse_prompts`` (the boxes first); '': none."""
    items = _items(text)
    boxes = [POINTS_JOIN not in item and item.count(",") == 3 for item in items]
    chosen = lambda box: ";".join(item for item, is_box in zip(items, boxes) if is_box == box)  # noqa: E731
    return parse_prompts(chosen(True), chosen(False), ("prompt", "prompt"))


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(";") if item.strip()]


def _numbers(text: str, option: str, form: str) -> list[float]:
    try:
        values = [float(value) for value in text.split(",")]
    except ValueError:
        raise ValueError(f"{option}: '{untrusted(text, 100)}' is not {form} (numbers separated by commas)") from None
    if not all(np.isfinite(values)):
        raise ValueError(f"{option}: '{untrusted(text, 100)}' holds a value that is not a finite number")
    return values
