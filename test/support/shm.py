"""Fast DDS shared-memory segments left by processes that no longer run, removed.

Every Fast DDS participant (and every shared-memory port it listens on) creates a segment in /dev/shm
(``fastdds_<id>``, ``fastdds_port<N>``) with a lock file beside it (``<segment>_el``) that the owning processes
hold with flock while they run; ports also have a named semaphore (``sem.fastdds_port<N>_mutex``). A process that is
killed (as tests kill nodes that do not stop) leaves them: 15 GB of them once filled /dev/shm and got an export
killed for memory, and before that made DDS answers go missing late in a run. A segment is stale when nobody holds
its lock file and it is older than ``min_age`` seconds (a process that is starting may not have locked it yet) —
the check Fast DDS' own ``fastdds shm clean`` makes.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

SHM = Path("/dev/shm")
PREFIX = "fastdds_"
LOCK_SUFFIX = "_el"


def _held(lock_file: Path) -> bool:
    """Whether a running process holds ``lock_file`` (its flock cannot be taken at once)."""
    try:
        fd = os.open(lock_file, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return True  # not ours to judge (gone, or not a plain file)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def clean_stale(folder: Path = SHM, min_age: float = 600.0, now: float | None = None) -> int:
    """Removes the Fast DDS segments in ``folder`` that no running process holds and that are older than
    ``min_age`` seconds; returns how many segments went (each with its lock file and a port's semaphore)."""
    if not folder.is_dir():
        return 0
    now = time.time() if now is None else now
    removed = 0
    for lock_file in folder.glob(f"{PREFIX}*{LOCK_SUFFIX}"):
        segment = lock_file.with_name(lock_file.name[: -len(LOCK_SUFFIX)])
        try:
            age = now - max(lock_file.lstat().st_mtime, segment.lstat().st_mtime if segment.exists() else 0.0)
        except OSError:
            continue
        if lock_file.is_symlink() or age < min_age or _held(lock_file):
            continue
        semaphore = folder / f"sem.{segment.name}_mutex"
        for path in (segment, semaphore, lock_file):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        removed += 1
    return removed
