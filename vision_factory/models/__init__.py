"""Model families: pre-processing, decoding and streaming state. No ROS imports."""
