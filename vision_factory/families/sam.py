"""sam: Segment Anything (models/sam.py on models/sam_detector.py), recognised by models/sam_interface.py: the
model is the image encoder (model_path), run once a frame, with its prompt decoder beside it (decoder_path, or the
file beside the encoder: sam_interface.decoder_beside), run once per batch of prompts.

Its prompts are another node's boxes: the Detection2DArray on ``boxes`` paired with the image of the same stamp
(any detector node of this package, or anyone's: "detect, then segment"), each box's class and ID carried to its
mask. Its answers are the segmentation family's (yolo -seg): the detections on ``detections`` (each box tightened
to its mask, the predicted IoU its score) and the instance label image on ``masks``. `predict` takes fixed prompts
instead (--boxes, --points).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..models.recognition import load_checked
from ..models.sam_detector import SamDetector
from ..models.sam_interface import MAX_PROMPTS, SAM, decoder_beside
from ..parameters import FRACTION, LIVE, Parameter
from ..results import DETECTIONS
from ..runtime.runner import Runner
from ..text import untrusted
from .detection import MASK_ENCODING, MODEL, node
from .family import DETECTIONS_MESSAGE, IMAGE_INPUTS, Family, Input, LoadRunner
from .pipeline import DetectionPipeline
from .prompts import BoxesPrompt

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
OPTIONS = ("decoder", "encoder_name", "decoder_name", "max_prompts", "confidence")
BOXES = Input("boxes", DETECTIONS_MESSAGE, ", paired with the image of the same stamp: each box is segmented")


def make(runner: Runner, decoder: Runner, **given: Any) -> SamDetector:
    return SamDetector(runner, decoder, **given)


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> SamDetector:
    """The node's adapter: the encoder (model_path) and its decoder (decoder_path, or the one beside it), each
    checked to be a Segment Anything file (a model of another family named as such), then checked as a pair."""
    encoder_path = values["model_path"]
    decoder_path = decoder_beside(encoder_path, values["decoder_path"])
    user = FAMILY.executable
    encoder = load_checked(load_runner, encoder_path, NAME, "model_path", user)
    decoder = load_checked(load_runner, decoder_path, NAME, "decoder_path", user)
    return FAMILY.detector(
        encoder,
        decoder=decoder,
        encoder_name=f"model_path {untrusted(encoder_path, 200)}",
        decoder_name=f"decoder_path {untrusted(decoder_path, 200)}",
        max_prompts=values["max_prompts"],
        confidence=values["confidence_threshold"],
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
    ),
    not_quantized="an encoder's loss is in the masks its decoder makes of it (prompted by boxes), which quantize does "
    "not measure; check an INT8 encoder made elsewhere with compare --model-type sam --model FP32.onnx --model-b "
    "INT8.onnx --b onnx:cpu --decoder DECODER.onnx --data COCO (mask AP, prompted with the truth's boxes)",
)
