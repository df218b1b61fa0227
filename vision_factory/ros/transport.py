"""The Fast DDS transport a node runs on, chosen before ROS starts, and what the node says when frames are lost on it.

A node started without a Fast DDS profile (the pip-only route: ``yolo_node --ros-args ...`` in a shell) applies the
package's ``config/fastdds_node.xml`` to its own process: it receives over UDP into a large receive buffer (or TCP
from a publisher in Fast DDS's LARGE_DATA mode) and announces no shared-memory locator, so a publisher on Fast DDS
defaults sends it camera-sized frames over UDP instead of through the publisher's 512 KB shared-memory segment
(benchmarks/pip_route_transport.py: 0-8 of 100 frames of 640x480 or 1280x720 came through that segment, 100 of 100
over UDP). A profile or builtin transport the user chose is kept. When frames are lost all the same, the node's
warnings (ros/monitor.py) say why with ``advice``.

No ROS import here: ``choose_transport`` runs before rclpy starts.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from xml.etree import ElementTree

PROFILE_VARIABLES = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")  # the second: older name
BUILTIN_VARIABLE = "FASTDDS_BUILTIN_TRANSPORTS"
# Loaded by Fast DDS from the working directory when present: a profile the user chose too.
WORKING_DIRECTORY_PROFILE = "DEFAULT_FASTDDS_PROFILES.xml"
FAST_DDS_RMWS = ("", "rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp")  # RMW_IMPLEMENTATION values that use Fast DDS
SHARED_MEMORY_PROFILE = "fastdds_shm.xml"  # shared memory with room for 1920x1080 bgr8, UDP on loopback only
NODE_PROFILE = "fastdds_node.xml"  # what a node applies to itself when nothing was chosen
RMEM_MAX = Path("/proc/sys/net/core/rmem_max")
# The largest RTPS message over UDP: a frame larger than this is sent in fragments, and one lost fragment loses it.
UDP_MESSAGE = 65500


def config_profile(name: str) -> str:
    """The path of this package's Fast DDS profile config/``name``, as installed (colcon, pip) or in a source
    checkout: vision_factory's share path helper where it is there; a generated package (which has no such helper)
    installs it under <prefix>/share/<package>/config, or runs from its source folder (config/ beside the package's
    folder). Where none has it, the pip install's path (for a message)."""
    package = __package__.split(".")[0]  # vision_factory, or a generated package (its own copy of the profile)
    try:
        share_path = importlib.import_module(f"{package}.share").share_path
        return str(share_path("config", name))
    except (ImportError, AttributeError, FileNotFoundError):
        pass
    candidates = []
    try:  # a generated package built with colcon
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory(package)) / "config" / name)
    except (ImportError, LookupError, OSError, ValueError):
        pass
    installed = Path(sys.prefix) / "share" / package / "config" / name
    candidates += [installed, Path(__file__).resolve().parents[2] / "config" / name]
    return str(next((path for path in candidates if path.is_file()), installed))


def chosen_transport(environ: Mapping[str, str]) -> str:
    """What the user chose for this process' Fast DDS transport ('FASTDDS_DEFAULT_PROFILES_FILE=...'), '' when
    nothing; a variable set to '' counts as chosen (Fast DDS defaults, as a launch file's fastdds_profile:='')."""
    for name in (*PROFILE_VARIABLES, BUILTIN_VARIABLE):
        if name in environ:
            return f"{name}={environ[name]}"
    if Path(WORKING_DIRECTORY_PROFILE).is_file() and not environ.get("SKIP_DEFAULT_XML"):
        return f"{WORKING_DIRECTORY_PROFILE} in the working directory"
    return ""


def choose_transport(environ: MutableMapping[str, str]) -> str:
    """Point FASTDDS_DEFAULT_PROFILES_FILE at the package's node profile unless a transport was chosen or the RMW is
    not Fast DDS; call before rclpy starts. The line to log: what the node runs on, '' when it was left alone."""
    if chosen_transport(environ) or environ.get("RMW_IMPLEMENTATION", "") not in FAST_DDS_RMWS:
        return ""
    profile = config_profile(NODE_PROFILE)
    if not Path(profile).is_file():
        package = __package__.split(".")[0]
        return f"Fast DDS defaults: the package's {NODE_PROFILE} is not at {profile} (reinstall {package})"
    environ[PROFILE_VARIABLES[0]] = profile
    return (
        f"Fast DDS: frames received over UDP into a {megabytes(receive_buffer())} buffer, or TCP from a LARGE_DATA "
        f"publisher ({profile}; no profile was set: export FASTDDS_DEFAULT_PROFILES_FILE to choose another)"
    )


def receive_limit() -> int | None:
    """net.core.rmem_max, the largest UDP receive buffer a process may ask for (bytes); None where unknown."""
    try:
        return int(RMEM_MAX.read_text())
    except (OSError, ValueError):
        return None


def on_node_profile(environ: Mapping[str, str]) -> bool:
    """Whether this process runs on the package's node profile (chosen by ``choose_transport`` or by hand)."""
    return os.path.basename(environ.get(PROFILE_VARIABLES[0], "")) == NODE_PROFILE


def receive_buffer(profile: str | None = None) -> int:
    """The UDP receiveBufferSize of ``profile`` (default: the package's node profile) in bytes (Linux caps it at
    net.core.rmem_max and doubles it); 0 where the profile cannot be read."""
    try:
        found = ElementTree.parse(profile or config_profile(NODE_PROFILE)).getroot().find(".//{*}receiveBufferSize")
        return int(found.text) if found is not None and found.text else 0
    except (OSError, ElementTree.ParseError, ValueError):
        return 0


def megabytes(size: float) -> str:
    return f"{size / 2**20:.1f} MiB"


def advice(frame_bytes: int, reliable_publishers: list[str], environ: Mapping[str, str], limit: int | None) -> str:
    """Why frames of ``frame_bytes`` (0: unknown) are lost between a publisher and this node, by the transport this
    process runs on, and the fixes. ``reliable_publishers``: the names of those that offer reliable delivery;
    ``limit``: net.core.rmem_max (``receive_limit``)."""
    size = f"frames of {megabytes(frame_bytes)}" if frame_bytes else "camera-sized frames"
    fixes = []
    if reliable_publishers:
        who = ", ".join(reliable_publishers[:3])
        offer = "offers" if len(reliable_publishers) == 1 else "offer"
        fixes.append(f"{who} {offer} reliable delivery, which repairs lost fragments: -p qos_reliability:=reliable")
    shared = config_profile(SHARED_MEMORY_PROFILE)
    fixes.append(
        f"or export FASTDDS_DEFAULT_PROFILES_FILE={shared} in the publisher's shell and in this node's (shared "
        f"memory both ways)"
    )
    if on_node_profile(environ):
        asked = receive_buffer(environ[PROFILE_VARIABLES[0]])
        buffer = min(asked, limit) if limit else asked
        text = f"this node receives over UDP into a {megabytes(buffer)} buffer (net.core.rmem_max caps it)"
        if buffer < frame_bytes:  # Linux doubles it: room for two frames at least
            raise_it = f"sudo sysctl -w net.core.rmem_max={asked}" if buffer < asked else "its receiveBufferSize"
            text += f", too small for {size}: raise it, {raise_it}"
    else:
        chosen = chosen_transport(environ)
        if chosen.startswith(WORKING_DIRECTORY_PROFILE):
            fix = f"start this node where there is no {WORKING_DIRECTORY_PROFILE}"
        elif chosen:
            fix = f"start this node with {chosen.partition('=')[0]} unset"
        else:
            fix = f"reinstall {__package__.split('.')[0]}: its {NODE_PROFILE} was not found"
        text = (
            f"this node runs with {chosen[:300] or 'Fast DDS defaults'}: a publisher on Fast DDS defaults sends {size} "
            f"through its own 512 KB shared-memory segment to a node that offers shared memory, which loses them; "
            f"{fix} (it then receives over UDP into a large buffer, config/{NODE_PROFILE})"
        )
    return "; ".join([text, *fixes])
