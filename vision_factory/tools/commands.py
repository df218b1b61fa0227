"""What the command functions of tools/ share with the CLI: usage errors naming an option (usage.py), reports,
option parsers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..parameters import Parameter
from ..text import parse_size, shown_path
from ..usage import UsageError

MIN_FRAME_SIDE = 64


@dataclass
class CommandReport:
    """What a command wrote: the text it shows, then its files (name: path), and warnings for stderr."""

    text: str
    files: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def shown(self) -> str:
        return self.text + "\n".join(f"{name}: {shown_path(path)}" for name, path in self.files.items())


def frame_size(text: str, option: str) -> tuple[int, int]:
    """The WIDTHxHEIGHT frame size given as ``option``, as (width, height), at least 64x64."""
    try:
        width, height = parse_size(text)
    except ValueError as exc:
        raise UsageError(str(exc), option) from None
    if width < MIN_FRAME_SIDE or height < MIN_FRAME_SIDE:
        raise UsageError(f"frames must be at least {MIN_FRAME_SIDE}x{MIN_FRAME_SIDE}", option)
    return width, height


def node_default(parameters: Iterable[Parameter], name: str) -> Any:
    """The default of a node's parameter ``name``: an option meaning the same starts from it."""
    return next(parameter.default for parameter in parameters if parameter.name == name)
