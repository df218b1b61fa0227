"""`eval` and `compare` of a dense map (results/dense.py): maps scored against truth maps (AbsRel, RMSE, delta1),
two configurations' maps over the same images compared (their largest and mean difference)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..files import output_folder, write_text
from ..results.dense import differences, evaluate_maps
from .commands import CommandReport, UsageError
from .compare import describe_comparison, save_comparison
from .predict import detector_from_options, predict
from .sources import source_files


def evaluate_command(model_type: str, options: Mapping[str, Any]) -> CommandReport:
    """`eval`: the maps in folder ``predictions`` (as predict --save writes them) against the truth maps of the same
    names in folder ``data``: AbsRel, RMSE and delta1, written as OUT/eval.json."""
    if options["predictions"] is None:
        raise UsageError(f"{model_type} is scored from its maps: give --predictions FOLDER (predict --save)")
    metrics = evaluate_maps(Path(options["predictions"]), Path(options["data"]))
    path = output_folder(options["out_dir"], option="--out") / "eval.json"
    write_text(path, json.dumps({"model_type": model_type, **metrics}, indent=2) + "\n")
    text = f"AbsRel {metrics['AbsRel']:.4f}, RMSE {metrics['RMSE']:.4f}, delta1 {metrics['delta1']:.4f}"
    text += (
        f" (scale-and-shift aligned: AbsRel {metrics['aligned_AbsRel']:.4f}, RMSE {metrics['aligned_RMSE']:.4f}, "
        f"delta1 {metrics['aligned_delta1']:.4f})\n"
    )
    return CommandReport(text, {"eval": path})


def compare_command(
    model_type: str, configurations: Sequence[tuple[Path, str]], options: Mapping[str, Any]
) -> CommandReport:
    """`compare`: two (model, target) configurations over ``source`` (an image, a video or a folder of images): the
    largest and mean difference of their maps, saved as compare's report; ``options["options"]``: predict's options
    by flag (quantize's --depth-kind)."""
    source = options["source"] if options.get("source") is not None else options.get("data")  # quantize: --data
    if source is None:
        raise UsageError(f"{model_type} needs --source, the images both configurations run over")
    source = Path(source)
    inputs = source_files(source)
    runs = []
    for model, target in configurations:
        adapter = detector_from_options(model_type, model, target, options.get("options") or {})
        runs.append([found.result.dense for found in predict(adapter, inputs)])
    found = [differences(a, b) for a, b in zip(*runs, strict=True)]
    outputs = {name: max((one[name] for one in found), default=0.0) for name in ("max_difference", "valid_in_one")}
    for name in ("mean_difference", "relative_difference"):
        outputs[name] = float(np.mean([one[name] for one in found])) if found else 0.0
    runs_on = [target for _, target in configurations]
    report, path = save_comparison(
        configurations, runs_on, ("source", source), {"outputs": outputs}, options["out_dir"]
    )
    return CommandReport(describe_comparison(report, path))
