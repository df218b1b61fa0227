"""Launch this host's multi-camera node, from one hosts file shared by every host.

Usage (the same file on every host; each names its own group):
    ros2 launch vision_factory multicamera_hosts.launch.py \\
        hosts_file:=/etc/robot/hosts.yaml host:=front_pc

hosts_file lists host groups, each with its family, namespace, cameras, optional domain_id (the node's
ROS_DOMAIN_ID) and the node's other parameters (shape: vision_factory/ros/hosts_launch.py, docs/running/cameras.md
"Several hosts, one hosts file"). host defaults to this machine's host name. The node is started with its group's
parameters (cameras included), in its group's namespace. FASTDDS_DEFAULT_PROFILES_FILE is left as it is:
unset, Fast DDS defaults reach the other hosts (the shared-memory profile of the single-node launch files keeps
UDP on loopback). The launch ends with the node, and fails (exit code 1, naming the node's) when the node ended on
its own with an error, e.g. at start on a parameter of the hosts file: a service manager sees that host fail.
Written by hand: one launch file for every family, the family being the hosts file's.
"""

from functools import partial

from vision_factory.ros.hosts_launch import HostNodeError, host_node, load_hosts, this_host


def _start_node(context):
    from launch_ros.actions import Node
    from launch_ros.parameter_descriptions import ParameterValue

    values = context.launch_configurations
    node = host_node(load_hosts(values["hosts_file"]), values["host"])
    # Text as text: launch_ros would YAML-parse a bare string (a numeric model path would arrive as an int).
    parameters = {
        name: ParameterValue(value, value_type=str) if isinstance(value, str) else value
        for name, value in node.node_parameters.items()
    }
    return [
        Node(
            package="vision_factory",
            executable=node.executable,
            namespace=node.namespace,
            parameters=[parameters],
            additional_env=node.environment,
            output="screen",
            on_exit=partial(_node_ended, node),
        )
    ]


def _node_ended(node, event, context):
    """The node's process ended: an error unless it ended well or launch was ending it (Ctrl-C, a Shutdown)."""
    if event.returncode != 0 and not context.is_shutdown:
        raise HostNodeError(node, event.returncode)


def generate_launch_description():
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    return LaunchDescription(
        [
            DeclareLaunchArgument("hosts_file", description="YAML file of host groups (the same on every host)"),
            DeclareLaunchArgument("host", default_value=this_host(), description="the host group to start here"),
            OpaqueFunction(function=_start_node),
        ]
    )
