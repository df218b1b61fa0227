"""ROS 2 layer: thin nodes, message builders, QoS and parameter helpers. Nothing below it (models/, runtime/)
imports rclpy; the tools that drive nodes over DDS (tools/replay.py, tools/fuzz.py) import it too."""

import importlib


def message_class(msgtype: str) -> type:
    """'sensor_msgs/msg/Image' -> the rclpy message class (imported now, so this module stays free of ROS)."""
    package, _, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)
