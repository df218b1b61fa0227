"""A prompted detection node's ends, as a test of it over DDS holds them (test_prompts.py, test_open_vocab_node.py):
its answers and latched labels subscribed, its image and ~/prompt topics and ~/set_prompt service and parameters
as clients, all matched before the first frame."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rclpy.parameter_client import AsyncParameterClient
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
from std_msgs.msg import String
from support.ros_harness import PATIENCE_S, NodeProcess, Probe
from vision_msgs.msg import Detection2DArray, LabelInfo


@dataclass
class PromptedNode:
    answers: list  # Detection2DArray on <namespace>/detections, as they come
    labels: list  # LabelInfo on <namespace>/labels (latched), as they come
    images: Any  # the image publisher
    prompts: Any  # the ~/prompt publisher
    service: Any  # the ~/set_prompt client
    parameters: AsyncParameterClient

    def phrases_named(self) -> list[str]:
        """The class names of the last LabelInfo ([] before one)."""
        return [entry.class_name for entry in self.labels[-1].class_map] if self.labels else []


def prompted_node(probe: Probe, node: NodeProcess, name: str, namespace: str = "/t") -> PromptedNode:
    """The ends of the node ``name`` (its node name) under ``namespace``, each matched (else the node's log)."""
    from vision_factory_interfaces.srv import SetPrompt

    answers = probe.subscribe(Detection2DArray, f"{namespace}/detections")
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    labels: list = []
    probe.node.create_subscription(LabelInfo, f"{namespace}/labels", labels.append, latched)
    images = probe.publisher(Image, f"{namespace}/image")
    prompts = probe.publisher(String, f"{namespace}/{name}/prompt")
    service = probe.node.create_client(SetPrompt, f"{namespace}/{name}/set_prompt")
    parameters = AsyncParameterClient(probe.node, f"{namespace}/{name}")
    ready = lambda: images.get_subscription_count() > 0 and prompts.get_subscription_count() > 0  # noqa: E731
    assert probe.spin_until(lambda: ready() and service.service_is_ready() and probe.matched(), PATIENCE_S), node.log()
    assert probe.spin_until(parameters.services_are_ready, PATIENCE_S)
    return PromptedNode(answers, labels, images, prompts, service, parameters)
