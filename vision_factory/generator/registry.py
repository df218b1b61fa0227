"""What the generator can build: backends and model families, as data.

A backend is a runner template plus the dependencies its runtime needs; a model family
is a node module of this package plus its parameters and outputs. Adding a family is
its adapter (models/), its node (ros/) and one ``FamilySpec`` here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..parameters import IMAGE_INPUT_PARAMETERS, Parameter


@dataclass(frozen=True)
class BackendSpec:
    name: str
    title: str
    runner_module: str  # module under runtime/, rendered from the template
    runner_class: str
    template: str  # under templates/runners/
    pip: tuple[str, ...]  # what setup.py of a generated package requires
    rosdep: tuple[str, ...]  # what its package.xml declares
    install_hint: str
    tools: tuple[tuple[str, str], ...] = ()  # (executable, function in the runner module)

    @property
    def parameters(self) -> tuple[Parameter, ...]:
        module = importlib.import_module(f"vision_factory.runtime.{self.runner_module}")
        return getattr(module, self.runner_class).PARAMETERS


@dataclass(frozen=True)
class FamilySpec:
    name: str
    summary: str
    node_module: str  # module under ros/ with run(RunnerClass)
    node_name: str
    executable: str
    parameters_module: str  # module under vision_factory/ whose PARAMETERS the node declares
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    ros_dependencies: tuple[str, ...]
    backends: tuple[str, ...]

    @property
    def parameters(self) -> tuple[Parameter, ...]:
        module = importlib.import_module(f"vision_factory.{self.parameters_module}")
        return (*module.PARAMETERS, *IMAGE_INPUT_PARAMETERS)


BACKENDS: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec(
            name="onnx",
            title="ONNX Runtime",
            runner_module="onnx_runner",
            runner_class="OnnxRunner",
            template="onnx.py.j2",
            pip=("onnxruntime",),
            rosdep=("python3-onnxruntime-pip",),
            install_hint="pip install onnxruntime (CPU) or onnxruntime-gpu (CUDA, TensorRT provider); never both",
        ),
        BackendSpec(
            name="openvino",
            title="OpenVINO",
            runner_module="openvino_runner",
            runner_class="OpenVinoRunner",
            template="openvino.py.j2",
            pip=("openvino",),
            rosdep=("python3-openvino-pip",),
            install_hint="pip install openvino",
        ),
        BackendSpec(
            name="tensorrt",
            title="TensorRT",
            runner_module="tensorrt_runner",
            runner_class="TensorRtRunner",
            template="tensorrt.py.j2",
            pip=("tensorrt", "cuda-python"),
            rosdep=("python3-tensorrt-pip", "python3-cuda-python-pip"),
            install_hint="pip install tensorrt cuda-python (needs an NVIDIA GPU and driver)",
            tools=(("build_engine", "build_engine_main"),),
        ),
    )
}

FAMILIES: dict[str, FamilySpec] = {
    spec.name: spec
    for spec in (
        FamilySpec(
            name="tracknet",
            summary="TrackNetV3 ball tracking, with optional InpaintNet repair",
            node_module="tracknet_node",
            node_name="tracknet",
            executable="tracknet_node",
            parameters_module="models.ball_stream",
            inputs=("image (sensor_msgs/Image) or image/compressed (sensor_msgs/CompressedImage)",),
            outputs=(
                "ball (geometry_msgs/PointStamped: pixels, z = visibility)",
                "ball_markers (visualization_msgs/MarkerArray, when subscribed)",
                "debug_image (sensor_msgs/Image, when subscribed)",
            ),
            ros_dependencies=(
                "rclpy",
                "rcl_interfaces",
                "std_msgs",
                "sensor_msgs",
                "geometry_msgs",
                "visualization_msgs",
            ),
            backends=("onnx", "openvino", "tensorrt"),
        ),
    )
}


def backend(name: str) -> BackendSpec:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend '{name}': choose one of {', '.join(BACKENDS)}")
    return BACKENDS[name]


def family(name: str) -> FamilySpec:
    if name not in FAMILIES:
        raise ValueError(
            f"unknown model family '{name}': choose one of {', '.join(FAMILIES)} (`vision-factory models` lists them)"
        )
    return FAMILIES[name]
