"""The node of a replay (tools/replay.py) and its parameters, checked before anything runs: the node recognised from
its model file where not named and what replay reads of it (``node_spec``), -p values and a parameters file read as
ROS reads them, and the parameters replay sets itself refused naming the option to use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..families.registry import NODE_FAMILIES
from ..parameters import Parameter, Value, checked_values, ros_scalar
from ..results import ResultKind
from ..runtime.backends import BACKENDS
from ..text import shown_path, untrusted
from .commands import UsageError

# Node parameters replay sets itself, and what to use instead: given with -p or in a parameters file, they are
# refused before anything runs (another value would leave replay waiting for answers on topics the node never uses).
OWNED = {
    "cameras": "give each camera with --camera NAME=SOURCE",
    "input_transport": "it follows the bag's images (raw or compressed): choose the image topic with --topic",
    "autostart": "replay starts the node and plays into it once it is active",
}


@dataclass(frozen=True)
class NodeSpec:
    """What replay reads of a family's node (``node_spec``: from its Family, when it runs)."""

    module: str  # run as `python -m module`
    outputs: dict[str, str]  # relative output topic -> message type
    main_output: str  # one message per input frame on this topic
    result: ResultKind  # what it publishes there (results/__init__.py): what replay writes of it and records latched
    parameters: dict[str, str] = field(default_factory=dict)  # replay's own overrides
    # inputs besides the image the bag must hold, fed with each frame (by stamp): relative topic -> message type
    inputs: dict[str, str] = field(default_factory=dict)
    measures: tuple[str, str] = ("", "")  # a map's (kind, unit) on its main output (families/family.py's Output)


# A node that ends its stream after seconds without frames (flush_timeout) gets a short one: the bag ends.
FLUSH_TIMEOUT = {"flush_timeout": "0.5"}


def node_spec(node: str, values: Mapping[str, Any] | None = None) -> NodeSpec:
    """The ``node`` family's node as replay runs it (any family with a node, registered ones too): this package's
    ONNX Runtime node, its main output (with the node's parameter ``values``, where known, the one they and its
    model give: Family.main_output), and the inputs it always pairs with its images (its input table: the track
    node's other node's detections), which replay plays from the bag, each with its image's stamp."""
    from ..generator.package import node_module_name  # what a package's node is named (jinja2, onnx: not at import)

    if node not in NODE_FAMILIES:
        raise ValueError(f"unknown node '{node}': choose one of {', '.join(NODE_FAMILIES)}")
    spec = NODE_FAMILIES[node]
    main = spec.main_output(values, "replay") if values else spec.output_topic
    measures = next((output.measures for output in spec.node.outputs if output.topic == main), ())
    return NodeSpec(
        f"vision_factory.{node_module_name(spec, BACKENDS['onnx'])}",
        {main: spec.result.message},
        main,
        spec.result,
        FLUSH_TIMEOUT if any(parameter.name in FLUSH_TIMEOUT for parameter in spec.parameters) else {},
        {topic.topic: topic.message for topic in spec.node.inputs[1:] if not topic.when},
        measures or ("", ""),
    )


def node_parameters(node: str) -> tuple[Parameter, ...]:
    """Every parameter a ``node`` of this family can have: its own, and each backend's (an --executable may run
    any backend)."""
    spec = NODE_FAMILIES[node]
    return (*spec.node_parameters, *(parameter for backend in BACKENDS.values() for parameter in backend.parameters))


def checked_overrides(node: str, params: dict[str, str]) -> dict[str, Value]:
    """``-p`` values (NAME: TEXT) for a ``node`` read as ROS reads them and checked against its parameters before
    anything runs: a name the node does not have (ROS would ignore it silently; the closest is named) or a value
    not valid for its parameter is a UsageError naming it."""
    try:
        return checked_values(node_parameters(node), params, f"the {node} node")
    except ValueError as exc:
        raise UsageError(str(exc), "--param") from None


def params_file_values(params_file: str | Path | None) -> dict[str, Any]:
    """Every ``ros__parameters`` value of a ROS 2 parameters YAML (any node's section), by name."""
    if params_file is None:
        return {}
    import yaml

    try:
        document = yaml.safe_load(Path(params_file).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read {shown_path(params_file)}: {untrusted(exc, 400)}", "--params-file") from None
    values: dict[str, Any] = {}
    for section in document.values() if isinstance(document, dict) else ():
        if isinstance(section, dict) and isinstance(section.get("ros__parameters"), dict):
            values.update(section["ros__parameters"])
    return values


def replay_node(node: str | None, params: Mapping[str, str], params_file: str | Path | None = None) -> str:
    """The node replay starts: ``node`` (--node) where given, else the family its model file is recognised as
    (model_path from ``params``, -p texts, or the parameters file), as verify's model; a ``node`` the model file
    contradicts is refused naming both, a file no family's rule recognises names --node (a UsageError)."""
    from ..models.model_file import summarize
    from ..models.recognition import FAMILY_NAMES, fits, mismatch, recognise

    if node is not None and node not in NODE_FAMILIES:
        raise UsageError(f"unknown node '{untrusted(node, 100)}': choose one of {', '.join(NODE_FAMILIES)}", "--node")
    model = params["model_path"] if "model_path" in params else params_file_values(params_file).get("model_path")
    model = ros_scalar(model) if isinstance(model, str) and "model_path" in params else model
    if not model or (node is not None and node not in FAMILY_NAMES):  # the track node's model is its reid_model_path
        if node is None:
            raise UsageError(
                "replay needs the model (--model FILE, or -p model_path:=FILE) to recognise its node, or the node: "
                f"--node {' | '.join(NODE_FAMILIES)}",
                "--node",
            )
        return node
    try:
        summary = summarize(str(model))
    except ValueError as exc:
        raise UsageError(str(exc), "--model") from None
    recognition = recognise(summary)
    shown = shown_path(str(model))
    if node is not None:
        if recognition.family != "unknown" and not fits(recognition, node):
            raise UsageError(mismatch(recognition, node, summary.outputs, f"model_path {shown}", f"--node {node}"))
        return node  # an unrecognised file: the node's own checks say what does not fit
    if recognition.family in NODE_FAMILIES:
        return recognition.family
    what = (
        f"it looks like {'an' if recognition.family[0] in 'aeiou' else 'a'} {recognition.family} model, which no node "
        "runs as its model_path"
        if recognition.family != "unknown"
        else untrusted(recognition.reason, 400)
    )
    raise UsageError(f"{shown}: {what}; name the node to start with --node ({', '.join(NODE_FAMILIES)})", "--model")


def refuse_owned(node: str, given: Mapping[str, Any], params_file: str | Path | None = None) -> None:
    """A node parameter replay sets itself (OWNED) given another value than its default with -p (``given``, read as
    ROS reads them: checked_overrides) or in ``params_file`` is a UsageError naming what to use instead (a node's
    config/*.yaml lists each at its default: that is no conflict)."""
    defaults = {parameter.name: parameter.default for parameter in node_parameters(node)}
    file_values = params_file_values(params_file)
    for name, instead in OWNED.items():
        for option, values in (("--param", given), ("--params-file", file_values)):
            value = values.get(name, defaults.get(name))
            value = value.strip() if isinstance(value, str) else value
            if name in values and value != defaults.get(name) and value not in ("", "[]", [], None):
                raise UsageError(f"replay sets {name} itself ({option} {name} refused): {instead}", option)
