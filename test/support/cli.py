"""Running the command line as a user does: a child process (`python -m vision_factory.cli`)."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vision_factory.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def assert_refused(done, *named: str) -> None:
    """A clear error (exit 1, no traceback) naming each of ``named``."""
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    for text in named:
        assert text in done.stderr, done.stderr
