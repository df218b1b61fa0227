"""sam: Segment Anything (models/sam.py on models/sam_detector.py), recognised by models/sam_interface.py: the
model is the image encoder (model_path), run once a frame, with its prompt decoder beside it (decoder_path, or the
file beside the encoder: sam_interface.decoder_beside), run once per batch of prompts.

Its prompts are another node's boxes: the Detection2DArray on ``boxes`` paired with the image of the same stamp
(any detector node of this package, or anyone's: "detect, then segment"), each box's class and ID carried to its
mask; and boxes and points given on the node (a PointsPrompt: the ``prompt`` parameter, ~/set_prompt, ~/prompt, in
predict's --boxes / --points syntax, one parser: sam_detector.parse_prompt), segmented after the topic's boxes of
each frame. A change of them is answered at once on the last frame answered, with its cached embedding (the node
keeps one segmenter per loaded encoder, so a live change rebuilds the adapter on the same cache: ``_segmenter``),
then on each new frame until an empty prompt clears them. Its answers are the segmentation family's (yolo -seg): the
detections on ``detections`` (each box tightened to its mask, the predicted IoU its score) and the instance label
image on ``masks``. `predict` takes fixed prompts instead (--boxes, --points).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from weakref import WeakValueDictionary

from ..models.recognition import load_checked
from ..models.sam import SamSegmenter
from ..models.sam_detector import SamDetector, parse_prompt
from ..models.sam_interface import MAX_PROMPTS, SAM, decoder_beside
from ..parameters import FRACTION, LIVE, Parameter
from ..results import DETECTIONS
from ..runtime.runner import Runner
from ..text import untrusted
from .detection import MASK_ENCODING, MODEL, node
from .family import DETECTIONS_MESSAGE, IMAGE_INPUTS, AccuracyLoss, Family, Input, LoadRunner
from .pipeline import DetectionPipeline
from .prompts import BoxesPrompt, PointsPrompt

NAME = "sam"
DECODER = Parameter(
    "decoder_path",
    "",
    "the prompt decoder exported with the encoder (model_path); empty: the one beside it (prompt_encoder_mask_decoder"
    ".onnx beside vision_encoder.onnx, X-decoder.onnx beside X-encoder.onnx)",
    launch_argument=True,
)
CONFIDENCE = Parameter(
    "confidence_threshold",
    0.0,
    "masks whose predicted IoU is below this are dropped; 0: none",
    True,
    **FRACTION,
    applies=LIVE,
)
MAX_PROMPTS_PARAMETER = Parameter(
    "max_prompts",
    MAX_PROMPTS,
    "boxes segmented per frame at most (the first ones; the rest dropped, counted)",
    minimum=1,
    maximum=1000,
    applies=LIVE,
)
PROMPT_CLASS = "prompt_class"
ENCODER = replace(MODEL, description="the image encoder (.onnx), run once a frame")
PARAMETERS = (
    ENCODER,
    DECODER,
    Parameter(PROMPT_CLASS, "", "segment only the boxes of this class name; empty: every box", applies=LIVE),
    CONFIDENCE,
    MAX_PROMPTS_PARAMETER,
    MASK_ENCODING,
)
OPTIONS = ("decoder", "encoder_name", "decoder_name", "max_prompts", "confidence", "prompts", "segmenter")
PROMPT = PointsPrompt("segmented on each frame after the boxes topic's", parse_prompt)
BOXES = Input("boxes", DETECTIONS_MESSAGE, ", paired with the image of the same stamp: each box is segmented")


def make(runner: Runner, decoder: Runner, **given: Any) -> SamDetector:
    return SamDetector(runner, decoder, **given)


# The segmenter (and its cached embeddings, its counts) of each loaded encoder while a detector holds it: a node's
# live change builds the adapter again on the runners already loaded, and a prompt changed on the last frame reuses
# that frame's embedding. Held weakly, by the encoder's id: a segmenter holds its encoder, so a map keyed by the
# encoder itself would keep both sessions alive for ever (480 MB a load); while the segmenter lives, so does its
# encoder, whose id then names no other object.
_SEGMENTERS: WeakValueDictionary[int, SamSegmenter] = WeakValueDictionary()


def _segmenter(encoder: Runner, decoder: Runner, max_prompts: int, **names: str) -> SamSegmenter:
    """The segmenter on ``encoder`` and ``decoder``: the one already made on them (its max_prompts set), else new."""
    segmenter = _SEGMENTERS.get(id(encoder))
    if segmenter is None or segmenter.encoder is not encoder or segmenter.decoder is not decoder:
        segmenter = SamSegmenter(encoder, decoder, max_prompts=max_prompts, **names)
        _SEGMENTERS[id(encoder)] = segmenter
    segmenter.max_prompts = max_prompts  # a live change (checked by its parameter)
    return segmenter


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> SamDetector:
    """The node's adapter: the encoder (model_path) and its decoder (decoder_path, or the one beside it), each
    checked to be a Segment Anything file (a model of another family named as such), then checked as a pair."""
    encoder_path = values["model_path"]
    decoder_path = decoder_beside(encoder_path, values["decoder_path"])
    user = FAMILY.executable
    encoder = load_checked(load_runner, encoder_path, NAME, "model_path", user)
    decoder = load_checked(load_runner, decoder_path, NAME, "decoder_path", user)
    names = {
        "encoder_name": f"model_path {untrusted(encoder_path, 200)}",
        "decoder_name": f"decoder_path {untrusted(decoder_path, 200)}",
    }
    segmenter = _segmenter(encoder, decoder, values["max_prompts"], **names)
    prompts = parse_prompt(values.get(PROMPT.parameter.name, ""))
    for prompt in prompts:  # what this decoder cannot take (a box for a points decoder, ...): refused at once
        problem = segmenter.refusal(prompt)
        if problem:
            raise ValueError(f"prompt: {prompt.class_name}: {problem}; give what {names['decoder_name']} takes")
    return FAMILY.detector(
        encoder, decoder=decoder, segmenter=segmenter, confidence=values["confidence_threshold"], prompts=prompts
    )


FAMILY = Family(
    name=NAME,
    summary="Segment Anything: masks for another node's boxes (HF, Meta and SAM2 exports)",
    rule=SAM,
    parameters=PARAMETERS,
    build=build,
    result=DETECTIONS,
    node=replace(
        node(
            "detections",
            keypoints=False,
            tracking=False,
            inputs=(*IMAGE_INPUTS, BOXES),
            topic_arguments=(("boxes", "boxes_topic", "/detections", "Detection2DArray whose boxes are segmented"),),
            masks=True,
        ),
        usage_arguments=("boxes_topic:=/detections",),
    ),
    make=make,
    options=OPTIONS,
    make_pipeline=DetectionPipeline.build,
    prompts=(
        BoxesPrompt(
            "boxes",
            "segmenting the boxes",
            lambda sam, frame, boxes: sam.segment_boxes(frame, boxes),
            PROMPT_CLASS,
            ids=True,
        ),
        PROMPT,
    ),
    # quantize: the encoder (model_path), calibrated on its own input a frame; the decoder kept as it is. Its loss shows
    # in the masks its decoder makes of it: the drop of mask_mIoU (each truth instance's mask against the mask its
    # truth box prompts, eval's), the INT8 encoder's masks against the FP32 encoder's through the same decoder.
    accuracy_loss=AccuracyLoss.metric("mask mIoU lost", "mask_mIoU", 0.02),
    no_float_tail="the encoder's convs are fed by transposes (a ViT's patches, its neck's channel norms), so the "
    "float tail would keep it all",
)
