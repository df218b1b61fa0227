"""ROS domains claimed per run: a test run (conftest) or a benchmark locks its own, so that no two share one."""

from __future__ import annotations

import fcntl
import os
import tempfile

_held: list = []  # the locks held, for as long as this process lasts


def claim_domain() -> int:
    """A ROS domain (1..100: clear of ephemeral ports) that no other test run or benchmark on this machine holds: each
    locks its own (a lock file under the temp dir, released when the process ends, however it ends). Two runs sharing
    a domain see each other's nodes under the same names (seen: a probe got another run's constant-model answers; a
    benchmark counted another run's camera frames)."""
    start = os.getpid() % 100
    for step in range(100):
        domain = 1 + (start + step) % 100
        handle = open(os.path.join(tempfile.gettempdir(), f"vision_factory_test_domain_{domain}.lock"), "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _held.append(handle)
        return domain
    raise RuntimeError("every ROS domain 1..100 is held by another test run on this machine")
