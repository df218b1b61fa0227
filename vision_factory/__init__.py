"""vision_factory: ONNX models as production ROS 2 perception nodes."""

__version__ = "0.1.0"
