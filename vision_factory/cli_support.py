"""The Click plumbing of the command line (cli.py keeps the option tables and the calls): shared options, path
types, options made from a node parameter's table (``parameter_option``: the parameter's default and description),
and how a command shows what a tool returns or why it failed."""

from __future__ import annotations

import contextlib
import inspect
import shlex
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import click

from .families.registry import node_parameter
from .parameters import Parameter
from .progress import ENVIRONMENT, Bars, shown
from .text import printable, shown_path
from .tools.commands import CommandReport, UsageError

FORMAT_HELP = "text for people, json for programs"

option = click.option
FILE = click.Path(dir_okay=False, path_type=Path)
MODEL = click.Path(path_type=Path)  # a model file, or a model folder (a Florence-2 export: models/model_file.py)
FOLDER = click.Path(file_okay=False, path_type=Path)
ANY_PATH = click.Path(path_type=Path)
EXISTING = click.Path(exists=True, path_type=Path)
EXISTING_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
POSITIVE = click.FloatRange(min=0, min_open=True)
STRIDE = click.IntRange(min=1)  # tracknet's stride: 1..seq_len (seq_len is the model's, checked as it loads)
FORMAT = option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
                help=FORMAT_HELP)  # fmt: skip
BACKEND = option(
    "--backend", "target", default="onnx:cpu", show_default=True, help="as in bench: onnx:cpu, openvino:CPU"
)
BAG_TOPIC = option("--topic", help="image topic in the bag (needed when it has several)")
PARAM = option("-p", "--param", "params", multiple=True, metavar="NAME:=VALUE", help="node parameter, repeatable")
# A prompted family's options (families/prompts.py): (option, click type, help); each sets the node parameter
# tools/predict.py's PROMPTED names. predict and track take them with the detector's options, eval, compare, bench
# and quantize as ``prompt_options``; replay and verify take the prompt (PROMPT) and the others as -p NAME:=VALUE.
PROMPT_OPTIONS = (
    ("--prompt", str, "a text prompt, for a family that takes one: phrases separated by ' . ' (e.g. 'a cat . a dog')"),
    ("--tokenizer", click.Path(exists=True, dir_okay=False), "open_vocab: the export's own tokenizer.json (or "
     "vocab.txt)  [default: the one beside the model]"),
    ("--text-encoder", click.Path(exists=True, dir_okay=False), "open_vocab, YOLO-World / YOLOE taking txt_feats "
     "or tpe: the CLIP text encoder (.onnx)  [default: text_encoder.onnx beside the model]"),
    ("--text-threshold", float, "open_vocab, Grounding DINO: a detection none of whose phrase's tokens scores above "
     "this is dropped  [default: the nodes']"),
    ("--decoder", FILE, "sam: the prompt decoder  [default: the one beside the --model encoder]"),
)  # fmt: skip
# A node's text prompt, for a family that takes one: replay's and verify's -p prompt:=TEXT.
PROMPT = option("--prompt", help=PROMPT_OPTIONS[0][2])


def prompt_options(*flags: str, prefix: str = "") -> Callable:
    """PROMPT_OPTIONS (those of ``flags``, or all), each passed to the command under its node parameter's name
    (tools/predict.py's PROMPTED; None: not given), its help after ``prefix``."""
    from .tools.predict import PROMPTED

    return options(
        *(
            option(flag, PROMPTED[flag], type=kind, help=prefix + text)
            for flag, kind, text in PROMPT_OPTIONS
            if not flags or flag in flags
        )
    )


def given_prompt_options(given: dict) -> dict:
    """The PROMPT_OPTIONS values ``prompt_options`` passed (taken out of ``given``), by option."""
    from .tools.predict import PROMPTED

    return {flag: given.pop(name, None) for flag, name in PROMPTED.items()}


# replay's and verify's several cameras through one node, read by tools/replay_frames.py's parse_cameras for both.
CAMERAS = option(
    "--camera",
    "cameras",
    multiple=True,
    metavar="NAME=SOURCE",
    help="camera NAME and its frames' SOURCE (an image topic of BAG, or another bag), repeatable: several cameras "
    "through one node (its cameras parameter), played in recorded time order as fast as the node keeps up, each "
    "camera's results in OUT/NAME/",
)


def camera_sources(given: dict, cameras: tuple[str, ...], unused: dict[str, object]) -> list:
    """--camera's sources (replay_frames.parse_cameras; none without --camera: the one camera is BAG's image topic),
    the options of one camera's run it does not take (``unused``: an option's name and its default) refused, naming
    them."""
    from .tools.replay_frames import parse_cameras

    if not cameras:
        return []
    refused = [f"--{name.replace('_', '-')}" for name, default in unused.items() if given.get(name) != default]
    if refused:
        raise click.UsageError(f"--camera plays as fast as the node keeps up and takes no {', '.join(refused)}")
    try:
        return parse_cameras(cameras, given["bag"])
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


class ParameterOption(click.Option):
    """An option that means a node parameter (``parameter``): its default is the parameter's, its help the
    parameter's description."""

    def __init__(self, *args: Any, parameter: Parameter, **settings: Any) -> None:
        super().__init__(*args, **settings)
        self.parameter = parameter


def parameter_option(
    name: str, flag: str = "", dest: str = "", prefix: str = "", suffix: str = "", **settings: Any
) -> Callable:
    """The option ``flag`` (default: --name-with-dashes) for the node parameter ``name`` (families/registry.py's
    node_parameter), passed to the command as ``dest`` (default: the parameter's name), of the parameter's default;
    its help ``prefix`` + the parameter's description + ``suffix``. ``settings``: Click's (a narrower type)."""
    parameter = node_parameter(name)
    settings = {"type": type(parameter.default), "show_default": parameter.default != "", **settings}
    help_text = f"{prefix}{parameter.description}{suffix}"
    flag = flag or "--" + name.replace("_", "-")
    return option(flag, dest or name, cls=ParameterOption, parameter=parameter, default=parameter.default,
                  help=help_text, **settings)  # fmt: skip


def tool_option(flag: str, tool: Callable, name: str, **settings: Any) -> Callable:
    """The option ``flag`` for the keyword argument ``name`` of the ``tool`` function, of its default there."""
    default = inspect.signature(tool).parameters[name].default
    return option(flag, name, default=default, show_default=True, **settings)


def options(*decorators: Callable) -> Callable:
    """Apply option decorators in the order listed (the order --help shows)."""

    def apply(command: Callable) -> Callable:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


# florence2's task and its text, which make its prompt ('<CAPTION_TO_PHRASE_GROUNDING>' and 'a cat': the prompt
# '<CAPTION_TO_PHRASE_GROUNDING>a cat'): predict, bench and compare; folded into --prompt by ``task_prompt``.
TASK = options(
    option("--task", help="florence2: the task, e.g. '<OD>', '<CAPTION>', '<OCR>'  [default: the nodes']"),
    option("--text", "task_text", help="florence2: the task's text, e.g. the caption of "
           "'<CAPTION_TO_PHRASE_GROUNDING>'"),
)  # fmt: skip


def task_prompt(given: dict, prompt: str | None) -> str | None:
    """The prompt --task and --text make (taken out of ``given``), else ``prompt`` (--prompt); both refused."""
    task, text = given.pop("task", None), given.pop("task_text", None)
    if not (task or text):
        return prompt
    if prompt:
        raise click.UsageError("give the task by --task (and --text) or by --prompt, not both")
    return (task or "") + (text or "")


def out_option(help_text: str, default: str | None = None, kind: click.ParamType = FOLDER, dest: str = "out_dir"):
    """--out: a folder (or file) for what the command writes; required when it has no default."""
    if default is None:
        return option("--out", dest, type=kind, required=True, help=help_text)
    return option("--out", dest, type=kind, default=Path(default), show_default=True, help=help_text)


def force_option(help_text: str = "replace the outputs of an earlier run in OUT (else refused)") -> Callable:
    return option("--force", is_flag=True, help=help_text)


def executable_option(example: str) -> Callable:
    return option("--executable", help=f"command that starts the node instead of this package's, e.g. '{example}'")


def model_type_option(choices: Iterable[str], help_text: str = "model family", **settings: Any) -> Callable:
    return option("--model-type", type=click.Choice(list(choices)), help=help_text, **settings)


@contextlib.contextmanager
def reported(*errors: type[Exception]) -> Iterator[None]:
    """A wrong option as Click's usage error (naming the option), a failure (ValueError, RuntimeError, an OSError
    and ``errors``) as an error message instead of a traceback; either made printable (text.printable)."""
    try:
        yield
    except UsageError as exc:
        if exc.option:
            raise click.BadParameter(printable(exc), param_hint=exc.option) from None
        raise click.UsageError(printable(exc)) from None
    except (ValueError, RuntimeError, *errors) as exc:
        raise click.ClickException(printable(exc)) from exc
    except OSError as exc:  # a path of the wrong kind (a folder for a file, a file above a folder), unreadable...
        raise click.ClickException(os_error(exc)) from exc


def os_error(exc: OSError) -> str:
    """An OSError as one line naming the path, the reason and the fix (its own message when it names no path)."""
    if exc.filename is None:
        return printable(exc)
    other = f" -> {shown_path(exc.filename2)}" if exc.filename2 is not None else ""
    return (
        f"cannot use {shown_path(exc.filename)}{other}: {exc.strerror or exc}; give a path of the right kind "
        "(a file or a folder) that this user can read, or write for an output"
    )


def command_words(executable: str | None) -> list[str] | None:
    """--executable's command, split as a shell would."""
    return shlex.split(executable) if executable else None


def show(report: CommandReport) -> None:
    for note in report.warnings:
        warn(note)
    echo(report.shown())


def warn(note: str) -> None:
    if note:
        echo(f"warning: {note}", err=True)


def echo(text: str, err: bool = False) -> None:
    """The command's own text on the terminal: made printable (text.printable), whatever it quotes."""
    click.echo(printable(text), err=err)


_BARS = "vision_factory.progress"  # the command's Bars, in its Click context's meta


def _progress_choice(context: click.Context, _parameter: click.Parameter, value: bool | None) -> None:
    context.meta[_BARS + ".choice"] = value


# Every long command's --progress/--quiet (progress.py): read by progress_bars, not passed to the command.
PROGRESS = option(
    "--progress/--quiet",
    default=None,
    expose_value=False,
    callback=_progress_choice,
    help=f"a progress bar on stderr  [default: when stderr is a terminal, or {ENVIRONMENT}=1]; --quiet: none",
)


def progress_bars() -> Bars:
    """The running command's progress bars (progress.py's Bars, shown as its --progress/--quiet and stderr say),
    made once and closed with the command."""
    context = click.get_current_context(silent=True)
    if context is None:
        return Bars(shown(None))
    if _BARS not in context.meta:
        bars = context.meta[_BARS] = Bars(shown(context.meta.get(_BARS + ".choice")))
        context.call_on_close(bars.close)
    return context.meta[_BARS]


def progress(done: int, total: int) -> None:
    """replay's frames played (tools/replay.py's progress callback)."""
    progress_bars()("replayed frames", done, total)
