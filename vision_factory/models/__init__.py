"""Adapters (pre-processing, decoding, streaming state on any Runner), the recognition rules beside them, and
the geometry and metadata they share. No ROS imports."""
