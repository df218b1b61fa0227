"""Launch detect_3d_node: another node's detections in 3D from a depth image and the cameras' intrinsics.

Usage:
    ros2 launch vision_factory detect_3d.launch.py \\
        detections_topic:=/yolo/detections \\
        depth_topic:=/camera/aligned_depth_to_color/image_raw \\
        camera_info_topic:=/camera/color/camera_info

depth_camera_info_topic: the depth image's own camera_info, needed when its size differs from the colour image's.
`--show-args` lists every argument, with its description and default. The node's parameters that are launch
arguments (autostart) are typed as the node declares them; autostart:=false starts it as launch_ros's
LifecycleNode, waiting in 'unconfigured' for its transitions. Written by hand: the node has no model, so no
backend, family or rendered launch file.
"""

from vision_factory.ros.detect_3d_node import NAME, PARAMETERS
from vision_factory.ros.launch_description import AUTOSTART, parameter_arguments, typed_value

TOPICS = (
    ("detections", "detections_topic", "/detections", "Detection2DArray to lift into 3D"),
    ("depth", "depth_topic", "/camera/depth/image_raw", "depth image (16UC1 mm or 32FC1 m) registered to the colour"),
    ("camera_info", "camera_info_topic", "/camera/camera_info", "CameraInfo of the colour image of the detections"),
    (
        "depth_camera_info",
        "depth_camera_info_topic",
        "/camera/depth/camera_info",
        "CameraInfo of the depth image (when its size differs from the colour image's)",
    ),
)


def _start_node(context):
    from launch_ros.actions import LifecycleNode, Node
    from launch_ros.parameter_descriptions import ParameterValue

    values = context.launch_configurations
    overrides = {
        argument.name: typed_value(argument.name, values[argument.name], argument.value_type)
        for argument in parameter_arguments(PARAMETERS)
    }
    action = Node if overrides[AUTOSTART] else LifecycleNode
    return [
        action(
            package="vision_factory",
            executable="detect_3d_node",
            name=NAME,
            namespace=values["namespace"],
            parameters=[{name: ParameterValue(value, value_type=type(value)) for name, value in overrides.items()}],
            remappings=[(topic, values[argument]) for topic, argument, _, _ in TOPICS],
            output="screen",
        )
    ]


def generate_launch_description():
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    declared = [
        DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
        for a in parameter_arguments(PARAMETERS)
    ]
    declared += [
        DeclareLaunchArgument(name, default_value=default, description=about) for _, name, default, about in TOPICS
    ]
    declared.append(DeclareLaunchArgument("namespace", default_value="", description="ROS namespace of the node"))
    return LaunchDescription([*declared, OpaqueFunction(function=_start_node)])
