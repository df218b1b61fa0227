"""ROS 2 layer: thin nodes, message builders, QoS and parameter helpers. Nothing below it (models/, runtime/)
imports rclpy; the tools that drive nodes over DDS (tools/replay.py, tools/fuzz.py) import it too."""

import importlib


def message_class(msgtype: str) -> type:
    """'sensor_msgs/msg/Image' -> the rclpy message class (imported now, so this module stays free of ROS)."""
    package, _, name = msgtype.split("/")
    module = importlib.import_module(f"{package}.msg")
    if not hasattr(module, name):  # e.g. a vision_msgs built before Classification joined it
        raise ImportError(
            f"this {package} has no message {name} (built before it joined {package}): build it again "
            f"(vision-factory install-vision-msgs --force on the pip route; a newer ros-<distro>-"
            f"{package.replace('_', '-')} otherwise)"
        )
    return getattr(module, name)
