"""Synthetic RGB-D scenes with objects at known 3D positions, for the 3D detections (models/lift3d.py and its node):
flat objects facing the camera (rectangles, a ring) in front of a background wall, rendered by ray casting into a
depth image through a depth camera's intrinsics, their 2D boxes (and masks) computed from the colour camera's. The
two cameras share one optical centre (registered depth) and differ in size and intrinsics. The truth is the scene's
own numbers, never the code under test's."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vision_factory.models.lift3d import Intrinsics
from vision_factory.results.boxes import Boxes
from vision_factory.results.frame import FrameResult
from vision_factory.results.masks import InstanceMask, Masks

COLOUR = Intrinsics(fx=525.0, fy=520.0, cx=319.5, cy=239.5, width=640, height=480)
# A depth camera of another size, field of view and principal point (OAK-D style: depth aligned to the colour
# camera's centre, at its own resolution).
DEPTH = Intrinsics(fx=301.0, fy=299.0, cx=211.25, cy=119.75, width=424, height=240)
WALL = 4.0  # metres: the background's depth


@dataclass(frozen=True)
class Flat:
    """A flat object facing the camera: its centre (metres, optical frame), width and height; a ring when ``inner``
    (its outer radius is width / 2)."""

    name: str
    centre: tuple[float, float, float]
    width: float
    height: float
    inner: float = 0.0

    def covers(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Whether points (x, y) of the object's plane are on the object."""
        dx, dy = x - self.centre[0], y - self.centre[1]
        if self.inner:
            radius = np.hypot(dx, dy)
            return (radius <= self.width / 2) & (radius >= self.inner)
        return (np.abs(dx) <= self.width / 2) & (np.abs(dy) <= self.height / 2)

    def box(self, camera: Intrinsics = COLOUR) -> tuple[float, float, float, float]:
        """Its 2D box in ``camera``'s image, as a detector gives it (pixel c spans c..c+1)."""
        x, y, z = self.centre
        return (
            camera.fx * (x - self.width / 2) / z + camera.cx + 0.5,
            camera.fy * (y - self.height / 2) / z + camera.cy + 0.5,
            camera.fx * (x + self.width / 2) / z + camera.cx + 0.5,
            camera.fy * (y + self.height / 2) / z + camera.cy + 0.5,
        )


def rays(camera: Intrinsics) -> tuple[np.ndarray, np.ndarray]:
    """Each pixel centre's ray (x / z, y / z), [height, width] each."""
    columns = (np.arange(camera.width) - camera.cx) / camera.fx
    rows = (np.arange(camera.height) - camera.cy) / camera.fy
    return np.meshgrid(columns, rows)


def render(objects: list[Flat], camera: Intrinsics = DEPTH) -> tuple[np.ndarray, np.ndarray]:
    """The scene's depth in metres through ``camera`` (float64, the nearest surface) and, per pixel, the index of
    the object seen there (-1: the wall)."""
    ray_x, ray_y = rays(camera)
    depth = np.full(ray_x.shape, WALL)
    seen = np.full(ray_x.shape, -1)
    for index, item in enumerate(objects):
        z = item.centre[2]
        hit = item.covers(ray_x * z, ray_y * z) & (z < depth)
        depth[hit], seen[hit] = z, index
    return depth, seen


def mask_of(objects: list[Flat], index: int) -> InstanceMask:
    """Object ``index``'s instance mask in the colour image, as a segmentation model gives it (frame-sized)."""
    _, seen = render(objects, COLOUR)
    bits = seen == index
    return InstanceMask(0, 0, bits, COLOUR.width, COLOUR.height)


def detections(objects: list[Flat], masks: bool = False) -> FrameResult:
    """The objects as a detector finds them in the colour image (with ``masks``: their instance masks)."""
    count = len(objects)
    scores = [0.9 - 0.1 * index for index in range(count)]
    boxes = Boxes([item.box() for item in objects], scores, list(range(count)), [item.name for item in objects])
    found = FrameResult(COLOUR.width, COLOUR.height, boxes)
    if masks:
        found.masks = Masks([mask_of(objects, index) for index in range(count)])
    return found


def encode(depth: np.ndarray, encoding: str) -> tuple[bytes, int]:
    """Metres as a depth image's data and step: 16UC1 millimetres (rounded; NaN -> 0, no depth) or 32FC1 metres."""
    if encoding == "16UC1":
        millimetres = np.where(np.isfinite(depth), np.round(depth * 1000), 0).astype("<u2")
        return millimetres.tobytes(), 2 * depth.shape[1]
    return depth.astype("<f4").tobytes(), 4 * depth.shape[1]


def holes(depth: np.ndarray, share: float, seed: int = 0) -> np.ndarray:
    """``depth`` with a random ``share`` of its pixels without depth (NaN)."""
    found = depth.copy()
    found[np.random.default_rng(seed).random(depth.shape) < share] = np.nan
    return found
