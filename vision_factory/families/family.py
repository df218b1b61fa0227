"""What a model family is, as data: the ``Family`` record every family module fills in once."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..models.interface import Rule
from ..parameters import IMAGE_INPUT_PARAMETERS, RUNTIME_PARAMETERS, Parameter
from ..results import ResultKind
from ..runtime.runner import Runner

# What every node imports from ROS (ball markers and pose skeletons are visualization_msgs; rclpy.lifecycle's
# services are lifecycle_msgs).
NODE_ROS_DEPENDENCIES = (
    "rclpy",
    "rcl_interfaces",
    "lifecycle_msgs",
    "std_msgs",
    "sensor_msgs",
    "geometry_msgs",
    "visualization_msgs",
    "diagnostic_msgs",  # /diagnostics (ros/monitor.py)
)
IMAGE_INPUTS = ("image (sensor_msgs/Image) or image/compressed (sensor_msgs/CompressedImage)",)

LoadRunner = Callable[[str], Runner]  # loads a model file on the node's (or tool's) backend


@dataclass(frozen=True)
class Family:
    """One model family: its node, its parameters, how it is built, what it publishes, how it is recognised."""

    name: str
    summary: str  # one line, for `vision-factory models` and the generated package's README
    rule: Rule | None  # how its models are recognised (models/*_interface.py); None: no model of its own (track)
    parameters: tuple[Parameter, ...]  # the node's own, besides image input (IMAGE_INPUT_PARAMETERS) and backend
    build: Callable[..., Any]  # (parameter values, LoadRunner) -> what the node runs: a Detector or a BallStream
    # What its pipeline returns and its node publishes (results/__init__.py): tools ask this, never the family's name.
    result: ResultKind | None
    # The node: a family without one (node_module None: reid, whose embedder the tracker uses) leaves these empty.
    node_module: str | None  # the module under ros/ whose run(RunnerClass, args, family) starts the node
    output_topic: str = ""  # one message per accepted frame, stamped with its header; its type: result.message
    inputs: tuple[str, ...] = ()  # the node's subscriptions, described
    outputs: tuple[str, ...] = ()  # its publications, described
    ros_dependencies: tuple[str, ...] = ()
    # Inputs besides the image the launch file remaps: (node topic, launch argument, default, description).
    topic_arguments: tuple[tuple[str, str, str, str], ...] = ()
    # The launch file's usage line: ``argument:=example`` shown after the required models and image_topic (what
    # else the node needs to do anything useful, e.g. the track node's detections topic).
    usage_arguments: tuple[str, ...] = ()
    # What it runs on besides its one model file (rtmpose: a person detector's boxes; track: another node's
    # detections): tools that run a family from a model file alone (bench, compare, track) take those without.
    runs_on: tuple[str, ...] = ()
    make: Callable[..., Any] | None = None  # (runner, **options) -> its Detector; None: not a detector
    options: tuple[str, ...] = ()  # the keyword options ``make`` takes (the adapter's own)
    # The node's queue_size default: 1 keeps only the newest frame (a detector answers the freshest image); a
    # family that needs every frame of a window (tracknet) or of a track (track) keeps a longer bounded queue.
    queue_size: int = 1
    # (Family, parameter values, LoadRunner) -> the frame pipeline its node and the tools run (families/pipeline.py);
    # None: it has none (reid, track)
    make_pipeline: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        node = (self.output_topic, self.inputs, self.outputs, self.ros_dependencies)
        if self.node_module is None and any(node + (self.topic_arguments,)):
            raise ValueError(f"family {self.name} has no node_module but describes a node's topics")
        if self.node_module is not None and not all((*node, self.result)):
            raise ValueError(f"family {self.name}'s node needs its output topic and result, inputs, outputs, ROS deps")

    @property
    def has_node(self) -> bool:
        """Whether the family has a node of its own (and a generated package, launch file and config)."""
        return self.node_module is not None

    @property
    def single_model(self) -> bool:
        """Whether it runs from its one model file alone (nothing in ``runs_on``)."""
        return not self.runs_on

    @property
    def executable(self) -> str:
        return f"{self.name}_node"

    @property
    def node_name(self) -> str:
        return self.name

    @property
    def node_parameters(self) -> tuple[Parameter, ...]:
        """Every parameter of the node but the backend's: its own, image input (with its queue_size), runtime."""
        image_input = (
            replace(parameter, default=self.queue_size) if parameter.name == "queue_size" else parameter
            for parameter in IMAGE_INPUT_PARAMETERS
        )
        return (*self.parameters, *image_input, *RUNTIME_PARAMETERS)

    def pipeline(self, values: Mapping[str, Any], load_runner: LoadRunner) -> Any:
        """The frame pipeline the family's node runs (and every tool that runs its model), from the node's
        parameter ``values``: a DetectionPipeline, or tracknet's BallStream (families/pipeline.py)."""
        if self.make_pipeline is None:
            raise ValueError(f"{self.name} has no frame pipeline")
        return self.make_pipeline(self, values, load_runner)

    def detector(self, runner: Runner, **options: Any) -> Any:
        """The family's adapter on ``runner``. An option that is None or "" keeps the adapter's default, so unset
        CLI options and empty ROS string parameters can be passed as they are; one it does not take is an error."""
        if self.make is None:
            raise ValueError(f"{self.name} is not a detector")
        given = {name: value for name, value in options.items() if value is not None and value != ""}
        unknown = sorted(set(given) - set(self.options))
        if unknown:
            raise ValueError(f"{self.name} takes no option {', '.join(unknown)}: it takes {', '.join(self.options)}")
        return self.make(runner, **given)
