"""bench of a prompted family (families/prompts.py): the model built as its node builds it, from the prompt options
(tools/predict.py's PROMPTED: the tokenizer, the decoder beside the encoder) and a prompt on the bench photo, timed
part by part. A generating family (Family.generates: florence2): its stages, the encoding apart from the first token
and each token after (tools/bench_generation.py). A text prompt's family (open_vocab): the text side (the prompt's
encoding, once per prompt) apart from the image side (pre-processing, inference, decoding per frame). A box
prompt's family (sam): the encoder (once a frame) apart from the decoder (once per batch of boxes), per box."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..families.registry import family
from ..models.model_file import folder_model
from ..results.boxes import Boxes
from ..results.frame import FrameResult
from ..runtime.backends import load_target
from ..runtime.runner import Runner
from .bench_generation import generation_stages
from .bench_generation import lines as generation_lines
from .predict import PROMPTED, taken_options

BENCH_PROMPT = "a person . a tie"  # what a text-prompted model is timed finding on the bench photo (a portrait)
BENCH_BOXES = 4  # box prompts a frame for a box-prompted model: the frame's quarters, each a box


def prompted(model_type: str | None) -> bool:
    """Whether the family takes prompts besides images (its model is timed on its prompt's inputs)."""
    return model_type is not None and bool(family(model_type).prompts)


def prompt_values(model_type: str | None, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The node parameter values of the prompt ``options`` given (by option; one the family has no parameter for
    refused, naming it), and a text prompt's family's BENCH_PROMPT where --prompt is not given."""
    options = options or {}
    if model_type is None:
        given = [flag for flag in PROMPTED if options.get(flag) is not None]
        if given:
            raise ValueError(f"{given[0]} needs --model-type (the family that takes it)")
        return {}
    values = {PROMPTED[flag]: value for flag, value in taken_options(model_type, options, PROMPTED).items()}
    if family(model_type).text_prompt is not None and not values.get("prompt"):
        values["prompt"] = BENCH_PROMPT
    return {name: str(value) if isinstance(value, Path) else value for name, value in values.items()}


def loader(runner: Runner, model: Path, target: str):
    """A LoadRunner giving ``runner`` for ``model`` (a model folder: the file it is recognised by, its main graph)
    and loading any other file of the family (sam's decoder, Florence-2's other graphs) on ``target``."""
    main = folder_model(Path(model))
    return lambda path: runner if Path(path) == main else load_target(target, Path(path))


def prompted_detector(runner: Runner, model: Path, target: str, model_type: str, values: Mapping[str, Any]) -> Any:
    """The detector of the family's node pipeline for ``model`` (on ``runner``) with the prompt ``values``
    (``prompt_values``), its other files loaded on ``target``."""
    spec = family(model_type)
    return spec.pipeline(spec.values_from_model(model, "bench", **values), loader(runner, model, target)).detector


def check(model: Path, model_type: str, values: Mapping[str, Any]) -> None:
    """The family's model built once on onnx:cpu with the prompt ``values`` (its tokenizer or decoder found, its
    prompt taken) and let go: what is missing refused at once, before any worker runs."""
    prompted_detector(load_target("onnx:cpu", folder_model(Path(model))), model, "onnx:cpu", model_type, values)


def _boxes(frame: np.ndarray) -> FrameResult:
    height, width = frame.shape[:2]
    quarters = [(x, y, x + width / 2, y + height / 2) for y in (0, height / 2) for x in (0, width / 2)]
    xyxy = np.array(quarters[:BENCH_BOXES], np.float64) + np.array([width / 16, height / 16, -width / 16, -height / 16])
    return FrameResult.of(frame, boxes=Boxes.of(xyxy, np.ones(len(xyxy)), [0] * len(xyxy), ("box",)))


def prompted_feeds(detector: Any, model_type: str, frame: np.ndarray) -> dict[str, np.ndarray]:
    """What the model file is run on for the frame: the image's inputs with the prompt's (a text prompt), the
    encoder's input (a box prompt's model: the encoder), the vision encoder's (a generating model's)."""
    if family(model_type).generates:
        return {detector.runner.inputs[0].name: detector.preprocess(frame)}
    if family(model_type).text_prompt is not None:
        feeds, _ = detector.preprocess(frame)
        return feeds | detector.prompt.feeds
    return {detector.sam.layout.image.name: detector.sam.preprocess(frame)}


def prompted_pipeline(detector: Any, model_type: str, frame: np.ndarray, frames: int) -> dict[str, Any]:
    """The family's per-frame parts on ``frame``, medians over ``frames`` runs (ms): the text prompt's encoding
    (text_ms) apart from the image's pre-processing, inference and decoding; or the encoder (inference_ms, its
    pre-processing apart) and the decoder with the masks back at the frame's size (postprocess_ms, decoder_ms a
    box) for BENCH_BOXES boxes."""
    spec = family(model_type)
    if spec.generates:  # its stages, the first token and each after apart (a frame's cost is the answer's length)
        return generation_stages(detector, frame, frames)
    height, width = frame.shape[:2]
    times: dict[str, list[float]] = {}

    def timed(name: str, call, *arguments):
        start = time.perf_counter()
        value = call(*arguments)
        times.setdefault(name, []).append(time.perf_counter() - start)
        return value

    if spec.text_prompt is not None:
        for _ in range(frames):
            prompt = timed("text_ms", detector.encode, detector.prompt.phrases)
            feeds, size = timed("preprocess_ms", detector.preprocess, frame)
            outputs = timed("inference_ms", detector.runner.run, feeds | prompt.feeds)
            timed("postprocess_ms", detector.decode, outputs, size, prompt)
        extra = {"prompt": " . ".join(detector.prompt.phrases)}
    else:
        from ..models.sam_detector import frame_key

        boxes = _boxes(frame)
        for _ in range(frames):
            detector.sam.forget()
            timed("preprocess_ms", detector.sam.preprocess, frame)
            timed("encode_ms", detector.sam.encode, frame_key(frame), frame)  # its pre-processing included
            timed("postprocess_ms", spec.boxes_prompt.run, detector, frame, boxes)  # the embedding cached
        extra = {"boxes": len(boxes.boxes)}
    split = {name: 1000 * float(np.median(values)) for name, values in times.items()}
    if "encode_ms" in split:
        split["inference_ms"] = split.pop("encode_ms") - split["preprocess_ms"]
        split["decoder_ms_per_box"] = split["postprocess_ms"] / extra["boxes"]
    per_frame = split["preprocess_ms"] + split["inference_ms"] + split["postprocess_ms"]
    return {"frame_size": f"{width}x{height}", **extra, **split, "fps": 1000.0 / per_frame}


def lines(target: str, pipeline: Mapping[str, Any]) -> list[str]:
    """The table's line on a prompted family's parts apart (``prompted_pipeline``'s), [] for any other."""
    if "first_token_ms" in pipeline:
        return generation_lines(target, pipeline)
    if "text_ms" in pipeline:
        return [f"{target} text side (the prompt '{pipeline['prompt']}' encoded, once per prompt): "
                f"{pipeline['text_ms']:.2f} ms"]  # fmt: skip
    if "decoder_ms_per_box" in pipeline:
        return [
            f"{target} encoder (once a frame) {pipeline['inference_ms']:.2f} ms, decoder with its masks "
            f"{pipeline['decoder_ms_per_box']:.2f} ms a box ({pipeline['boxes']} boxes a frame)"
        ]
    return []
