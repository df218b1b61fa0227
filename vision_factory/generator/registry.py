"""What the generator can build: model families, as data (the backends are runtime/backends.py's table).

A model family is a node module of this package plus its parameters and outputs. Adding a
family is its adapter (models/), its node (ros/) and one ``FamilySpec`` here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..parameters import IMAGE_INPUT_PARAMETERS, Parameter
from ..runtime.backends import BACKENDS

# What every node imports from ROS (ball markers and pose skeletons are visualization_msgs).
NODE_ROS_DEPENDENCIES = ("rclpy", "rcl_interfaces", "std_msgs", "sensor_msgs", "geometry_msgs", "visualization_msgs")
IMAGE_INPUTS = ("image (sensor_msgs/Image) or image/compressed (sensor_msgs/CompressedImage)",)


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
            backends=tuple(BACKENDS),
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
                backends=tuple(BACKENDS),
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


def family(name: str) -> FamilySpec:
    if name not in FAMILIES:
        raise ValueError(
            f"unknown model family '{name}': choose one of {', '.join(FAMILIES)} (`vision-factory models` lists them)"
        )
    return FAMILIES[name]
