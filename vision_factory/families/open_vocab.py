"""open_vocab: open-vocabulary detection, the boxes of whatever a text prompt names: Grounding DINO (Hugging Face and
IDEA / TAO exports, models/grounding_dino.py), OWLv2 / OWL-ViT (models/owl.py) and YOLO-World / YOLOE exported with a
text-embedding input (models/yolo_world.py, with the CLIP text encoder beside the model or ``text_encoder_path``),
recognised from the file by models/open_vocab_interface.py's rule, which also tells the adapter to run (its
``head``). A YOLO-World / YOLOE export with its classes baked in is a plain YOLO head: the ``yolo`` family's.

The prompt is the family's TextPrompt (families/prompts.py): phrases separated by " . ", each a class (class id: the
phrase's index, class name: the phrase), set at start (``prompt``) or on a running node (the parameter, ~/set_prompt,
~/prompt); the adapter is built again once per change, which tokenizes the prompt once (models/open_vocab.py's
PromptedDetector), and the node republishes LabelInfo with the new phrases. What the model reads of a prompt is the
adapter's bound, refused with the reason when a prompt passes it: Grounding DINO reads at most 256 tokens of the
whole prompt, OWL at most 16 tokens a phrase.

The tokenizer is the export's own (models/tokenizer_file.py: tokenizer.json, or vocab.txt for Grounding DINO),
beside the model, above its onnx/ folder, or given by ``tokenizer_path``; never downloaded. A missing one is refused
at start naming every path looked at. The file is read once per node (per path, size and time of change), not per
prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..models import grounding_dino, owl
from ..models.grounding_dino import GroundingDino
from ..models.interface import Interface
from ..models.open_vocab import PromptedDetector, Size
from ..models.open_vocab_interface import GROUNDING_DINO_HF, GROUNDING_DINO_IDEA, OPEN_VOCAB, OWL, YOLO_TEXT
from ..models.owl import OwlDetector
from ..models.recognition import load_checked
from ..models.tokenizer_file import TokenizerFile, find_tokenizer, read_once
from ..models.yolo_world import YoloTextDetector, text_encoder_beside
from ..parameters import FRACTION, LIVE, Parameter
from ..results import DETECTIONS
from ..runtime.runner import Runner
from ..text import untrusted
from .detection import CONFIDENCE, INPUT_SIZE, IOU, MAX_DETECTIONS, MODEL, input_shape, node
from .family import AP_LOST, Family, LoadRunner
from .pipeline import DetectionPipeline
from .prompts import TextPrompt

NAME = "open_vocab"
PROMPT = TextPrompt("what to find; Grounding DINO reads at most 256 tokens of it, OWL 16 tokens a phrase")
TOKENIZER = Parameter(
    "tokenizer_path",
    "",
    "the export's own tokenizer.json (or Grounding DINO's vocab.txt); empty: the one beside the model or above its "
    "onnx/ folder (never downloaded)",
    launch_argument=True,
)
TEXT_THRESHOLD = Parameter(
    "text_threshold",
    0.25,
    "Grounding DINO: a detection whose phrases' tokens all score at or below this names no phrase and is dropped",
    **FRACTION,
    applies=LIVE,
)
VARIANT = Parameter(
    "owl_variant",
    "auto",
    "OWL exports: owlv2 (the frame padded to a square), owlvit (stretched) or auto: as the file says",
    choices=owl.VARIANTS,
)
TEXT_ENCODER = Parameter(
    "text_encoder_path",
    "",
    "YOLO-World / YOLOE exports taking txt_feats or tpe: the CLIP text encoder (.onnx: input_ids, attention_mask -> "
    "text_embeds), run once per prompt; empty: text_encoder.onnx beside the model",
    launch_argument=True,
)
NMS_IOU = replace(IOU, description="YOLO-World / YOLOE: NMS IoU threshold (the other exports' boxes are final)")
PARAMETERS = (MODEL, TOKENIZER, TEXT_ENCODER, CONFIDENCE, TEXT_THRESHOLD, NMS_IOU, MAX_DETECTIONS, INPUT_SIZE, VARIANT)
OPTIONS = (
    "tokenizer",
    "prompt",
    "confidence",
    "text_threshold",
    "max_detections",
    "image_size",
    "variant",
    "text_encoder",
    "iou",
)


def open_vocab_detector(
    runner: Runner,
    tokenizer: TokenizerFile,
    prompt: str | Sequence[str] | None = None,
    confidence: float = 0.25,
    text_threshold: float = 0.25,
    max_detections: int = 300,
    image_size: Size | None = None,
    variant: str = "auto",
    text_encoder: tuple[Runner, str] | None = None,
    iou: float = 0.7,
) -> PromptedDetector:
    """The adapter of the layout the rule recognises on ``runner``: OwlDetector for OWL (``variant``),
    YoloTextDetector for YOLO-World / YOLOE (``text_encoder``: its runner and how errors name it; ``iou``),
    GroundingDino otherwise (``text_threshold``; a model of no layout is refused by it, naming what it needs)."""
    found = head(runner)
    if found == OWL:
        return OwlDetector(runner, tokenizer, confidence, max_detections, image_size, variant, prompt)
    if found == YOLO_TEXT:
        if text_encoder is None:
            raise ValueError("a YOLO-World / YOLOE export taking text embeddings needs its text encoder: give it")
        encoder, name = text_encoder
        return YoloTextDetector(runner, encoder, tokenizer, confidence, iou, max_detections, prompt, name)
    return GroundingDino(runner, tokenizer, confidence, text_threshold, max_detections, image_size, prompt)


def head(runner: Runner) -> str | None:
    """The layout the rule recognises on ``runner`` or a model file's summary (models/model_file.py), of
    open_vocab_interface's heads; None for none."""
    recognition = OPEN_VOCAB.recognise(Interface.of(runner))
    return None if recognition is None else str(recognition.details["head"])


def tokenizer_names(runner: Runner) -> tuple[str, ...]:
    """The tokenizer files looked for beside a model of ``runner``'s layout: Grounding DINO's tokenizer.json or
    vocab.txt, the others' (CLIP's) tokenizer.json."""
    grounding = head(runner) in (GROUNDING_DINO_HF, GROUNDING_DINO_IDEA, None)
    return grounding_dino.TOKENIZER_NAMES if grounding else owl.TOKENIZER_NAMES


def tokenizer_of(model_path: str, given: str, runner: Runner) -> TokenizerFile:
    """The export's tokenizer (``given``, else found beside the model: models/tokenizer_file.py), read once per
    file as it is (path, size, time of change): a new prompt builds the adapter again, not the tokenizer."""
    return read_once(find_tokenizer(model_path, given or None, tokenizer_names(runner)))


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> PromptedDetector:
    runner = load_checked(load_runner, values["model_path"], NAME, "model_path", FAMILY.executable)
    size = input_shape(values["input_size"])
    options = {
        "tokenizer": tokenizer_of(values["model_path"], values["tokenizer_path"], runner),
        "prompt": values["prompt"],  # "": none yet, no detections until one comes
        "confidence": values["confidence_threshold"],
        "text_threshold": values["text_threshold"],
        "max_detections": values["max_detections"],
        "image_size": (size[1], size[0]) if size else None,
        "variant": values["owl_variant"],
        "iou": values["iou_threshold"],
    }
    if head(runner) == YOLO_TEXT:  # its text encoder: given, or the one beside the model
        path = text_encoder_beside(values["model_path"], values["text_encoder_path"])
        options["text_encoder"] = (load_runner(path), f"text encoder {untrusted(path, 200)}")
    return FAMILY.detector(runner, **options)


FAMILY = Family(
    name=NAME,
    summary="open-vocabulary detection of what a prompt names (Grounding DINO, OWL, YOLO-World)",
    rule=OPEN_VOCAB,
    parameters=PARAMETERS,  # the prompt parameter comes with the prompt
    build=build,
    result=DETECTIONS,
    node=node("detections", keypoints=False, tracking=False),
    make=open_vocab_detector,
    options=OPTIONS,
    make_pipeline=DetectionPipeline.build,
    prompts=(PROMPT,),
    # quantize: calibrated on the frames with the prompt its check uses (--prompt, else --data's category names), the
    # text inputs fed with that prompt's tokens; the loss is eval's AP drop, prompted as eval prompts.
    accuracy_loss=AP_LOST,
)
