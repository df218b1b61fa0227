"""The model families, in one list: everything that keeps a table of families reads it (CLI choices, the
generator, eval, bench, replay, predict). Adding a family adds its module's FAMILY here.

Nodes do not import this module (it imports every family): a node gets its own family's module.
"""

from __future__ import annotations

from ..parameters import Parameter
from . import fasterrcnn, reid, rtmpose, track, tracknet, yolo, yolo_pose
from .family import Family

FAMILIES: dict[str, Family] = {
    spec.name: spec
    for spec in (
        tracknet.FAMILY,
        yolo.FAMILY,
        yolo_pose.FAMILY,
        fasterrcnn.FAMILY,
        rtmpose.FAMILY,
        reid.FAMILY,
        track.FAMILY,
    )
}
# Families with a node of their own: what generate, replay, launch files and the per-frame tools (bench, eval,
# compare) take. reid has none: its embedder serves the tracker; track's node tracks another node's detections.
NODE_FAMILIES: dict[str, Family] = {name: spec for name, spec in FAMILIES.items() if spec.has_node}
# Families whose node runs a Detector (vision_msgs detections, `predict`), and those that run from one model file.
DETECTORS = tuple(name for name, spec in NODE_FAMILIES.items() if spec.make is not None)
SINGLE_MODEL = tuple(name for name, spec in NODE_FAMILIES.items() if spec.single_model)
SINGLE_MODEL_DETECTORS = tuple(name for name in DETECTORS if name in SINGLE_MODEL)


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
