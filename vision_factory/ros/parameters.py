"""Parameter and QoS helpers shared by every node."""

from __future__ import annotations

from typing import Any

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

from ..runtime.providers import FALLBACK_POLICIES, GRAPH_OPTIMIZATION_LEVELS, ProviderConfig

RELIABILITY = {"best_effort": ReliabilityPolicy.BEST_EFFORT, "reliable": ReliabilityPolicy.RELIABLE}


def declare(node: Node, name: str, default: Any, description: str, dynamic: bool = False) -> Any:
    """Declare a parameter with a description and return its value."""
    descriptor = ParameterDescriptor(description=description, dynamic_typing=dynamic)
    return node.declare_parameter(name, default, descriptor).value


def image_qos(node: Node) -> QoSProfile:
    """Subscriber QoS from parameters; defaults to sensor data (best effort, keep last)."""
    reliability = declare(node, "qos_reliability", "best_effort", "best_effort (cameras) or reliable")
    depth = declare(node, "qos_depth", 5, "subscription history depth")
    if reliability not in RELIABILITY:
        raise ValueError(f"qos_reliability must be 'best_effort' or 'reliable', got '{reliability}'")
    if depth < 1:
        raise ValueError(f"qos_depth must be >= 1, got {depth}")
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=RELIABILITY[reliability])


def provider_config(node: Node) -> ProviderConfig:
    """ONNX Runtime execution provider settings, the same for every ONNX node."""
    providers = declare(
        node,
        "execution_provider",
        "cpu",
        "provider name or alias (cpu, cuda, tensorrt, openvino, rocm, dml, coreml), "
        "or an ordered list / comma-separated string",
        dynamic=True,
    )
    return ProviderConfig.create(
        providers,
        fallback=declare(
            node,
            "provider_fallback",
            "error",
            f"when a requested provider cannot run: {' or '.join(FALLBACK_POLICIES)}",
        ),
        device_id=declare(node, "device_id", 0, "GPU index for CUDA / TensorRT / ROCm / DirectML"),
        cuda_mem_limit_mb=declare(node, "cuda_mem_limit_mb", 0, "CUDA arena limit in MiB, 0 = none"),
        trt_cache_dir=declare(
            node, "trt_cache_dir", "", "TensorRT engine cache, default $ROS_HOME/vision_factory/trt_cache"
        ),
        trt_fp16=declare(node, "trt_fp16", False, "let TensorRT build fp16 engines"),
        intra_op_threads=declare(node, "intra_op_threads", 0, "threads inside an operator, 0 = ONNX Runtime decides"),
        inter_op_threads=declare(node, "inter_op_threads", 0, "threads across operators, 0 = ONNX Runtime decides"),
        graph_optimization=declare(
            node, "graph_optimization", "all", f"graph optimisation level: {', '.join(GRAPH_OPTIMIZATION_LEVELS)}"
        ),
    )
