"""track_node: multi-object tracking with optional re-identification of another node's detections.

The node of vision_factory, on ONNX Runtime.
Rendered from vision_factory's templates/package/node.py.j2: regenerate rather than edit.
"""

import sys

from vision_factory.families.track import FAMILY
from vision_factory.ros.track_node import run
from vision_factory.runtime.onnx_runner import OnnxRunner


def main(args: list[str] | None = None) -> int:
    return run(OnnxRunner, args, FAMILY)


if __name__ == "__main__":
    sys.exit(main())
