"""Running the command line as a user does: a child process (`python -m vision_factory.cli`)."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args: str, timeout: float = 300, memory_limit: int | None = None) -> subprocess.CompletedProcess:
    """``memory_limit``: the bytes of address space the child may map (RLIMIT_AS), so that a command a bad file asks
    for gigabytes fails at once (a MemoryError, or a native crash: a negative return code) rather than swapping the
    machine the tests share."""

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    return subprocess.run(
        [sys.executable, "-m", "vision_factory.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limit if memory_limit else None,
    )


def assert_refused(done, *named: str) -> None:
    """A clear error (exit 1, no traceback) naming each of ``named``."""
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    for text in named:
        assert text in done.stderr, done.stderr
