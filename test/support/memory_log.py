"""Each test's memory, for finding what grows: with ``VF_TEST_MEMORY_LOG=DIR`` every test worker appends a line per
test to ``DIR/<worker>.tsv``: the time, the test, the worker's resident and peak memory and its children's (KiB),
and the machine's available memory. A worker whose memory climbs test after test holds something it should free
(a map keyed by a loaded model kept every SAM session once: 9.4 GB by the end of a run).

    VF_TEST_MEMORY_LOG=/tmp/memory python -m pytest -q
    awk -F'\\t' '{print $3 - last, $2; last = $3}' /tmp/memory/gw0.tsv | sort -n | tail   # the largest steps
"""

from __future__ import annotations

import os
import time
from pathlib import Path

HEADER = "time\ttest\trss_kib\tpeak_kib\tchildren_rss_kib\tavailable_kib\n"


def _field(path: str, key: str) -> int:
    """A ``key: N kB`` line's N in a /proc file (-1 when it cannot be read)."""
    try:
        with open(path) as lines:
            for line in lines:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return -1


def _children_rss(pid: int) -> int:
    """The resident memory of ``pid``'s descendants (KiB): nodes and tools the tests start."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0
    return sum(max(_field(f"/proc/{child}/status", "VmRSS:"), 0) + _children_rss(int(child)) for child in children)


def record(folder: str, test: str) -> None:
    """Appends ``test``'s line to this worker's file in ``folder`` (made if missing)."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.tsv"
    status = "/proc/self/status"
    fresh = not path.exists()
    with path.open("a") as handle:
        if fresh:
            handle.write(HEADER)
        handle.write(
            f"{time.time():.0f}\t{test}\t{_field(status, 'VmRSS:')}\t{_field(status, 'VmHWM:')}\t"
            f"{_children_rss(os.getpid())}\t{_field('/proc/meminfo', 'MemAvailable:')}\n"
        )
