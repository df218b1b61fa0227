"""Open-vocabulary detection of what a prompt names (Grounding DINO, OWL, YOLO-World), on ONNX Runtime: the node.

Command open_vocab_node,
of vision_factory.
Rendered from vision_factory's templates/package/node.py.j2: regenerate rather than edit.
"""

import sys

from vision_factory.families.open_vocab import FAMILY
from vision_factory.ros.start import node_run
from vision_factory.runtime.onnx_runner import OnnxRunner

COMMAND = "open_vocab_node"
PACKAGE = "vision_factory"
# The node module's run, or the fix where a ROS 2 Python package is missing (ros/start.py).
run = node_run(f"{PACKAGE}.ros.detection_node", COMMAND, PACKAGE)


def main(args: list[str] | None = None) -> int:
    return run(OnnxRunner, args, FAMILY)


if __name__ == "__main__":
    sys.exit(main())
