"""The ROS side of a node serving several cameras (its ``cameras`` parameter; the rest is ../cameras.py, ROS-free):
an output published per camera, and what /diagnostics and ``~/debug/`` say per camera.

- ``CameraPublisher``: one publisher per camera (``<camera>/<topic>``; the one camera's, "", on ``topic``) behind
  the one a node's code publishes on: ``publisher[camera]`` is that camera's (a frame's answer goes out on its
  camera's), ``publish`` sends to every camera's (latched metadata such as labels).
- ``camera_status``: one DiagnosticStatus per camera, "<node>: camera <name>": its counts, rate, latency and frame
  age (CameraStats), WARN while it is silent for silence_timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from rclpy.qos import DurabilityPolicy

from ..cameras import CameraStats
from ..text import untrusted

CAMERA_STATUS = "{node}: camera {camera}"  # the name of a camera's DiagnosticStatus


class CameraPublisher:
    """A node output's publishers, one per camera: ``publisher[camera]`` is that camera's."""

    def __init__(self, publishers: Mapping[str, Any]):
        self.publishers = dict(publishers)

    def __getitem__(self, camera: str) -> Any:
        return self.publishers[camera]

    def publish(self, message: Any) -> None:
        """``message`` on every camera's publisher."""
        for publisher in self.publishers.values():
            publisher.publish(message)

    def get_subscription_count(self) -> int:
        """Every camera's subscribers."""
        return sum(publisher.get_subscription_count() for publisher in self.publishers.values())

    @property
    def topic_name(self) -> str:
        """The first camera's topic."""
        return next(iter(self.publishers.values())).topic_name

    @property
    def qos_profile(self) -> Any:
        """The first camera's QoS (every camera's alike)."""
        return next(iter(self.publishers.values())).qos_profile


def wanted(publisher: Any) -> bool:
    """Whether a node computes an on-demand output (a debug image, markers, masks, a point cloud, a ~/debug/ time)
    now: while its writer counts a reader, or always where the output is kept for late readers (transient local,
    as replay asks: discovery is not symmetric, so the writer may learn of a reader only after the frames that
    reader waits for)."""
    kept = publisher.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
    return kept or publisher.get_subscription_count() > 0


def camera_status(node: str, camera: str, topic: str, stats: CameraStats, silence_s: float, since: float):
    """``camera``'s DiagnosticStatus: OK, or WARN when no frame came on ``topic`` for ``silence_s`` seconds since
    ``since`` (monotonic s: when the node started listening; 0 silence_s: never)."""
    values = stats.values()
    level, message = DiagnosticStatus.OK, "answering" if stats.answered else f"waiting for frames on {topic}"
    silent = stats.silent_for(since)
    if silence_s > 0 and silent >= silence_s:
        level, message = DiagnosticStatus.WARN, f"no frame on {topic} for {silent:.0f} s"
    return DiagnosticStatus(
        level=level,
        name=CAMERA_STATUS.format(node=node, camera=camera),
        message=untrusted(message, 500),
        hardware_id=camera,
        values=[KeyValue(key=key, value=untrusted(value, 500)) for key, value in values.items()],
    )
