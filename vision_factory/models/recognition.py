"""Which model family a model belongs to, from its interface alone: one recognise() that asks every family's rule.

``vision-factory inspect`` prints what these rules find in an ONNX file (models/model_file.py), and every
node checks its models with them at start-up, on whatever backend loaded them. Each family's rule lives
beside its adapter, in the light module of facts the two share (tracknet_interface.py, yolo_interface.py,
fasterrcnn_interface.py, rtmpose_interface.py, reid_interface.py, depth_interface.py, open_vocab_interface.py): a
generated package carries every rule, to name the family a wrong model looks like, but only its own family's adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..runtime.runner import Runner, TensorInfo, tensor_text, tensors_text
from ..text import untrusted
from .depth_interface import DEPTH
from .detr_interface import DETR
from .fasterrcnn_interface import FASTERRCNN
from .florence2_interface import FLORENCE2
from .interface import Interface, ModelInterface, Recognition, Rule, end2end
from .open_vocab_interface import OPEN_VOCAB
from .reid_interface import REID
from .rtmpose_interface import RTMPOSE
from .sam_interface import SAM
from .tracknet_interface import INPAINTNET, TRACKNET
from .ultralytics import unsupported_task
from .yolo_interface import YOLO, YOLO_CLS, YOLO_POSE

__all__ = ["FAMILY_NAMES", "RULES", "Recognition", "WrongFamily", "load_checked", "recognise", "require_family"]

# Tried in this order; the first that matches wins (a pose model also fits the detector's rule; a DETR export's
# query rows would read as a transposed YOLO head, and a deploy export's labels, boxes, scores as fasterrcnn's; a
# fixed-size depth export's [1, H, W] map would fit YOLO's rows, but depth asks for its output's name or metadata;
# an open-vocabulary export's logits and pred_boxes are a DETR head's beside its text inputs; Florence-2's vision
# encoder's image_features [1, 577, D] would read as YOLO rows).
RULES: tuple[Rule, ...] = (
    TRACKNET,
    INPAINTNET,
    DEPTH,
    FLORENCE2,
    OPEN_VOCAB,
    DETR,
    YOLO_POSE,
    YOLO,
    YOLO_CLS,
    FASTERRCNN,
    RTMPOSE,
    REID,
    SAM,
)
FAMILY_NAMES = tuple(rule.family for rule in RULES)
_NEEDS = {rule.family: rule.needs for rule in RULES}


def add_rule(rule: Rule) -> None:
    """Adds a family's rule (families/registry.py's register), tried after those above; a family named twice is a
    ValueError."""
    global RULES, FAMILY_NAMES
    if rule.family in _NEEDS:
        raise ValueError(f"a rule for model family '{rule.family}' is already known")
    RULES, FAMILY_NAMES = (*RULES, rule), (*FAMILY_NAMES, rule.family)
    _NEEDS[rule.family] = rule.needs


def remove_rule(family: str) -> None:
    """Forgets a rule ``add_rule`` added (families/registry.py's unregister)."""
    global RULES, FAMILY_NAMES
    RULES = tuple(rule for rule in RULES if rule.family != family)
    FAMILY_NAMES = tuple(rule.family for rule in RULES)
    _NEEDS.pop(family, None)


def recognise(model: ModelInterface) -> Recognition:
    """The model family ``model`` belongs to; the first rule that matches wins."""
    interface = Interface.of(model)
    for rule in RULES:
        recognition = rule.recognise(interface)
        if recognition is not None:
            return recognition
    return _unknown(interface)


class WrongFamily(ValueError):
    """A model that looks like another family than the one it is given for."""


def fits(recognition: Recognition, family: str) -> bool:
    """Whether a model recognised so can be used as ``family``."""
    return family == recognition.family or family in recognition.also


def needs(family: str) -> str:
    """What a ``family`` model looks like, for errors."""
    if family not in _NEEDS:
        raise ValueError(f"unknown model family '{family}': choose one of {', '.join(FAMILY_NAMES)}")
    return _NEEDS[family]


def mismatch(recognition: Recognition, family: str, outputs: Sequence[TensorInfo], source: str, user: str) -> str:
    """Why a model recognised so is not a ``family`` model: what it looks like, its outputs, and what ``user`` needs.

    ``source`` names the model (e.g. "model_path x.onnx"), ``user`` what takes it (e.g. "tracknet_node").
    """
    seen = untrusted(", ".join(map(tensor_text, outputs)) or "none")
    found = recognition.family
    article = "an" if found in ("inpaintnet", "rtmpose", "unknown") else "a"  # as they are said
    return (
        f"{source} looks like {article} {found} model (output{'s' if len(outputs) != 1 else ''} {seen}); "
        f"{user} needs {needs(family)}. What decided it: {untrusted(recognition.reason, 400)}"
    )


def load_checked(load_runner: Callable[[str], Runner], path: str, family: str, parameter: str, user: str) -> Runner:
    """``load_runner(path)``, refused (WrongFamily) when it looks like another family; ``parameter`` names the path."""
    runner = load_runner(path)
    require_family(runner, family, f"{parameter} {untrusted(path)}", user)
    return runner


def require_family(model: ModelInterface, family: str, source: str, user: str) -> Recognition:
    """The recognition of ``model``; WrongFamily when it looks like another known family than ``family``.

    A model no rule recognises passes: the adapter's own checks then say precisely what does not fit; but an
    Ultralytics export of a task no family runs (``unsupported_task``) is refused, with the line every entry point
    gives.
    Nodes call this once a model is loaded, before the adapter checks its shapes, so that a model of
    another family is named as such rather than reported as a puzzling shape.
    """
    needs(family)
    recognition = recognise(model)
    unsupported = unsupported_task(model.metadata) if recognition.family == "unknown" else None
    if unsupported:  # an Ultralytics export of a task no family runs: said so, as inspect and generate say it
        raise WrongFamily(f"{source}: {unsupported}")
    if recognition.family != "unknown" and not fits(recognition, family):
        raise WrongFamily(mismatch(recognition, family, model.outputs, source, user))
    return recognition


def _unknown(model: Interface) -> Recognition:
    inputs, outputs = tensors_text(model.inputs), tensors_text(model.outputs)
    reason = f"no known family matches inputs {inputs} and outputs {outputs}"
    unsupported = unsupported_task(model.metadata)
    if unsupported:
        reason += f" ({unsupported})"
    elif end2end(model.metadata):
        reason += (
            " (Ultralytics exported it end-to-end, but not as one output [1, N, 6 (+ keypoints)] of rows, nor as rows "
            "[1, N, 6 + M] and the mask prototypes [1, M, H/4, W/4])"
        )
    return Recognition("unknown", reason, {})
