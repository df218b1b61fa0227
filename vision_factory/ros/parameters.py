"""Declaring parameter lists on a node, and the image subscription's QoS."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

from ..parameters import Parameter

RELIABILITY = {"best_effort": ReliabilityPolicy.BEST_EFFORT, "reliable": ReliabilityPolicy.RELIABLE}
TRANSPORTS = ("raw", "compressed")


def declare_parameters(node: Node, parameters: Iterable[Parameter]) -> None:
    """Declare each parameter with its description (values are read, and checked, by ``parameter_values``)."""
    for parameter in parameters:
        descriptor = ParameterDescriptor(description=parameter.description, dynamic_typing=parameter.dynamic_typing)
        node.declare_parameter(parameter.name, parameter.default, descriptor)


def parameter_values(node: Node, parameters: Iterable[Parameter]) -> dict[str, Any]:
    """The declared parameters' current values by name. A required one left empty is an error."""
    values = {}
    for parameter in parameters:
        values[parameter.name] = node.get_parameter(parameter.name).value
        if parameter.required and values[parameter.name] in ("", None):
            raise ValueError(f"parameter {parameter.name} is empty: set it to the {parameter.description}")
    return values


def image_input(values: Mapping[str, Any]) -> tuple[str, QoSProfile]:
    """The image transport and subscriber QoS from IMAGE_INPUT_PARAMETERS values (default: sensor data QoS)."""
    if values["input_transport"] not in TRANSPORTS:
        raise ValueError(f"input_transport must be 'raw' or 'compressed', got '{values['input_transport']}'")
    if values["qos_reliability"] not in RELIABILITY:
        raise ValueError(f"qos_reliability must be 'best_effort' or 'reliable', got '{values['qos_reliability']}'")
    if values["qos_depth"] < 1:
        raise ValueError(f"qos_depth must be >= 1, got {values['qos_depth']}")
    if values["queue_size"] < 1:
        raise ValueError(f"queue_size must be >= 1, got {values['queue_size']}")
    if values["max_frame_age"] < 0:
        raise ValueError(f"max_frame_age must be >= 0 ms (0: off), got {values['max_frame_age']}")
    if values["max_image_pixels"] < 0:
        raise ValueError(f"max_image_pixels must be >= 0 (0: no limit), got {values['max_image_pixels']}")
    qos = QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=values["qos_depth"], reliability=RELIABILITY[values["qos_reliability"]]
    )
    return values["input_transport"], qos
