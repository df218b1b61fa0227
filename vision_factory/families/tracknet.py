"""tracknet: TrackNetV3 ball tracking (models/tracknet_stream.py, streamed by models/ball_stream.py), with its
companion InpaintNet; both recognised by models/tracknet_interface.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models.ball_stream import BallStream, load_median
from ..models.bounds import MAX_MEDIAN_FRAMES, MAX_SEQ_LEN
from ..models.inpaint_stream import InpaintRefiner
from ..models.recognition import load_checked, require_family
from ..models.tracknet_background import MedianMissing
from ..models.tracknet_interface import BG_MODES, HEIGHT, TRACKNET, WIDTH
from ..models.tracknet_stream import EVAL_MODES, TrackNetTracker, check_input_frame, check_stride
from ..parameters import FRACTION, LIVE, MAX_HISTORY_FRAMES, Parameter, with_defaults
from ..results import BALL_TRACK
from ..text import untrusted
from .family import (
    DEBUG_IMAGE,
    IMAGE_INPUTS,
    MARKERS_MESSAGE,
    NODE_ROS_DEPENDENCIES,
    AccuracyLoss,
    Family,
    LoadRunner,
    NodeWiring,
    Output,
)

# bg_mode's default: the model's own (its bg_mode metadata, else what its input channels mean).
BG_MODE_FROM_MODEL = "model"
# Frames of the background-median warm-up unless given: the node's default, which eval, bench and quantize read
# from PARAMETERS (tools.commands.node_default).
MEDIAN_WARMUP = 10

PARAMETERS = (
    Parameter("model_path", "", "TrackNet model file (.onnx)", launch_argument=True, required=True),
    Parameter(
        "seq_len",
        8,
        "frames per TrackNet window; must match the model",
        launch_argument=True,
        minimum=1,
        maximum=MAX_SEQ_LEN,
    ),
    Parameter(
        "bg_mode",
        BG_MODE_FROM_MODEL,
        f"{', '.join(repr(mode) for mode in BG_MODES)}, or {BG_MODE_FROM_MODEL!r}: the model's own (metadata, else "
        "input channels)",
        launch_argument=True,
    ),
    Parameter("eval_mode", "weight", f"temporal ensemble: {' or '.join(EVAL_MODES)}", choices=EVAL_MODES),
    Parameter(
        "stride",
        1,
        "run the model once every stride frames, 1..seq_len (1: full overlap, seq_len: none)",
        launch_argument=True,
        minimum=1,
        maximum=MAX_SEQ_LEN,
    ),
    Parameter(
        "median_warmup",
        MEDIAN_WARMUP,
        "frames collected for the background median at the start of each stream (bg modes; unused with median_path)",
        launch_argument=True,
        minimum=0,
        maximum=MAX_MEDIAN_FRAMES,
    ),
    Parameter(
        "median_path",
        "",
        "background median instead of the warm-up: a PNG, JPEG or WebP image, or .npy of HxWx3 RGB uint8 at frame size "
        f"(concat: also 3x{HEIGHT}x{WIDTH})",
    ),
    Parameter("heatmap_threshold", 0.5, "heatmap peak at or below this is 'no ball'", **FRACTION, applies=LIVE),
    Parameter("inpaint_model_path", "", "InpaintNet model file; empty disables refinement", launch_argument=True),
    Parameter("inpaint_seq_len", 16, "frames per InpaintNet window", minimum=1, maximum=MAX_SEQ_LEN),
    Parameter(
        "flush_timeout",
        1.0,
        "seconds without frames after which the pending frames are answered, or the stream ends when none are; "
        "0 = never",
        minimum=0.0,
        applies=LIVE,
    ),
    Parameter(
        "trajectory_length", 30, "positions in ball_markers", minimum=0, maximum=MAX_HISTORY_FRAMES, applies=LIVE
    ),
)


BALL = Output("ball", BALL_TRACK.message, ": pixels, z = visibility", depth=10)  # one per frame


def model_bg_mode(bg_mode: str, found: str | None, model: str) -> str:
    """``bg_mode`` as given, or for BG_MODE_FROM_MODEL the one the model's recognition ``found``."""
    if bg_mode != BG_MODE_FROM_MODEL:
        return bg_mode
    if found is None:
        raise ValueError(
            f"model_path {untrusted(model)} does not tell its bg_mode (no bg_mode metadata, and its input channels "
            f"fit none or it takes any number); set bg_mode to one of {', '.join(map(repr, BG_MODES))}"
        )
    return found


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> BallStream:
    """A BallStream configured by ``PARAMETERS`` values; both models load now, so bad ones fail at start-up."""
    # Each model's family is checked as it loads, before the adapters check its shapes.
    path = values["model_path"]
    runner = load_runner(path)
    found = require_family(runner, "tracknet", f"model_path {untrusted(path)}", FAMILY.executable).details
    check_input_frame(runner.inputs[0].shape, untrusted(path))  # a model of no family: its shape, before bg_mode
    bg_mode = model_bg_mode(values["bg_mode"], found.get("bg_mode"), path)
    try:
        tracker = TrackNetTracker(
            runner,
            values["seq_len"],
            bg_mode,
            values["eval_mode"],
            load_median(values["median_path"], bg_mode),
            values["median_warmup"],
            model_name=values["model_path"],
            heatmap_threshold=values["heatmap_threshold"],
            stride=values["stride"],
        )
    except MedianMissing:  # the tracker's rule, in the words of the node's parameters
        raise ValueError(
            f"bg_mode {bg_mode!r} needs a background median, but median_warmup is {values['median_warmup']} and no "
            "median_path is given: every frame would be skipped; set median_warmup to the frames to build it from "
            f"at the start of each stream (default {MEDIAN_WARMUP}), or median_path to a background image"
        ) from None
    make_refiner = None
    inpaint_path = values["inpaint_model_path"]
    if inpaint_path:
        inpaint_runner = load_checked(
            load_runner, inpaint_path, "inpaintnet", "inpaint_model_path", f"{FAMILY.executable}'s inpainting"
        )
        seq_len = values["inpaint_seq_len"]
        make_refiner = lambda scaler: InpaintRefiner(inpaint_runner, seq_len, scaler, model_name=inpaint_path)
        make_refiner((1.0, 1.0))  # checks the model against inpaint_seq_len now
    return BallStream(tracker, make_refiner)


def model_values(model: str, details: Mapping[str, Any], median_warmup: int | None = None, **given: Any) -> dict:
    """The node's parameter values for the model file ``model`` of recognition ``details``: seq_len and bg_mode as
    the model records them, the median warm-up the node's default unless given (none without a background), the
    rest the node's defaults unless ``given`` (a stride given is checked against seq_len). Family.values_from_model:
    what eval, compare, bench and quantize build the node's pipeline from."""
    if "stride" in given:
        check_stride(given["stride"], details["seq_len"])
    return values(model, details["seq_len"], details.get("bg_mode") or "", median_warmup, **given)


def values(model: str, seq_len: int, bg_mode: str, median_warmup: int | None = None, **given: Any) -> dict[str, Any]:
    """The node's parameter values for a model of ``seq_len`` and ``bg_mode`` ("": no background, so no warm-up)."""
    given = {"model_path": model, "seq_len": seq_len, "bg_mode": bg_mode, **given}
    if median_warmup is not None:
        given["median_warmup"] = median_warmup
    if not bg_mode:
        given["median_warmup"] = 0
    return with_defaults(PARAMETERS, given, "tracknet")


def held_back(values: Mapping[str, Any]) -> int:
    """The frames the node holds back, past the median warm-up, until later frames come or the stream pauses: a
    window's but one, and InpaintNet's window but one with it (a frame is answered that many frames later)."""
    inpaint = values["inpaint_seq_len"] - 1 if values["inpaint_model_path"] else 0
    return values["seq_len"] - 1 + inpaint


def pipeline(family: Family, values: Mapping[str, Any], load_runner: LoadRunner) -> BallStream:
    """tracknet's frame pipeline (Family.pipeline): the BallStream ``build`` makes."""
    return build(values, load_runner)


FAMILY = Family(
    name="tracknet",
    summary="TrackNetV3 ball tracking, with optional InpaintNet repair",
    rule=TRACKNET,
    parameters=PARAMETERS,
    build=build,
    result=BALL_TRACK,
    make_pipeline=pipeline,
    from_model=model_values,
    held_back=held_back,
    accuracy_loss=AccuracyLoss.metric("F1 lost", "f1", 0.03),  # eval's F1
    compares_over="the bag or video of the --data CSV",
    node=NodeWiring(
        "tracknet_node",
        inputs=IMAGE_INPUTS,
        outputs=(
            BALL,
            Output("ball_markers", MARKERS_MESSAGE, on_demand=True),
            DEBUG_IMAGE,
        ),
        ros_dependencies=NODE_ROS_DEPENDENCIES,
    ),
    queue_size=4,  # every frame of a window counts: a bounded queue, not only the newest
)
