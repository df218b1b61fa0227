"""What a Segment Anything export's interface is, and the rules that recognise it from its two files: an image
encoder, run once a frame, and a prompt decoder beside it, run once per batch of prompts (models/sam.py). Three
layouts, told apart by the decoder's input and output names:

- ``hf``: the Hugging Face / optimum / transformers.js split. ``vision_encoder.onnx``: ``pixel_values``
  [1, 3, 1024, 1024] -> ``image_embeddings`` [1, C, 64, 64] and ``image_positional_embeddings`` (same shape);
  ``prompt_encoder_mask_decoder.onnx``: those two and ``input_points`` [1, P, N, 2] with ``input_labels``
  [1, P, N] (optimum's export, transformers.js's files), or ``input_boxes`` [1, B, 4] -> ``iou_scores`` [1, P, 3],
  ``pred_masks`` [1, P, 3, 256, 256]. A frame's prompts of as many points go in one run (P). transformers'
  prompt encoder pads a prompt's points with (0, 0) labelled -1 itself, and has no embedding for a point labelled 2
  or 3: a points-only export cannot take a box.
- ``meta``: Meta's segment-anything export (``scripts/export_onnx_model.py``, ``SamOnnxModel``), which MobileSAM,
  EfficientSAM-style and SlimSAM exports share: an encoder of one image input and one output [1, C, 64, 64], and a
  decoder taking ``image_embeddings``, ``point_coords`` [1, N, 2], ``point_labels`` [1, N], ``mask_input``
  [1, 1, 256, 256], ``has_mask_input`` [1], ``orig_im_size`` [2] -> ``masks`` (at orig_im_size),
  ``iou_predictions`` [1, M], ``low_res_masks`` [1, M, 256, 256]; M is 4 (output 0 the single-mask one, 1-3 the
  multimask ones) or 1 (``--return-single-mask``). A box is its two corners labelled 2 and 3; point prompts end with
  a padding point (0, 0) labelled -1 (the caller adds it). One prompt a run (Meta's export fixes the batch at 1).
- ``sam2``: SAM2's image predictor export (samexporter's ``export_sam2.py`` and its kin): an encoder ``image`` ->
  ``high_res_feats_0``, ``high_res_feats_1``, ``image_embed``, and a decoder taking those three, ``point_coords``
  [P, N, 2], ``point_labels`` [P, N], ``mask_input`` [P, 1, 256, 256], ``has_mask_input`` [P] -> ``masks``
  [P, 3, 256, 256], ``iou_predictions`` [P, 3]; no ``orig_im_size``; the padding point added inside; a box is its
  corners labelled 2 and 3. Prompts of as many points go in one run.

The encoder of Meta's layout (one image in, one map out) looks like many models alone: a pair is recognised from the
decoder, and the encoder checked against what the decoder takes (``pair``). ``SAM`` recognises one file: a decoder
of any layout, or an encoder of the ``hf`` or ``sam2`` layout (their output names say it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..runtime.runner import TensorInfo, fixed_dim, tensor_text, tensors_text
from ..text import untrusted
from .bounds import check_input_size
from .interface import Interface, Recognition, Rule, batch_ok

NAME = "sam"
HF, META, SAM2 = "hf", "meta", "sam2"
POINTS, BOXES = "points", "boxes"  # what a decoder's prompts can be
MAX_PROMPTS = 20  # prompts per frame by default, as Isaac ROS's SAM node caps them
HF_EMBEDDINGS = ("image_embeddings", "image_positional_embeddings")
HF_POINTS = ("input_points", "input_labels")
HF_BOXES = "input_boxes"
HF_OUTPUTS = ("iou_scores", "pred_masks")
META_INPUTS = ("image_embeddings", "point_coords", "point_labels", "mask_input", "has_mask_input", "orig_im_size")
META_OUTPUTS = ("masks", "iou_predictions", "low_res_masks")
SAM2_FEATURES = ("image_embed", "high_res_feats_0", "high_res_feats_1")
SAM2_INPUTS = (*SAM2_FEATURES, "point_coords", "point_labels", "mask_input", "has_mask_input")
SAM2_OUTPUTS = ("masks", "iou_predictions")
NEEDS = (
    "a Segment Anything model as two files, an image encoder and its prompt decoder: the Hugging Face split "
    "(vision_encoder.onnx: pixel_values -> image_embeddings, image_positional_embeddings; "
    "prompt_encoder_mask_decoder.onnx: input_points and input_labels, or input_boxes, with the embeddings -> "
    "iou_scores, pred_masks), Meta's export (a decoder of image_embeddings, point_coords, point_labels, mask_input, "
    "has_mask_input, orig_im_size -> masks, iou_predictions, low_res_masks) or SAM2's (image_embed, "
    "high_res_feats_0, high_res_feats_1 and the prompts -> masks, iou_predictions)"
)


@dataclass(frozen=True)
class Layout:
    """What a recognised pair of files is, for the adapter."""

    layout: str  # HF, META or SAM2
    prompts: tuple[str, ...]  # what its decoder takes: POINTS and/or BOXES
    batched: bool  # whether a run takes several prompts (those of as many points)
    image: TensorInfo  # the encoder's image input
    side: int  # the encoder's input side (SAM: 1024)
    masks: int  # the mask outputs of a prompt (3; Meta's 4 or 1)
    reason: str


def _named(tensors: tuple[TensorInfo, ...], name: str) -> TensorInfo | None:
    return next((tensor for tensor in tensors if tensor.name == name), None)


def _names(tensors: tuple[TensorInfo, ...]) -> set[str]:
    return {tensor.name for tensor in tensors}


def decoder_layout(decoder: Interface) -> tuple[str, tuple[str, ...], bool, str] | None:
    """(layout, prompts, batched, what decided it) of a prompt decoder; None when it is not one."""
    inputs, outputs = _names(decoder.inputs), _names(decoder.outputs)
    if set(META_INPUTS) <= inputs and set(META_OUTPUTS) <= outputs:
        return META, (POINTS, BOXES), False, "inputs " + ", ".join(META_INPUTS) + " (Meta's SamOnnxModel)"
    if set(SAM2_INPUTS) <= inputs and set(SAM2_OUTPUTS) <= outputs and "orig_im_size" not in inputs:
        return SAM2, (POINTS, BOXES), True, "inputs " + ", ".join(SAM2_INPUTS) + " (SAM2's image predictor)"
    if set(HF_EMBEDDINGS) <= inputs and set(HF_OUTPUTS) <= outputs:
        points, boxes = set(HF_POINTS) <= inputs, HF_BOXES in inputs
        if points and boxes:
            return None  # both at once: every run would need both kinds for each prompt
        if points or boxes:
            taken = (POINTS,) if points else (BOXES,)
            names = ", ".join(HF_POINTS) if points else HF_BOXES
            return HF, taken, True, f"inputs {names} with {', '.join(HF_EMBEDDINGS)} (the Hugging Face split)"
    return None


def _square_image(encoder: Interface) -> TensorInfo | None:
    """The encoder's one [1, 3, S, S] image input (S fixed), else None."""
    if len(encoder.inputs) != 1:
        return None
    image = encoder.inputs[0]
    shape = image.shape
    if len(shape) != 4 or not batch_ok(shape[0]) or shape[1] != 3:
        return None
    height, width = fixed_dim(shape[2]), fixed_dim(shape[3])
    return image if height is not None and height == width else None


def _fits(given: TensorInfo, taken: TensorInfo) -> bool:
    """Whether an encoder output can feed a decoder input: the same rank and every size fixed in both equal."""
    if len(given.shape) != len(taken.shape):
        return False
    return all(fixed_dim(a) is None or fixed_dim(b) is None or a == b for a, b in zip(given.shape[1:], taken.shape[1:]))


def pair(encoder: Interface, decoder: Interface, encoder_name: str, decoder_name: str) -> Layout:
    """The layout of an encoder and its decoder; a ValueError naming both files when the decoder is not one, the
    encoder does not fit it, or the two are given the other way round."""
    encoder_name, decoder_name = untrusted(encoder_name, 200), untrusted(decoder_name, 200)
    found = decoder_layout(decoder)
    if found is None:
        if decoder_layout(encoder) is not None:
            raise ValueError(
                f"{encoder_name} is a Segment Anything prompt decoder and {decoder_name} is not: the encoder and "
                "decoder are given the other way round; give the encoder as the model and the decoder beside it"
            )
        raise ValueError(
            f"decoder {decoder_name} (inputs {tensors_text(decoder.inputs)}; outputs "
            f"{tensors_text(decoder.outputs)}) is not a Segment Anything prompt decoder; it needs {NEEDS}"
        )
    layout, prompts, batched, decided = found
    image = _square_image(encoder)
    if image is None:
        raise ValueError(
            f"encoder {encoder_name} (inputs {tensors_text(encoder.inputs)}) does not take one square image "
            f"[1, 3, S, S] of a fixed size S, as the encoder of decoder {decoder_name} must (SAM: 1024)"
        )
    side = int(image.shape[2])
    check_input_size(f"encoder {encoder_name} input {tensor_text(image)}", side, side)
    if layout == HF:
        wanted = {name: _named(decoder.inputs, name) for name in HF_EMBEDDINGS}
        given = {name: _named(encoder.outputs, name) for name in HF_EMBEDDINGS}
    elif layout == SAM2:
        wanted = {name: _named(decoder.inputs, name) for name in SAM2_FEATURES}
        given = {name: _named(encoder.outputs, name) for name in SAM2_FEATURES}
    else:
        wanted = {"image_embeddings": _named(decoder.inputs, "image_embeddings")}
        given = {"image_embeddings": encoder.outputs[0] if len(encoder.outputs) == 1 else None}
    for name, taken in wanted.items():
        output = given[name]
        if output is None or not _fits(output, taken):
            gives = f"gives {tensors_text(encoder.outputs)}"
            raise ValueError(
                f"decoder {decoder_name} does not fit encoder {encoder_name}: the decoder takes "
                f"{tensor_text(taken)}, the encoder {gives}; give the decoder exported with this encoder (the "
                "two files of one model)"
            )
    masks = _mask_count(layout, decoder)
    reason = (
        f"decoder {decided}, encoder {tensor_text(image)} -> {tensors_text(encoder.outputs)}: a Segment Anything "
        f"model ({layout} layout; prompts: {', '.join(prompts)}; "
        f"{'a batch of prompts a decoder run' if batched else 'one prompt a decoder run'})"
    )
    return Layout(layout, prompts, batched, image, side, masks, reason)


def _mask_count(layout: str, decoder: Interface) -> int:
    """The masks a prompt gets (the decoder's IoU output's last axis); 0 when the file does not fix it."""
    name = {HF: "iou_scores", META: "iou_predictions", SAM2: "iou_predictions"}[layout]
    scores = _named(decoder.outputs, name)
    return (fixed_dim(scores.shape[-1]) or 0) if scores is not None and scores.shape else 0


def _encoder(model: Interface) -> tuple[str, str] | None:
    """(layout, what decided it) of an encoder that says what it is by its output names."""
    outputs = _names(model.outputs)
    if _square_image(model) is None:
        return None
    if set(HF_EMBEDDINGS) <= outputs:
        return HF, f"outputs {', '.join(HF_EMBEDDINGS)}"
    if set(SAM2_FEATURES) <= outputs:
        return SAM2, f"outputs {', '.join(SAM2_FEATURES)}"
    return None


def _recognise(model: Interface) -> Recognition | None:
    decoder = decoder_layout(model)
    if decoder is not None:
        layout, prompts, batched, decided = decoder
        reason = (
            f"{decided}: a Segment Anything prompt decoder ({layout} layout; prompts: {', '.join(prompts)}); "
            "it runs beside its image encoder, which is the model to give"
        )
        return Recognition(NAME, reason, {"part": "decoder", "layout": layout, "prompts": prompts})
    encoder = _encoder(model)
    if encoder is not None:
        layout, decided = encoder
        image = model.inputs[0]
        reason = (
            f"input {tensor_text(image)} and {decided}: a Segment Anything image encoder ({layout} layout), run "
            "once a frame; its prompt decoder is given beside it"
        )
        size = (image.shape[2], image.shape[3])
        return Recognition(NAME, reason, {"part": "encoder", "layout": layout, "input_size": size})
    return None


SAM = Rule(NAME, NEEDS, _recognise)

# An encoder's file name part -> its decoder's, tried in this order (the first that is in the name, its last place)
DECODER_NAMES = (("vision_encoder", "prompt_encoder_mask_decoder"), ("encoder", "decoder"))


def decoder_names(encoder: str) -> list[str]:
    """The paths a decoder of ``encoder`` (a path) is looked for at, beside it (DECODER_NAMES); [] when its name
    says no encoder."""
    folder, name = os.path.split(encoder)
    for part, decoder in DECODER_NAMES:
        if part in name:
            before, _, after = name.rpartition(part)
            return [os.path.join(folder, before + decoder + after)]
    return []


def decoder_beside(encoder: str, given: str = "", parameter: str = "decoder_path") -> str:
    """The decoder of ``encoder``: ``given`` when set, else the file beside it (``decoder_names``); a ValueError
    naming where it looked and the fix when there is none."""
    if given:
        return given
    candidates = decoder_names(encoder)
    found = next((path for path in candidates if os.path.isfile(path)), None)
    if found is not None:
        return found
    looked = f"no {untrusted(candidates[0], 200)}" if candidates else "its name says no 'encoder'"
    raise ValueError(
        f"{parameter} is empty and no prompt decoder is beside encoder {untrusted(encoder, 200)} ({looked}): give "
        f"the decoder exported with this encoder (the {parameter} parameter, --decoder)"
    )
