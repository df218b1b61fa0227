"""How a node command starts: its node module imported, or, where a ROS 2 Python package cannot be imported (a
pip-only machine before `vision-factory install-vision-msgs`, a shell without the distribution sourced), a message
naming it and the fix instead of a traceback.

No ROS import here: this runs before ROS is found. Every rendered ``<family>_<backend>_node.py`` (this package's and
a generated package's, which carries this module) calls ``node_run``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

# Top-level modules of ROS 2's Python packages: a missing one of these is a missing ROS 2 package, not a bug.
ROS_PREFIXES = ("rclpy", "rcl_", "rmw", "rosidl")
ROS_SUFFIXES = ("_msgs", "_interfaces")


def missing_ros(name: str, command: str, package: str) -> str:
    """What to do when the ROS 2 Python package ``name`` cannot be imported by ``command`` of ``package``."""
    if name == "vision_msgs":
        how = (
            "vision_msgs has no PyPI wheel: build it into this environment once with `vision-factory "
            "install-vision-msgs` (where vision_factory is not installed, first, in the folder of "
            f"{package}: pip install '.[ros]' '/path/to/vision_factory[ros]'; its README.md, 'Without a ROS "
            "distribution')"
        )
    else:
        how = f"pip install '.[ros]' in the folder of {package} installs ROS 2 from PyPI wheels"
    return (
        f"{command}: the ROS 2 Python package {name} is not installed. With a ROS 2 distribution: source its "
        f"setup.bash and your workspace's install/setup.bash. Without one: {how}."
    )


def node_run(module: str, command: str, package: str) -> Callable[..., int]:
    """The ``run(RunnerClass, args, family)`` of the node module ``module`` (absolute), imported now; a SystemExit
    with ``missing_ros``'s message when a ROS 2 Python package it imports is missing."""
    try:
        return importlib.import_module(module).run
    except ModuleNotFoundError as missing:
        name = (missing.name or "").partition(".")[0]
        if not (name.startswith(ROS_PREFIXES) or name.endswith(ROS_SUFFIXES)):
            raise
        raise SystemExit(missing_ros(name, command, package)) from None
