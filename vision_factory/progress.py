"""Progress of long work, shown as a bar on stderr (tqdm): a count, its total where the work knows it up front
(the frames of a bag, the images of a data set, calibration frames), the rate and the time left.

The tools take a ``progress`` callable of the shape ``Progress``: ``progress(what, done, total)`` after each unit
of work (``what`` names the stage, e.g. "calibration frames"; ``total`` None where it is not known). They never
import tqdm; the command line makes a ``Bars`` (cli_support.progress_bars) and hands it down. A bar is shown when
stderr is a terminal, or when the user asks for it (--progress, or VISION_FACTORY_PROGRESS=1), and never under
--quiet (or VISION_FACTORY_PROGRESS=0): a pipe and a log file get none of it, and stdout is never touched.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import IO

from .text import untrusted

ENVIRONMENT = "VISION_FACTORY_PROGRESS"  # 1: bars even when stderr is not a terminal; 0: never
Progress = Callable[[str, int, "int | None"], None]


def shown(choice: bool | None, stream: IO[str] | None = None) -> bool:
    """Whether to show bars: ``choice`` (--progress True, --quiet False) first, then VISION_FACTORY_PROGRESS
    (1 or 0), else whether ``stream`` (default stderr) is a terminal."""
    if choice is not None:
        return choice
    setting = os.environ.get(ENVIRONMENT, "").strip().lower()
    if setting in ("1", "true", "yes", "on"):
        return True
    if setting in ("0", "false", "no", "off"):
        return False
    stream = stream if stream is not None else sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or stand-in stream
        return False


class Bars:
    """A ``Progress`` that draws one tqdm bar per stage on ``stream`` (default stderr), the bar of the stage
    before closed when the next begins; nothing at all when not ``enabled``. Close it (or use it in ``with``) to
    end the last bar's line."""

    def __init__(self, enabled: bool, stream: IO[str] | None = None) -> None:
        self.enabled = enabled
        self.stream = stream
        self._bar = None
        self._what = ""

    def __call__(self, what: str, done: int, total: int | None = None) -> None:
        if not self.enabled:
            return
        if self._bar is None or what != self._what or (total is not None and total != self._bar.total):
            self._open(what, total)
        bar = self._bar
        if done > bar.n:
            bar.update(done - bar.n)
        if total is not None and done >= total:
            self.close()

    def _open(self, what: str, total: int | None) -> None:
        from tqdm import tqdm

        self.close()
        self._what = what
        self._bar = tqdm(
            total=total,
            desc=untrusted(what, 80),
            unit="",
            file=self.stream if self.stream is not None else sys.stderr,
            dynamic_ncols=True,
            mininterval=0.2,
            leave=True,
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Bars:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def counted(items, progress: Progress | None, what: str, total: int | None = None):
    """``items`` as they are, ``progress(what, n, total)`` reported after each (total: ``len(items)`` where it
    has one)."""
    if progress is None:
        yield from items
        return
    if total is None and hasattr(items, "__len__"):
        total = len(items)
    progress(what, 0, total)
    for done, item in enumerate(items, 1):
        yield item
        progress(what, done, total)
