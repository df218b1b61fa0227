"""What a model family is, as data: the ``Family`` record every family module fills in once."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..models.interface import Rule
from ..parameters import IMAGE_INPUT_PARAMETERS, RUNTIME_PARAMETERS, Parameter, with_defaults
from ..results import DETECTIONS, ResultKind
from ..runtime.runner import Runner
from .prompts import BoxesPrompt, PointsPrompt, TextPrompt

# What every node imports from ROS (ball markers and pose skeletons are visualization_msgs; rclpy.lifecycle's
# services are lifecycle_msgs; every node carries results/, whose parts' codecs import vision_msgs: Boxes'
# Detection2DArray, Text's Classification).
NODE_ROS_DEPENDENCIES = (
    "rclpy",
    "rcl_interfaces",
    "lifecycle_msgs",
    "std_msgs",
    "sensor_msgs",
    "geometry_msgs",
    "visualization_msgs",
    "diagnostic_msgs",  # /diagnostics (ros/monitor.py)
    "vision_msgs",
)
SERVED = (TextPrompt, PointsPrompt)  # the prompts a node takes as text (node_prompts.py)
PROMPT_INTERFACES = "vision_factory_interfaces"  # the prompt service's package (SetPrompt), of a text prompt's node
DETECTIONS_MESSAGE = DETECTIONS.message  # vision_msgs/msg/Detection2DArray (results/__init__.py)
MARKERS_MESSAGE = "visualization_msgs/msg/MarkerArray"

LoadRunner = Callable[[str], Runner]  # loads a model file on the node's (or tool's) backend


@dataclass(frozen=True)
class Output:
    """A topic a node publishes, declared once: the node creates its publisher from it (ros/inference_node.py's
    ``create_outputs``) and `vision-factory models` and the generated README describe it (``description``)."""

    topic: str
    message: str  # its ROS type, e.g. vision_msgs/msg/Detection2DArray
    about: str = ""  # what it carries, in words, after the type (", one per frame", ": pixels, z = visibility")
    depth: int = 1  # QoS history depth (reliable, volatile)
    latched: bool = False  # transient local with depth 1: a late subscriber gets the last message
    on_demand: bool = False  # computed and published only while something subscribes to it
    listened: bool = True  # its subscribers make a ``lazy`` node listen (not so for latched metadata)
    when: str = ""  # the boolean parameter that must be true for the node to publish it; "": always
    # A map's (kind, unit), which its messages do not carry (results/dense.py): e.g. ("depth", "m"); (): not a map
    measures: tuple[str, str] | tuple[()] = ()

    @property
    def description(self) -> str:
        """One line: 'topic (package/Type, what it carries, when)'."""
        package, _, name = self.message.split("/")
        text = f"{self.topic} ({package}/{name}{', transient local' if self.latched else ''}{self.about}"
        text += (f", with {self.when} on" if self.when else "") + (", when subscribed" if self.on_demand else "")
        return text + ")"

    def published(self, values: Mapping[str, Any]) -> bool:
        """Whether a node of parameter ``values`` publishes it."""
        return not self.when or bool(values.get(self.when))


DEBUG_IMAGE = Output("debug_image", "sensor_msgs/msg/Image", on_demand=True)  # every node's annotated frames


@dataclass(frozen=True)
class Input:
    """A topic a node subscribes to, declared once: the node subscribes from it (ros/inference_node.py's
    ``subscribe_paired_images``), `replay` feeds it from a bag, and `vision-factory models` and the generated README
    describe it (``description``)."""

    topic: str
    message: str  # its ROS type, e.g. vision_msgs/msg/Detection2DArray
    about: str = ""  # what it carries, in words, after the type (", paired with the image of the same stamp")
    when: tuple[str, Any] = ()  # (parameter, value): the node subscribes to it only with that value; (): always
    alternative: Input | None = None  # the topic it reads instead, by a parameter (image/compressed for image)

    @property
    def description(self) -> str:
        """One line: 'topic (package/Type, what it carries, when)', then 'or' its alternative's."""
        package, _, name = self.message.split("/")
        when = f", with {self.when[0]} {self.when[1]}" if self.when else ""
        text = f"{self.topic} ({package}/{name}{self.about}{when})"
        return text + (f" or {self.alternative.description}" if self.alternative else "")

    def subscribed(self, values: Mapping[str, Any]) -> bool:
        """Whether a node of parameter ``values`` subscribes to it."""
        return not self.when or values.get(self.when[0]) == self.when[1]


# Every node's images: raw, or compressed with input_transport compressed (ros/inference_node.py subscribe_images).
COMPRESSED_IMAGE = Input("image/compressed", "sensor_msgs/msg/CompressedImage")
IMAGE = Input("image", "sensor_msgs/msg/Image", alternative=COMPRESSED_IMAGE)
IMAGE_INPUTS = (IMAGE,)


@dataclass(frozen=True)
class NodeWiring:
    """A family's ROS node: its module, what it subscribes to and publishes, and how it is launched."""

    module: str  # the module under ros/ whose run(RunnerClass, args, family) starts the node
    inputs: tuple[Input, ...]  # the node's subscriptions: the images (IMAGE) first
    outputs: tuple[Output, ...]  # its publications; the first is its main output, one message per accepted frame
    ros_dependencies: tuple[str, ...]
    # Inputs besides the image the launch file remaps: (node topic, launch argument, default, description).
    topic_arguments: tuple[tuple[str, str, str, str], ...] = ()
    # The launch file's usage line: ``argument:=example`` shown after the required models and image_topic (what
    # else the node needs to do anything useful, e.g. the track node's detections topic).
    usage_arguments: tuple[str, ...] = ()

    def paired(self, values: Mapping[str, Any]) -> Input | None:
        """The input a node of parameter ``values`` pairs with its images by stamp (another node's detections);
        None: it reads the images alone."""
        return next((topic for topic in self.inputs[1:] if topic.subscribed(values)), None)

    def __post_init__(self) -> None:
        if not (self.inputs and self.outputs and self.ros_dependencies):
            raise ValueError(f"node {self.module} needs its inputs, outputs and ROS dependencies")
        if self.inputs[0] != IMAGE:
            raise ValueError(f"node {self.module}'s first input must be the images (IMAGE)")
        topics = [output.topic for output in self.outputs]
        if len(set(topics)) != len(topics):
            raise ValueError(f"node {self.module} publishes a topic twice: {', '.join(topics)}")


@dataclass(frozen=True)
class AccuracyLoss:
    """What `quantize` calls the accuracy a family's quantized model lost, read from compare's saved report of the
    source model (a) against the quantized one (b), and the most it accepts by default (--max-loss)."""

    what: str  # e.g. "AP lost"
    default: float
    measure: Callable[[Mapping[str, Any]], float]  # compare's report -> the loss

    @classmethod
    def metric(cls, what: str, key: str, default: float) -> AccuracyLoss:
        """The loss as the drop of compare's metric ``key`` from a to b."""
        return cls(what, default, lambda report: report["metrics"][key]["a"] - report["metrics"][key]["b"])


def _ap_lost(report: Mapping[str, Any]) -> float:
    """The drop of AP from a to b; a segmentation model's the larger of its box and mask AP drops."""
    metrics = report["metrics"]
    return max(metrics[key]["a"] - metrics[key]["b"] for key in ("AP", "mask_AP") if key in metrics)


# detectors: AP (keypoint AP for pose; box or mask AP, whichever dropped more, for segmentation), pycocotools'
AP_LOST = AccuracyLoss("AP lost", 0.03, _ap_lost)


def _model_file() -> Any:
    """models/model_file.py (onnx), imported by name: a generated package carries its family's module but never reads
    a model file's values without loading it, and does not carry model_file.py."""
    return importlib.import_module(f"{__package__.rpartition('.')[0]}.models.model_file")


def _none_held(values: Mapping[str, Any]) -> int:
    return 0


@dataclass(frozen=True)
class Family:
    """One model family. Its core facts (name, rule, parameters, how it is built, its adapter and options), its
    ROS node (``node``: topics, message types, QoS, launch usage; None: no node of its own), and its result kind
    (``result``, results/), which is what the tools read of it."""

    name: str
    summary: str  # one line, for `vision-factory models` and the generated package's README
    rule: Rule | None  # how its models are recognised (models/*_interface.py); None: no model of its own (track)
    parameters: tuple[Parameter, ...]  # the node's own, besides image input (IMAGE_INPUT_PARAMETERS) and backend
    build: Callable[..., Any]  # (parameter values, LoadRunner) -> what the node runs: a Detector or a BallStream
    # What its pipeline returns and its node publishes (results/__init__.py): tools ask this, never the family's name.
    result: ResultKind | None
    # The node: None for a family without one (reid, whose embedder the tracker uses).
    node: NodeWiring | None = None
    # What it runs on besides its one model file (rtmpose: a person detector's boxes; track: another node's
    # detections): tools that run a family from a model file alone (bench, compare, track) take those without.
    runs_on: tuple[str, ...] = ()
    make: Callable[..., Any] | None = None  # (runner, **options) -> its Detector, called by ``detector``; None: none
    options: tuple[str, ...] = ()  # the keyword options ``make`` takes (the adapter's own)
    # The node's queue_size default: 1 keeps only the newest frame (a detector answers the freshest image); a
    # family that needs every frame of a window (tracknet) or of a track (track) keeps a longer bounded queue.
    queue_size: int = 1
    # (Family, parameter values, LoadRunner) -> the frame pipeline its node and the tools run (families/pipeline.py);
    # None: it has none (reid, track)
    make_pipeline: Callable[..., Any] | None = None
    model_parameter: str = "model_path"  # the parameter naming its model file
    # (model file, its recognition's details, **given) -> the node's parameter values for a model file that records
    # some of them itself (tracknet: seq_len and bg_mode); None: the defaults, the file as model_parameter
    from_model: Callable[..., dict[str, Any]] | None = None
    # (parameter values, its model file's recognition details) -> its node's main output topic where the model
    # decides it (depth: depth for a metric model, relative_depth for a relative one); None: always output_topic
    output_of: Callable[[Mapping[str, Any], Mapping[str, Any]], str] | None = None
    # (parameter values) -> the frames its node holds back until later frames come or its stream pauses (tracknet:
    # a window's but one, and InpaintNet's with it)
    held_back: Callable[[Mapping[str, Any]], int] = _none_held
    # `quantize`: its accuracy loss (None: quantize does not take it), and what it compares over besides --data
    # ("": nothing; tracknet: the video of its truth CSV)
    accuracy_loss: AccuracyLoss | None = None
    compares_over: str = ""
    # Why `quantize` refuses its models at once, the check to use instead ("": not refused by name; quantize takes a
    # family with an accuracy_loss)
    not_quantized: str = ""
    # Why `quantize` keeps no float tail on its models, quantizing them whole ("": it keeps one unless --no-float-tail)
    no_float_tail: str = ""
    # The prompts it takes besides images (families/prompts.py): a TextPrompt or a PointsPrompt (its node parameter,
    # added to ``parameters`` here, and the node's ~/set_prompt service and ~/prompt topic), a BoxesPrompt (another
    # node's boxes, its node's paired input); (): none
    prompts: tuple[TextPrompt | PointsPrompt | BoxesPrompt, ...] = ()
    # Its answers are generated token by token (Florence-2): bench times the encoding, the first token and each token
    # after (tools/bench_generation.py); compare matches two configurations' token ids, texts and boxes over images
    generates: bool = False

    def __post_init__(self) -> None:
        names = {parameter.name for parameter in self.parameters}
        served = [prompt for prompt in self.prompts if isinstance(prompt, SERVED)]
        added = tuple(p.parameter for p in served if p.parameter.name not in names)
        object.__setattr__(self, "parameters", (*self.parameters, *added))  # declared once: in the prompt
        if self.node is not None and self.result is None:
            raise ValueError(f"family {self.name}'s node needs its result kind")
        if self.node is not None and self.node.outputs[0].message != self.result.message:
            raise ValueError(f"family {self.name}'s main output is not of its result's message {self.result.message}")

    # The node's wiring as the generator, launch files and tools read it (empty for a family without a node).

    @property
    def node_module(self) -> str | None:
        return self.node.module if self.node else None

    @property
    def output_topic(self) -> str:
        """The main output: one message per accepted frame, stamped with its header."""
        return self.node.outputs[0].topic if self.node else ""

    def main_output(self, values: Mapping[str, Any], user: str = "this command") -> str:
        """The main output topic of its node run with parameter ``values`` (any node parameters; those of the family
        read, the rest its defaults): ``output_topic``, or where its model decides it (``output_of``) the one its
        model file (``model_parameter``, when given) says, read as its node reads it (``user``: who asks, in errors)."""
        if self.output_of is None or not values.get(self.model_parameter):
            return self.output_topic
        own = {parameter.name: parameter.default for parameter in self.parameters}
        values = {**own, **{name: value for name, value in values.items() if name in own}}
        details = _model_file().require_file_family(values[self.model_parameter], self.name, user).details
        return self.output_of(values, details)

    @property
    def inputs(self) -> tuple[str, ...]:
        """Its subscriptions, described (from the table its node subscribes from)."""
        return tuple(topic.description for topic in self.node.inputs) if self.node else ()

    @property
    def outputs(self) -> tuple[str, ...]:
        """Its publications, described (from the table its node creates them from)."""
        return tuple(output.description for output in self.node.outputs) if self.node else ()

    @property
    def ros_dependencies(self) -> tuple[str, ...]:
        """What its node imports of ROS: its wiring's, and the prompt service's package with a prompt it serves."""
        if not self.node:
            return ()
        return (*self.node.ros_dependencies, *((PROMPT_INTERFACES,) if self.served_prompt else ()))

    @property
    def text_prompt(self) -> TextPrompt | None:
        """The text prompt it takes (families/prompts.py), None: none."""
        return next((prompt for prompt in self.prompts if isinstance(prompt, TextPrompt)), None)

    @property
    def served_prompt(self) -> TextPrompt | PointsPrompt | None:
        """The prompt its node takes as text (the prompt parameter, ~/set_prompt, ~/prompt), None: none."""
        return next((prompt for prompt in self.prompts if isinstance(prompt, SERVED)), None)

    @property
    def boxes_prompt(self) -> BoxesPrompt | None:
        """The boxes it takes from another node (families/prompts.py), None: none."""
        return next((prompt for prompt in self.prompts if isinstance(prompt, BoxesPrompt)), None)

    @property
    def prompt_lines(self) -> tuple[str, ...]:
        """Its prompts described, but boxes (their topic is among ``inputs``): `vision-factory models`, the
        generated README."""
        return tuple(prompt.description for prompt in self.prompts if isinstance(prompt, SERVED))

    @property
    def topic_arguments(self) -> tuple[tuple[str, str, str, str], ...]:
        return self.node.topic_arguments if self.node else ()

    @property
    def usage_arguments(self) -> tuple[str, ...]:
        return self.node.usage_arguments if self.node else ()

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

    def pipeline(self, values: Mapping[str, Any], load_runner: LoadRunner, **given: Any) -> Any:
        """The frame pipeline the family's node runs (and every tool that runs its model), from the node's
        parameter ``values`` (families/frame_pipeline.py's FramePipeline: a DetectionPipeline, tracknet's BallStream,
        depth's SingleFrame); ``given``: what its ``make_pipeline`` takes besides (a detector's pipeline: a
        ``detector`` already built)."""
        if self.make_pipeline is None:
            raise ValueError(f"{self.name} has no frame pipeline")
        return self.make_pipeline(self, values, load_runner, **given)

    def values_from_model(self, model: Any, user: str = "this command", **given: Any) -> dict[str, Any]:
        """Its node's parameter values for the model file ``model``: what the file records (``from_model``; ``user``
        names who asks in its errors), the rest the node's defaults unless ``given``. What the tools that run a
        model file (bench, eval, compare, quantize) build its pipeline from."""
        if self.from_model is None:
            return with_defaults(self.parameters, {self.model_parameter: str(model), **given}, self.name)
        return self.from_model(str(model), _model_file().require_file_family(model, self.name, user).details, **given)

    def detector(self, runner: Runner, **options: Any) -> Any:
        """The family's adapter on ``runner``: the one way to put it on a runner (the node, the pipeline and the tools
        reach it through ``build`` from parameter values, or call it with adapter options). An option that is None or
        "" keeps the adapter's default, so unset CLI options and empty ROS string parameters can be passed as they
        are; one it does not take is an error."""
        if self.make is None:
            raise ValueError(f"{self.name} is not a detector")
        given = {name: value for name, value in options.items() if value is not None and value != ""}
        unknown = sorted(set(given) - set(self.options))
        if unknown:
            raise ValueError(f"{self.name} takes no option {', '.join(unknown)}: it takes {', '.join(self.options)}")
        return self.make(runner, **given)
