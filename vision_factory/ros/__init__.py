"""ROS 2 layer: thin nodes, message builders, QoS and parameter helpers. Nothing below it (models/, runtime/)
imports rclpy; the tools that drive nodes over DDS (tools/replay.py, tools/fuzz.py) import it too."""
