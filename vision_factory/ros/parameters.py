"""Declaring parameter lists on a node, checking their values (at start-up, at configure and when set at run time),
and the image subscription's QoS."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSPolicyKind, QoSProfile, ReliabilityPolicy
from rclpy.qos_overriding_options import QoSOverridingOptions

from ..parameters import CONFIGURE, LIVE, MAX_QUEUE, QOS_OVERRIDES, RELIABILITIES, START, Parameter, closest

# What `ros2 param describe` says of when a value set on a running node takes effect.
APPLIES_TEXT = {
    LIVE: "live: set on a running node, it applies from the next frame",
    CONFIGURE: "at configure: refused while the node is configured; set it unconfigured, then configure",
    START: "at start: read-only",
}
RELIABILITY = dict(zip(RELIABILITIES, (ReliabilityPolicy.BEST_EFFORT, ReliabilityPolicy.RELIABLE)))
# Parameters every rclpy node declares itself.
ROS_PARAMETERS = ("use_sim_time", "start_type_description_service")
# What a user may override in each output's QoS, as ROS nodes take it: -p qos_overrides./TOPIC.publisher.POLICY:=VALUE
# (history, depth, reliability, durability; ROS declares them when the publisher is made, read-only).
OUTPUT_QOS_OVERRIDES = QoSOverridingOptions(
    (QoSPolicyKind.HISTORY, QoSPolicyKind.DEPTH, QoSPolicyKind.RELIABILITY, QoSPolicyKind.DURABILITY)
)
# The values each of them takes: a policy's names as rclpy reads them (its enum's, lower case), a depth's range.
QOS_OVERRIDE_CHOICES = {
    policy.name.lower(): [name for name in kind.short_keys() if name != "unknown"]
    for policy, kind in (
        (QoSPolicyKind.HISTORY, HistoryPolicy),
        (QoSPolicyKind.RELIABILITY, ReliabilityPolicy),
        (QoSPolicyKind.DURABILITY, DurabilityPolicy),
    )
}


def declare_parameters(node: Node, parameters: Iterable[Parameter]) -> None:
    """Declare each parameter with its description and valid values (``ros2 param describe`` shows both); values
    are checked by ``parameter_values`` at configure and by the node when set (ros/node_live.py). The description
    ends with when a value set on a running node applies (Parameter.applies); one read at start only is read-only.
    A start-up value of another type (text for a number, 1 for a floating-point number) is a ValueError naming the
    fix."""
    for parameter in parameters:
        descriptor = ParameterDescriptor(
            description=f"{parameter.description} [{APPLIES_TEXT[parameter.applies]}]",
            additional_constraints=parameter.valid,
            dynamic_typing=parameter.dynamic_typing,
            read_only=parameter.applies == START,
        )
        try:
            node.declare_parameter(parameter.name, parameter.default, descriptor)
        except InvalidParameterTypeException:  # a start-up value of another type: said in the table's words
            raise ValueError(parameter.type_refusal(node._parameter_overrides[parameter.name].value)) from None


def parameter_values(node: Node, parameters: Iterable[Parameter]) -> dict[str, Any]:
    """The declared parameters' current values by name, each checked (``Parameter.check``: a ValueError names the
    parameter, its value and the valid values). A required one left empty is an error."""
    values = {}
    for parameter in parameters:
        values[parameter.name] = parameter.check(node.get_parameter(parameter.name).value)
        if parameter.required and values[parameter.name] in ("", None):
            raise ValueError(f"parameter {parameter.name} is empty: set it to the {parameter.description}")
    return values


def undeclared_overrides(node: Node, names: Iterable[str]) -> list[str]:
    """The parameters given to ``node`` at start-up (-p, a parameters file) that it does not have (``names``: its
    own), each as 'NAME (did you mean X?)': ROS ignores them silently."""
    known = [*names, *ROS_PARAMETERS]
    given = getattr(node, "_parameter_overrides", {})  # rclpy keeps no public list of the start-up values
    unknown = sorted(set(given) - set(known))
    # ROS's own QoS overrides are declared with each publisher (at configure, after this check)
    unknown = [name for name in unknown if not name.startswith(QOS_OVERRIDES) and not node.has_parameter(name)]
    return [f"{name}{closest(name, known)}" for name in unknown]


def check_qos_overrides(node: Node) -> None:
    """The QoS overrides given to ``node`` at start-up (-p qos_overrides./TOPIC.publisher.POLICY:=VALUE, or a
    parameters file) for the policies its outputs take (OUTPUT_QOS_OVERRIDES), checked before anything is made: ROS
    reads them only as it makes the publisher, after the model loaded, and of a depth out of range says no more than
    a pybind11 dump (2^31) or rmw's 'queue size exceeds the DDS type' (-1), naming neither parameter nor topic. A
    ValueError naming the parameter, its value, the valid values and the fix."""
    given = getattr(node, "_parameter_overrides", {})  # rclpy keeps no public list of the start-up values
    for name in sorted(name for name in given if name.startswith(QOS_OVERRIDES)):
        policy, value = name.rsplit(".", 1)[-1], given[name].value
        if policy == QoSPolicyKind.DEPTH.name.lower():
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_QUEUE:
                raise ValueError(
                    f"{name} is {value!r}: a history depth is a whole number of messages in 1..{MAX_QUEUE}; give "
                    f"e.g. -p {name}:=10"
                )
        elif policy in QOS_OVERRIDE_CHOICES:
            choices = QOS_OVERRIDE_CHOICES[policy]
            if not isinstance(value, str) or value.lower() not in choices:
                raise ValueError(
                    f"{name} is {value!r}: a {policy} is one of {', '.join(choices)}; give e.g. -p {name}:={choices[1]}"
                )


def image_input(values: Mapping[str, Any]) -> tuple[str, QoSProfile]:
    """The image transport and subscriber QoS from IMAGE_INPUT_PARAMETERS values (checked by ``parameter_values``;
    default: sensor data QoS)."""
    qos = QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=values["qos_depth"], reliability=RELIABILITY[values["qos_reliability"]]
    )
    return values["input_transport"], qos
