"""depth: monocular depth (Depth Anything V1/V2 relative and metric, DPT/MiDaS-style relative, ZoeDepth metric) as
transformers and Optimum export them (models/depth.py), recognised by models/depth_interface.py. Its result is a
dense map (results/dense.py): metres for a metric model, relative inverse depth for a relative one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..models.bounds import MAX_INPUT_PIXELS
from ..models.depth import KIND, RESIZES, UNITS, DepthEstimator
from ..models.depth_interface import DEPTH, DEPTH_KINDS, PROCESSORS, implied_kind
from ..models.recognition import require_family
from ..parameters import LIVE, Parameter
from ..results import DENSE_MAP
from ..text import parse_size, untrusted
from .family import (
    DEBUG_IMAGE,
    IMAGE,
    NODE_ROS_DEPENDENCIES,
    AccuracyLoss,
    Family,
    Input,
    LoadRunner,
    NodeWiring,
    Output,
)
from .frame_pipeline import SingleFrame

FROM_MODEL = "model"  # depth_kind and model_type: what the file's metadata says (refused when it says nothing)

PARAMETERS = (
    Parameter("model_path", "", "depth model file (.onnx)", launch_argument=True, required=True),
    Parameter(
        "depth_kind",
        FROM_MODEL,
        "metric (metres on ~/depth) or relative (relative inverse depth on ~/relative_depth); model: the file's "
        "depth_kind metadata (required when it has none: never guessed)",
        launch_argument=True,
        choices=(FROM_MODEL, *DEPTH_KINDS),
    ),
    Parameter(
        "model_type",
        FROM_MODEL,
        f"the image processor: {', '.join(PROCESSORS)}; model: the file's model_type metadata, else depth_anything",
        choices=(FROM_MODEL, *PROCESSORS),
    ),
    Parameter(
        "processor_size",
        "",
        "the image processor's size WIDTHxHEIGHT (each side to its multiple, keeping the aspect ratio); empty: "
        "the file's image_size metadata, else the model type's (depth_anything 518x518)",
        max_pixels=MAX_INPUT_PIXELS,
        applies=LIVE,
    ),
    Parameter(
        "resize_filter",
        RESIZES[0],
        "how frames are resized to the processor's size: exact (the processor's own antialiased bicubic, PIL: maps "
        "as transformers gives them) or fast (OpenCV's bilinear or area filter: a tenth of the time at 1280x720, "
        "maps slightly different; benchmarks/README.md); ZoeDepth's processor (bilinear) is exact either way",
        choices=RESIZES,
        applies=LIVE,
    ),
    Parameter(
        "max_depth", 0.0, "metric: metres beyond which depth is invalid (NaN); 0: no limit", minimum=0.0, applies=LIVE
    ),
    Parameter("camera_info", True, "subscribe to camera_info: the intrinsics of ~/camera_info and ~/points"),
)


def model_type_of(values: Mapping[str, Any], details: Mapping[str, Any]) -> str:
    """The model type: the parameter's, else the file's model_type metadata, else depth_anything."""
    model_type = values["model_type"]
    return model_type if model_type != FROM_MODEL else details.get("model_type") or "depth_anything"


def processor_of(values: Mapping[str, Any], details: Mapping[str, Any]):
    """The image processor for a model of recognition ``details`` and the node's parameter ``values``."""
    processor = PROCESSORS[model_type_of(values, details)]
    if values["processor_size"]:
        width, height = parse_size(values["processor_size"], "processor_size", "518x518")
        return replace(processor, size=(height, width))
    if details.get("image_size"):
        return replace(processor, size=tuple(details["image_size"]))
    return processor


def depth_kind_of(values: Mapping[str, Any], details: Mapping[str, Any], path: str) -> str:
    """metric or relative: the parameter's, else the file's metadata; refused when neither says. A model type with
    one kind (ZoeDepth: metric; its architecture has no relative form) has that kind, and refuses the other."""
    kind, model_type = values["depth_kind"], model_type_of(values, details)
    implied = implied_kind(model_type)
    if implied and kind not in (FROM_MODEL, implied):
        raise ValueError(
            f"depth_kind {kind}: a {model_type} model's depth is {implied} only: set depth_kind to {implied}"
        )
    if implied:
        return implied
    if kind != FROM_MODEL:
        return kind
    if details.get("depth_kind") in DEPTH_KINDS:
        return details["depth_kind"]
    raise ValueError(
        f"model_path {untrusted(path)} does not say whether its depth is metric (metres) or relative (no depth_kind "
        "metadata, as Optimum's exports): set depth_kind (predict, quantize: --depth-kind) to metric (a metric "
        "checkpoint, e.g. Depth-Anything-V2-Metric-*) or relative (relative inverse depth, e.g. "
        "Depth-Anything-V2-Small-hf)"
    )


def map_topic(kind: str) -> str:
    """The topic a node publishes a model's maps on: metric ones (metres) on depth, relative ones on relative_depth."""
    return METRIC_TOPIC if kind == "metric" else RELATIVE_TOPIC


def main_output(values: Mapping[str, Any], details: Mapping[str, Any]) -> str:
    """Family.output_of: the node's map topic for the depth_kind its ``values`` and model file's ``details`` give."""
    return map_topic(depth_kind_of(values, details, values["model_path"]))


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> DepthEstimator:
    """The DepthEstimator of ``PARAMETERS`` values; the model loads now, so a bad one fails at start-up."""
    path = values["model_path"]
    runner = load_runner(path)
    details = require_family(runner, FAMILY.name, f"model_path {untrusted(path)}", FAMILY.executable).details
    kind = depth_kind_of(values, details, path)
    return DepthEstimator(runner, processor_of(values, details), kind, values["max_depth"], values["resize_filter"])


def pipeline(family: Family, values: Mapping[str, Any], load_runner: LoadRunner) -> SingleFrame:
    """depth's frame pipeline (Family.pipeline): each frame alone through the estimator ``build`` makes."""
    estimator = build(values, load_runner)
    return SingleFrame(estimator)


CAMERA_INFO = Input(
    "camera_info",
    "sensor_msgs/msg/CameraInfo",
    ", the image's intrinsics (the one of its stamp, else the newest received; with cameras, each camera's "
    "<camera>/camera_info), scaled to the maps' size when they differ",
    when=("camera_info", True),
)
METRIC_TOPIC, RELATIVE_TOPIC = "depth", "relative_depth"  # a metric model's maps, a relative one's (map_topic)
MAP_INFO = "depth/camera_info"  # the maps' camera_info (camera_info is the image's, subscribed beside it)
DEPTH_MAP = ", 32FC1 metres (REP-118: NaN invalid), one per frame with its header; metric models"
RELATIVE_MAP = ", 32FC1 relative inverse depth (no unit: larger is nearer), one per frame with its header"

FAMILY = Family(
    name="depth",
    summary="monocular depth (Depth Anything V1/V2 metric or relative, DPT/MiDaS-style)",
    rule=DEPTH,
    parameters=PARAMETERS,
    build=build,
    result=DENSE_MAP,
    make_pipeline=pipeline,
    output_of=main_output,
    # quantize: compare's mean depth difference over the mean depth (results/dense.py: free of a relative map's scale)
    accuracy_loss=AccuracyLoss(
        "mean relative depth difference", 0.05, lambda report: report["outputs"]["relative_difference"]
    ),
    node=NodeWiring(
        "depth_node",
        inputs=(IMAGE, CAMERA_INFO),
        outputs=(
            Output(METRIC_TOPIC, DENSE_MAP.message, DEPTH_MAP, depth=10, measures=(KIND, UNITS["metric"])),
            Output(RELATIVE_TOPIC, DENSE_MAP.message, RELATIVE_MAP, depth=10, measures=(KIND, UNITS["relative"])),
            Output(
                MAP_INFO, "sensor_msgs/msg/CameraInfo", ": the maps' intrinsics (the image's, scaled to their size)"
            ),
            Output("points", "sensor_msgs/msg/PointCloud2", ": x, y, z in metres (metric models)", on_demand=True),
            DEBUG_IMAGE,
        ),
        ros_dependencies=NODE_ROS_DEPENDENCIES,
        topic_arguments=(("camera_info", "camera_info_topic", "/camera/camera_info", "CameraInfo of the image"),),
    ),
)
