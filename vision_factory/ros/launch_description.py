"""What every node's launch file does, in one place: its arguments, their typing, the Fast DDS profile rule, and
which launch_ros action starts the node.

The launch files (launch/*.launch.py here and in generated packages, rendered from templates/package/launch.py.j2)
are a docstring and ``NodeLaunch(FAMILY, Runner, ...).description()``. Everything but ``description`` and the two
actions it runs at launch time is plain Python over the family's and the runner's parameter tables, tested without
ROS (test/test_launch_support.py); launch, launch_ros and ament_index_python are imported only there. Generated
packages carry this module and import it from their own package.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..parameters import CAMERA_TOPIC, Parameter, Value
from ..text import untrusted
from .transport import NODE_PROFILE, PROFILE_VARIABLES, chosen_transport  # in the package's share/<package>/config/

if TYPE_CHECKING:
    from launch import LaunchContext, LaunchDescription

    from ..families.family import Family
    from ..runtime.runner import Runner

PROFILE_VARIABLE = PROFILE_VARIABLES[0]  # FASTDDS_DEFAULT_PROFILES_FILE
AUTOSTART = "autostart"  # the node parameter (and launch argument) that picks the launch_ros action
INTEGER = re.compile(r"[+-]?[0-9]+")
BOOLEANS = {"true": True, "false": False}


class LaunchArgumentError(ValueError):
    """A launch argument's value that its node parameter cannot take; the message names the argument and the fix."""


@dataclass(frozen=True)
class Argument:
    """One launch argument, as ``DeclareLaunchArgument`` takes it and ``--show-args`` lists it."""

    name: str
    default: str | None  # None: required (no default)
    description: str
    value_type: type | None = None  # the type of the node parameter it sets; None: the launch file's own argument


@dataclass(frozen=True)
class NodeStart:
    """The node to start, from the launch configuration's values: its action, parameters and remappings."""

    lifecycle: bool  # autostart:=false: launch_ros's LifecycleNode (follows transitions, takes ChangeState events)
    namespace: str
    params_file: str
    overrides: dict[str, Value]  # the parameter arguments, typed; applied after params_file (the later value wins)
    remappings: list[tuple[str, str]]


def launch_text(value: Value) -> str:
    """A parameter default as launch argument text: booleans as ROS writes them (true, false)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def parameter_arguments(parameters: Iterable[Parameter]) -> list[Argument]:
    """The node parameters that are launch arguments too; a required one has no default."""
    return [
        Argument(p.name, None if p.required else launch_text(p.default), p.description, type(p.default))
        for p in parameters
        if p.launch_argument
    ]


def typed_value(name: str, text: str, value_type: type) -> Value:
    """Launch argument ``name:=text`` as its node parameter's type, so that the node gets that type whatever the
    text looks like (a bare value would be YAML-parsed: a numeric model path would arrive as an int, seq_len:=8.0
    as a double, both refused by the node). Text the type cannot take is a LaunchArgumentError."""
    if value_type is str:
        return text
    shown = f"{name}:={untrusted(text)!r}"
    if value_type is bool:
        if text.lower() in BOOLEANS:
            return BOOLEANS[text.lower()]
        raise LaunchArgumentError(f"{shown} is not a boolean: give {name}:=true or {name}:=false")
    if value_type is int:
        if not INTEGER.fullmatch(text.strip()):
            raise LaunchArgumentError(f"{shown} is not a whole number: give digits, e.g. {name}:=8")
        if len(text.strip()) > 20 or not -(2**63) <= int(text) < 2**63:  # int() of thousands of digits is refused
            raise LaunchArgumentError(f"{shown} is out of a ROS integer's range (64 bits): give a smaller one")
        return int(text)
    if value_type is float:
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if math.isfinite(number):
            return number
        raise LaunchArgumentError(f"{shown} is not a finite number: give one, e.g. {name}:=0.5")
    raise TypeError(f"launch argument {name}: no launch typing for {value_type.__name__}")


def profile_to_export(given: str, default: str, environment: Mapping[str, str]) -> str | None:
    """The FASTDDS_DEFAULT_PROFILES_FILE to set for the node, None to leave the variable as it is: fastdds_profile
    when given; not given (its default), None when a transport was chosen (a profile or builtin-transports variable
    set, the node's own rule: ros/transport.py; decided at launch time, so that a launch file including this one can
    set it first), else the default; '' leaves the variable alone (the node then applies the same default profile
    to itself unless a transport was chosen)."""
    if not given or (given == default and chosen_transport(environment)):
        return None
    return given


@dataclass(frozen=True)
class NodeLaunch:
    """A node's launch file: the family and runner whose parameters it exposes, and the package facts."""

    family: Family
    runner: type[Runner]
    package: str
    executable: str
    config_file: str  # under share/<package>/config/: the params_file default

    @property
    def parameters(self) -> list[Argument]:
        """The parameter arguments: the family node's, then the backend's (the config file's order)."""
        return parameter_arguments((*self.family.node_parameters, *self.runner.PARAMETERS))

    def arguments(self, share: str) -> list[Argument]:
        """Every argument, in --show-args order; ``share``: the package's share directory (for the file defaults)."""
        config = os.path.join(share, "config")
        return [
            *self.parameters,
            Argument("image_topic", CAMERA_TOPIC, "camera topic; compressed input reads <image_topic>/compressed"),
            *(Argument(argument, default, about) for _, argument, default, about in self.family.topic_arguments),
            Argument("namespace", "", "ROS namespace of the node"),
            Argument(
                "params_file", os.path.join(config, self.config_file), "YAML file with the node's other parameters"
            ),
            Argument(
                "fastdds_profile",
                os.path.join(config, NODE_PROFILE),
                "Fast DDS XML profile for the node; not given: the transport chosen in the environment "
                "($FASTDDS_DEFAULT_PROFILES_FILE, $FASTDDS_BUILTIN_TRANSPORTS) when there is one, else this default "
                "(UDP into a large buffer, no shared memory: frames from a camera on Fast DDS defaults or on "
                "fastdds_shm.xml, on this machine or another)",
            ),
        ]

    def node_start(self, values: Mapping[str, str]) -> NodeStart:
        """The node to start given the launch configuration's ``values`` (every argument's, by name): the
        parameter arguments typed (a LaunchArgumentError for one its type cannot take), the image topic and the
        family's other inputs remapped, and the action autostart picks."""
        overrides = {
            argument.name: typed_value(argument.name, values[argument.name], argument.value_type)
            for argument in self.parameters
        }
        image_topic = values["image_topic"]
        remappings = [("image", image_topic), ("image/compressed", f"{image_topic}/compressed")]
        remappings += [(topic, values[argument]) for topic, argument, _, _ in self.family.topic_arguments]
        return NodeStart(
            lifecycle=not overrides[AUTOSTART],
            namespace=values["namespace"],
            params_file=values["params_file"],
            overrides=overrides,
            remappings=remappings,
        )

    def description(self) -> LaunchDescription:
        """The launch description: every argument declared (with the defaults --show-args shows), then, at launch
        time, the Fast DDS profile exported and the node started as ``node_start`` says."""
        from ament_index_python.packages import get_package_share_directory
        from launch import LaunchDescription
        from launch.actions import DeclareLaunchArgument, OpaqueFunction

        arguments = self.arguments(get_package_share_directory(self.package))
        declared = [
            DeclareLaunchArgument(a.name, description=a.description)
            if a.default is None
            else DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
            for a in arguments
        ]
        (profile,) = [a.default for a in arguments if a.name == "fastdds_profile"]
        return LaunchDescription(
            [
                *declared,
                OpaqueFunction(function=_export_profile, args=[profile]),
                OpaqueFunction(function=self._start_node),
            ]
        )

    def _start_node(self, context: LaunchContext) -> list[Any]:
        from launch_ros.actions import LifecycleNode, Node
        from launch_ros.parameter_descriptions import ParameterValue

        start = self.node_start(context.launch_configurations)  # every declared argument's value, by name
        # ParameterValue with the value's own type: launch_ros would YAML-parse a bare string.
        overrides = {name: ParameterValue(value, value_type=type(value)) for name, value in start.overrides.items()}
        action = LifecycleNode if start.lifecycle else Node
        return [
            action(
                package=self.package,
                executable=self.executable,
                name=self.family.node_name,
                namespace=start.namespace,
                parameters=[start.params_file, overrides],
                remappings=start.remappings,
                output="screen",
            )
        ]


def _export_profile(context: LaunchContext, default: str) -> list[Any]:
    from launch.actions import SetEnvironmentVariable

    profile = profile_to_export(context.launch_configurations["fastdds_profile"], default, context.environment)
    return [] if profile is None else [SetEnvironmentVariable(PROFILE_VARIABLE, profile)]
