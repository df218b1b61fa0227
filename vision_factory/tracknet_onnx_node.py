"""TrackNetV3 ball tracking, with optional InpaintNet repair, on ONNX Runtime: the node.

Command tracknet_node,
of vision_factory.
Rendered from vision_factory's templates/package/node.py.j2: regenerate rather than edit.
"""

import sys

from vision_factory.families.tracknet import FAMILY
from vision_factory.runtime.onnx_runner import OnnxRunner

COMMAND = "tracknet_node"
PACKAGE = "vision_factory"


def missing_ros(name: str) -> str:
    """What to do when the ROS 2 Python package ``name`` cannot be imported."""
    if name == "vision_msgs":
        how = (
            "vision_msgs has no PyPI wheel: build it into this environment once with `vision-factory "
            "install-vision-msgs` (where vision_factory is not installed, first, in the folder of "
            f"{PACKAGE}: pip install '.[ros]' '/path/to/vision_factory[ros]'; its README.md, 'Without a ROS "
            "distribution')"
        )
    else:
        how = f"pip install '.[ros]' in the folder of {PACKAGE} installs ROS 2 from PyPI wheels"
    return (
        f"{COMMAND}: the ROS 2 Python package {name} is not installed. With a ROS 2 distribution: source its "
        f"setup.bash and your workspace's install/setup.bash. Without one: {how}."
    )


try:
    from vision_factory.ros.tracknet_node import run
except ModuleNotFoundError as missing:
    name = (missing.name or "").partition(".")[0]
    if not (name.startswith(("rclpy", "rcl_", "rmw", "rosidl")) or name.endswith(("_msgs", "_interfaces"))):
        raise
    raise SystemExit(missing_ros(name)) from None


def main(args: list[str] | None = None) -> int:
    return run(OnnxRunner, args, FAMILY)


if __name__ == "__main__":
    sys.exit(main())
