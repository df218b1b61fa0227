"""Several hosts, one parameter file: what launch/multicamera_hosts.launch.py does, without launch or launch_ros.

Past one machine, ROS 2 itself is the distributed engine: each host runs one multi-camera node (its ``cameras``
parameter) for the cameras wired to it, and DDS (or Zenoh) carries the answers to whoever subscribes. The same
hosts file goes to every host; ``host:=NAME`` picks the group this host runs:

    hosts:
      front_pc:                      # a host group: the name given as host:=front_pc
        family: yolo                 # the node (vision-factory models lists the families)
        namespace: robot/front       # its topics: /robot/front/<camera>/detections ...
        cameras: [front, left]       # the cameras it serves: <camera>/image in, <camera>/... out
        domain_id: 11                # optional: the node's ROS_DOMAIN_ID (the launching shell's when not given)
        parameters:                  # the node's other parameters (model_path, ...)
          model_path: /models/yolo.onnx

``host_node(load_hosts(path), name)`` is the node to start; the launch file turns it into a launch_ros Node.
Tested without ROS launch in test/test_hosts_launch.py.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..cameras import camera_names
from ..text import untrusted

HOSTS_KEY = "hosts"
GROUP_KEYS = {"family", "namespace", "cameras", "domain_id", "parameters"}
MAX_DOMAIN_ID = 232  # the largest ROS_DOMAIN_ID DDS can take (0..101 and 215..232 clear ephemeral ports on Linux)
MAX_HOSTS_FILE = 1 << 20  # bytes: a hosts file is a few lines per host
MAX_HOSTS_DEPTH = 16  # levels of nesting: hosts, a group, its parameters and a list value take 5
NAMESPACE = re.compile(r"/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*")
DOMAIN_VARIABLE = "ROS_DOMAIN_ID"
PACKAGE = Path(__file__).resolve().parents[1]


class HostsFileError(ValueError):
    """A hosts file that cannot be used; the message names the file's problem and the fix."""


class HostNodeError(RuntimeError):
    """A host's node that ended on its own with an error (the launch file raises it: ``ros2 launch`` then fails)."""

    def __init__(self, node: HostNode, returncode: int):
        super().__init__(
            f"the {node.family} node of host {untrusted(repr(node.host), 80)} ended with exit code {returncode}: "
            "its log above says why (on 'cannot start', fix the group's parameters in the hosts file)"
        )
        self.returncode = returncode


@dataclass(frozen=True)
class HostNode:
    """The multi-camera node of one host group."""

    host: str
    family: str
    namespace: str
    cameras: tuple[str, ...]
    domain_id: int | None = None
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def executable(self) -> str:
        """The package's console script of the family's node (setup.py: <family>_node)."""
        return f"{self.family}_node"

    @property
    def node_parameters(self) -> dict[str, Any]:
        """Every parameter given to the node: the group's ``parameters`` and its cameras."""
        return {**self.parameters, "cameras": list(self.cameras)}

    @property
    def environment(self) -> dict[str, str]:
        """Variables set for the node's process: ROS_DOMAIN_ID when the group names one."""
        return {} if self.domain_id is None else {DOMAIN_VARIABLE: str(self.domain_id)}


def node_families() -> tuple[str, ...]:
    """The families with a node in this package: its rendered <family>_onnx_node.py entry points (setup.py's
    <family>_node console scripts; the family registry is not imported by a node's side)."""
    return tuple(sorted(path.name.removesuffix("_onnx_node.py") for path in PACKAGE.glob("*_onnx_node.py")))


def this_host() -> str:
    """The host:= default: this machine's host name, without its domain."""
    return socket.gethostname().split(".")[0]


def load_hosts(path: str | Path) -> dict[str, HostNode]:
    """The host groups of the hosts file at ``path``, by name; a HostsFileError for a file that cannot be used."""
    path = Path(path)
    shown = untrusted(str(path), 200)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_HOSTS_FILE + 1)
    except OSError as error:
        raise HostsFileError(f"cannot read the hosts file {shown}: {untrusted(error.strerror or error)}") from None
    if len(data) > MAX_HOSTS_FILE:
        raise HostsFileError(f"hosts file {shown} is over {MAX_HOSTS_FILE >> 10} KiB: give a hosts file of groups")
    try:
        document = yaml.safe_load(data.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise HostsFileError(f"hosts file {shown} is not YAML: {untrusted(error, 300)}") from None
    except RecursionError:  # the YAML reader recurses once per level of nesting
        raise HostsFileError(_too_deep(shown, "nests deeper than a YAML reader can follow")) from None
    depth = nesting(document)
    if depth is None:
        raise HostsFileError(_too_deep(shown, "refers to itself (a YAML alias inside its own anchor)"))
    if depth > MAX_HOSTS_DEPTH:
        raise HostsFileError(_too_deep(shown, f"nests {depth} levels deep"))
    return parse_hosts(document, shown)


def _too_deep(shown: str, found: str) -> str:
    return (
        f"hosts file {shown} {found}: a hosts file nests at most {MAX_HOSTS_DEPTH} levels (hosts, a group, its "
        "parameters and their values): give hosts: {NAME: {family, namespace, cameras, parameters}}"
    )


def nesting(document: Any) -> int | None:
    """How many levels of lists and mappings ``document`` (as yaml.safe_load gives it) nests, without recursion;
    None when it contains itself (a YAML alias inside its own anchor). Each list or mapping is measured once, however
    many aliases share it."""
    depth: dict[int, int] = {}  # id of a list or mapping measured -> its levels
    open_: set[int] = set()  # ids on the current path: met again, the document contains itself
    stack: list[tuple[Any, bool]] = [(document, False)]
    while stack:
        value, children_done = stack.pop()
        if not isinstance(value, list | dict):
            continue
        children = [
            item for item in (value.values() if isinstance(value, dict) else value) if isinstance(item, list | dict)
        ]
        if children_done:
            open_.discard(id(value))
            depth[id(value)] = 1 + max((depth[id(child)] for child in children), default=0)
            continue
        if id(value) in depth:
            continue
        if id(value) in open_:
            return None
        open_.add(id(value))
        stack.append((value, True))
        stack.extend((child, False) for child in children if id(child) not in depth)
    return depth.get(id(document), 0)


def parse_hosts(document: Any, shown: str = "hosts file") -> dict[str, HostNode]:
    """The host groups of a parsed hosts file (see the module's docstring for its shape)."""
    groups = document.get(HOSTS_KEY) if isinstance(document, dict) else None
    if not isinstance(groups, dict) or not groups:
        raise HostsFileError(f"{shown} has no '{HOSTS_KEY}:' mapping of host groups: give hosts: {{NAME: {{...}}}}")
    return {str(name): _group(str(name), group, shown) for name, group in groups.items()}


def _group(name: str, group: Any, shown: str) -> HostNode:
    where = f"{shown}, host {untrusted(name, 80)!r}"
    if not isinstance(group, dict):
        raise HostsFileError(f"{where} is not a mapping: give family, namespace, cameras and parameters")
    unknown = sorted(str(key) for key in group if key not in GROUP_KEYS)
    if unknown:
        raise HostsFileError(
            f"{where} has unknown keys {untrusted(', '.join(unknown), 200)}: give only {', '.join(sorted(GROUP_KEYS))}"
            " (the node's parameters go under parameters:)"
        )
    family, nodes = group.get("family"), node_families()
    if family not in nodes:
        raise HostsFileError(
            f"{where}: family {untrusted(repr(family), 80)} has no node: choose one of {', '.join(nodes)}"
        )
    namespace = group.get("namespace", "")
    if not isinstance(namespace, str) or (namespace and not NAMESPACE.fullmatch(namespace)):
        raise HostsFileError(
            f"{where}: namespace {untrusted(repr(namespace), 80)} is not a ROS namespace: give e.g. robot/front"
        )
    try:
        cameras = camera_names(group.get("cameras"))
    except ValueError as error:
        raise HostsFileError(f"{where}: {error}") from None
    if not cameras:
        raise HostsFileError(f"{where} lists no cameras: give cameras: [front, left, ...]")
    domain_id = group.get("domain_id")
    if domain_id is not None and (
        isinstance(domain_id, bool) or not isinstance(domain_id, int) or not 0 <= domain_id <= MAX_DOMAIN_ID
    ):
        raise HostsFileError(
            f"{where}: domain_id {untrusted(repr(domain_id), 80)} is no ROS domain: give a whole number in "
            f"0..{MAX_DOMAIN_ID}, or leave it out for the launching shell's ROS_DOMAIN_ID"
        )
    parameters = group.get("parameters") or {}
    if not isinstance(parameters, Mapping) or not all(isinstance(key, str) for key in parameters):
        raise HostsFileError(f"{where}: parameters is not a mapping of parameter names to values")
    if "cameras" in parameters:
        raise HostsFileError(f"{where}: cameras is the group's own key: move it out of parameters")
    return HostNode(name, family, namespace, cameras, domain_id, dict(parameters))


def host_node(groups: Mapping[str, HostNode], host: str) -> HostNode:
    """The group ``host`` of ``groups``; a HostsFileError naming the groups when there is none of that name."""
    if host not in groups:
        raise HostsFileError(
            f"no host group {untrusted(repr(host), 80)} in the hosts file: give host:= one of "
            f"{untrusted(', '.join(groups), 500)}"
        )
    return groups[host]
