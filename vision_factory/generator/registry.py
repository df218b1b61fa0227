"""What the generator can build: backends and model families, as data.

A backend is a runner template plus the dependencies its runtime needs; a model family
is a node module of this package plus its parameters and outputs. Adding a family is
its adapter (models/), its node (ros/) and one ``FamilySpec`` here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..parameters import IMAGE_INPUT_PARAMETERS, Parameter

# What every node imports from ROS (ball markers and pose skeletons are visualization_msgs).
NODE_ROS_DEPENDENCIES = ("rclpy", "rcl_interfaces", "std_msgs", "sensor_msgs", "geometry_msgs", "visualization_msgs")
IMAGE_INPUTS = ("image (sensor_msgs/Image) or image/compressed (sensor_msgs/CompressedImage)",)


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
    parameters_module: str  # module under vision_factory/ holding the node's parameter list
    parameters_name: str  # that list's name in it
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    ros_dependencies: tuple[str, ...]
    backends: tuple[str, ...]
    model_type: str = ""  # passed to the node module's run() when it serves several families
    # Inputs besides the image the launch file remaps: (node topic, launch argument, default, description).
    topic_arguments: tuple[tuple[str, str, str, str], ...] = ()

    @property
    def parameters(self) -> tuple[Parameter, ...]:
        module = importlib.import_module(f"vision_factory.{self.parameters_module}")
        return (*getattr(module, self.parameters_name), *IMAGE_INPUT_PARAMETERS)


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
            parameters_name="PARAMETERS",
            inputs=IMAGE_INPUTS,
            outputs=(
                "ball (geometry_msgs/PointStamped: pixels, z = visibility)",
                "ball_markers (visualization_msgs/MarkerArray, when subscribed)",
                "debug_image (sensor_msgs/Image, when subscribed)",
            ),
            ros_dependencies=NODE_ROS_DEPENDENCIES,
            backends=("onnx", "openvino", "tensorrt"),
        ),
        *(
            FamilySpec(
                name=name,
                summary=summary,
                node_module="detection_node",
                node_name=name,
                executable=f"{name}_node",
                parameters_module="models.detection_parameters",
                parameters_name=f"{name.upper()}_PARAMETERS",
                inputs=inputs,
                outputs=(
                    f"{output} (vision_msgs/Detection2DArray, one per frame, stamped with its header)",
                    "labels (vision_msgs/LabelInfo, transient local: the class map)",
                    *(("pose_markers (visualization_msgs/MarkerArray skeleton, when subscribed)",) if pose else ()),
                    "debug_image (sensor_msgs/Image, when subscribed)",
                ),
                ros_dependencies=(*NODE_ROS_DEPENDENCIES, "vision_msgs"),
                backends=("onnx", "openvino", "tensorrt"),
                model_type=name,
                topic_arguments=(
                    (
                        "person_detections",
                        "person_detections_topic",
                        "/detections",
                        "Detection2DArray of people, read with person_source:=topic",
                    ),
                )
                if name == "rtmpose"
                else (),
            )
            for name, summary, output, pose, inputs in (
                ("yolo", "YOLO object detection (Ultralytics export)", "detections", False, IMAGE_INPUTS),
                ("yolo_pose", "YOLO-pose human pose estimation (Ultralytics export)", "poses", True, IMAGE_INPUTS),
                (
                    "fasterrcnn",
                    "object detection with boxes, scores and labels outputs (FasterRCNN-style)",
                    "detections",
                    False,
                    IMAGE_INPUTS,
                ),
                (
                    "rtmpose",
                    "top-down RTMPose human pose estimation on person boxes",
                    "poses",
                    True,
                    (
                        *IMAGE_INPUTS,
                        "person_detections (vision_msgs/Detection2DArray, with person_source topic)",
                    ),
                ),
            )
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
