"""`vision-factory param list|get|set|describe NODE`: what ``ros2 param`` does, over the node's parameter services
(rcl_interfaces), on rclpy alone. A value is read as ROS reads a ``-p NAME:=VALUE`` (parameters.py's ``ros_scalar``;
a list ``[a, b]`` item by item); the node's answer is shown as it gives it: successful, or its reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from rcl_interfaces.msg import ParameterType
from rcl_interfaces.srv import DescribeParameters, GetParameters, ListParameters, SetParameters
from rclpy.parameter import Parameter, parameter_value_to_python

from ..parameters import ros_scalar, ros_text
from ..text import untrusted
from .ros_graph import Graph, by_closeness, listed

Emit = Callable[[str], None]
# ParameterType's values in words, as ros2 param get and describe name them.
TYPE_NAMES = {
    ParameterType.PARAMETER_NOT_SET: "not set",
    ParameterType.PARAMETER_BOOL: "boolean",
    ParameterType.PARAMETER_INTEGER: "integer",
    ParameterType.PARAMETER_DOUBLE: "double",
    ParameterType.PARAMETER_STRING: "string",
    ParameterType.PARAMETER_BYTE_ARRAY: "byte array",
    ParameterType.PARAMETER_BOOL_ARRAY: "boolean array",
    ParameterType.PARAMETER_INTEGER_ARRAY: "integer array",
    ParameterType.PARAMETER_DOUBLE_ARRAY: "double array",
    ParameterType.PARAMETER_STRING_ARRAY: "string array",
}
ITEM_TYPES = (bool, int, float, str)  # the types a list's items may all be (bool before int: a bool is an int)


def ros_value(text: str) -> Any:
    """``text`` as ROS reads ``-p NAME:=TEXT``: a scalar as ``ros_scalar`` reads it; ``[a, b, ...]`` a list whose
    items are each read so (quoted ones stay text), all of one type (ROS has no mixed arrays: a ValueError saying
    so, e.g. for [1, 2.5], where 1.0 is meant)."""
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")):
        return ros_scalar(text)
    try:
        node = yaml.compose(stripped)
    except yaml.YAMLError as exc:
        raise ValueError(f"{untrusted(text)} is not a list ROS reads: {untrusted(exc, 120)}") from None
    if not isinstance(node, yaml.SequenceNode) or not all(isinstance(item, yaml.ScalarNode) for item in node.value):
        raise ValueError(f"{untrusted(text)} is not a list of single values, as ROS parameters take")
    items = [item.value if item.style in ("'", '"') else ros_scalar(item.value) for item in node.value]
    if not items:
        raise ValueError("an empty list has no type to ROS: give at least one item")
    kinds = {next(kind for kind in ITEM_TYPES if isinstance(item, kind)) for item in items}
    if len(kinds) > 1:
        named = " and ".join(sorted(kind.__name__ for kind in kinds))
        hint = " (write 1.0 for a floating-point 1)" if kinds == {int, float} else ""
        raise ValueError(f"{untrusted(text)} mixes {named} items: a ROS list holds one type{hint}")
    return items


def shown_value(value: Any) -> str:
    """A parameter's value as it would be given back to ``param set`` (text escaped and cut)."""
    if isinstance(value, list | tuple) or hasattr(value, "tolist"):
        items = list(value)
        return "[" + ", ".join(shown_value(item) for item in items[:100]) + (", ..." if len(items) > 100 else "") + "]"
    if isinstance(value, str):
        return untrusted(value, 1000)
    return ros_text(value)


class ParameterClient:
    """The parameter services of one running node (found as Graph.find_node finds it)."""

    def __init__(self, graph: Graph, node: str):
        self.graph = graph
        self.node = graph.find_node(node)

    def _client(self, service_type: type, service: str) -> Any:
        return self.graph.client(service_type, f"{self.node}/{service}")

    def names(self) -> list[str]:
        request = ListParameters.Request(depth=ListParameters.Request.DEPTH_RECURSIVE)
        return sorted(self.graph.call(self._client(ListParameters, "list_parameters"), request).result.names)

    def known(self, name: str) -> None:
        """A ValueError naming ``name`` and the node's parameters (closest first) when the node has no such one."""
        names = self.names()
        if name not in names:
            raise ValueError(
                f"{self.node} has no parameter {untrusted(name)}; its parameters, closest first: "
                f"{listed(by_closeness(name, names))}"
            )

    def get(self, name: str) -> Any:
        """The ParameterValue message of ``name``."""
        self.known(name)
        answer = self.graph.call(self._client(GetParameters, "get_parameters"), GetParameters.Request(names=[name]))
        return answer.values[0]

    def describe(self, name: str) -> Any:
        self.known(name)
        request = DescribeParameters.Request(names=[name])
        return self.graph.call(self._client(DescribeParameters, "describe_parameters"), request).descriptors[0]

    def set(self, name: str, value: Any) -> Any:
        """The node's SetParametersResult for ``name`` := ``value``."""
        self.known(name)
        request = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
        return self.graph.call(self._client(SetParameters, "set_parameters"), request).results[0]


def list_parameters(node: str, emit: Emit, timeout: float) -> None:
    with Graph(timeout) as graph:
        for name in ParameterClient(graph, node).names():
            emit(untrusted(name))


def get_parameter(node: str, name: str, emit: Emit, timeout: float) -> None:
    """'TYPE value is: VALUE' (ros2 param get's words) of the node's parameter ``name``."""
    with Graph(timeout) as graph:
        message = ParameterClient(graph, node).get(name)
    kind = TYPE_NAMES.get(message.type, str(message.type))
    if message.type == ParameterType.PARAMETER_NOT_SET:
        emit("Parameter not set.")
        return
    plural = "values are" if kind.endswith("array") else "value is"
    emit(f"{kind.split()[0].capitalize()} {plural}: {shown_value(parameter_value_to_python(message))}")


def describe_parameter(node: str, name: str, emit: Emit, timeout: float) -> None:
    """The parameter's type, description and constraints (the node's valid values), as ros2 param describe."""
    with Graph(timeout) as graph:
        descriptor = ParameterClient(graph, node).describe(name)
    lines = [f"Parameter name: {untrusted(descriptor.name)}", f"  Type: {TYPE_NAMES.get(descriptor.type, '?')}"]
    if descriptor.description:
        lines.append(f"  Description: {untrusted(descriptor.description, 1000)}")
    constraints = [f"Additional constraints: {untrusted(descriptor.additional_constraints, 1000)}"]
    constraints = constraints if descriptor.additional_constraints else []
    for bound in [*descriptor.floating_point_range, *descriptor.integer_range]:
        constraints += [f"Min value: {bound.from_value}", f"Max value: {bound.to_value}"]
    constraints += ["Read only: true"] if descriptor.read_only else []
    constraints += ["Dynamic typing: true"] if descriptor.dynamic_typing else []
    if constraints:
        lines += ["  Constraints:", *(f"    {line}" for line in constraints)]
    emit("\n".join(lines))


def set_parameter(node: str, name: str, text: str, emit: Emit, timeout: float) -> None:
    """Set the node's ``name`` to ``text`` read as ROS reads -p values; 'Set parameter successful', or a
    ValueError with the node's reason (and, where ROS refused an integer for a floating-point parameter, the
    fix)."""
    value = ros_value(text)
    with Graph(timeout) as graph:
        client = ParameterClient(graph, node)
        result = client.set(name, value)
        if result.successful:
            emit("Set parameter successful")
            return
        current = client.get(name).type
    reason = f"Setting parameter failed: {untrusted(result.reason, 1000) or 'the node gave no reason'}"
    if current == ParameterType.PARAMETER_DOUBLE and isinstance(value, int) and not isinstance(value, bool):
        reason += (
            f" ({untrusted(name)} is a floating-point number and ROS reads {value} as an integer: write {value}.0)"
        )
    raise ValueError(reason)
