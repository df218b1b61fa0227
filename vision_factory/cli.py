"""vision-factory: the command line. Each command is a few lines calling tools/ or generator/."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from . import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vision-factory")
def main() -> None:
    """ONNX models as ROS 2 perception nodes: run, replay, and (soon) generate packages."""


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

    width, height = _parse_size(size)
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
    help="folder for the output bag, ball.csv and replay.json",
)
@click.option("--node", default="tracknet", show_default=True, help="node to start for the replay")
@click.option(
    "--params-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="ROS 2 parameters YAML for the node (e.g. config/tracknet_onnx.yaml)",
)
@click.option("-p", "--param", "params", multiple=True, metavar="NAME:=VALUE", help="node parameter, repeatable")
@click.option("--topic", help="image topic in the bag (needed when it has several)")
@click.option("--rate", type=float, help="play at recorded timing times RATE; default: as fast as the node keeps up")
@click.option("--storage", type=click.Choice(["mcap", "sqlite3"]), default="mcap", show_default=True)
def replay(
    bag: Path,
    out_dir: Path,
    node: str,
    params_file: Path | None,
    params: tuple[str, ...],
    topic: str | None,
    rate: float | None,
    storage: str,
) -> None:
    """Play a rosbag2 (mcap or sqlite3) through a node and record its outputs.

    Writes the node's messages to OUT/<node>_outputs (a bag), the ball as OUT/ball.csv in
    TrackNet's format (Frame, Visibility, X, Y) and a summary to OUT/replay.json.

    \b
    Example:
      vision-factory replay rally_bag --out /tmp/rally -p model_path:=tracknet.onnx \\
          -p bg_mode:=subtract -p median_warmup:=10
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
            bag, out_dir, node, overrides, params_file, topic, rate, storage=storage, progress=_progress
        )
    except (BagError, ValueError, RuntimeError, FileExistsError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo("", err=True)
    click.echo(json.dumps(result.summary(), indent=2))
    if result.missing_frames:
        click.echo(f"warning: {len(result.missing_frames)} frames got no output (see {result.node_log})", err=True)


def _progress(done: int, total: int) -> None:
    if done == total or done % 10 == 0:
        click.echo(f"\rreplayed {done}/{total} frames", nl=False, err=True)


def _parse_size(size: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in size.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"'{size}' is not WIDTHxHEIGHT, e.g. 1280x720", param_hint="--size") from None
    if width < 64 or height < 64:
        raise click.BadParameter("frames must be at least 64x64", param_hint="--size")
    return width, height


if __name__ == "__main__":
    sys.exit(main())
