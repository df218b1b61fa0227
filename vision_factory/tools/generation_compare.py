"""`compare` of a family whose answers are generated token by token (Family.generates: Florence-2): two (model,
target) configurations over the same images with the same task, their answers matched frame by frame: the token
ids (where the first differs), the text, the boxes. A generated answer is exact or it is another answer (one token
apart, the rest of the sequence follows another path), so what is counted is the frames whose answers differ, not a
distance; the boxes of answers whose labels agree are compared in pixels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..results.frame import FrameResult
from .commands import CommandReport, UsageError
from .compare import describe_comparison, save_comparison
from .predict import detector_from_options, predict
from .sources import source_files

SHOWN_DIFFERENCES = 20  # frames whose differing answers the saved report shows


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The index of the first token where ``a`` and ``b`` differ (one ending earlier: its length); None: equal."""
    if list(a) == list(b):
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _boxes(found: FrameResult) -> tuple[list[str], np.ndarray]:
    """The answer's boxes: their labels (phrases) and xyxy (none for a text task)."""
    if found.boxes is None:
        return [], np.zeros((0, 4))
    return list(found.boxes.labels), found.boxes.xyxy


def answer_differences(runs: Sequence[Sequence[tuple[str, FrameResult]]]) -> dict[str, Any]:
    """Two configurations' answers (each a list of (image, FrameResult), the same images in order) matched: the
    frames whose token ids, texts or boxes differ, the first differing token over all frames (-1: none), the largest
    box coordinate difference (pixels) between answers whose labels agree, and the first SHOWN_DIFFERENCES frames
    that differ, each with both texts."""
    outputs = {"frames": 0, "tokens_differ": 0, "texts_differ": 0, "boxes_differ": 0}
    first, largest, shown = None, 0.0, []
    for (image, a), (_, b) in zip(*runs, strict=True):
        outputs["frames"] += 1
        at = first_difference(a.text.tokens if a.text else (), b.text.tokens if b.text else ())
        texts = [found.text.text if found.text else "" for found in (a, b)]
        (labels_a, xyxy_a), (labels_b, xyxy_b) = _boxes(a), _boxes(b)
        same_labels = labels_a == labels_b
        if same_labels and len(xyxy_a):
            largest = max(largest, float(np.abs(xyxy_a - xyxy_b).max()))
        boxes_differ = not same_labels or not np.array_equal(xyxy_a, xyxy_b)
        outputs["tokens_differ"] += at is not None
        outputs["texts_differ"] += texts[0] != texts[1]
        outputs["boxes_differ"] += boxes_differ
        if at is not None:
            first = at if first is None else min(first, at)
        if (at is not None or texts[0] != texts[1] or boxes_differ) and len(shown) < SHOWN_DIFFERENCES:
            shown.append({"image": image, "first_token": -1 if at is None else at, "a": texts[0], "b": texts[1]})
    outputs["first_differing_token"] = -1 if first is None else first
    outputs["max_box_difference_px"] = largest
    differ = max(outputs["tokens_differ"], outputs["texts_differ"], outputs["boxes_differ"])
    verdict = "the same answers" if not differ else f"answers differ on {differ} of {outputs['frames']} frames"
    return {"outputs": outputs, "verdict": verdict, "differing": shown}


def compare_command(
    model_type: str, configurations: Sequence[tuple[Path, str]], options: Mapping[str, Any]
) -> CommandReport:
    """`compare`: the two configurations over ``source`` (an image, a video or a folder of them) with the task of
    the prompt options (``options["prompts"]``, by flag: --prompt; else the node's), their answers matched
    (``answer_differences``), saved as compare's report."""
    if options.get("source") is None:
        raise UsageError(f"{model_type} needs --source, the images both configurations answer", "--source")
    source = Path(options["source"])
    inputs = source_files(source)
    runs = []
    for model, target in configurations:
        adapter = detector_from_options(model_type, model, target, options.get("prompts") or {})
        runs.append([(found.record["image"], found.result) for found in predict(adapter, inputs)])
    runs_on = [target for _, target in configurations]
    report, path = save_comparison(configurations, runs_on, ("source", source), answer_differences(runs),
                                   options["out_dir"])  # fmt: skip
    return CommandReport(describe_comparison(report, path))


def evaluate_command(model_type: str, options: Mapping[str, Any]) -> CommandReport:
    """`eval`: refused, saying why (a generated answer's phrases are its own, not a data set's categories)."""
    raise UsageError(
        f"eval does not score {model_type}'s answers (its phrases are its own, not a data set's categories): compare "
        "two configurations with `compare --source IMAGES`, or check a node with `verify`",
        "--model-type",
    )
