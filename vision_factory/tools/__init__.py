"""Replay, demo, benchmark: built on models/ and runtime/, ROS only where they drive nodes."""
