"""vision-factory predict: a model's detections (and keypoints) on images and videos.

The detector is built from the options as the node builds it from its parameters
(the family's ``build``): each option is the node parameter it names, and an option
left out is the node's default.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..families.detection import input_shape
from ..families.family import LoadRunner
from ..families.pipeline import has_masks
from ..families.registry import family
from ..models.sam_detector import parse_prompts
from ..parameters import with_defaults
from ..results.finite import finite
from ..results.frame import Adapter, Detector, FrameResult
from ..runtime.backends import load_target
from .commands import UsageError
from .sources import file_frames

# A prompted family's options (families/prompts.py), each the node parameter it sets: predict, eval, compare, bench and
# quantize take them (cli_support.py's PROMPT_OPTIONS), and give a family only those it has (node_values).
PROMPTED = {
    "--prompt": "prompt",  # a family that takes a text prompt (families/prompts.py)
    "--tokenizer": "tokenizer_path",  # open_vocab: the export's own tokenizer
    "--text-encoder": "text_encoder_path",  # open_vocab: YOLO-World / YOLOE's CLIP text encoder
    "--text-threshold": "text_threshold",  # open_vocab: Grounding DINO's
    "--decoder": "decoder_path",  # sam: the prompt decoder beside the encoder
}
# option -> the node parameter it sets; rtmpose: FINDING sets the person detector's, POSING the pose model's.
FINDING = {
    "--conf": "confidence_threshold",
    "--iou": "iou_threshold",
    "--max-det": "max_detections",
    "--classes": "classes",
    "--imgsz": "image_size",
    "--labels": "labels_path",
    "--resize": "resize",
    "--box-units": "box_units",
    "--label-offset": "label_offset",
    "--score-function": "score_function",
    **PROMPTED,
    "--max-new-tokens": "max_new_tokens",  # florence2
    "--num-beams": "num_beams",  # florence2
}
# Fixed prompts of an adapter that takes them (``prompted``: sam's boxes and points), the same on every frame.
PROMPTING = ("--boxes", "--points")
POSING = {"--input-size": "input_size", "--person-class": "person_class"}
MAPPING = {  # depth
    "--depth-kind": "depth_kind",
    "--processor-size": "processor_size",
    "--max-depth": "max_depth",
    "--resize-filter": "resize_filter",
}


def node_values(name: str, model: Path, options: Mapping[str, Any], parameters: Mapping[str, str]) -> dict:
    """The parameter values the node of family ``name`` would have for ``model`` and those ``options`` (option:
    value; None: not given, the node's default) that ``parameters`` maps; an option the family has no parameter
    for is an error."""
    given = taken_options(name, options, parameters)
    values = {parameters[option]: value for option, value in given.items()}
    return with_defaults(family(name).parameters, {"model_path": str(model), **values}, name)


def taken_options(name: str, options: Mapping[str, Any], parameters: Mapping[str, str]) -> dict[str, Any]:
    """The ``options`` given (not None) of those ``parameters`` maps to node parameters, by option; one whose
    parameter family ``name`` has not is a UsageError naming the option."""
    known = {parameter.name for parameter in family(name).parameters}
    given = {option: options[option] for option in parameters if options.get(option) is not None}
    for option in given:
        if parameters[option] not in known:
            raise UsageError(f"{name} models take no {parameters[option]}", option)
    return given


def detector_from_options(
    model_type: str,
    model: Path,
    target: str,
    options: Mapping[str, Any],
    detector_model: Path | None = None,
    detector_type: str = "yolo",
    load: LoadRunner | None = None,
) -> Detector:
    """The ``model_type`` detector on ``target`` (e.g. onnx:cpu) as its node builds it (``Family.build``) from the
    parameter values the options of FINDING and POSING give; rtmpose: on the people the ``detector_type`` model
    ``detector_model`` finds. ``load`` loads each model file instead of ``target`` (quantize records what the model
    is fed)."""
    spec = family(model_type)
    if spec.runs_on and detector_model is None:
        runs_on = " and ".join(spec.runs_on)
        raise UsageError(f"{model_type} needs {runs_on}: give --detector MODEL (and --detector-type if not yolo)")
    if options.get("--input-size"):
        try:
            input_shape(options["--input-size"])
        except ValueError as exc:
            raise UsageError(str(exc), "--input-size") from None
    require_prompt(model_type, options)
    load = load or (lambda path: load_target(target, Path(path)))
    if spec.runs_on:  # the people come from the --detector model
        people = family(detector_type).build(node_values(detector_type, detector_model, options, FINDING), load)
        return spec.build(node_values(model_type, model, options, POSING), load, person_detector=people)
    detector = spec.build(node_values(model_type, model, options, FINDING | POSING | MAPPING), load)
    return prompted(model_type, detector, options)


def require_prompt(model_type: str, options: Mapping[str, Any]) -> None:
    """A UsageError naming --prompt when the family takes a text prompt, has none by default and ``options`` give
    none."""
    prompt = family(model_type).text_prompt
    if prompt is not None and not prompt.default and not options.get("--prompt"):
        raise UsageError(
            f"{model_type} models detect what a prompt names: give it, e.g. 'a person . a forklift'", "--prompt"
        )


def prompted_values(model_type: str, model: Path, options: Mapping[str, Any], **fixed: Any) -> dict:
    """The ``model_type`` node's parameter values for ``model`` with the PROMPTED ``options`` given (option: value;
    None: the node's default; one the family has no parameter for refused, naming it) and the ``fixed`` values the
    tool sets (eval's confidence): what eval, compare, bench and quantize build a prompted family from."""
    values = node_values(model_type, model, options, PROMPTED)
    return with_defaults(family(model_type).parameters, {**values, **fixed}, model_type)


def prompted(model_type: str, detector: Detector, options: Mapping[str, Any]) -> Detector:
    """``detector`` with the fixed prompts of PROMPTING where it takes them (an adapter's ``prompted``: sam's
    boxes and points); a UsageError when it takes them and none is given, or they are given and it takes none."""
    given = {option: options.get(option) or "" for option in PROMPTING}
    takes = getattr(detector, "prompted", None)
    if takes is None:
        for option, text in given.items():
            if text:
                raise UsageError(f"{model_type} models take no {option[2:]} prompts", option)
        return detector
    if not any(given.values()):
        raise UsageError(f"{model_type} models segment what prompts name: give --boxes or --points", "--boxes")
    try:
        prompts = parse_prompts(given["--boxes"], given["--points"])
    except ValueError as exc:
        raise UsageError(str(exc), "--points" if str(exc).startswith("--points") else "--boxes") from None
    return takes(prompts)


@dataclass
class Prediction:
    record: dict[str, Any]  # the frame's record (FrameResult.record): image, frame, width, height, and its parts'
    result: FrameResult

    @property
    def problems(self) -> dict[str, str]:
        """What was wrong with the model's output on this frame (a NaN box left out, ...): kind -> detail."""
        return self.result.problems

    def line(self) -> str:
        """One line of text: the image and its parts in a few words (for detections each one's class and score;
        names from the model or a labels file, and the file's name, escaped: text.untrusted)."""
        return self.result.line(self.record["image"])


def predict(
    adapter: Adapter, inputs: Iterable[Path], save: Path | None = None, protected: Iterable[Path | None] = ()
) -> Iterator[Prediction]:
    """``adapter`` (the family's: a function from a frame to its FrameResult) on each image, and each frame of each
    video, in order; with ``save``, each result saved there (detections drawn; a map as .npy and .png), never onto
    one of ``inputs`` or of the ``protected`` files (the model ...)."""
    inputs = list(inputs)
    protected = [*inputs, *protected]
    masks = has_masks(adapter)  # a segmentation model: each detection its mask
    for path in inputs:
        for name, index, frame in file_frames(path):
            # those of a NaN or infinite value left out or mended (results/finite.py), said in its problems
            found = finite(adapter(frame), masks=masks).result
            if save is not None:
                found.save(save, path, index, frame, protected)
            yield Prediction(found.record(name, index or 0), found)
