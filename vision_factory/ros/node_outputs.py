"""An inference node's outputs (a part of ros/inference_node.py's InferenceNode): the publishers of its output
table, one per camera with named cameras (``<camera>/<topic>``, a ros/cameras.py CameraPublisher that publishes on
the camera given, ``publisher[camera]``) and ``~/debug/<camera>/`` figures per named camera.
"""

from __future__ import annotations

from typing import Any

from rclpy.qos import DurabilityPolicy, QoSProfile
from std_msgs.msg import Float64

from ..cameras import camera_topic
from ..families.family import Output
from . import message_class
from .cameras import CameraPublisher, wanted
from .parameters import OUTPUT_QOS_OVERRIDES


class NodeOutputs:
    """InferenceNode's outputs: its publishers (``create_outputs``), per camera."""

    def create_output(self, message_type: type, topic: str, qos: Any, listened: bool = True) -> Any:
        """A lifecycle publisher (publishes only while active) per camera (``<camera>/<topic>``; the one camera's:
        ``topic``), destroyed at cleanup, behind a CameraPublisher: ``publisher[camera].publish(message)`` publishes
        on that camera's, ``publisher.publish(message)`` on every camera's (latched metadata such as labels).
        ``listened``: its subscribers make a ``lazy`` node listen (not so for latched metadata)."""
        publishers = {}
        for camera in self.cameras:
            publisher = self.create_lifecycle_publisher(
                message_type, camera_topic(camera, topic), qos, qos_overriding_options=OUTPUT_QOS_OVERRIDES
            )
            self._outputs.append(publisher)
            if listened:
                self._listened.append(publisher)
            publishers[camera] = publisher
        return CameraPublisher(publishers)

    def resolved_outputs(self, topic: str) -> str:
        """The fully qualified name of output ``topic``: each camera's, with named cameras (for the logs)."""
        return ", ".join(self.resolve_topic_name(camera_topic(camera, topic)) for camera in self.cameras)

    @property
    def multicamera(self) -> bool:
        """Whether the node serves named cameras (``cameras``), each on its own topics."""
        return self.cameras != ("",)

    def _camera_debug(self) -> dict[str, dict[str, Any]]:
        """``~/debug/<camera>/pipeline_latency_ms`` and ``frame_age_ms`` per named camera (none for one camera)."""
        if not self.multicamera:
            return {}
        return {
            camera: {
                name: self.create_publisher(
                    Float64, f"~/debug/{camera}/{name}", 10, qos_overriding_options=OUTPUT_QOS_OVERRIDES
                )
                for name in ("pipeline_latency_ms", "frame_age_ms")
            }
            for camera in self.cameras
        }

    def _debug(self, camera: str, name: str, value_ms: float) -> None:
        publisher = getattr(self, "camera_debug", {}).get(camera, {}).get(name)
        if publisher is not None and wanted(publisher):
            publisher.publish(Float64(data=value_ms))

    def create_outputs(self, outputs: tuple[Output, ...]) -> dict[str, Any]:
        """The publishers of a node's output table (Family.node.outputs: the table `vision-factory models` and the
        generated README describe), by topic; one whose ``when`` parameter is off is not created."""
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        publishers = {}
        for output in outputs:
            if output.published(self.values):
                qos = latched if output.latched else output.depth
                kind = message_class(output.message)
                publishers[output.topic] = self.create_output(kind, output.topic, qos, output.listened)
        return publishers
