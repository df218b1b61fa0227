"""Generated packages installed as colcon's ament_python build installs them (lib/<pkg>/<exe>, share/<pkg>, the
ament index marker): for the tests that run a generated package's own node (test_generator, test_verify)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from vision_factory.generator.writing import write_package


def install_like_colcon(package_dir: Path, prefix: Path) -> Path:
    """What colcon's ament_python build does; returns the installed node executable (named after the package)."""
    subprocess.run(
        [
            sys.executable,
            "setup.py",
            "-q",
            "build",
            "--build-base",
            str(prefix / "build" / package_dir.name),
            "install",
            "--prefix",
            str(prefix),
            "--record",
            str(prefix / f"{package_dir.name}.record"),
            "--single-version-externally-managed",
        ],
        cwd=package_dir,
        check=True,
        capture_output=True,
    )
    site = site_packages(prefix)
    assert (site / package_dir.name / "__init__.py").is_file()
    assert (prefix / "share" / "ament_index" / "resource_index" / "packages" / package_dir.name).is_file()
    assert (prefix / "share" / package_dir.name / "package.xml").is_file()
    executable = prefix / "lib" / package_dir.name / f"{package_dir.name}_node"
    assert executable.is_file(), f"{executable} was not installed"
    return executable


def site_packages(prefix: Path) -> Path:
    """The install prefix's site-packages: what PYTHONPATH needs for its executables (as colcon's setup sets)."""
    return prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def generate_and_install(family: str, backend: str, package: str, root: Path) -> Path:
    """``family`` on ``backend`` generated as ``package`` into root/src and installed into root/install; its node's
    executable (``<package>_node``). Run it with PYTHONPATH set to ``site_packages(root / "install")``."""
    package_dir = write_package(family, backend, package, root / "src")
    return install_like_colcon(package_dir, root / "install")
