"""Launch tracknet_node: TrackNet (+ optional InpaintNet) ball tracking on ONNX Runtime.

Usage:
    ros2 launch vision_factory tracknet_onnx.launch.py model_path:=/models/tracknet.onnx \
        image_topic:=/camera/image_raw bg_mode:=subtract median_warmup:=30 execution_provider:=cuda,cpu

`ros2 launch vision_factory tracknet_onnx.launch.py --show-args` lists every argument.
Parameters not exposed as arguments come from params_file (default: config/tracknet_onnx.yaml);
the arguments below always override the same keys in that file.

FASTDDS_DEFAULT_PROFILES_FILE is set to config/fastdds_shm.xml (shared memory, large frames)
unless already set; export the same file for the camera driver, or large frames may travel
over best-effort UDP and be lost.
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, SetEnvironmentVariable
from launch.substitutions import EnvironmentVariable, LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from launch import LaunchDescription

PACKAGE = "vision_factory"

# (name, default or None when required, description)
ARGUMENTS: list[tuple[str, str | None, str]] = [
    ("model_path", None, "TrackNet ONNX model (required)"),
    ("inpaint_model_path", "", "InpaintNet ONNX model; empty disables refinement"),
    ("image_topic", "/camera/image_raw", "camera topic; the compressed input uses <image_topic>/compressed"),
    ("input_transport", "raw", "raw (sensor_msgs/Image) or compressed (sensor_msgs/CompressedImage)"),
    ("execution_provider", "cpu", "ONNX Runtime provider(s): cpu, cuda, tensorrt, ... or e.g. tensorrt,cuda,cpu"),
    ("seq_len", "8", "frames per TrackNet window; must match the model"),
    ("bg_mode", "", "background mode: '', subtract, subtract_concat or concat; must match the model"),
    ("median_warmup", "0", "frames averaged into the background median (bg modes)"),
    ("params_file", None, "YAML file with the remaining node parameters"),  # default set below
    ("namespace", "", "ROS namespace of the node"),
]
STRING_PARAMETERS = ("model_path", "inpaint_model_path", "input_transport", "execution_provider", "bg_mode")
INT_PARAMETERS = ("seq_len", "median_warmup")


def node_parameters() -> list:
    """params_file, then the launch arguments as typed overrides (the later value wins)."""
    # ParameterValue fixes each type: a bare substitution would be YAML-parsed, so e.g. a numeric
    # model path would arrive as an int and seq_len:=8.0 as a double, which the node rejects.
    overrides = {name: ParameterValue(LaunchConfiguration(name), value_type=str) for name in STRING_PARAMETERS}
    overrides.update({name: ParameterValue(LaunchConfiguration(name), value_type=int) for name in INT_PARAMETERS})
    return [LaunchConfiguration("params_file"), overrides]


def node_remappings() -> list:
    """The node's relative image topics onto image_topic (raw and compressed)."""
    image_topic = LaunchConfiguration("image_topic")
    return [("image", image_topic), ("image/compressed", [image_topic, "/compressed"])]


def generate_launch_description() -> LaunchDescription:
    share = get_package_share_directory(PACKAGE)
    defaults = {"params_file": os.path.join(share, "config", "tracknet_onnx.yaml")}
    return LaunchDescription(
        [
            *(
                DeclareLaunchArgument(name, default_value=defaults.get(name, default), description=description)
                for name, default, description in ARGUMENTS
            ),
            # Shared-memory Fast DDS profile for camera-sized messages, unless the user chose a profile.
            SetEnvironmentVariable(
                "FASTDDS_DEFAULT_PROFILES_FILE",
                EnvironmentVariable(
                    "FASTDDS_DEFAULT_PROFILES_FILE", default_value=os.path.join(share, "config", "fastdds_shm.xml")
                ),
            ),
            Node(
                package=PACKAGE,
                executable="tracknet_node",
                name="tracknet",
                namespace=LaunchConfiguration("namespace"),
                parameters=node_parameters(),
                remappings=node_remappings(),
                output="screen",
            ),
        ]
    )
