"""How `eval` and `compare` (and quantize, which compares) score each result kind (results/__init__.py's
ResultKind, by its name): the command functions of its tools module, taking eval's and compare's options by name."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..results import ResultKind
from . import ball_eval, coco_eval, dense_eval
from .commands import CommandReport, UsageError


@dataclass(frozen=True)
class Evaluation:
    """A result kind's `eval` (model_type, options) and `compare` (model_type, configurations, options)."""

    evaluate: Callable[[str, Mapping[str, Any]], CommandReport]
    compare: Callable[[str, Sequence[tuple[Path, str]], Mapping[str, Any]], CommandReport]


EVALUATIONS = {
    "detections": Evaluation(coco_eval.evaluate_command, coco_eval.compare_command),
    "ball": Evaluation(ball_eval.evaluate_command, ball_eval.compare_command),
    "dense": Evaluation(dense_eval.evaluate_command, dense_eval.compare_command),
}


def evaluation(kind: ResultKind | None) -> Evaluation:
    """The Evaluation of result ``kind``; a kind that none scores is a UsageError."""
    if kind is None or kind.name not in EVALUATIONS:
        raise UsageError(f"no eval or compare scores {kind.name if kind else 'this family'}'s results")
    return EVALUATIONS[kind.name]
