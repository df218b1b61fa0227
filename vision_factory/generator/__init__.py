"""From an ONNX model to a ROS 2 perception package: inspect the model, recognise it, generate code."""
