"""How a node command starts: its node module imported, or, where a ROS 2 Python package cannot be imported (a
pip-only machine before `vision-factory install-vision-msgs`, a shell without the distribution sourced), a message
naming it and the fix instead of a traceback.

No ROS import here: this runs before ROS is found. Every rendered ``<family>_<backend>_node.py`` (this package's and
a generated package's, which carries this module) calls ``node_run``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

# Top-level modules of ROS 2's Python packages: a missing one of these is a missing ROS 2 package, not a bug.
ROS_PREFIXES = ("rclpy", "rcl_", "rmw", "rosidl")
ROS_SUFFIXES = ("_msgs", "_interfaces")


def missing_ros(name: str, command: str, package: str) -> str:
    """What to do when the ROS 2 Python package ``name`` cannot be imported by ``command`` of ``package``."""
    if name == "vision_msgs":
        how = (
            "vision_msgs has no PyPI wheel: build it into this environment once with `vision-factory "
            "install-vision-msgs` (where vision_factory is not installed, first, in the folder of "
            f"{package}: pip install '.[ros]' '/path/to/vision_factory[ros]'; its README.md, 'Without a ROS "
            "distribution')"
        )
    else:
        how = f"pip install '.[ros]' in the folder of {package} installs ROS 2 from PyPI wheels"
    return (
        f"{command}: the ROS 2 Python package {name} is not installed. With a ROS 2 distribution: source its "
        f"setup.bash and your workspace's install/setup.bash. Without one: {how}."
    )


HELP_FLAGS = ("-h", "--help")


def wants_help(args: Sequence[str]) -> bool:
    """Whether the command line asks for help: -h or --help before ``--ros-args`` (ROS's own arguments after it)."""
    given = list(args)
    ours = given[: given.index("--ros-args")] if "--ros-args" in given else given
    return any(arg in HELP_FLAGS for arg in ours)


def _default(parameter: Any) -> str:
    if parameter.required:
        return "required"
    if isinstance(parameter.default, bool):
        return "true" if parameter.default else "false"
    return repr(parameter.default) if isinstance(parameter.default, str) else str(parameter.default)


def node_help(command: str, family: Any, runner_class: Any) -> str:
    """What ``command --help`` prints: the node's summary, how to start it, its topics and prompts, and every
    parameter with its default, valid values and when a new value applies (live, at configure, at start), from the
    tables the node declares them from (the family's and the runner's)."""
    parameters = (*family.node_parameters, *runner_class.PARAMETERS)
    return help_text(command, family.summary, family.inputs, family.prompt_lines, family.outputs, parameters)


def module_help(command: str, node_module: Any) -> str:
    """``node_help`` of a node without a model (detect_3d_node): its summary the module docstring's first line, its
    topics and parameters the module's ``INPUTS``, ``OUTPUTS`` and ``PARAMETERS`` tables."""
    summary = (node_module.__doc__ or command).strip().splitlines()[0].partition(": ")[2] or command
    inputs = tuple(topic.description for topic in getattr(node_module, "INPUTS", ()))
    outputs = tuple(output.description for output in getattr(node_module, "OUTPUTS", ()))
    return help_text(command, summary, inputs, (), outputs, node_module.PARAMETERS)


def help_text(
    command: str,
    summary: str,
    inputs: Sequence[str],
    prompts: Sequence[str],
    outputs: Sequence[str],
    parameters: Sequence[Any],
) -> str:
    """The help of a node command from its described topics and prompts and its parameter table."""
    required = " ".join(f"-p {p.name}:=..." for p in parameters if p.required)
    remap = next((topic.split(" ")[0] for topic in inputs), "image")
    remap = "image:=/camera/image_raw" if remap == "image" else f"{remap}:=/your/{remap}"
    lines = [
        f"{command}: {summary}",
        "",
        f"usage: {command} --ros-args {required} [-p NAME:=VALUE ...] [-r {remap}]".replace("  ", " "),
        "",
        "subscribes:",
        *(f"  {topic}" for topic in inputs),
        *(("prompts:", *(f"  {prompt}" for prompt in prompts)) if prompts else ()),
        "publishes:",
        *(f"  {topic}" for topic in outputs),
        "parameters (default; valid values; when a value set on a running node applies):",
    ]
    width = max(len(p.name) for p in parameters)
    for parameter in parameters:
        lines.append(f"  {parameter.name:<{width}}  {parameter.description}")
        lines.append(f"  {'':<{width}}  ({_default(parameter)}; {parameter.valid}; {parameter.applies})")
    lines += [
        "",
        "Watch and steer it while it runs: vision-factory topic echo TOPIC, vision-factory param set NODE NAME VALUE,",
        "vision-factory lifecycle get NODE (or ros2 topic / param / lifecycle where ROS 2's CLI is installed).",
    ]
    return "\n".join(lines)


def node_run(module: str, command: str, package: str) -> Callable[..., int]:
    """The ``run(RunnerClass, args, family)`` of the node module ``module`` (absolute), imported now, which prints
    ``node_help`` instead of starting the node when the command line asks for help; a SystemExit with
    ``missing_ros``'s message when a ROS 2 Python package it imports is missing."""
    try:
        node_module = importlib.import_module(module)
    except ModuleNotFoundError as missing:
        name = (missing.name or "").partition(".")[0]
        if not (name.startswith(ROS_PREFIXES) or name.endswith(ROS_SUFFIXES)):
            raise
        raise SystemExit(missing_ros(name, command, package)) from None

    run = node_module.run

    def run_or_help(*call: Any) -> int:
        """``run(runner_class, args, family)`` of a model's node, ``run(args)`` of a node without a model."""
        args = call[1] if len(call) == 3 else (call[0] if call else None)
        if wants_help(sys.argv[1:] if args is None else args):
            print(node_help(command, call[2], call[0]) if len(call) == 3 else module_help(command, node_module))
            return 0
        return run(*call)

    return run_or_help
