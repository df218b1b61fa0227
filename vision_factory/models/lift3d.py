"""Detections in 3D: 2D detections (boxes, optional instance masks) lifted into boxes in the camera's optical frame
(x right, y down, z forward, metres) by a depth image and pinhole intrinsics. No ROS import: ros/detect_3d_node.py
feeds it from messages, the tests from synthetic scenes.

Depth (REP-118): ``16UC1`` is millimetres, ``32FC1`` metres, read from the image's encoding and never from a
divisor setting; 0, NaN, infinities and negative values are "no depth". Any other encoding is refused.

Alignment: boxes are in the colour image's pixels (the detections' camera, ``camera_info``); the depth image is
read through its own intrinsics (``depth_camera_info``) when it has them: a box is mapped colour pixel -> ray ->
depth pixel through both. Without them the depth image must be the colour camera's own registered depth, of the
same size, read through the colour intrinsics; a depth image of another size, or in another optical frame
(unregistered depth: it needs the extrinsics, e.g. depth_image_proc's register), is refused, never guessed.
So is a camera_info of another frame than the detections' (``check_camera_frame``).

Pixel coordinates: a box's x1..x2 are continuous coordinates in which pixel column c spans c..c+1 (as the
detectors give them, and as models/masks.py crops a mask); camera_info's K puts pixel c's centre at c. A depth
pixel belongs to a box when its centre, mapped into the colour image, lies inside the box (at least the pixel
holding the box's centre always does).

Per detection: the depth samples are the valid depths under its instance mask, or in its box's core (the central
``core`` fraction of its width and height: the object, rarely the background around it). Their median is the
reference; samples farther from it than the outlier band (``OUTLIER_MADS`` median absolute deviations, at least
``OUTLIER_MIN`` of the reference) are left out (background seen through the core or beside a mask's edge). The
box's depth extent is the inliers' ``SPREAD_PERCENTILES`` range (the visible surface's: depth sees the front of an
object only) and its centre z the middle of that range; its centre x, y is the 2D box's centre back-projected at
that depth, its width and height the 2D box's, back-projected at that depth. A detection with fewer valid samples
than ``min_valid`` of its region's pixels (or none) gets no 3D box: ``lift`` gives None for it, never a box at
zero depth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..camera_infos import Intrinsics
from ..results.finite import finite_box
from ..results.frame import FrameResult
from ..results.masks import InstanceMask
from ..streaming import KindError
from ..text import untrusted

# Depth image encodings (REP-118) -> (numpy dtype, units per metre). Nothing else is depth.
DEPTH_ENCODINGS = {"16UC1": ("u2", 1000), "32FC1": ("f4", 1)}
CORE = 0.5  # the share of a box's width and height, around its centre, whose depth is the object's (without a mask)
MIN_VALID = 0.1  # the least share of valid depth among the region's pixels for a 3D box
OUTLIER_MADS = 3.0  # samples farther than this many (normal-scaled) median absolute deviations from the median ...
OUTLIER_MIN = 0.02  # ... and farther than this share of the median are not the object's
SPREAD_PERCENTILES = (5.0, 95.0)  # the robust depth range of the object's samples: its depth extent
MAD_TO_SIGMA = 1.4826  # a normal distribution's standard deviation per median absolute deviation


class LiftError(KindError):
    """Depth that cannot be used (``kind``: which problem, so that a node counts and reports each once; the message:
    the details and the fix)."""


def depth_metres(encoding: str, width: int, height: int, step: int, data, bigendian: bool = False) -> np.ndarray:
    """A depth image's pixels as float32 metres [height, width], NaN where there is no depth; the unit from the
    ``encoding`` (DEPTH_ENCODINGS). Another encoding, or a step or buffer too short for the size, is a LiftError."""
    if encoding not in DEPTH_ENCODINGS:
        raise LiftError(
            "depth encoding",
            f"the depth image is {untrusted(encoding, 40)}: depth is 16UC1 (millimetres) or 32FC1 (metres), REP-118; "
            "subscribe to the camera's depth image (e.g. aligned_depth_to_color/image_raw), not a colourised one",
        )
    kind, per_metre = DEPTH_ENCODINGS[encoding]
    dtype = np.dtype(kind).newbyteorder(">" if bigendian else "<")
    if width <= 0 or height <= 0 or step < width * dtype.itemsize or len(data) < step * height:
        raise LiftError(
            "malformed depth image",
            f"a {width}x{height} {encoding} image needs step >= {width * dtype.itemsize} and {step * height} bytes; "
            f"it has step {step} and {len(data)} bytes",
        )
    rows = np.frombuffer(data, np.uint8, step * height).reshape(height, step)[:, : width * dtype.itemsize]
    values = np.ascontiguousarray(rows).view(dtype).astype(np.float32)
    if per_metre != 1:
        values /= np.float32(per_metre)  # divided, so that 1500 mm is exactly the float32 nearest 1.5 m
    values[~(values > 0) | ~np.isfinite(values)] = np.nan  # 0 (16UC1's no depth), NaN, inf, negative
    return values


def check_camera_frame(detections_frame: str, camera_frame: str) -> None:
    """The detections (header frame ids; "" unknown) must be of the camera whose camera_info is given: else a
    LiftError naming both frames."""
    if detections_frame and camera_frame and detections_frame != camera_frame:
        raise LiftError(
            "camera_info of another camera",
            f"the detections are in frame {untrusted(detections_frame, 100)}, camera_info in "
            f"{untrusted(camera_frame, 100)}: remap camera_info to the camera_info of the detections' image",
        )


def depth_intrinsics(
    colour: Intrinsics,
    depth: Intrinsics | None,
    depth_size: tuple[int, int],
    colour_frame: str = "",
    depth_frame: str = "",
) -> Intrinsics:
    """The intrinsics to read a depth image of ``depth_size`` (width, height) by: its own (``depth``, the depth
    camera_info), or the colour camera's when it has none and is of the colour image's size. ``colour_frame`` and
    ``depth_frame`` (header frame ids; "" unknown) must name one optical frame. Else a LiftError saying what would
    say how the two images align."""
    if colour_frame and depth_frame and colour_frame != depth_frame:
        raise LiftError(
            "depth not registered",
            f"the depth image is in frame {untrusted(depth_frame, 100)}, the detections in "
            f"{untrusted(colour_frame, 100)}: depth from another camera needs registering to the colour camera first "
            "(the driver's aligned depth, e.g. align_depth.enable, or depth_image_proc's register)",
        )
    if depth is None:
        if depth_size != colour.size:
            raise LiftError(
                "depth size without its camera_info",
                f"depth {depth_size[0]}x{depth_size[1]}, colour image {colour.width}x{colour.height} (camera_info), "
                "and no depth_camera_info says how they align: publish the depth's camera_info there, or registered "
                "depth of the colour size",
            )
        return colour
    if depth_size != depth.size:
        raise LiftError(
            "depth_camera_info size",
            f"the depth image is {depth_size[0]}x{depth_size[1]}, its depth_camera_info {depth.width}x{depth.height}: "
            "that camera_info is not this depth image's",
        )
    return depth


@dataclass(frozen=True)
class Box3D:
    """An axis-aligned box in the camera's optical frame (metres): its centre and full size along x, y, z."""

    centre: tuple[float, float, float]
    size: tuple[float, float, float]
    samples: int  # the valid depth samples it was measured from (inliers)


def _to_depth(u: np.ndarray | float, colour: Intrinsics, depth: Intrinsics, axis: int):
    """Box coordinates (pixel c spans c..c+1) of the colour image -> the depth image's, along x (0) or y (1)."""
    if axis == 0:
        return (np.asarray(u) - 0.5 - colour.cx) / colour.fx * depth.fx + depth.cx + 0.5
    return (np.asarray(u) - 0.5 - colour.cy) / colour.fy * depth.fy + depth.cy + 0.5


def _to_colour_index(index: np.ndarray, colour: Intrinsics, depth: Intrinsics, axis: int) -> np.ndarray:
    """Depth pixel indices -> the index of the colour pixel their centres fall in, along x (0) or y (1)."""
    if axis == 0:
        position = (index - depth.cx) / depth.fx * colour.fx + colour.cx
    else:
        position = (index - depth.cy) / depth.fy * colour.fy + colour.cy
    return np.floor(position + 0.5).astype(np.int64)


def _span(low: float, high: float, size: int) -> tuple[int, int]:
    """The pixels (first, end) whose centres c + 0.5 lie in low..high, clipped to 0..size; at least the pixel holding
    the middle when it is inside; none when either is NaN."""
    if math.isnan(low) or math.isnan(high):
        return 0, 0
    low, high = max(low, -1.0), min(high, size + 1.0)  # an infinite (or vast) side: just outside the image
    first, end = max(math.ceil(low - 0.5), 0), min(math.ceil(high - 0.5), size)
    if end <= first:
        middle = math.floor((low + high) / 2)
        first, end = (middle, middle + 1) if 0 <= middle < size else (0, 0)
    return first, end


def _region(
    xyxy: Sequence[float], mask: InstanceMask | None, colour: Intrinsics, depth_k: Intrinsics, core: float
) -> tuple[tuple[int, int, int, int], np.ndarray | None]:
    """The depth pixels to sample: (row first, row end, column first, column end), and within them the mask's
    pixels (None: all of them; the box's core, without a usable mask)."""
    x1, y1, x2, y2 = (float(v) for v in xyxy)
    if mask is not None and (mask.width, mask.height) == colour.size:
        box = (x1, y1, x2, y2)
    else:
        mask = None
        half_w, half_h = (x2 - x1) * core / 2, (y2 - y1) * core / 2
        box = ((x1 + x2) / 2 - half_w, (y1 + y2) / 2 - half_h, (x1 + x2) / 2 + half_w, (y1 + y2) / 2 + half_h)
    u1, u2 = (float(v) for v in _to_depth(np.array([box[0], box[2]]), colour, depth_k, 0))
    v1, v2 = (float(v) for v in _to_depth(np.array([box[1], box[3]]), colour, depth_k, 1))
    c0, c1 = _span(u1, u2, depth_k.width)
    r0, r1 = _span(v1, v2, depth_k.height)
    if mask is None:
        return (r0, r1, c0, c1), None
    columns = _to_colour_index(np.arange(c0, c1), colour, depth_k, 0) - mask.left
    rows = _to_colour_index(np.arange(r0, r1), colour, depth_k, 1) - mask.top
    h, w = mask.bits.shape
    inside_c, inside_r = (columns >= 0) & (columns < w), (rows >= 0) & (rows < h)
    selected = np.zeros((r1 - r0, c1 - c0), bool)
    selected[np.ix_(inside_r, inside_c)] = mask.bits[np.ix_(rows[inside_r], columns[inside_c])]
    return (r0, r1, c0, c1), selected


def lift_one(
    xyxy: Sequence[float],
    mask: InstanceMask | None,
    depth: np.ndarray,
    colour: Intrinsics,
    depth_k: Intrinsics,
    core: float = CORE,
    min_valid: float = MIN_VALID,
) -> Box3D | None:
    """A detection's box in 3D from ``depth`` (float metres, NaN invalid: ``depth_metres``) read through ``depth_k``
    (``depth_intrinsics``), its 2D box ``xyxy`` in the image of ``colour`` (its instance ``mask``, when it has one,
    chooses the pixels); None without enough valid depth, and for a 2D box of a NaN or infinite value
    (results/finite.py's finite_box: the caller counts those apart)."""
    if not finite_box(xyxy):
        return None
    (r0, r1, c0, c1), selected = _region(xyxy, mask, colour, depth_k, core)
    window = depth[r0:r1, c0:c1]
    samples = window[selected] if selected is not None else window.ravel()
    if not samples.size:
        return None
    valid = samples[np.isfinite(samples)].astype(np.float64)
    if not valid.size or valid.size < min_valid * samples.size:
        return None
    reference = float(np.median(valid))
    band = max(OUTLIER_MADS * MAD_TO_SIGMA * float(np.median(np.abs(valid - reference))), OUTLIER_MIN * reference)
    inliers = valid[np.abs(valid - reference) <= band]
    near, far = (float(v) for v in np.percentile(inliers, SPREAD_PERCENTILES))
    z = (near + far) / 2
    x1, y1, x2, y2 = (float(v) for v in xyxy)
    x = ((x1 + x2) / 2 - 0.5 - colour.cx) / colour.fx * z
    y = ((y1 + y2) / 2 - 0.5 - colour.cy) / colour.fy * z
    size = ((x2 - x1) / colour.fx * z, (y2 - y1) / colour.fy * z, far - near)
    if not all(math.isfinite(v) for v in (x, y, *size)):  # a finite 2D box too vast for floats once in metres
        return None
    return Box3D((x, y, z), size, int(inliers.size))


def lift(
    detections: FrameResult,
    depth: np.ndarray,
    colour: Intrinsics,
    depth_k: Intrinsics,
    core: float = CORE,
    min_valid: float = MIN_VALID,
) -> list[Box3D | None]:
    """``lift_one`` of each detection of ``detections`` (a FrameResult: its boxes and instance masks), in order
    (None: no 3D box for it)."""
    if depth.shape != (depth_k.height, depth_k.width):
        raise LiftError(
            "depth size",
            f"the depth map is {depth.shape[1]}x{depth.shape[0]}, its intrinsics {depth_k.width}x{depth_k.height}",
        )
    masks = detections.masks.masks if detections.masks is not None else [None] * len(detections)
    boxes = detections.boxes.xyxy.tolist()
    return [lift_one(xyxy, mask, depth, colour, depth_k, core, min_valid) for xyxy, mask in zip(boxes, masks)]
