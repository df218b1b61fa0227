"""The model families, in one list: everything that keeps a table of families reads it (CLI choices, the
generator, eval, bench, replay, predict). Adding a family adds its module's FAMILY here, or, for a family defined
elsewhere (a plug-in, a test), ``register(FAMILY)`` at run time.

Nodes do not import this module (it imports every family): a node gets its own family's module.
"""

from __future__ import annotations

from ..models import recognition
from ..parameters import Parameter
from ..results import DENSE_MAP
from . import (
    depth,
    detr,
    fasterrcnn,
    florence2,
    open_vocab,
    reid,
    rtmpose,
    sam,
    track,
    tracknet,
    yolo,
    yolo_cls,
    yolo_pose,
)
from .family import Family

FAMILIES: dict[str, Family] = {
    spec.name: spec
    for spec in (
        tracknet.FAMILY,
        yolo.FAMILY,
        yolo_pose.FAMILY,
        fasterrcnn.FAMILY,
        detr.FAMILY,
        rtmpose.FAMILY,
        reid.FAMILY,
        track.FAMILY,
        depth.FAMILY,
        open_vocab.FAMILY,
        sam.FAMILY,
        yolo_cls.FAMILY,
        florence2.FAMILY,
    )
}
# Families with a node of their own: what generate, replay, launch files and the per-frame tools (bench, eval,
# compare) take. reid has none: its embedder serves the tracker; track's node tracks another node's detections.
NODE_FAMILIES: dict[str, Family] = {name: spec for name, spec in FAMILIES.items() if spec.has_node}
# Families whose node runs a Detector (vision_msgs detections, `predict`), and those that run from one model file.
DETECTORS = tuple(name for name, spec in NODE_FAMILIES.items() if spec.make is not None)
SINGLE_MODEL = tuple(name for name, spec in NODE_FAMILIES.items() if spec.single_model)
SINGLE_MODEL_DETECTORS = tuple(name for name in DETECTORS if name in SINGLE_MODEL)
# Families whose node publishes a dense map (results/dense.py: depth), which `predict` also takes.
MAPS = tuple(name for name, spec in NODE_FAMILIES.items() if spec.result is DENSE_MAP)


def family(name: str) -> Family:
    if name not in FAMILIES:
        raise ValueError(
            f"unknown model family '{name}': choose one of {', '.join(FAMILIES)} (`vision-factory models` lists them)"
        )
    return FAMILIES[name]


def node_parameter(name: str) -> Parameter:
    """The node parameter ``name``, of whichever nodes have it (a tool option meaning it takes its default and
    description); an error when none has it, or when nodes give it different meanings or defaults."""
    found = {parameter for spec in NODE_FAMILIES.values() for parameter in spec.parameters if parameter.name == name}
    if len(found) != 1:
        raise ValueError(f"{len(found)} different node parameters are named {name}: name the family's")
    return found.pop()


def register(spec: Family) -> Family:
    """Adds ``spec``, a family defined outside this package, to FAMILIES (NODE_FAMILIES when it has a node) and
    its rule to models/recognition.py, so that the tools that look a family up when they run (predict's
    detector_from_options, recognition, eval and compare by its result kind) take it. The CLI's choices are made
    when vision_factory.cli is imported: register before that. A name already taken is a ValueError."""
    if spec.name in FAMILIES:
        raise ValueError(f"model family '{spec.name}' is already registered")
    if spec.rule is not None:
        recognition.add_rule(spec.rule)
    FAMILIES[spec.name] = spec
    if spec.has_node:
        NODE_FAMILIES[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Removes a family ``register`` added (and its rule)."""
    spec = FAMILIES.pop(name)
    NODE_FAMILIES.pop(name, None)
    if spec.rule is not None:
        recognition.remove_rule(spec.rule.family)
