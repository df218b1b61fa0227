"""Each camera's camera_info for each of its images, without ROS: a node keeps the camera_info messages it receives
here, per camera, and asks for the one of an image's stamp.

The rule (``CameraInfos.for_stamp``): the camera_info of the image's own header stamp when one of the camera's last
``PAIRING_WINDOW`` (30) received has it; else the camera's newest received (by arrival), so a driver that publishes
its camera_info once, latched, or with a stamp of its own (a static calibration) keeps working; None before the
camera's first. An image is never held back for its camera_info: one of its stamp that comes after the image is
kept for later images, not used for it. Memory is bounded whatever arrives: per camera at most ``window`` messages
(the oldest received forgotten first; a stamp received again replaces its message), and the cameras are the node's
(its ``cameras`` parameter: at most parameters.MAX_CAMERAS). A message is anything with ``header.stamp.sec`` and
``header.stamp.nanosec``; a stamp is such a ``stamp``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from .streaming import PAIRING_WINDOW, stamp_of


class CameraInfos:
    """The camera_info messages of ``cameras`` ("" is the one camera of a node without names), the newest ``window``
    received of each by stamp. ``keep`` runs on the receiving thread, ``for_stamp`` on the inference thread."""

    def __init__(self, cameras: Sequence[str] = ("",), window: int = PAIRING_WINDOW):
        if window < 1:
            raise ValueError(f"a camera_info window of {window}: keep at least one")
        self.window = window
        self._kept: dict[str, OrderedDict] = {camera: OrderedDict() for camera in cameras or ("",)}
        self._lock = threading.Lock()

    def keep(self, info: Any, camera: str = "") -> None:
        """``camera``'s camera_info ``info``, received now: its newest, and the one of its stamp."""
        kept = self._kept[camera]
        stamp = stamp_of(info.header)
        with self._lock:
            kept.pop(stamp, None)  # a stamp again: its newest message, moved to the newest place
            kept[stamp] = info
            while len(kept) > self.window:
                kept.popitem(last=False)

    def for_stamp(self, stamp: Any, camera: str = "") -> Any | None:
        """``camera``'s camera_info for an image of header stamp ``stamp``: the one of that stamp if kept, else the
        newest received; None when none came."""
        kept = self._kept[camera]
        with self._lock:
            info = kept.get((stamp.sec, stamp.nanosec))
            if info is None and kept:
                info = next(reversed(kept.values()))
        return info

    def __len__(self) -> int:
        """The messages kept, over every camera."""
        with self._lock:
            return sum(len(kept) for kept in self._kept.values())
