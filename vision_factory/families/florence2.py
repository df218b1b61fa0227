"""florence2: Florence-2 (models/florence2.py), one model for captions, OCR, detection and phrase grounding, chosen
by a task prompt. The model is the export folder as onnx-community publishes it (tokenizer.json and the configs at
its top, the four graphs in onnx/; or a flat folder), recognised from its files (models/florence2_interface.py).

The prompt is the task, a TextPrompt (families/prompts.py): '<CAPTION>', '<OD>', '<OCR>', or a task with its text,
'<CAPTION_TO_PHRASE_GROUNDING>a cat and a dog'; set at start (``prompt``) or on a running node (the parameter,
~/set_prompt, ~/prompt), applied from the next frame: the adapter is built again on the graphs already loaded, which
encodes the task's question once. The node publishes each frame's text (vision_msgs/Classification on ``text``)
and, for the tasks that give regions, its boxes with their phrases (Detection2DArray on ``detections``; empty for a
text task), both stamped with the frame's header.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..models import florence2_interface as interface
from ..models.florence2 import DEFAULT_TASK, Florence2
from ..models.florence2_interface import FLORENCE2, find_export
from ..models.tokenizer_file import read_once
from ..parameters import LIVE, Parameter
from ..results import DETECTIONS
from ..runtime.runner import Runner
from .detection import CONFIDENCE, MODEL, node
from .family import Family, LoadRunner, Output
from .pipeline import DetectionPipeline
from .prompts import TextPrompt

NAME = "florence2"
log = logging.getLogger(__name__)  # a node shows its INFO lines in its own log (ros/spin.py)
PROMPT = TextPrompt(
    "the task: '<CAPTION>', '<DETAILED_CAPTION>', '<OCR>', '<OD>', '<REGION_PROPOSAL>', or a task with its text, "
    "'<CAPTION_TO_PHRASE_GROUNDING>a cat and a dog'",
    default=DEFAULT_TASK,
)
EXPORT = replace(
    MODEL,
    description="the Florence-2 export folder (tokenizer.json and the configs at its top, the graphs in onnx/)",
)
MAX_NEW_TOKENS = Parameter(
    "max_new_tokens",
    256,
    "the most tokens generated a frame (the answer ends earlier at </s>); a frame's time grows with them",
    minimum=1,
    maximum=interface.MAX_POSITIONS - 1,
    applies=LIVE,
)
NUM_BEAMS = Parameter(
    "num_beams",
    0,
    "beams of transformers' beam search (1: greedy, the fastest); 0: the export's generation_config.json's, as "
    "transformers' generate() takes it (3 in Florence-2's published configs; 1 where it says none)",
    minimum=0,
    maximum=interface.MAX_BEAMS,
    applies=LIVE,
)
TEXT = Output(
    "text",
    "vision_msgs/msg/Classification",
    ": the answer's text (a caption, the OCR, or a region task's generated text), one per frame",
    depth=10,
)
PARAMETERS = (EXPORT, replace(CONFIDENCE, default=0.0), MAX_NEW_TOKENS, NUM_BEAMS)
OPTIONS = ("export", "prompt", "max_new_tokens", "num_beams")


def florence2_model(
    runner: Runner,
    export: Any = None,
    prompt: str = DEFAULT_TASK,
    max_new_tokens: int = 256,
    runners: Any = None,
    num_beams: int = 0,
) -> Florence2:
    """The adapter on ``runner`` (the vision encoder) and the export's other graphs (``runners``: graph name ->
    Runner), the task ``prompt``, ``num_beams`` (0: the export's); the tokenizer read once per file, not per task."""
    export = export if isinstance(export, interface.Export) else find_export(export)
    graphs = {interface.VISION: runner, **(runners or {})}
    return Florence2(graphs, export, read_once(export.tokenizer), prompt or DEFAULT_TASK, max_new_tokens, num_beams)


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> Florence2:
    """The node's adapter: each graph of the export folder (model_path) loaded on the node's backend (a prompt
    change builds it again on the graphs already loaded), the task its prompt."""
    export = find_export(values["model_path"])
    try:
        runners = {name: load_runner(str(path)) for name, path in export.graphs.items()}
    except RuntimeError as exc:  # OpenVINO's CPU plugin compiles no If of dynamic rank: the merged decoder's
        pair = find_export(values["model_path"], interface.PAIR_LAYOUT)
        if export.layout != interface.MERGED_LAYOUT or pair.layout != interface.PAIR_LAYOUT:
            raise RuntimeError(
                f"{exc} (a backend that cannot run {interface.MERGED} runs optimum's pair: put {interface.FIRST} "
                f"and {interface.WITH_PAST} of the same export beside it)"
            ) from None
        log.info("florence2: %s did not load here, running %s and %s instead", interface.MERGED, interface.FIRST,
                 interface.WITH_PAST)  # fmt: skip
        export = pair
        runners = {name: load_runner(str(path)) for name, path in export.graphs.items()}
    vision = runners.pop(interface.VISION)
    return FAMILY.detector(
        vision,
        export=export,
        prompt=values["prompt"],
        max_new_tokens=values["max_new_tokens"],
        runners=runners,
        num_beams=values["num_beams"],
    )


FAMILY = Family(
    name=NAME,
    summary="Florence-2: captions, OCR, detection and phrase grounding, chosen by a task prompt",
    rule=FLORENCE2,
    parameters=PARAMETERS,
    build=build,
    result=DETECTIONS,
    node=(lambda wiring: replace(wiring, outputs=(*wiring.outputs[:2], TEXT, *wiring.outputs[2:])))(
        node("detections", keypoints=False, tracking=False)
    ),
    make=florence2_model,
    options=(*OPTIONS, "runners"),
    make_pipeline=DetectionPipeline.build,
    prompts=(PROMPT,),
    generates=True,
)
