"""What the tools' charts share (matplotlib, drawing into files only): pyplot on the Agg backend, a
precision-recall chart's axes, and a figure saved by files.py's rules then closed."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


def pyplot():
    """matplotlib's pyplot, drawing into files only (the Agg backend: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def precision_recall_axes(axes: Any, title: str) -> None:
    """``axes`` as a precision-recall chart: recall across, precision up, both 0..1 (a little over, so that a line
    at 1 shows), a light grid."""
    axes.set_xlabel("recall")
    axes.set_ylabel("precision")
    axes.set_xlim(0, 1.02)
    axes.set_ylim(0, 1.02)
    axes.set_title(title)
    axes.grid(alpha=0.3)


def save_figure(figure: Any, path: Path, inputs: Iterable = (), option: str | None = None) -> Path:
    """``figure`` laid out and written as ``path`` (files.staged: never through a link nor onto one of ``inputs``),
    then closed."""
    from ..files import staged

    figure.tight_layout()
    with staged(path, inputs, option) as fresh:
        figure.savefig(fresh, dpi=100)
    pyplot().close(figure)
    return path
