"""The ROS-free parts of an inference node's stream (ros/inference_node.py): the bounded queue of frames that
keeps the newest, the frame-age (staleness) rule, the problem log that reports each kind of problem once and
counts it, and the pairing of an image with its partner (e.g. another node's detections) by header stamp.

Nothing here imports rclpy: a message is anything with ``header.stamp.sec`` and ``header.stamp.nanosec``.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict, deque
from typing import Any

PAIRING_WINDOW = 30  # images (or their partners) kept while waiting for the partner of the same stamp
# The closing line every node logs as it stops (NodeDiagnostics.counts), and what reads it back. The frames its
# publishers sent that never arrived (the monitor's count) end it; a node from before they were counted ends before.
_NEVER_ARRIVED = ", never arrived {never_arrived}"
CLOSING = "frames in {frames_in}, dropped {dropped}, skipped {skipped}, outputs {outputs}" + _NEVER_ARRIVED


def _pattern(line: str) -> str:
    return re.sub(r"\\{(\w+)\\}", r"(?P<\1>\\d+)", re.escape(line))


_CLOSING = re.compile(f"{_pattern(CLOSING.removesuffix(_NEVER_ARRIVED))}(?:{_pattern(_NEVER_ARRIVED)})?")


def closing_counts(log: str) -> dict[str, int] | None:
    """The counts of the last closing line (CLOSING) in a node's ``log``: frames_in, dropped, skipped, outputs,
    never_arrived (0 on a line without it); None when it has none (the node did not stop cleanly)."""
    found = list(_CLOSING.finditer(log))
    return {name: int(value or 0) for name, value in found[-1].groupdict().items()} if found else None


def stamp_of(header: Any) -> tuple[int, int]:
    return header.stamp.sec, header.stamp.nanosec


def stamp_ns(header: Any) -> int:
    stamp = header.stamp
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def frame_header(item: Any) -> Any:
    """The header of a queued item: an image message, or a tuple whose first element is the image message."""
    return (item[0] if isinstance(item, tuple) else item).header


class LastFrame(tuple):
    """A queued item answered again (the same tuple: the image message first): the last frame a node answered, for
    a prompt that changed without a new frame (ros/node_prompts.py). Never stale: it is old on purpose."""


def stale_age_ms(item: Any, now_ns: int, max_frame_age: float) -> float | None:
    """The age in ms (``now_ns`` - the frame's header stamp) of an ``item`` older than ``max_frame_age`` ms;
    None when it is not stale, or when ``max_frame_age`` is 0 (no limit), or for a LastFrame."""
    if not max_frame_age or isinstance(item, LastFrame):
        return None
    age_ms = (now_ns - stamp_ns(frame_header(item))) / 1e6
    return age_ms if age_ms > max_frame_age else None


class FrameQueue:
    """A queue of at most ``size`` items shared by a receiving thread and one consuming thread: when full, the
    oldest item is dropped for the new one (the newest frames are the ones worth answering)."""

    def __init__(self, size: int = 1):
        self.size = size
        self._items: deque = deque()
        self._wake = threading.Condition()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Any) -> Any | None:
        """Add ``item``, waking the consumer; the item dropped to make room, or None."""
        dropped = None
        with self._wake:
            if len(self._items) >= self.size:
                dropped = self._items.popleft()
            self._items.append(item)
            self._wake.notify()
        return dropped

    def take(self, timeout: float = 0.0) -> Any | None:
        """The oldest item, waiting up to ``timeout`` seconds for one when empty; None when none came."""
        with self._wake:
            if not self._items and timeout > 0:
                self._wake.wait(timeout=timeout)
            return self._items.popleft() if self._items else None

    def drain(self) -> list:
        """Remove and return every item, oldest first."""
        with self._wake:
            items, self._items = list(self._items), deque()
        return items

    def wake(self) -> None:
        """Wake a consumer waiting in ``take`` (e.g. to see that it should stop)."""
        with self._wake:
            self._wake.notify()


class KindError(ValueError):
    """An input that cannot be used, of a kind of problem a node counts and reports once (ProblemLog): ``kind`` names
    it in a few fixed words (never text from a message), the message adds the details and the fix."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind


class ProblemLog:
    """Problems with frames, counted by kind (a short fixed name, never text from a message): ``count`` gives the
    line to log for the first of each kind only, ``summary`` the counts when new ones came since the last."""

    def __init__(self, period: float):
        # seconds between the summaries while new problems come (said in the first lines); 0: one at the end
        self.period = period
        self.counts: dict[str, int] = {}  # kind -> frames it happened to, in order of first sight
        self.skipped = 0  # frames skipped (not answered) for a problem
        self._logged = 0  # of the frames counted, at the last summary
        self._lock = threading.Lock()  # problems come from the receiving and the inference threads

    def count(self, kind: str, what: str, detail: str, skipped: bool) -> str | None:
        """Count one frame with problem ``kind``; the line to log (``what``, ``kind``, ``detail``) when it is the
        first of its kind, else None. ``detail`` is logged as given: escape untrusted text before."""
        with self._lock:
            first = kind not in self.counts
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.skipped += skipped
        if not first:
            return None
        follow = f"every {self.period:g} s while more come, and at stop" if self.period else "at the end"
        return f"{what} ({kind}): {detail} (logged once per kind; counts follow {follow})"

    def summary(self, final: bool = False) -> str | None:
        """The counts by kind when new problems came since the last summary, or ``final``ly when any came."""
        with self._lock:
            counts, total = dict(self.counts), sum(self.counts.values())
            if total == self._logged and not (final and total):
                return None
            self._logged = total
        by_kind = ", ".join(f"{kind}: {count}" for kind, count in counts.items())
        return f"frames with problems {'in all' if final else 'so far'}, by kind: {by_kind}"


class Pairing:
    """Images and their partners (messages of another topic with the same header stamp), the newest ``window``
    unpaired of each kept. ``image`` and ``partner`` return the (image, partner) pair once both of a stamp are in,
    and how many unpaired images fell out of the window (their partner never came)."""

    def __init__(self, window: int = PAIRING_WINDOW):
        self.window = window
        self.images: OrderedDict = OrderedDict()
        self.partners: OrderedDict = OrderedDict()

    def image(self, msg: Any) -> tuple[tuple | None, int]:
        partner = self.partners.pop(stamp_of(msg.header), None)
        if partner is not None:
            return (msg, partner), 0
        return None, self._keep(self.images, msg)

    def partner(self, msg: Any) -> tuple[tuple | None, int]:
        image = self.images.pop(stamp_of(msg.header), None)
        if image is not None:
            return (image, msg), 0
        self._keep(self.partners, msg)
        return None, 0

    def clear(self) -> int:
        """Forget every unpaired message; the number of images among them."""
        unpaired = len(self.images)
        self.images.clear()
        self.partners.clear()
        return unpaired

    def _keep(self, kept: OrderedDict, msg: Any) -> int:
        kept[stamp_of(msg.header)] = msg
        dropped = 0
        while len(kept) > self.window:
            kept.popitem(last=False)
            dropped += 1
        return dropped
