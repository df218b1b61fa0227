"""vision-factory's bag commands: replay (a bag through the real node), verify (the node's answers checked frame by
frame) and bag (images or a video into a bag). Option tables and calls, as cli.py's; cli.py adds COMMANDS."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from .cli_support import (
    ANY_PATH,
    BAG_TOPIC,
    CAMERAS,
    EXISTING,
    EXISTING_FILE,
    FOLDER,
    MODEL,
    PARAM,
    POSITIVE,
    PROGRESS,
    PROMPT,
    camera_sources,
    executable_option,
    force_option,
    model_type_option,
    option,
    options,
    out_option,
)
from .cli_support import command_words as _command
from .cli_support import echo as _echo
from .cli_support import progress as _progress
from .cli_support import progress_bars as _progress_bars
from .cli_support import reported as _reported
from .cli_support import show as _show
from .cli_support import warn as _warn
from .families.registry import NODE_FAMILIES
from .images import OUTPUT_ENCODINGS
from .parameters import CAMERA_TOPIC
from .text import shown_path
from .tools.bags import STORAGES
from .tools.image_bag import DEFAULT_FPS
from .tools.replay_pictures import SAVE_MAX

# verify's model types: the nodes that answer each frame from one model (tools/verify.py).
VERIFIED = [name for name, spec in NODE_FAMILIES.items() if spec.make_pipeline is not None]


@click.command()
@click.argument("bag", type=EXISTING)
@options(
    out_option("folder for the output bag, ball.csv or detections.json, and replay.json"),
    option("--model", type=MODEL, help="the model (ONNX, or a Florence-2 export folder): the node's model_path (or "
           "give -p model_path:=FILE)"),
    option("--node", type=click.Choice(list(NODE_FAMILIES)),
           help="node to start for the replay  [default: the family the model file is recognised as]"),
    option("--params-file", type=EXISTING_FILE,
           help="ROS 2 parameters YAML for the node (e.g. config/tracknet_onnx.yaml)"),
    PARAM,
    PROMPT,
    BAG_TOPIC,
    option("--rate", type=POSITIVE, help="play at recorded timing times RATE; default: as fast as the node keeps up"),
    option("--storage", type=click.Choice(list(STORAGES)), default="mcap", show_default=True,
           help="rosbag2 storage of the bag of the node's outputs written to OUT (the input bag's is read as it is)"),
    executable_option("ros2 run my_tracker tracknet_node"),
    option("--save", type=FOLDER,
           help="folder for the answered frames drawn with the node's answers (frame_NNNNNN.png)"),
    option("--save-every", type=click.IntRange(min=1), default=1, show_default=True,
           help="with --save: draw one answered frame in this many"),
    option("--save-max", type=click.IntRange(min=1), default=SAVE_MAX, show_default=True,
           help="with --save: draw at most this many frames"),
    CAMERAS,
    force_option("replace the outputs of an earlier run in OUT, and its pictures in --save (else refused)"),
    PROGRESS,
)  # fmt: skip
def replay(
    params: tuple[str, ...],
    prompt: str | None,
    executable: str | None,
    cameras: tuple[str, ...],
    model: Any,
    **given: Any,
) -> None:
    """Play a rosbag2 (mcap or sqlite3) through a node and record its outputs.

    The node is the family the model file (--model, or -p model_path:=FILE) is recognised
    as, as `inspect` shows it; --node names it where the file is not recognised (and is
    refused where the file is another family's).

    Writes the node's messages to OUT/<node>_outputs (a bag), the ball as OUT/ball.csv in
    TrackNet's format (Frame, Visibility, X, Y) or the detections per frame as
    OUT/detections.json (a list of the records `predict --format json` prints, image
    BAG:FRAME, class ids from the node's class map, a segmentation model's masks as COCO
    RLE), its log to OUT/<node>_node.log and a summary to OUT/replay.json (its "files": every
    file written to OUT). The parameters replay sets itself are refused with the option to
    use: cameras (--camera), input_transport (the bag's images), autostart. An OUT holding
    an earlier run's outputs is refused before anything plays, unless --force (which
    replaces those outputs only).

    --save DIR draws the frames the node answered with its answers, as predict --save draws
    them (a map beside its frame), into DIR/frame_NNNNNN.png: one in --save-every, at most
    --save-max; replay.json's "pictures" says how many.

    --node track tracks detections recorded in the bag: its one Detection2DArray topic is
    played with the images, each message with the frame of its stamp (a bag without one is
    refused; replay the detector with -p tracking:=true instead).

    \b
    Example:
      vision-factory replay rally_bag --out /tmp/rally --model tracknet.onnx \\
          -p bg_mode:=subtract -p median_warmup:=10
      vision-factory replay rally_bag --out /tmp/rally --executable 'ros2 run my_tracker tracknet_node' \\
          -p model_path:=tracknet.onnx
      vision-factory replay street_bag --out /tmp/street --model yolov8n-seg.onnx
      vision-factory replay street_bag --out /tmp/tracks --node track -p reid_model_path:=reid.onnx
      vision-factory replay rig_bag --out /tmp/rig --model yolov8n.onnx \\
          --camera front=/front/image_raw --camera left=/left/image_raw --camera back=back_bag
    """
    from .tools.replay import parse_overrides
    from .tools.replay import replay as run_replay

    overrides = _with_model(parse_overrides(params, prompt), model)
    if cameras and given["save"] is not None:
        raise click.UsageError("--save draws one camera's replay: replay each camera's topic on its own (--topic)")
    sources = camera_sources(given, cameras, {"topic": None, "rate": None})
    with _reported(FileExistsError):
        result = run_replay(
            **given, params=overrides, progress=_progress, executable=_command(executable), cameras=sources
        )
    click.echo(json.dumps(result.summary(), indent=2))
    missing = result.missing_frames
    count = sum(map(len, missing.values())) if isinstance(missing, dict) else len(missing)  # per camera, or the one's
    if count:
        _warn(f"{count} frames got no output (see {shown_path(result.node_log)})")


def _with_model(overrides: dict[str, str], model: Any) -> dict[str, str]:
    """The -p values with --model as the node's model_path (refused where -p model_path names another file)."""
    from .parameters import ros_scalar, ros_text

    if model is None:
        return overrides
    given = overrides.get("model_path")
    if given is not None and str(ros_scalar(given)) != str(model):
        raise click.UsageError("--model and -p model_path name two files: give the model once")
    return {**overrides, "model_path": ros_text(str(model))}


@click.command()
@click.argument("bag", type=EXISTING)
@options(
    model_type_option(VERIFIED, "the node's model family", required=True),
    option("--model", type=MODEL, required=True, help="the model (ONNX, or a Florence-2 export folder)"),
    executable_option("ros2 run my_pkg yolo_node"),
    option("-p", "--param", "params", multiple=True, metavar="NAME:=VALUE",
           help="node parameter, repeatable; the model's parameters apply offline too (model_path: the node's only)"),
    PROMPT,
    option("--params-file", type=EXISTING_FILE,
           help="ROS 2 parameters YAML of the node (e.g. its config/*.yaml), read for the offline model too"),
    option("--latency-budget-ms", type=POSITIVE,
           help="also check the node's p99 pipeline latency (answer received minus the image's stamp)"),
    option("--backend", default="onnx:cpu", show_default=True,
           help="what the node runs on, as in bench; the model runs offline on it too, and it sets the tolerance"),
    option("--tolerance", "tolerance_px", type=click.FloatRange(min=0), help="pixels  [default: the backend's]"),
    BAG_TOPIC,
    option("--rate", type=POSITIVE, default=1.0, show_default=True, help="play at the bag's own rate times RATE"),
    out_option("folder for verify.json, verify.md, worst_frame.png and the node's outputs", "vision_factory_verify"),
    CAMERAS,
    force_option("replace an earlier verification in OUT (else refused)"),
    PROGRESS,
)  # fmt: skip
def verify(
    params: tuple[str, ...], prompt: str | None, executable: str | None, cameras: tuple[str, ...], **given: Any
) -> None:
    """Check that a deployed node gives the model's own answers; exit 1 when it does not.

    Plays BAG through the node over ROS 2 (this package's, or --executable: a generated
    package's) at the bag's own rate, runs the same model offline through the family's
    adapter on the same frames, and compares answer by answer: every frame answered, header
    stamps and frame_ids carried, class names the model's, boxes, keypoints or ball positions
    and scores within the backend's tolerance, and with --latency-budget-ms the p99 pipeline
    latency. Each failed check is printed with its likely cause (colour order, letterbox,
    another model, restamped headers, frames dropped under load). Writes OUT/verify.json,
    OUT/verify.md and OUT/worst_frame.png (node's answers red, the model's green).

    With --camera, the cameras play through one node serving them all and each camera's
    answers are compared with the model run offline on that camera's frames alone (its own
    tracker or TrackNet window): a report per camera in OUT/NAME/, the verdict of all in OUT;
    exit 1 when any camera fails.

    \b
    Examples:
      vision-factory verify street_bag --model-type yolo --model yolov8n.onnx --latency-budget-ms 100
      vision-factory verify rally_bag --model-type tracknet --model tracknet.onnx \\
          --executable 'ros2 run court_tracker court_tracker_node' -p bg_mode:=subtract -p median_warmup:=10
      vision-factory verify rig_bag --model-type yolo --model yolov8n.onnx \
          --camera front=/front/image_raw --camera left=/left/image_raw --camera back=back_bag
    """
    from .tools.replay import parse_overrides
    from .tools.verify import verify as run_verify

    sources = camera_sources(given, cameras, {"topic": None, "rate": 1.0, "latency_budget_ms": None})
    with _reported(FileExistsError):
        report = run_verify(
            **given,
            params=parse_overrides(params, prompt),
            executable=_command(executable),
            progress=_progress_bars(),
            cameras=sources,
        )
    _echo(report.text())
    if not report.passed:
        for failure in report.failures():
            _echo(f"verify failed: {failure}", err=True)
        sys.exit(1)


@click.command(name="bag")
@click.argument("source", metavar="IMAGES_OR_VIDEO", type=EXISTING)
@options(
    out_option("the new bag (a folder; refused if it exists)", kind=ANY_PATH, dest="out"),
    option("--topic", default=CAMERA_TOPIC, show_default=True, help="the image topic"),
    option("--fps", type=POSITIVE,
           help=f"frames per second the stamps follow  [default: a video's own rate, else {DEFAULT_FPS:g}]"),
    option("--encoding", type=click.Choice(list(OUTPUT_ENCODINGS)),
           help="sensor_msgs/Image pixel encoding  [default: bgr8]"),
    option("--compressed", type=click.Choice(["jpeg", "png"]),
           help="write sensor_msgs/CompressedImage of this format instead of raw images"),
    option("--storage", type=click.Choice(list(STORAGES)), default="mcap", show_default=True, help="rosbag2 storage"),
    PROGRESS,
)  # fmt: skip
def bag(encoding: str | None, compressed: str | None, **given: Any) -> None:
    """Make a rosbag2 of camera images from a folder of images or a video, without ROS.

    A folder's image files (.jpg, .png, ...) are taken in name order, a video's frames in
    order; each becomes one message on --topic, header and bag time stamped at --fps from
    the first frame, frame_id 'camera'. The bag plays into a node with `ros2 bag play` or
    `vision-factory replay`.

    \b
    Examples:
      vision-factory bag frames/ --out street_bag
      vision-factory bag rally.mp4 --out rally_bag --compressed jpeg
      vision-factory bag frames/ --out cam_bag --topic /cam/image_raw --fps 15 --encoding rgb8
    """
    from .tools.image_bag import make_bag

    if encoding and compressed:
        raise click.UsageError("--encoding and --compressed exclude each other: raw images have an encoding")
    with _reported():
        _show(make_bag(**given, encoding=encoding or "bgr8", compressed=compressed or "", progress=_progress_bars()))


COMMANDS = (
    replay,
    verify,
    bag,
)
