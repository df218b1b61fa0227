"""Segment Anything on any runner: masks for a frame's prompts (boxes, points), the image encoded once a frame and the
prompt decoder run once per batch of prompts (models/sam_interface.py: the three export layouts).

Processing as the exporters' own, checked against transformers (benchmarks/make_sam_models.py, test/test_sam.py):

- SAM (``hf`` and ``meta``), as transformers' ``SamProcessor`` (its PIL backend, ``SamImageProcessorPil``; Meta's
  ``ResizeLongestSide`` and ``SamPredictor`` are the same arithmetic): the frame's longest side scaled to the
  encoder's side S (1024): s = S / max(h, w), the frame resized with PIL's bilinear filter (antialiased when it
  shrinks) to (int(h s + 0.5), int(w s + 0.5)), RGB / 255, ImageNet's mean and std, zeros padded at the bottom and
  right to S x S. A prompt's x scales by the resized width / w, its y by the resized height / h. A mask: the
  low-resolution logits (256 x 256) bilinearly up to S x S, the padding cut off, bilinearly to the frame's size
  (PyTorch's ``interpolate``, half-pixel centres, no antialiasing: ``post_process_masks``, and Meta's in-graph
  ``mask_postprocessing``), > 0.
- SAM2 (``sam2``), as transformers' ``Sam2Processor``: the frame resized to S x S (no padding; PIL's bilinear here,
  transformers resizes with torchvision's antialiased bilinear, within a level of it), RGB / 255, ImageNet's mean
  and std; x scales by S / w, y by S / h; a mask: the logits bilinearly to the frame's size, > 0.
- Prompts as each layout takes them: transformers' decoders pad a prompt's points themselves; Meta's gets its points
  then a padding point (0, 0) labelled -1, or a box's corners labelled 2 and 3 (after any points) and no padding;
  SAM2's the points, then a box's corners, the padding added inside.
- With several masks a prompt (3; Meta's 4: output 0 is the single-mask one), the one of the highest predicted IoU
  among the multimask ones, as transformers' pipeline picks; its score is that raw prediction (no sigmoid; it can
  exceed 1).

Meta's decoder also up-samples its masks to ``orig_im_size`` inside; those are not read (the low-resolution ones
are, as for the other layouts), so it is given the resized frame's size: its in-graph masks stay at most S x S
whatever the frame. Each mask is computed only over the frame pixels whose interpolation reads a positive logit
(bilinear weights are positive: elsewhere the mask is False) and kept as its bounding box's pixels
(``InstanceMask``); at most ``max_prompts`` prompts a frame are decoded, the rest dropped and counted.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..results.masks import InstanceMask
from ..runtime.runner import Runner
from .bounds import check_count
from .detr import IMAGENET_MEAN, IMAGENET_STD, pil_resize
from .geometry import rgb_tensor
from .interface import Interface
from .masks import Resampling, resample_axis
from .sam_interface import (
    BOXES,
    HF,
    HF_BOXES,
    HF_EMBEDDINGS,
    HF_POINTS,
    MAX_PROMPTS,
    META,
    POINTS,
    SAM2,
    SAM2_FEATURES,
    pair,
)

MAX_POINTS = 64  # points a prompt (a click session's few; bounds the decoder's input)
MAX_LOW_RES = 1024  # the side of a decoder's low-resolution masks (SAM: 256)


@dataclass(frozen=True)
class Prompt:
    """One object to segment: a box (x1, y1, x2, y2 frame pixels) and/or points ((x, y, label) each: label 1 on the
    object, 0 off it), with the class and id it carries through to its mask."""

    box: tuple[float, float, float, float] | None = None
    points: tuple[tuple[float, float, int], ...] = ()
    class_id: int = -1
    class_name: str = ""
    id: str = ""


@dataclass(frozen=True)
class PromptMask:
    """A prompt's mask (None when the decoder's logits for it are not finite), its predicted IoU, and which of the
    decoder's mask outputs it is."""

    prompt: Prompt
    mask: InstanceMask | None
    iou_score: float
    mask_index: int


@dataclass
class SamResult:
    """One frame's answer: a mask per decoded prompt, in the prompts' order; what was dropped and why."""

    masks: list[PromptMask]
    encoded: bool  # whether this frame's image was encoded now (False: the cached embedding was reused)
    dropped: int = 0  # prompts beyond max_prompts or of a kind the decoder does not take
    problems: list[str] = field(default_factory=list)  # one line per kind of problem


@dataclass(frozen=True)
class Frame:
    """A frame as the encoder saw it: its size, the resized size within the S x S input, and the encoder's
    outputs by name."""

    key: Hashable
    height: int
    width: int
    resized: tuple[int, int]  # (height, width) of the frame within the model's input
    features: dict[str, np.ndarray]


class SamSegmenter:
    """A Segment Anything model, encoder and decoder, on two Runners."""

    def __init__(
        self,
        encoder: Runner,
        decoder: Runner,
        encoder_name: str = "the encoder",
        decoder_name: str = "the decoder",
        max_prompts: int = MAX_PROMPTS,
        cache_frames: int = 1,
    ):
        self.layout = pair(Interface.of(encoder), Interface.of(decoder), encoder_name, decoder_name)
        self.encoder, self.decoder = encoder, decoder
        self.max_prompts = check_count("max_prompts", max_prompts, 10_000)
        self.side = self.layout.side
        self._decoder_inputs = {tensor.name: tensor for tensor in decoder.inputs}
        self._decoder_outputs = {tensor.name: i for i, tensor in enumerate(decoder.outputs)}
        self._encoder_outputs = [tensor.name for tensor in encoder.outputs]
        # the last frames' embeddings (one a camera, say), newest last: what a new prompt on them reuses
        self.cache_frames = check_count("cache_frames", cache_frames, 64)
        self._frames: OrderedDict[Hashable, Frame] = OrderedDict()
        self.lock = threading.Lock()  # one frame at a time through the cache (its users hold it: SamDetector)
        self.encoder_runs = 0
        self.decoder_runs = 0

    @property
    def reason(self) -> str:
        return self.layout.reason

    # -- the image, once a frame ---------------------------------------------------------------------------------

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """The frame's (height, width) within the model's input: SAM's longest side to S, rounded as
        SamProcessor rounds; SAM2's S x S."""
        if self.layout.layout == SAM2:
            return self.side, self.side
        scale = self.side * 1.0 / max(height, width)
        return int(height * scale + 0.5), int(width * scale + 0.5)

    def preprocess(self, image_bgr: np.ndarray) -> np.ndarray:
        """The encoder's input for a frame (HWC BGR uint8)."""
        height, width = image_bgr.shape[:2]
        new_height, new_width = self.resized_size(height, width)
        tensor = (rgb_tensor(pil_resize(image_bgr, new_width, new_height)) - IMAGENET_MEAN) / IMAGENET_STD
        if (new_height, new_width) == (self.side, self.side):
            return tensor.astype(np.float32)
        padded = np.zeros((1, 3, self.side, self.side), np.float32)
        padded[:, :, :new_height, :new_width] = tensor
        return padded

    def encode(self, key: Hashable, image_bgr: np.ndarray) -> tuple[Frame, bool]:
        """The frame's embedding: the cached one when ``key`` is one of the last ``cache_frames`` frames', else the
        encoder run now (cached in the oldest one's place); and whether it ran."""
        cached = self._frames.get(key)
        if cached is not None:
            self._frames.move_to_end(key)
            return cached, False
        height, width = image_bgr.shape[:2]
        outputs = self.encoder.run({self.layout.image.name: self.preprocess(image_bgr)})
        self.encoder_runs += 1
        features = dict(zip(self._encoder_outputs, outputs))
        if self.layout.layout == META:
            features = {"image_embeddings": outputs[0]}
        frame = Frame(key, height, width, self.resized_size(height, width), features)
        self._frames[key] = frame
        while len(self._frames) > self.cache_frames:
            self._frames.popitem(last=False)
        return frame, True

    def forget(self) -> None:
        """Drops the cached embeddings (a new stream, a lifecycle cleanup)."""
        self._frames.clear()

    # -- the prompts, once per batch -----------------------------------------------------------------------------

    def segment(self, key: Hashable, image_bgr: np.ndarray, prompts: Sequence[Prompt]) -> SamResult:
        """Masks for ``prompts`` on the frame ``key`` (its image ``image_bgr``): the encoder runs unless ``key`` is
        a cached frame's, the decoder once per batch the export takes; the result in one place."""
        frame, encoded = self.encode(key, image_bgr)
        result = SamResult([], encoded)
        taken = self._admitted(prompts, result)
        for batch in self._batches(taken):
            result.masks.extend(self._decode(frame, batch, result))
        order = {id(prompt): i for i, prompt in enumerate(taken)}
        result.masks.sort(key=lambda found: order[id(found.prompt)])
        return result

    def _admitted(self, prompts: Sequence[Prompt], result: SamResult) -> list[Prompt]:
        """The prompts the decoder takes, the first max_prompts; the others counted in ``result`` with one line
        per kind of problem."""
        taken, refused = [], {}
        for prompt in prompts:
            problem = self.refusal(prompt)
            if problem:
                refused[problem] = refused.get(problem, 0) + 1
            else:
                taken.append(prompt)
        if len(taken) > self.max_prompts:
            refused[
                f"more than max_prompts {self.max_prompts} prompts on one frame: the first {self.max_prompts} "
                "decoded; raise max_prompts to decode more (each costs a decoder run's share)"
            ] = len(taken) - self.max_prompts
            taken = taken[: self.max_prompts]
        result.dropped = sum(refused.values())
        result.problems = [f"{count} prompt{'s' if count != 1 else ''}: {why}" for why, count in refused.items()]
        return taken

    def refusal(self, prompt: Prompt) -> str:
        """Why the decoder cannot take ``prompt`` ('' when it can)."""
        values = [*(prompt.box or ()), *(v for point in prompt.points for v in point[:2])]
        if not values:
            return "no box and no point: nothing to segment"
        if not np.isfinite(np.asarray(values, np.float64)).all():
            return "a box or point that is not a finite number"
        if len(prompt.points) > MAX_POINTS:
            return f"more than {MAX_POINTS} points"
        if any(point[2] not in (0, 1) for point in prompt.points):
            return "a point label other than 1 (on the object) or 0 (off it)"
        takes = self.layout.prompts
        if prompt.box is not None and BOXES not in takes:
            return "a box, which this decoder cannot take (its export has input_points, no input_boxes)"
        if prompt.points and POINTS not in takes:
            return "points, which this decoder cannot take (its export has input_boxes, no input_points)"
        if prompt.box is not None and prompt.points and self.layout.layout == HF:
            return "a box with points, which a Hugging Face decoder takes only as separate runs"
        return ""

    def _batches(self, prompts: list[Prompt]) -> list[list[Prompt]]:
        """Prompts grouped into decoder runs: those of as many points (a box: two) in one run where the export
        batches prompts (the Hugging Face split, SAM2), so that no prompt is padded and none depends on the others
        of its run; one a run for Meta's export."""
        if not self.layout.batched:
            return [[prompt] for prompt in prompts]
        groups: dict[int, list[Prompt]] = {}
        for prompt in prompts:
            groups.setdefault(len(prompt.points) + 2 * (prompt.box is not None), []).append(prompt)
        return list(groups.values())

    def _points(self, prompt: Prompt, scale: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
        """The prompt's points [N, 2] in the model's input and their labels [N], as the layout's decoder takes them:
        the points, then a box's corners labelled 2 and 3; Meta's points alone end with the padding point."""
        sx, sy = scale
        coords = [(x * sx, y * sy) for x, y, _ in prompt.points]
        labels = [float(label) for _, _, label in prompt.points]
        if prompt.box is not None:
            x1, y1, x2, y2 = prompt.box
            coords += [(x1 * sx, y1 * sy), (x2 * sx, y2 * sy)]
            labels += [2.0, 3.0]
        elif self.layout.layout == META:
            coords.append((0.0, 0.0))
            labels.append(-1.0)
        return np.asarray(coords, np.float64).reshape(-1, 2), np.asarray(labels, np.float64)

    def _feeds(self, frame: Frame, batch: list[Prompt]) -> dict[str, np.ndarray]:
        height, width = frame.resized
        scale = (width / frame.width, height / frame.height)
        layout = self.layout.layout
        if layout == HF and HF_BOXES in self._decoder_inputs:
            boxes = [[v * s for v, s in zip(prompt.box, scale * 2)] for prompt in batch]
            return {name: frame.features[name] for name in HF_EMBEDDINGS} | {
                HF_BOXES: self._typed(HF_BOXES, np.asarray([boxes]))
            }
        made = [self._points(prompt, scale) for prompt in batch]
        coords = np.stack([points for points, _ in made])
        labels = np.stack([point_labels for _, point_labels in made])
        if layout == HF:
            return {name: frame.features[name] for name in HF_EMBEDDINGS} | {
                HF_POINTS[0]: self._typed(HF_POINTS[0], coords[None]),
                HF_POINTS[1]: self._typed(HF_POINTS[1], labels[None]),
            }
        feeds = {
            "point_coords": self._typed("point_coords", coords),
            "point_labels": self._typed("point_labels", labels),
            "mask_input": self._typed("mask_input", np.zeros((len(batch), 1, MASK_INPUT, MASK_INPUT))),
            "has_mask_input": self._typed("has_mask_input", np.zeros(len(batch))),
        }
        if layout == SAM2:
            return feeds | {name: frame.features[name] for name in SAM2_FEATURES}
        return feeds | {
            "image_embeddings": frame.features["image_embeddings"],
            "orig_im_size": self._typed("orig_im_size", np.asarray(frame.resized, np.float64)),
        }

    def _typed(self, name: str, values: np.ndarray) -> np.ndarray:
        """``values`` in the dtype the decoder's input ``name`` states (float32 where it states none it knows)."""
        dtype = self._decoder_inputs[name].dtype
        return np.ascontiguousarray(
            values, dtype=dtype if dtype in ("float32", "float64", "int64", "int32") else "float32"
        )

    def _decode(self, frame: Frame, batch: list[Prompt], result: SamResult) -> list[PromptMask]:
        outputs = self.decoder.run(self._feeds(frame, batch))
        self.decoder_runs += 1
        layout = self.layout.layout
        masks_name, scores_name = {
            HF: ("pred_masks", "iou_scores"),
            META: ("low_res_masks", "iou_predictions"),
            SAM2: ("masks", "iou_predictions"),
        }[layout]
        logits = np.asarray(outputs[self._decoder_outputs[masks_name]])
        scores = np.asarray(outputs[self._decoder_outputs[scores_name]], np.float64)
        if layout == HF:
            logits, scores = logits[0], scores[0]
        count = len(batch)
        if logits.ndim != 4 or logits.shape[0] != count or scores.shape != logits.shape[:2]:
            raise ValueError(
                f"the decoder gave {masks_name} {list(logits.shape)} and {scores_name} {list(scores.shape)} for "
                f"{count} prompt{'s' if count != 1 else ''}: not [prompts, masks, h, w] and [prompts, masks]; the "
                "decoder file is damaged or not of this layout"
            )
        check_count(f"the decoder's {masks_name} height", logits.shape[2], MAX_LOW_RES)
        check_count(f"the decoder's {masks_name} width", logits.shape[3], MAX_LOW_RES)
        first = 1 if logits.shape[1] == 4 else 0  # Meta's output 0 is the single-mask one; the rest multimask
        found = []
        for prompt, prompt_logits, prompt_scores in zip(batch, logits, scores):
            index = first + int(np.argmax(prompt_scores[first:]))
            mask = self.frame_mask(prompt_logits[index], frame)
            if mask is None and "a mask whose logits are not finite" not in " ".join(result.problems):
                result.problems.append("a mask whose logits are not finite: no mask given for its prompt")
            found.append(PromptMask(prompt, mask, float(prompt_scores[index]), index))
        return found

    # -- back to the frame ---------------------------------------------------------------------------------------

    def resampling(self, low_res: tuple[int, int], frame: Frame) -> Resampling:
        """How low-resolution logits of ``low_res`` (rows, columns) become the frame: SAM's up to S x S, the
        padding cut, to the frame; SAM2's straight to the frame (a factor of 1, nothing cut)."""
        rows, columns = low_res
        if self.layout.layout == SAM2:
            return Resampling(1, 0, rows, 0, columns, rows, columns)
        factor = self.side // rows if self.side % rows == 0 and self.side // rows == self.side // columns else 0
        if factor == 0:
            raise ValueError(
                f"low-resolution masks of {rows}x{columns} do not divide the encoder's {self.side}x{self.side} input "
                "evenly: the decoder does not belong to this encoder"
            )
        height, width = frame.resized
        return Resampling(factor, 0, height, 0, width, rows, columns)

    def frame_mask(self, logits: np.ndarray, frame: Frame) -> InstanceMask | None:
        """The frame's mask of one prompt from its low-resolution ``logits`` [h, w]; None when they are not all
        finite. Only the frame pixels whose taps reach a positive logit are interpolated."""
        logits = np.asarray(logits, np.float32)
        if not np.isfinite(logits).all():
            return None
        height, width = frame.height, frame.width
        positive_rows = np.flatnonzero((logits > 0).any(axis=1))
        positive_columns = np.flatnonzero((logits > 0).any(axis=0))
        if not len(positive_rows):
            return InstanceMask(0, 0, np.zeros((0, 0), bool), width, height)
        (down, top, bottom), (across, left, right) = _axes(self.resampling(logits.shape, frame), height, width)
        y0, y1 = _reaching(top, bottom, positive_rows[0], positive_rows[-1])
        x0, x1 = _reaching(left, right, positive_columns[0], positive_columns[-1])
        if y1 <= y0 or x1 <= x0:
            return InstanceMask(0, 0, np.zeros((0, 0), bool), width, height)
        row0, row1 = top[y0], bottom[y1 - 1] + 1
        col0, col1 = left[x0], right[x1 - 1] + 1
        cells = logits[row0:row1, col0:col1]
        rows = resample_axis(cells, down[y0:y1], top[y0:y1] - row0, axis=0)
        region = resample_axis(rows, across[x0:x1], left[x0:x1] - col0, axis=1) > 0
        return _tight(region, x0, y0, width, height)


MASK_INPUT = 256  # the side of SAM's mask_input (4 x the 64 x 64 embeddings)


@functools.lru_cache(maxsize=8)  # a stream's frames keep their size: computed once
def _axes(how: Resampling, height: int, width: int):
    """The vertical and horizontal ``Resampling.axis`` of ``how`` to a frame of height x width, read-only."""
    axes = how.axis(height, vertical=True), how.axis(width, vertical=False)
    for array in (array for axis in axes for array in axis):
        array.flags.writeable = False
    return axes


def _reaching(first: np.ndarray, last: np.ndarray, low: int, high: int) -> tuple[int, int]:
    """The pixels p (a range) whose cells first[p]..last[p] (both ascending) meet low..high."""
    return int(np.searchsorted(last, low, side="left")), int(np.searchsorted(first, high, side="right"))


def _tight(region: np.ndarray, left: int, top: int, width: int, height: int) -> InstanceMask:
    """``region`` (at left, top) as an InstanceMask cropped to its True pixels."""
    rows, columns = np.flatnonzero(region.any(axis=1)), np.flatnonzero(region.any(axis=0))
    if not len(rows):
        return InstanceMask(0, 0, np.zeros((0, 0), bool), width, height)
    bits = region[rows[0] : rows[-1] + 1, columns[0] : columns[-1] + 1]
    return InstanceMask(left + int(columns[0]), top + int(rows[0]), np.ascontiguousarray(bits), width, height)
