"""tracknet_node: TrackNetV3 ball tracking, with optional InpaintNet repair.

The node of vision_factory, on ONNX Runtime.
Rendered from vision_factory's templates/package/node.py.j2: regenerate rather than edit.
"""

import sys

from vision_factory.families.tracknet import FAMILY
from vision_factory.ros.tracknet_node import run
from vision_factory.runtime.onnx_runner import OnnxRunner


def main(args: list[str] | None = None) -> int:
    return run(OnnxRunner, args, FAMILY)


if __name__ == "__main__":
    sys.exit(main())
