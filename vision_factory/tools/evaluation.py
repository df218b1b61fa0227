"""How `eval` and `compare` (and quantize, which compares) score each result kind (results/__init__.py's
ResultKind, by its name; a generating family's answers: ``family_evaluation``): the command functions of its tools
module, taking eval's and compare's options by name."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..families.family import Family
from ..results import ResultKind
from . import ball_eval, coco_eval, dense_eval, generation_compare
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


# A family whose answers are generated token by token (Family.generates): compared answer by answer, not scored.
GENERATED = Evaluation(generation_compare.evaluate_command, generation_compare.compare_command)


def family_evaluation(spec: Family) -> Evaluation:
    """A family's Evaluation: GENERATED for one whose answers are generated (Family.generates), else its result
    kind's (``evaluation``)."""
    return GENERATED if spec.generates else evaluation(spec.result)


def evaluation(kind: ResultKind | None) -> Evaluation:
    """The Evaluation of result ``kind``; a kind that none scores is a UsageError."""
    if kind is None or kind.name not in EVALUATIONS:
        raise UsageError(f"no eval or compare scores {kind.name if kind else 'this family'}'s results")
    return EVALUATIONS[kind.name]
