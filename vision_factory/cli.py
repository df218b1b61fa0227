"""vision-factory: the command line. Each command is a few lines calling tools/ or generator/."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from . import __version__


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
@click.option("--frames", default=90, show_default=True, help="frames in the synthetic clip")
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
    from .tools.demo import run_demo

    width, height = _parse_size(size, "--size")
    if frames < 20:
        raise click.BadParameter("use at least 20 frames", param_hint="--frames")
    click.echo(f"demo: {frames} frames of {width}x{height} through tracknet_node (ONNX Runtime, CPU) ...")
    report = run_demo(out_dir, frames, width, height, inpaint=inpaint)
    click.echo(f"{'frame':>5} {'true (x, y)':>16} {'tracked (x, y)':>16} {'error px':>9}  status")
    for f in report.frames:
        tracked = f"{f.predicted[1]:7d},{f.predicted[2]:7d}" if f.seen else ""
        error = f"{f.error_px:9.2f}" if f.error_px is not None else ""
        click.echo(f"{f.frame:>5} {f.truth.x:7.1f},{f.truth.y:7.1f}  {tracked:>16} {error:>9}  {f.status}")
    click.echo("")
    for status in ("tracked", "inpainted", "missed", "hidden", "warm-up", "no output"):
        errors = report.errors(status)
        detail = f", error mean {sum(errors) / len(errors):.2f} px, max {max(errors):.2f} px" if errors else ""
        click.echo(f"{status:>10}: {report.count(status)} frames{detail}")
    replayed = report.replay
    click.echo(
        f"node: {replayed.fps:.1f} frames/s, "
        f"latency p50 {replayed.latency_ms_p50:.0f} ms, p99 {replayed.latency_ms_p99:.0f} ms"
    )
    click.echo(f"picture: {report.picture}\noutputs: {replayed.output_bag}, {replayed.ball_csv}")


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
    type=click.Choice(["tracknet", "yolo", "yolo_pose", "fasterrcnn", "rtmpose"]),
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
@click.option("--rate", type=float, help="play at recorded timing times RATE; default: as fast as the node keeps up")
@click.option("--storage", type=click.Choice(["mcap", "sqlite3"]), default="mcap", show_default=True)
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
    OUT/detections.json (as `predict` writes them), its log to OUT/<node>_node.log and a
    summary to OUT/replay.json. An OUT holding an earlier run's outputs is refused before
    anything plays, unless --force (which replaces those outputs only).

    \b
    Example:
      vision-factory replay rally_bag --out /tmp/rally -p model_path:=tracknet.onnx \\
          -p bg_mode:=subtract -p median_warmup:=10
      vision-factory replay rally_bag --out /tmp/rally --executable 'ros2 run my_tracker tracknet_node' \\
          -p model_path:=tracknet.onnx
      vision-factory replay street_bag --out /tmp/street --node yolo -p model_path:=yolov8n.onnx
    """
    from .tools.bags import BagError
    from .tools.replay import replay as run_replay

    overrides = {}
    for item in params:
        name, separator, value = item.partition(":=")
        if not separator or not name:
            raise click.BadParameter(f"'{item}' is not NAME:=VALUE", param_hint="--param")
        overrides[name] = value
    if rate is not None and rate <= 0:
        raise click.BadParameter("must be > 0", param_hint="--rate")
    try:
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
            executable=shlex.split(executable) if executable else None,
            force=force,
        )
    except (BagError, ValueError, RuntimeError, FileExistsError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo("", err=True)
    click.echo(json.dumps(result.summary(), indent=2))
    if result.missing_frames:
        click.echo(f"warning: {len(result.missing_frames)} frames got no output (see {result.node_log})", err=True)


@main.command(name="install-vision-msgs")
@click.option("--force", is_flag=True, help="rebuild the vision_msgs this command built (never another one)")
@click.option("--jobs", type=click.IntRange(min=1), help="parallel compile jobs  [default: all cores]")
@click.option("--verbose", is_flag=True, help="show the pip and CMake output as it runs")
def install_vision_msgs(force: bool, jobs: int | None, verbose: bool) -> None:
    """Build vision_msgs into this Python environment, for ROS 2 from PyPI wheels.

    The PyPI ros-* wheels have no vision_msgs: this builds the messages in interfaces/vision_msgs
    with the rosidl toolchain wheels (installed when missing) and CMake, into sys.prefix beside
    the wheels (about a minute). Needs cmake and a C/C++ compiler. When vision_msgs is already
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
    """The model families `generate` knows, with their outputs and backends.

    \b
    Example:
      vision-factory models
    """
    from .generator.registry import FAMILIES

    for spec in FAMILIES.values():
        click.echo(f"{spec.name}: {spec.summary}")
        click.echo(f"  node:     {spec.executable} (node name {spec.node_name})")
        for topic in spec.inputs:
            click.echo(f"  in:       {topic}")
        for topic in spec.outputs:
            click.echo(f"  out:      {topic}")
        click.echo(f"  backends: {', '.join(spec.backends)}")


@main.command()
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
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

    from .generator.registry import BACKENDS
    from .runtime.availability import all_statuses

    statuses = all_statuses()
    if output_format == "json":
        click.echo(json.dumps([asdict(status) for status in statuses], indent=2))
        return
    for status in statuses:
        title = BACKENDS[status.name].title
        state = f"{title} {status.version}" if status.installed else f"{title}: not installed"
        click.echo(f"{status.name}: {state}")
        for target in status.targets:
            click.echo(f"  runs on: {target}")
        for note in status.notes:
            click.echo(f"  {'note' if status.installed else 'install'}: {note}")


@main.command()
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def inspect(model: Path, output_format: str) -> None:
    """Inputs, outputs, opset, metadata of an ONNX model, and the family it looks like.

    \b
    Example:
      vision-factory inspect tracknet.onnx
    """
    from .generator.inspect_model import as_dict, describe, recognise, summarize

    try:
        summary = summarize(model)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    recognition = recognise(summary)
    if output_format == "json":
        click.echo(json.dumps(as_dict(summary, recognition), indent=2))
    else:
        click.echo(describe(summary, recognition))


@main.command()
@click.option("--model", "family_name", required=True, help="model family (see `vision-factory models`)")
@click.option("--backend", "backend_name", required=True, help="onnx, openvino or tensorrt")
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
@click.option("--maintainer", default="Package maintainer", show_default=True, help="package.xml maintainer")
@click.option("--maintainer-email", default="maintainer@example.com", show_default=True)
@click.option("--license", "license_name", default="Apache-2.0", show_default=True)
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
    from .generator.inspect_model import require_family
    from .generator.package import GeneratorError, write_package

    try:
        if model_file is not None:
            require_family(model_file, family_name, f"--model {family_name}")
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
    except (GeneratorError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"wrote {target}" + (f" and {target}.zip" if make_zip else ""))
    click.echo(f"next: colcon build --packages-select {package_name} (from the workspace root), then see its README.md")


@main.command()
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--backends",
    "targets",
    default="onnx:cpu,onnx:cuda,openvino:CPU,openvino:GPU,tensorrt:fp32",
    show_default=True,
    help="backend[:provider|device|precision], comma-separated",
)
@click.option("--runs", default=100, show_default=True, help="timed runs per backend, after the warm-up")
@click.option("--warmup", default=10, show_default=True, help="untimed runs first")
@click.option(
    "--model-type",
    type=click.Choice(["tracknet", "yolo", "yolo_pose", "fasterrcnn"]),
    help="also time the family's whole per-frame pipeline",
)
@click.option("--node", is_flag=True, help="also run the ROS node on each onnx target (needs --model-type)")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("vision_factory_bench"),
    show_default=True,
    help="folder for bench.json and bench.png",
)
def bench(model: Path, targets: str, runs: int, warmup: int, model_type: str | None, node: bool, out_dir: Path) -> None:
    """Load time, first inference, latency p50/p90/p99, throughput and peak memory per backend.

    Each backend runs in its own process; one that cannot run here is listed with the reason.
    Writes a table to the terminal, OUT/bench.json and a latency plot OUT/bench.png.

    \b
    Examples:
      vision-factory bench model.onnx --backends onnx:cpu,openvino:CPU
      vision-factory bench tracknet.onnx --model-type tracknet --node --runs 200
    """
    from .tools.bench import plot, run_bench, table

    if runs < 1 or warmup < 0:
        raise click.BadParameter("--runs must be >= 1 and --warmup >= 0")
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        results = run_bench(model, targets, runs, warmup, model_type, node, lambda text: click.echo(text, err=True))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(table(results))
    report = {"model": str(model), "runs": runs, "warmup": warmup, "results": [r.summary() for r in results]}
    (out_dir / "bench.json").write_text(json.dumps(report, indent=2) + "\n")
    click.echo(f"json: {out_dir / 'bench.json'}\nplot: {plot(results, out_dir / 'bench.png', model)}")


@main.command(name="eval")
@click.option(
    "--model-type",
    type=click.Choice(["tracknet", "yolo", "yolo_pose", "fasterrcnn", "rtmpose"]),
    required=True,
    help="model family",
)
@click.option(
    "--data",
    type=click.Path(path_type=Path),
    required=True,
    help="truth: a CSV (Frame,Visibility,X,Y) for tracknet; a COCO JSON or a folder with annotations.json and images/",
)
@click.option(
    "--predictions",
    type=click.Path(dir_okay=False, path_type=Path),
    help="predictions to score: a ball CSV, or a COCO results JSON",
)
@click.option("--frame-size", help="WIDTHxHEIGHT of the frames, needed with --predictions")
@click.option("--model", type=click.Path(dir_okay=False, path_type=Path), help="model to run over --source")
@click.option("--source", type=click.Path(path_type=Path), help="rosbag2 or video the model runs over")
@click.option("--backend", "target", default="onnx:cpu", show_default=True, help="as in bench: onnx:cpu, openvino:CPU")
@click.option("--median-warmup", default=10, show_default=True, help="frames for the background median (bg modes)")
@click.option("--heatmap-threshold", default=0.5, show_default=True)
@click.option("--tolerance", default=4.0, show_default=True, help="TP distance in 512x288 pixels")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("vision_factory_eval"))
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
    out_dir: Path,
) -> None:
    """Score ball tracking with TrackNet's metrics: accuracy, precision, recall, F1 (TP/FP1/FP2/FN/TN).

    Either a predictions CSV (with --frame-size), or --model run over --source (a bag or a
    video), which also sweeps the heatmap threshold for a precision-recall curve. Writes
    OUT/eval.json, OUT/eval.md, OUT/trajectory.png (and OUT/pr_curve.png).

    Detection and pose: a COCO results file (--predictions), or a yolo / yolo_pose / fasterrcnn
    --model run over the data set, scored against COCO annotations (--data: the JSON or a folder with
    annotations.json and images/) with pycocotools: AP, AP50, AP75, AR100 (keypoints: OKS AP, AR20).

    \b
    Examples:
      vision-factory eval --model-type tracknet --data truth.csv --predictions ball.csv --frame-size 1280x720
      vision-factory eval --model-type tracknet --data truth.csv --model TrackNet.onnx --source rally.mp4
      vision-factory eval --model-type yolo --data instances_val.json --predictions results.json
    """
    if model_type != "tracknet":
        return _evaluate_coco(model_type, data, predictions, model, target, out_dir)
    from .tools.bags import BagError, read_ball_csv
    from .tools.ball_eval import evaluate, precision_recall_curve, write_report

    try:
        truth = read_ball_csv(data)
        if predictions is not None:
            if frame_size is None:
                raise click.BadParameter("give --frame-size WIDTHxHEIGHT with --predictions", param_hint="--frame-size")
            rows, size, curve = read_ball_csv(predictions), _parse_size(frame_size, "--frame-size"), None
            about = {"predictions": str(predictions)}
        elif model is not None and source is not None:
            run = _track(model, source, target, median_warmup, heatmap_threshold)
            rows, size = run.predictions, run.frame_size
            curve = precision_recall_curve(truth, run, tolerance)
            about = {"model": str(model), "source": str(source), "runs_on": run.runs_on}
        else:
            raise click.UsageError("give --predictions CSV, or --model and --source to run the tracker")
        metrics, _ = evaluate(truth, rows, size, tolerance)
        files = write_report(
            out_dir, metrics, truth, rows, size, {**about, "truth": str(data), "tolerance_px": tolerance}, curve
        )
    except (BagError, ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(files["markdown"].read_text())
    click.echo("\n".join(f"{name}: {path}" for name, path in files.items()))


def _evaluate_coco(
    model_type: str, data: Path, predictions: Path | None, model: Path | None, target: str, out_dir: Path
) -> None:
    from .tools.coco_eval import IOU_TYPES, annotation_file, evaluate_coco, run_and_score

    out_dir.mkdir(parents=True, exist_ok=True)
    skipped = {}
    try:
        if predictions is not None:
            metrics = evaluate_coco(annotation_file(data), predictions, IOU_TYPES[model_type])
        elif model is not None and model_type in ("yolo", "yolo_pose", "fasterrcnn"):
            predictions = out_dir / "predictions.json"
            run = run_and_score(model_type, model, target, data, predictions)
            metrics, skipped = run.metrics, {"skipped_detections": run.predictions.skipped_count}
            _warn(run.predictions.skipped_note(data))
        else:
            raise click.UsageError(
                "give --predictions (a COCO results JSON), or --model for yolo / yolo_pose / fasterrcnn to run it "
                "over --data"
            )
    except (ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    record = {"model_type": model_type, "data": str(data), "predictions": str(predictions), "metrics": metrics}
    record |= skipped
    (out_dir / "eval.json").write_text(json.dumps(record, indent=2) + "\n")
    header = " | ".join(metrics)
    values = " | ".join(f"{value:.4f}" for value in metrics.values())
    table = f"| {header} |\n|{'---|' * len(metrics)}\n| {values} |\n"
    (out_dir / "eval.md").write_text(f"# {model_type}: {predictions}\n\nAgainst `{data}` (pycocotools).\n\n{table}")
    click.echo(table + f"json: {out_dir / 'eval.json'}\nmarkdown: {out_dir / 'eval.md'}")


def _track(model: Path, source: Path, target: str, median_warmup: int, heatmap_threshold: float):
    from .generator.inspect_model import require_family
    from .tools.ball_eval import run_tracker
    from .tools.bench import load_target

    recognition = require_family(model, "tracknet")
    bg_mode = recognition.details.get("bg_mode") or ""
    warmup = median_warmup if bg_mode else 0
    runner = load_target(target, model)
    return run_tracker(source, runner, recognition.details["seq_len"], bg_mode, warmup, heatmap_threshold)


@main.command()
@click.option(
    "--model-type",
    type=click.Choice(["tracknet", "yolo", "yolo_pose", "fasterrcnn"]),
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
@click.option("--median-warmup", default=10, show_default=True)
@click.option("--heatmap-threshold", default=0.5, show_default=True)
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
    from .tools.bags import BagError, read_ball_csv
    from .tools.ball_eval import compare_runs, evaluate

    model_b = model_b or model
    if model_type != "tracknet":
        return _compare_detections(model_type, model, model_b, target_a, target_b, data, out_dir)
    if source is None:
        raise click.UsageError("tracknet needs --source, the bag or video both configurations run over")
    try:
        runs = [
            _track(m, source, t, median_warmup, heatmap_threshold) for m, t in ((model, target_a), (model_b, target_b))
        ]
        metrics = [None, None]
        if data is not None:
            truth = read_ball_csv(data)
            metrics = [evaluate(truth, run.predictions, run.frame_size)[0] for run in runs]
        report = compare_runs(runs[0].predictions, runs[1].predictions, *metrics)
    except (BagError, ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    names = [f"{m.stem}-{t.replace(':', '-')}" for m, t in ((model, target_a), (model_b, target_b))]
    report = {
        "source": str(source),
        "a": {"model": str(model), "backend": target_a, "runs_on": runs[0].runs_on},
        "b": {"model": str(model_b), "backend": target_b, "runs_on": runs[1].runs_on},
        **report,
    }
    _save_comparison(report, out_dir / f"compare_{source.stem}_{names[0]}_vs_{names[1]}.json")


def _compare_detections(
    model_type: str, model: Path, model_b: Path, target_a: str, target_b: str, data: Path | None, out_dir: Path
) -> None:
    from .tools.coco_eval import run_and_score
    from .tools.compare import detection_differences, metric_differences

    if data is None:
        raise click.UsageError(f"{model_type} needs --data, the COCO data set both configurations run over")
    configurations = ((model, target_a), (model_b, target_b))
    out_dir.mkdir(parents=True, exist_ok=True)
    names = [f"{m.stem}-{t.replace(':', '-')}" for m, t in configurations]
    try:
        runs = [
            run_and_score(model_type, path, target, data, out_dir / f"predictions_{name}.json")
            for (path, target), name in zip(configurations, names)
        ]
    except (ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    for name, run in zip("AB", runs):
        note = run.predictions.skipped_note(data)
        _warn(note and f"{name}: {note}")
    report = {
        "data": str(data),
        "a": {"model": str(model), "backend": target_a, "runs_on": runs[0].runs_on},
        "b": {"model": str(model_b), "backend": target_b, "runs_on": runs[1].runs_on},
        "outputs": detection_differences(*(run.predictions.results for run in runs)),
        **metric_differences(*(run.metrics for run in runs)),
    }
    _save_comparison(report, out_dir / f"compare_{Path(data).stem}_{names[0]}_vs_{names[1]}.json")


def _save_comparison(report: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    a, b = report["a"], report["b"]
    click.echo(f"A {a['backend']} ({Path(a['model']).name}) vs B {b['backend']} ({Path(b['model']).name})")
    click.echo("  outputs: " + ", ".join(f"{name} {value:.4g}" for name, value in report["outputs"].items()))
    for name, row in report.get("metrics", {}).items():
        click.echo(
            f"  {name}: A {row['a']:.4f}, B {row['b']:.4f}, difference {row['difference']:+.4f} ({row['verdict']})"
        )
    if "verdict" in report:
        click.echo(f"verdict: {report['verdict']}")
    click.echo(f"saved: {path}")


@main.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--model-type",
    type=click.Choice(["yolo", "yolo_pose", "fasterrcnn", "rtmpose"]),
    required=True,
    help="model family",
)
@click.option("--model", type=click.Path(dir_okay=False, path_type=Path), required=True, help="ONNX model")
@click.option("--backend", "target", default="onnx:cpu", show_default=True, help="as in bench: onnx:cpu, openvino:CPU")
@click.option("--conf", "confidence", type=float, help="confidence threshold  [default: the nodes']")
@click.option("--iou", type=float, help="NMS IoU threshold (yolo)  [default: the nodes']")
@click.option("--max-det", type=int, help="detections per image at most  [default: the nodes']")
@click.option("--classes", help="class ids or names to keep, e.g. 0,2 or person,car  [default: all]")
@click.option(
    "--imgsz",
    type=int,
    help="input size for yolo models with dynamic input  [default: the size recorded in the model, as the nodes]",
)
@click.option(
    "--labels",
    "labels_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="class names, one per line, when the model's metadata has none (rtmpose: the detector's)",
)
@click.option("--input-size", help="fasterrcnn / rtmpose: WIDTHxHEIGHT for a model with dynamic input size")
@click.option("--resize", type=click.Choice(["stretch", "letterbox", "none"]), help="fasterrcnn: fit frames by")
@click.option("--box-units", type=click.Choice(["auto", "normalized", "pixels"]), help="fasterrcnn: boxes are in")
@click.option("--label-offset", type=int, help="fasterrcnn: the label of class 0 (default 1: 0 is the background)")
@click.option(
    "--detector",
    "detector_model",
    type=click.Path(dir_okay=False, path_type=Path),
    help="rtmpose: the person detector's model",
)
@click.option(
    "--detector-type",
    type=click.Choice(["yolo", "yolo_pose", "fasterrcnn"]),
    default="yolo",
    show_default=True,
    help="rtmpose: the person detector's family",
)
@click.option("--person-class", help="rtmpose: the detector's person class, name or id (default: 'person', else all)")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--save", type=click.Path(file_okay=False, path_type=Path), help="folder for annotated images")
def predict(
    inputs: tuple[Path, ...],
    model_type: str,
    model: Path,
    target: str,
    confidence: float | None,
    iou: float | None,
    max_det: int | None,
    classes: str | None,
    imgsz: int | None,
    labels_file: Path | None,
    input_size: str | None,
    resize: str | None,
    box_units: str | None,
    label_offset: int | None,
    detector_model: Path | None,
    detector_type: str,
    person_class: str | None,
    output_format: str,
    save: Path | None,
) -> None:
    """Detections (and keypoints) of a model on images or videos.

    yolo / yolo_pose are pre-processed as Ultralytics does; fasterrcnn (boxes, scores and labels
    outputs, NMS inside) gets the frame resized to its input, RGB, 0..1; rtmpose estimates the
    pose of each person that --detector finds (top-down, MMPose's crop and SimCC decoding).

    JSON: one record per image (or video frame, as PATH:FRAME) with width, height and
    detections [{xyxy, score, class_id, class_name, keypoints}] in image pixels.

    \b
    Examples:
      vision-factory predict --model-type yolo --model yolov8n.onnx bus.jpg --format json
      vision-factory predict --model-type yolo_pose --model yolo11n-pose.onnx clip.mp4 --save annotated/
      vision-factory predict --model-type fasterrcnn --model ssd_mobilenet.onnx street.jpg --labels coco.txt
      vision-factory predict --model-type rtmpose --model rtmpose-m.onnx --detector yolov8n.onnx people.jpg
    """
    from .models.detection_parameters import detector_from_parameters
    from .tools.ball_eval import VIDEO_SUFFIXES, source_frames
    from .tools.bench import load_target

    if model_type == "rtmpose" and detector_model is None:
        raise click.UsageError("rtmpose needs person boxes: give --detector MODEL (and --detector-type if not yolo)")
    if input_size:
        _input_size(input_size)
    # Each option as the node parameter it is (rtmpose: the detector's, and the pose model's).
    finding = {
        "--conf": ("confidence_threshold", confidence),
        "--iou": ("iou_threshold", iou),
        "--max-det": ("max_detections", max_det),
        "--classes": ("classes", classes),
        "--imgsz": ("image_size", imgsz),
        "--labels": ("labels_path", str(labels_file) if labels_file else None),
        "--resize": ("resize", resize),
        "--box-units": ("box_units", box_units),
        "--label-offset": ("label_offset", label_offset),
    }
    posing = {"--input-size": ("input_size", input_size), "--person-class": ("person_class", person_class)}
    load = lambda path: load_target(target, Path(path))  # noqa: E731
    try:
        if model_type == "rtmpose":
            people = detector_from_parameters(detector_type, _node_values(detector_type, detector_model, finding), load)
            values = _node_values("rtmpose", model, posing)
            detector = detector_from_parameters("rtmpose", values, load, person_detector=people)
        else:
            detector = detector_from_parameters(model_type, _node_values(model_type, model, finding | posing), load)
        for path in inputs:
            is_video = path.suffix.lower() in VIDEO_SUFFIXES
            frames = source_frames(path) if is_video else [_read_image(path)]
            for index, frame in enumerate(frames):
                name = f"{path}:{index}" if is_video else str(path)
                detections = detector.detect(frame)
                record = {"image": name, "width": frame.shape[1], "height": frame.shape[0]}
                record["detections"] = [detection.as_dict() for detection in detections]
                if output_format == "json":
                    click.echo(json.dumps(record))
                else:
                    click.echo(f"{name}: " + (", ".join(f"{d.class_name} {d.score:.2f}" for d in detections) or "-"))
                if save is not None:
                    _save_annotated(save, path, index if is_video else None, frame, detections)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc


def _node_values(family: str, model: Path, options: dict[str, tuple[str, object]]) -> dict:
    """The parameter values a ``family`` node would have for ``model`` and the given options (option: (parameter,
    value); None: not given, the nodes' default); an option the family has no parameter for is an error."""
    from .models.detection_parameters import PARAMETERS
    from .parameters import with_defaults

    known = {parameter.name for parameter in PARAMETERS[family]}
    given = {option: item for option, item in options.items() if item[1] is not None}
    for option, (name, _) in given.items():
        if name not in known:
            raise click.BadParameter(f"{family} models take no {name}", param_hint=option)
    return with_defaults(PARAMETERS[family], {"model_path": str(model), **dict(given.values())}, family)


def _warn(note: str) -> None:
    if note:
        click.echo(f"warning: {note}", err=True)


def _read_image(path: Path):
    import cv2

    from .tools.ball_eval import VIDEO_SUFFIXES

    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError(f"{path} is neither a readable image nor a video ({', '.join(VIDEO_SUFFIXES)})")
    return image


def _save_annotated(folder: Path, path: Path, index: int | None, frame, detections) -> None:
    import cv2

    from .models.drawing import draw_detections

    folder.mkdir(parents=True, exist_ok=True)
    suffix = f"_{index:06d}.jpg" if index is not None else path.suffix
    cv2.imwrite(str(folder / f"{path.stem}{suffix}"), draw_detections(frame, detections))


def _input_size(size: str) -> tuple[int, int]:
    """WIDTHxHEIGHT as (height, width)."""
    from .models.detection_parameters import parse_size

    try:
        return parse_size(size)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--input-size") from None


def _progress(done: int, total: int) -> None:
    if done == total or done % 10 == 0:
        click.echo(f"\rreplayed {done}/{total} frames", nl=False, err=True)


def _parse_size(size: str, option: str) -> tuple[int, int]:
    """WIDTHxHEIGHT of ``option`` (its name is in the error) as (width, height)."""
    try:
        width, height = (int(part) for part in size.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"'{size}' is not WIDTHxHEIGHT, e.g. 1280x720", param_hint=option) from None
    if width < 64 or height < 64:
        raise click.BadParameter("frames must be at least 64x64", param_hint=option)
    return width, height


if __name__ == "__main__":
    sys.exit(main())
