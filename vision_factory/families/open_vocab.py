"""open_vocab: open-vocabulary detection, the boxes of whatever a text prompt names: Grounding DINO (Hugging Face and
IDEA / TAO exports, models/grounding_dino.py) and OWLv2 / OWL-ViT (models/owl.py), recognised from the file by
models/open_vocab_interface.py's rule, which also tells the adapter to run (its ``head``).

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
from typing import Any

from ..models import grounding_dino, owl
from ..models.grounding_dino import GroundingDino
from ..models.interface import Interface
from ..models.open_vocab import PromptedDetector, Size
from ..models.open_vocab_interface import OPEN_VOCAB, OWL
from ..models.owl import OwlDetector
from ..models.recognition import load_checked
from ..models.tokenizer_file import TokenizerFile, find_tokenizer, read_once
from ..parameters import FRACTION, LIVE, Parameter
from ..results import DETECTIONS
from ..runtime.runner import Runner
from .detection import CONFIDENCE, INPUT_SIZE, MAX_DETECTIONS, MODEL, input_shape, node
from .family import Family, LoadRunner
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
PARAMETERS = (MODEL, TOKENIZER, CONFIDENCE, TEXT_THRESHOLD, MAX_DETECTIONS, INPUT_SIZE, VARIANT)
OPTIONS = ("tokenizer", "prompt", "confidence", "text_threshold", "max_detections", "image_size", "variant")


def open_vocab_detector(
    runner: Runner,
    tokenizer: TokenizerFile,
    prompt: str | Sequence[str] | None = None,
    confidence: float = 0.25,
    text_threshold: float = 0.25,
    max_detections: int = 300,
    image_size: Size | None = None,
    variant: str = "auto",
) -> PromptedDetector:
    """The adapter of the layout the rule recognises on ``runner``: OwlDetector for OWL (``variant``), GroundingDino
    otherwise (``text_threshold``; a model of neither layout is refused by it, naming what it needs)."""
    recognition = OPEN_VOCAB.recognise(Interface.of(runner))
    if recognition is not None and recognition.details["head"] == OWL:
        return OwlDetector(runner, tokenizer, confidence, max_detections, image_size, variant, prompt)
    return GroundingDino(runner, tokenizer, confidence, text_threshold, max_detections, image_size, prompt)


def tokenizer_names(runner: Runner) -> tuple[str, ...]:
    """The tokenizer files looked for beside a model of ``runner``'s layout."""
    recognition = OPEN_VOCAB.recognise(Interface.of(runner))
    owl_layout = recognition is not None and recognition.details["head"] == OWL
    return owl.TOKENIZER_NAMES if owl_layout else grounding_dino.TOKENIZER_NAMES


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
    }
    return FAMILY.detector(runner, **options)


FAMILY = Family(
    name=NAME,
    summary="open-vocabulary detection of what a text prompt names (Grounding DINO, OWL)",
    rule=OPEN_VOCAB,
    parameters=PARAMETERS,  # the prompt parameter comes with the prompt
    build=build,
    result=DETECTIONS,
    node=node("detections", keypoints=False, tracking=False),
    make=open_vocab_detector,
    options=OPTIONS,
    make_pipeline=DetectionPipeline.build,
    prompts=(PROMPT,),
    not_quantized="a text-conditioned model's calibration and accuracy check need prompts with the images, which "
    "quantize does not take; check an INT8 copy made elsewhere with compare --model-type open_vocab --model FP32.onnx "
    "--model-b INT8.onnx --b onnx:cpu --data COCO (AP, prompted with the category names)",
)
