"""Turning a model file plus parameters into something that runs. No ROS imports."""
