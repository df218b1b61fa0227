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


def _available_kib() -> int:
    """The machine's available memory (/proc/meminfo's MemAvailable), KiB."""
    with open("/proc/meminfo") as lines:
        return next(int(line.split()[1]) for line in lines if line.startswith("MemAvailable:"))


def _children_rss(pid: int) -> int:
    """The resident memory of ``pid``'s descendants (KiB): nodes and tools the tests start (one that has just
    ended counts 0)."""
    from vision_factory.tools.fuzz import memory_kib

    try:
        children = [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return 0
    total = 0
    for child in children:
        try:
            total += memory_kib(child).get("VmRSS", 0)
        except OSError:
            continue
        total += _children_rss(child)
    return total


def record(folder: str, test: str) -> None:
    """Appends ``test``'s line to this worker's file in ``folder`` (made if missing)."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.tsv"
    from vision_factory.tools.fuzz import memory_kib  # VmRSS and VmHWM, KiB: the fuzz campaign's reader

    own = memory_kib(os.getpid())
    fresh = not path.exists()
    with path.open("a") as handle:
        if fresh:
            handle.write(HEADER)
        handle.write(
            f"{time.time():.0f}\t{test}\t{own['VmRSS']}\t{own['VmHWM']}\t{_children_rss(os.getpid())}\t"
            f"{_available_kib()}\n"
        )
