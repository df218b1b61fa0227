"""Locate the package's shared files (config/, launch/, templates/) however it was installed."""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE = "vision_factory"


def share_path(*parts: str) -> Path:
    """A file under share/vision_factory: colcon/ament install, pip install, or a source checkout."""
    candidates = []
    try:
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory(PACKAGE)))
    except (ImportError, LookupError, OSError, ValueError):
        pass
    candidates += [Path(sys.prefix) / "share" / PACKAGE, Path(__file__).resolve().parent.parent]
    for base in candidates:
        path = base.joinpath(*parts)
        if path.exists():
            return path
    raise FileNotFoundError(f"{'/'.join(parts)} not found in share/{PACKAGE}; reinstall vision_factory")
