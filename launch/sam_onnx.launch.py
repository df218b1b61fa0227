"""Launch the node: Segment Anything: masks for another node's boxes (HF, Meta and SAM2 exports), on ONNX Runtime.

Command sam_node,
of vision_factory.
Rendered from vision_factory's templates/package/launch.py.j2: regenerate rather than edit.

Usage:
    ros2 launch vision_factory sam_onnx.launch.py \\
        model_path:=/models/model.onnx \\
        image_topic:=/camera/image_raw \\
        boxes_topic:=/detections

`--show-args` lists every argument, with its description and default:
model_path, decoder_path, confidence_threshold, prompt, input_transport, autostart,
execution_provider, image_topic, boxes_topic, namespace, params_file, fastdds_profile.
Parameters that are not arguments come from params_file (default:
config/sam_onnx.yaml); the arguments always override the same keys of that file.

fastdds_profile is exported as FASTDDS_DEFAULT_PROFILES_FILE for the node. Its default, which
`--show-args` shows, is config/fastdds_node.xml (UDP into a large receive buffer, no shared
memory): the frames of a camera on Fast DDS defaults, or on config/fastdds_shm.xml, arrive whole,
from this machine or another. When it is not given and a transport was chosen in the environment
(FASTDDS_DEFAULT_PROFILES_FILE or FASTDDS_BUILTIN_TRANSPORTS set, also by a launch file including
this one), that choice is kept: export config/fastdds_shm.xml for the camera and for this launch
to have frames over shared memory. fastdds_profile:='' leaves the variable alone.

The node is a managed (lifecycle) node. autostart:=true (the default) has it configure and activate itself at
start, as a plain node; autostart:=false starts it as launch_ros's LifecycleNode, waiting in 'unconfigured' for
its transitions (`ros2 lifecycle set /sam configure`, then `activate`; or ChangeState events
from another launch file), so a system manager decides when it loads its model and works.

What it does is NodeLaunch's, from ros/launch_description.py of the package
vision_factory; this file names the family, backend and package.
"""

from vision_factory.families.sam import FAMILY
from vision_factory.ros.launch_description import NodeLaunch
from vision_factory.runtime.onnx_runner import OnnxRunner

LAUNCH = NodeLaunch(
    FAMILY,
    OnnxRunner,
    package="vision_factory",
    executable="sam_node",
    config_file="sam_onnx.yaml",
)


def generate_launch_description():
    return LAUNCH.description()
