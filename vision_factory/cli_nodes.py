"""vision-factory node, topic, param and lifecycle: watching and steering running nodes with the verbs ``ros2`` has,
on rclpy alone (the pip route has no ros2cli). Option tables and calls into tools/topics.py, tools/params.py and
tools/lifecycle.py; cli.py adds these groups (COMMANDS) to its own."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .cli_support import FOLDER, option, options, reported
from .cli_support import echo as _echo
from .tools.message_lines import TRUNCATE_LENGTH

# The defaults of these commands (the tools take them as arguments: this module imports no rclpy, which the other
# commands do not need).
DEFAULT_TIMEOUT_S = 10.0  # seconds to wait for a node, topic, service or answer
LIST_SPIN_S = 2.0  # seconds of discovery before node list and topic list answer
HZ_WINDOW = 10000  # messages topic hz computes its rate over, as ros2 topic hz's default
MAX_HZ_WINDOW = 1_000_000  # hz keeps one arrival time per message of its window: bounded memory
TRANSITIONS = ("configure", "activate", "deactivate", "cleanup", "shutdown")  # lifecycle set's, as ros2 lifecycle's


def _out(text: str) -> None:
    """A line on stdout; when its reader has gone (`topic echo ... | head`), the command ends quietly, as a pipe's
    writer does."""
    try:
        _echo(text)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        raise SystemExit(0) from None


def _note(text: str) -> None:
    _echo(text, err=True)


TIMEOUT = option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="seconds to wait for the node or topic to be seen and for each answer",
)
SPIN_TIME = option(
    "--spin-time",
    type=click.FloatRange(min=0),
    default=LIST_SPIN_S,
    show_default=True,
    help="seconds to learn the graph (discovery) before listing",
)
NODE = click.argument("node")


@click.group()
def node() -> None:
    """Running nodes, as `ros2 node` (no ros2cli needed)."""


@node.command("list")
@SPIN_TIME
def node_list(spin_time: float) -> None:
    """The nodes seen on this ROS domain, by full name."""
    from .tools.topics import node_list as run

    with reported():
        for name in run(spin_time):
            _out(name)


@click.group()
def topic() -> None:
    """Watch topics, as `ros2 topic` (no ros2cli needed)."""


@topic.command("list")
@SPIN_TIME
def topic_list(spin_time: float) -> None:
    """Each topic seen with its types, as `ros2 topic list -t`."""
    from .tools.topics import topic_list as run

    with reported():
        for line in run(spin_time):
            _out(line)


@topic.command("echo")
@click.argument("name", metavar="TOPIC")
@options(
    option("--once", is_flag=True, help="print one message, then exit"),
    option("-n", "count", type=click.IntRange(min=1), help="print N messages, then exit  [default: until Ctrl-C]"),
    option("--save", type=FOLDER, help="image topics: write each frame to this folder as NNNNNN.png"),
    option("--fields", is_flag=True, help="print every message field by field, not the summary line"),
    option("--truncate-length", type=click.IntRange(min=1), default=TRUNCATE_LENGTH, show_default=True,
           help="characters of a text and items of an array shown field by field"),
    TIMEOUT,
)  # fmt: skip
def topic_echo(name: str, once: bool, count: int | None, save: Path | None, **given) -> None:
    """Print the messages of TOPIC as they come.

    Reads with the QoS the topic's publishers offer (best effort or transient local when they
    all are), so a camera's best-effort images and a node's latched class map are received.
    Detections, the ball, depth maps, images, point clouds, class maps, diagnostics, 3D
    detections and markers are one summary line each (header stamp and frame first); any other
    type is printed field by field, texts and arrays cut at --truncate-length.

    \b
    Examples:
      vision-factory topic echo /detections
      vision-factory topic echo /labels --once
      vision-factory topic echo /camera/image_raw -n 10 --save frames/
    """
    from .tools.topics import echo

    if once and count:
        raise click.UsageError("--once and -n exclude each other: --once is -n 1")
    with reported():
        echo(name, _out, _note, count=1 if once else count or 0, save=save, **given)


@topic.command("hz")
@click.argument("name", metavar="TOPIC")
@options(
    option("-n", "count", type=click.IntRange(min=2), help="stop after N messages  [default: until Ctrl-C]"),
    option("--window", "-w", type=click.IntRange(min=2, max=MAX_HZ_WINDOW), default=HZ_WINDOW, show_default=True,
           help="messages the rate is computed over (the latest)"),
    TIMEOUT,
)  # fmt: skip
def topic_hz(name: str, count: int | None, **given) -> None:
    """The rate of TOPIC's messages as they arrive here (wall clock), as `ros2 topic hz`:
    average rate and the period's min, max and standard deviation over the window, each second.

    \b
    Example:
      vision-factory topic hz /detections
    """
    from .tools.topics import hz

    with reported():
        hz(name, _out, _note, count=count or 0, **given)


@click.group()
def param() -> None:
    """A running node's parameters, as `ros2 param` (no ros2cli needed).

    NODE is the node's name, with or without its namespace and leading slash (yolo, /yolo,
    /robot/yolo); a name in no namespace that only one node has in some namespace means that node.
    """


@param.command("list")
@NODE
@TIMEOUT
def param_list(node: str, timeout: float) -> None:
    """The parameters NODE has."""
    from .tools.params import list_parameters

    with reported():
        list_parameters(node, _out, timeout)


@param.command("get")
@NODE
@click.argument("name")
@TIMEOUT
def param_get(node: str, name: str, timeout: float) -> None:
    """NODE's parameter NAME: its type and value."""
    from .tools.params import get_parameter

    with reported():
        get_parameter(node, name, _out, timeout)


@param.command("describe")
@NODE
@click.argument("name")
@TIMEOUT
def param_describe(node: str, name: str, timeout: float) -> None:
    """NODE's parameter NAME: its type, description and valid values."""
    from .tools.params import describe_parameter

    with reported():
        describe_parameter(node, name, _out, timeout)


@param.command("set")
@NODE
@click.argument("name")
@click.argument("value")
@TIMEOUT
def param_set(node: str, name: str, value: str, timeout: float) -> None:
    """Set NODE's parameter NAME to VALUE, read as ROS reads -p NAME:=VALUE (0.5 a number, 5 an
    integer, true a boolean, '5' text, [a, b] a list); the node's answer is shown, and a refusal
    with its reason exits 1.

    \b
    Example:
      vision-factory param set /yolo confidence_threshold 0.4
    """
    from .tools.params import set_parameter

    with reported():
        set_parameter(node, name, value, _out, timeout)


@click.group()
def lifecycle() -> None:
    """A managed node's lifecycle, as `ros2 lifecycle` (no ros2cli needed)."""


@lifecycle.command("get")
@NODE
@TIMEOUT
def lifecycle_get(node: str, timeout: float) -> None:
    """NODE's state: unconfigured [1], inactive [2], active [3] or finalized [4]."""
    from .tools.lifecycle import get_state

    with reported():
        get_state(node, _out, timeout)


@lifecycle.command("list")
@NODE
@TIMEOUT
def lifecycle_list(node: str, timeout: float) -> None:
    """The transitions NODE offers in its state."""
    from .tools.lifecycle import list_transitions

    with reported():
        list_transitions(node, _out, timeout)


@lifecycle.command("set")
@NODE
@click.argument("transition", type=click.Choice(TRANSITIONS))
@TIMEOUT
def lifecycle_set(node: str, transition: str, timeout: float) -> None:
    """Trigger TRANSITION on NODE; a failed one exits 1 with the state the node is in and what it
    logged.

    \b
    Example:
      vision-factory lifecycle set /yolo deactivate
    """
    from .tools.lifecycle import set_state

    with reported():
        set_state(node, transition, _out, timeout)


COMMANDS = (node, topic, param, lifecycle)
