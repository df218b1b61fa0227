"""Another node's detections in 3D from a depth image and the cameras' intrinsics: the node (ros/detect_3d_node.py).

Command detect_3d_node, of vision_factory. No model, so no backend: one command for every backend's detections.
"""

import sys

from vision_factory.ros.start import node_run

COMMAND = "detect_3d_node"
PACKAGE = "vision_factory"
# The node module's run, or the fix where a ROS 2 Python package is missing (ros/start.py).
run = node_run(f"{PACKAGE}.ros.detect_3d_node", COMMAND, PACKAGE)


def main(args: list[str] | None = None) -> int:
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
