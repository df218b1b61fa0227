"""Start the real node as its own process and talk to it over real DDS from the test."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


class NodeProcess:
    """A node (default: tracknet_node) in a subprocess under a private namespace; its log goes to a file."""

    def __init__(
        self,
        log_dir: Path,
        params: dict[str, str],
        params_file: Path | None = None,
        namespace: str = "/t",
        module: str = "vision_factory.tracknet_onnx_node",
    ):
        self.namespace = namespace
        self.log_path = log_dir / "node.log"
        command = [sys.executable, "-m", module, "--ros-args", "-r", f"__ns:={namespace}"]
        if params_file:
            command += ["--params-file", str(params_file)]
        for key, value in params.items():
            command += ["-p", f"{key}:={value}"]
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text()

    def wait(self, timeout: float = 20) -> int:
        return self.process.wait(timeout=timeout)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        code = self.process.wait(timeout=15)
        self._log.close()
        return code


class Probe:
    """A test-side rclpy node with its own context: publishes frames, collects outputs."""

    def __init__(self, name: str = "probe"):
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = Node(name, context=self.context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.received: dict[str, list] = {}

    def subscribe(self, msg_type, topic: str) -> list:
        messages = self.received.setdefault(topic, [])
        self.node.create_subscription(msg_type, topic, messages.append, RELIABLE)
        return messages

    def publisher(self, msg_type, topic: str):
        return self.node.create_publisher(msg_type, topic, RELIABLE)

    def spin_until(self, condition, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return True
            self.executor.spin_once(timeout_sec=0.05)
        return condition()

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
