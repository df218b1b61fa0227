"""fasterrcnn_node: object detection with boxes, scores and labels outputs (FasterRCNN-style).

The node of vision_factory, on ONNX Runtime.
Rendered from vision_factory's templates/package/node.py.j2: regenerate rather than edit.
"""

import sys

from vision_factory.families.fasterrcnn import FAMILY
from vision_factory.ros.detection_node import run
from vision_factory.runtime.onnx_runner import OnnxRunner


def main(args: list[str] | None = None) -> int:
    return run(OnnxRunner, args, FAMILY)


if __name__ == "__main__":
    sys.exit(main())
