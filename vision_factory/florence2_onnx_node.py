"""Florence-2: captions, OCR, detection and phrase grounding, chosen by a task prompt, on ONNX Runtime: the node.

Command florence2_node,
of vision_factory.
Rendered from vision_factory's templates/package/node.py.j2: regenerate rather than edit.
"""

import sys

from vision_factory.families.florence2 import FAMILY
from vision_factory.ros.start import node_run
from vision_factory.runtime.onnx_runner import OnnxRunner

COMMAND = "florence2_node"
PACKAGE = "vision_factory"
# The node module's run, or the fix where a ROS 2 Python package is missing (ros/start.py).
run = node_run(f"{PACKAGE}.ros.detection_node", COMMAND, PACKAGE)


def main(args: list[str] | None = None) -> int:
    return run(OnnxRunner, args, FAMILY)


if __name__ == "__main__":
    sys.exit(main())
