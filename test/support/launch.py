"""Reading a rendered launch file's NodeLaunch without launch or launch_ros."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from vision_factory.ros.launch_description import NodeLaunch


def launch_of(path: Path) -> NodeLaunch:
    """The NodeLaunch of a rendered launch file, imported as ros2 launch imports it (launch is not imported)."""
    spec = importlib.util.spec_from_file_location(path.name.removesuffix(".launch.py") + "_launch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LAUNCH
