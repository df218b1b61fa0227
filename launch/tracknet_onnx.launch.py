"""Launch the node: TrackNetV3 ball tracking, with optional InpaintNet repair, on ONNX Runtime.

Command tracknet_node,
of vision_factory.
Rendered from vision_factory's templates/package/launch.py.j2: regenerate rather than edit.

Usage:
    ros2 launch vision_factory tracknet_onnx.launch.py \\
        model_path:=/models/model.onnx \\
        image_topic:=/camera/image_raw

`--show-args` lists every argument. Parameters that are not arguments come from params_file
(default: config/tracknet_onnx.yaml); the arguments always override the same keys of that file.

fastdds_profile is exported as FASTDDS_DEFAULT_PROFILES_FILE for the node. Its default, which
`--show-args` shows, is config/fastdds_shm.xml (shared memory for camera-sized frames, UDP on
loopback only: export it for the camera driver too); when it is not given and the variable is
already set (also by a launch file including this one), the variable is kept as it is.
fastdds_profile:='' keeps Fast DDS defaults, e.g. to reach the node from other machines.

The node is a managed (lifecycle) node. autostart:=true (the default) has it configure and activate itself at
start, as a plain node; autostart:=false starts it as launch_ros's LifecycleNode, waiting in 'unconfigured' for
its transitions (`ros2 lifecycle set /tracknet configure`, then `activate`; or ChangeState events
from another launch file), so a system manager decides when it loads its model and works.
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch.conditions import IfCondition, UnlessCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node
from launch_ros.parameter_descriptions import ParameterValue

PACKAGE = "vision_factory"

# Node parameters that are launch arguments too: name -> (default, None when required; type; description).
PARAMETER_ARGUMENTS: dict[str, tuple[str | None, type, str]] = {
    "model_path": (
        None,
        str,
        "TrackNet model file (.onnx)",
    ),
    "seq_len": (
        "8",
        int,
        "frames per TrackNet window; must match the model",
    ),
    "bg_mode": (
        "model",
        str,
        "'', 'subtract', 'subtract_concat', 'concat', or 'model': the model's own (metadata, else input channels)",
    ),
    "stride": (
        "1",
        int,
        "run the model once every stride frames, 1..seq_len (1: full overlap, seq_len: none)",
    ),
    "median_warmup": (
        "10",
        int,
        "frames collected for the background median at the start of each stream (bg modes; unused with median_path)",
    ),
    "inpaint_model_path": (
        "",
        str,
        "InpaintNet model file; empty disables refinement",
    ),
    "input_transport": (
        "raw",
        str,
        "raw (sensor_msgs/Image on image) or compressed (CompressedImage on image/compressed)",
    ),
    "autostart": (
        "true",
        bool,
        "configure and activate at start; false: wait in 'unconfigured' for lifecycle transitions (ros2 lifecycle)",
    ),
    "execution_provider": (
        "cpu",
        str,
        "ONNX Runtime provider(s): cpu, cuda, tensorrt, openvino, rocm, dml, coreml; a list: tensorrt,cuda,cpu",
    ),
}


def node_parameters() -> list:
    """params_file, then the arguments as typed overrides (the later value wins)."""
    # ParameterValue fixes each type: a bare substitution would be YAML-parsed, so e.g. a numeric
    # model path would arrive as an int and seq_len:=8.0 as a double, which the node rejects.
    overrides = {
        name: ParameterValue(LaunchConfiguration(name), value_type=value_type)
        for name, (_, value_type, _) in PARAMETER_ARGUMENTS.items()
    }
    return [LaunchConfiguration("params_file"), overrides]


def node_remappings() -> list:
    """The node's relative image topics onto image_topic (raw and compressed)."""
    image_topic = LaunchConfiguration("image_topic")
    return [
        ("image", image_topic),
        ("image/compressed", [image_topic, "/compressed"]),
    ]


PROFILE_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"


def export_fastdds_profile(context, default: str) -> list:
    """The node's FASTDDS_DEFAULT_PROFILES_FILE: fastdds_profile when given, else the variable as it is when set
    (decided at launch time, so a launch file including this one can set it first), else ``default``; '' leaves
    the variable alone."""
    profile = LaunchConfiguration("fastdds_profile").perform(context)
    if not profile or (profile == default and PROFILE_VARIABLE in context.environment):
        return []
    return [SetEnvironmentVariable(PROFILE_VARIABLE, profile)]


def generate_launch_description() -> LaunchDescription:
    share = get_package_share_directory(PACKAGE)
    shared_memory_profile = os.path.join(share, "config", "fastdds_shm.xml")
    return LaunchDescription(
        [
            *(
                DeclareLaunchArgument(name, default_value=default, description=description)
                if default is not None
                else DeclareLaunchArgument(name, description=description)
                for name, (default, _, description) in PARAMETER_ARGUMENTS.items()
            ),
            DeclareLaunchArgument(
                "image_topic",
                default_value="/camera/image_raw",
                description="camera topic; compressed input reads <image_topic>/compressed",
            ),
            DeclareLaunchArgument("namespace", default_value="", description="ROS namespace of the node"),
            DeclareLaunchArgument(
                "params_file",
                default_value=os.path.join(share, "config", "tracknet_onnx.yaml"),
                description="YAML file with the node's other parameters",
            ),
            DeclareLaunchArgument(
                "fastdds_profile",
                default_value=shared_memory_profile,
                description="Fast DDS XML profile for the node; not given: $FASTDDS_DEFAULT_PROFILES_FILE when set, "
                "else this default (shared memory); '' keeps Fast DDS defaults (multi-machine)",
            ),
            OpaqueFunction(function=export_fastdds_profile, args=[shared_memory_profile]),
            # autostart:=true: a plain Node action (the node walks configure and activate itself);
            # autostart:=false: launch_ros's LifecycleNode, which follows its transitions and takes ChangeState events.
            *(
                action(
                    package=PACKAGE,
                    executable="tracknet_node",
                    name="tracknet",
                    namespace=LaunchConfiguration("namespace"),
                    parameters=node_parameters(),
                    remappings=node_remappings(),
                    output="screen",
                    condition=condition(LaunchConfiguration("autostart")),
                )
                for action, condition in ((Node, IfCondition), (LifecycleNode, UnlessCondition))
            ),
        ]
    )
