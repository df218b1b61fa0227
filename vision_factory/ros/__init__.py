"""ROS 2 layer: thin nodes, message builders, QoS and parameter helpers. The only rclpy importer."""
