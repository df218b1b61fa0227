"""quantize's calibration: the input tensors the family's node gives its model, recorded as the node's pipeline
(families/pipeline.py), or its detector as `predict` builds it, runs on the calibration frames (letterbox for YOLO,
TrackNet windows with the background median for TrackNet, crops of the person detector's boxes for RTMPose and for
re-identification embedders). One reader serves every family; no pre-processing is written twice."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from ..families.registry import family
from ..progress import Progress, counted
from ..runtime.backends import load_target
from ..runtime.runner import Runner
from ..text import shown_path
from .commands import UsageError
from .sources import read_image, source_frames

PERSON_DETECTOR = "yolo"  # the family of the --detector model finding people
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
REFERENCE = "onnx:cpu"  # where the source model runs: for its calibration, and against the quantized one


class RecordingRunner:
    """A runner that runs as ``runner`` does and keeps a copy of each feed (at most ``keep``)."""

    def __init__(self, runner: Runner, keep: int):
        self.runner, self.keep, self.feeds = runner, keep, []
        self.backend = runner.backend
        self.inputs, self.outputs, self.metadata = runner.inputs, runner.outputs, runner.metadata

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        if len(self.feeds) < self.keep:
            self.feeds.append({name: np.array(value, copy=True) for name, value in feeds.items()})
        return self.runner.run(feeds)

    def describe(self) -> str:
        return self.runner.describe()


def calibration_frames(source: Path, count: int | None, option: str = "--calibration") -> Iterator[np.ndarray]:
    """At most ``count`` (None: all) BGR frames of ``source``: a folder of images (in name order), a video or a
    rosbag2; ``option`` names it in errors."""
    source = Path(source)
    if not source.exists():
        what = option.lstrip("-")
        raise UsageError(
            f"{what} source not found: {shown_path(source)}; give a folder of images, a video or a rosbag2", option
        )
    if source.is_dir() and not _is_bag(source):
        images = sorted(path for path in source.iterdir() if path.suffix.lower() in IMAGE_SUFFIXES)
        if not images:
            raise UsageError(
                f"{shown_path(source)} holds no images ({', '.join(IMAGE_SUFFIXES)}) and is no rosbag2 (no "
                "metadata.yaml)",
                option,
            )
        frames = (read_image(path) for path in images)
        frames = (frame for frame in frames if frame is not None)
    elif source.is_file() and source.suffix.lower() in IMAGE_SUFFIXES:
        frames = iter([read_image(source)])
    else:
        frames = source_frames(source)
    return islice(frames, count)


def _is_bag(folder: Path) -> bool:
    return (folder / "metadata.yaml").is_file() or any(folder.glob("*.mcap")) or any(folder.glob("*.db3"))


def calibration_inputs(
    model_type: str,
    model: Path,
    source: Path,
    frames: int,
    options: Mapping[str, Any] | None = None,
    detector_model: Path | None = None,
    progress: Progress | None = None,
    data: Path | None = None,
) -> tuple[list[dict[str, np.ndarray]], int]:
    """The feeds the ``model_type`` node gives ``model`` for the first ``frames`` frames of ``source``, and the
    frames read: the family is built as the node builds it (detectors as `predict` builds them, with
    ``options``; reid as the tracker builds its embedder, on the boxes ``detector_model`` finds), on ONNX
    Runtime, with ``model`` on a RecordingRunner; each frame goes through it. ``progress`` (progress.py): the
    frames run, of ``frames``. A text-prompted family (open_vocab) is prompted as its accuracy check over the COCO
    data set ``data`` prompts it (``calibration_prompt``)."""
    if frames < 1:
        raise UsageError(f"--frames must be at least 1, got {frames}", "--frames")
    options = calibration_prompt(model_type, options or {}, data)
    calibration = calibration_frames(source, frames)  # checks the source before the models load
    calibration = counted(calibration, progress, "quantize: calibration frames", frames)
    recorders: list[RecordingRunner] = []

    def load(path) -> Runner:
        runner = load_target(REFERENCE, Path(path))
        if Path(path).resolve() != Path(model).resolve():
            return runner  # another model of the pipeline (rtmpose's person detector, InpaintNet)
        recorders.append(RecordingRunner(runner, keep=frames * 64))
        return recorders[-1]

    from .predict import detector_from_options

    spec = family(model_type)
    if spec.result is None:  # no result of its own: an embedder of people's crops, as the tracker builds it (reid)
        people = detector_from_options(PERSON_DETECTOR, detector_model, REFERENCE, options or {})
        embedder = spec.build(spec.values_from_model(model, "quantize"), load)
        read = sum(1 for frame in calibration if embedder.embed(frame, people.detect(frame).boxes.xyxy) is not None)
    elif spec.result.streamed:  # a stream (tracknet): the node's pipeline, of the values its model file records
        stream = spec.pipeline(spec.values_from_model(model, "quantize"), load)
        read = sum(1 for index, frame in enumerate(calibration) if stream.push(frame, index) is not None)
        stream.flush()
    elif spec.boxes_prompt is not None and not spec.runs_on:  # prompted by boxes (sam): the model is its encoder
        from .predict import prompted_values

        adapter = spec.build(prompted_values(model_type, model, options or {}), load)  # no prompt: the image alone
        read = sum(1 for frame in calibration if adapter.detect(frame) is not None)
    else:  # a detector (or a dense model), as `predict` builds it from ``options``, run as predict runs it
        adapter = detector_from_options(model_type, model, REFERENCE, options or {}, detector_model, load=load)
        read = sum(1 for frame in calibration if adapter(frame) is not None)
    feeds = [feed for recorder in recorders for feed in recorder.feeds]
    if not feeds:
        raise ValueError(
            f"no calibration input: {read} frames of {shown_path(source)} gave the {model_type} model nothing to run "
            "(tracknet: more frames than the median warm-up and seq_len; rtmpose, reid: frames with people); give more "
            "--frames or another --calibration source"
        )
    return feeds, read


def with_companions(model_type: str, model: Path, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with the files ``model`` works with, so that the quantized model, written elsewhere, is calibrated
    and compared with the same ones, kept as they are: --decoder for a family with a decoder (sam: ``with_decoder``),
    --tokenizer and --text-encoder for one that reads a tokenizer (open_vocab: ``with_text_files``); ``model``
    checked to be of the family."""
    if any(parameter.name == "decoder_path" for parameter in family(model_type).parameters):
        return with_decoder(model_type, model, options)
    if options.get("--decoder"):
        raise UsageError(f"{model_type} models have no decoder: leave --decoder out", "--decoder")
    from ..models.model_file import require_file_family

    require_file_family(model, model_type, "quantize")
    return with_text_files(model_type, model, options)


def with_decoder(model_type: str, model: Path, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with --decoder (its decoder_path parameter's file): the one given, else the one beside ``model``
    (a UsageError naming --decoder when none is). ``model`` checked to be of the family (an encoder its file alone
    does not name, Meta's, only not of another: its decoder checks it as the family is built)."""
    from ..models.model_file import summarize
    from ..models.recognition import require_family
    from ..models.sam_interface import decoder_beside

    options = dict(options)
    try:
        options["--decoder"] = Path(decoder_beside(str(model), str(options.get("--decoder") or "")))
    except ValueError as exc:
        raise UsageError(str(exc), "--decoder") from None
    require_family(summarize(model), model_type, shown_path(model), "quantize")
    return options


def with_text_files(model_type: str, model: Path, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with --tokenizer (and, for a YOLO-World / YOLOE export taking text embeddings, --text-encoder), for
    a family whose model reads a tokenizer (its tokenizer_path parameter: open_vocab): the one given, else the one
    beside ``model`` as its node finds it (a UsageError naming the option and every path looked at when none is), so
    that the quantized model, written elsewhere, is calibrated and compared with the same files, kept as they are."""
    options = dict(options)
    if not any(parameter.name == "tokenizer_path" for parameter in family(model_type).parameters):
        return options
    from ..families.open_vocab import head, tokenizer_names
    from ..models.model_file import summarize
    from ..models.open_vocab_interface import YOLO_TEXT
    from ..models.tokenizer_file import find_tokenizer
    from ..models.yolo_world import text_encoder_beside

    summary = summarize(model)
    try:
        options["--tokenizer"] = find_tokenizer(model, options.get("--tokenizer"), tokenizer_names(summary))
    except ValueError as exc:
        raise UsageError(str(exc), "--tokenizer") from None
    if head(summary) == YOLO_TEXT:
        try:
            options["--text-encoder"] = Path(text_encoder_beside(model, options.get("--text-encoder")))
        except ValueError as exc:
            raise UsageError(str(exc), "--text-encoder") from None
    return options


def calibration_prompt(model_type: str, options: Mapping[str, Any], data: Path | None) -> dict[str, Any]:
    """``options`` with the text prompt a text-prompted family's model (open_vocab) is calibrated with, the one its
    accuracy check prompts with: --prompt, else the category names of the COCO data set ``data`` (a phrase each, as
    eval prompts: coco_prompts.category_prompt), so that its text inputs are fed that prompt's tokens; a UsageError
    naming --prompt when neither is given. Another family's ``options`` as they are."""
    options = dict(options)
    spec = family(model_type)
    if spec.text_prompt is None or options.get("--prompt"):
        return options
    if data is None:
        raise UsageError(
            f"{model_type} models are calibrated with the prompt their accuracy check uses: give --data (a COCO data "
            "set: its category names) or --prompt, e.g. 'a person . a forklift'",
            "--prompt",
        )
    from .coco_eval import coco_truth
    from .coco_prompts import category_prompt

    truth, path = coco_truth(data, spec.result.iou_type)
    options["--prompt"] = category_prompt(truth["categories"], path)
    return options
