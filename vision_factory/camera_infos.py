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

What a camera_info says of its camera (``Intrinsics``: K, the size) is checked in one place, ``Intrinsics.of``,
for every node that places pixels by it (depth_node's points, detect_3d_node's boxes): a camera_info that cannot
place a pixel (a focal length of 0 or not finite, a principal point not finite, a size of 0, binning or roi set)
is a CameraInfoError naming the kind of problem.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .streaming import PAIRING_WINDOW, KindError, stamp_of


class CameraInfoError(KindError):
    """A camera_info that cannot place a pixel (``kind``: which problem; the message: the values and the fix)."""


@dataclass(frozen=True)
class Intrinsics:
    """A pinhole camera: focal lengths and principal point in pixels (K; pixel c's centre at c), image size."""

    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    @classmethod
    def from_camera_info(
        cls, k: Sequence[float], width: int, height: int, what: str = "camera_info", binning=(0, 0), roi=(0, 0, 0, 0)
    ) -> Intrinsics:
        """From a sensor_msgs/CameraInfo's K (row-major 3x3), width and height; ``binning`` (binning_x, binning_y)
        and ``roi`` (x_offset, y_offset, width, height) must be unset. An uncalibrated camera (K all zeros, a focal
        length of 0 or not finite), a principal point or another K value not finite, or a size of 0 is a CameraInfoError
        naming ``what`` (its kind with it: a node reports each once)."""
        values = [float(v) for v in k]
        if len(values) != 9:
            raise CameraInfoError(f"bad {what}", f"{what}: K has {len(values)} values, not 9")
        fx, cx, fy, cy = values[0], values[2], values[4], values[5]
        if not (math.isfinite(fx) and math.isfinite(fy)) or fx <= 0 or fy <= 0:
            raise CameraInfoError(
                f"{what} without focal length",
                f"{what}'s K has focal lengths fx {fx:g}, fy {fy:g}: the camera is not calibrated (a driver publishes "
                "K all zeros then); calibrate it (camera_calibration) or have its driver publish its factory "
                "intrinsics",
            )
        if not all(math.isfinite(v) for v in values):
            centre = math.isfinite(cx) and math.isfinite(cy)
            raise CameraInfoError(
                f"bad {what}" if centre else f"{what} without principal point",
                f"{what}'s K has a NaN or infinite value (cx {cx:g}, cy {cy:g}): it is damaged; calibrate the camera "
                "or have its driver publish its factory intrinsics",
            )
        if width <= 0 or height <= 0:
            raise CameraInfoError(f"bad {what}", f"{what} says the image is {width}x{height}: no image has that size")
        if any(int(b) > 1 for b in binning) or any(int(r) for r in roi):
            raise CameraInfoError(
                f"{what} with binning or roi",
                f"{what} sets binning {tuple(binning)} or roi {tuple(roi)}: publish the intrinsics of the image as "
                "sent (image_proc's crop_decimate does), or leave both unset",
            )
        return cls(fx, fy, cx, cy, int(width), int(height))

    @classmethod
    def of(cls, info: Any, what: str = "camera_info") -> Intrinsics:
        """``from_camera_info`` of a sensor_msgs/CameraInfo (any object of its fields: no ROS here)."""
        roi = info.roi
        return cls.from_camera_info(
            info.k,
            info.width,
            info.height,
            what,
            (info.binning_x, info.binning_y),
            (roi.x_offset, roi.y_offset, roi.width, roi.height),
        )

    @property
    def size(self) -> tuple[int, int]:
        return self.width, self.height


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
