"""How a frame is fitted into a model's input, and mapped back: letterbox, stretch or none.

``letterbox`` follows Ultralytics' own ``predict``: r = min(S/h, S/w); resize to (round(w*r),
round(h*r)), at least 1 pixel, with INTER_LINEAR; the leftover split as round(d/2 - 0.1) before and
round(d/2 + 0.1) after, padded with 114. A fixed-size input gets the full S x S letterbox; a dynamic
one pads only up to a multiple of 32. ``stretch`` is a plain resize to the input (one scale per axis),
``none`` feeds the frame as it is. Every mode is described by one ``FrameFit``.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

STRIDE = 32
PAD_VALUE = 114
RESIZE_MODES = ("stretch", "letterbox", "none")


@dataclass(frozen=True)
class FrameFit:
    """How a frame was fitted into the model input (scale per axis, then padding); maps input coordinates back."""

    scale_x: float  # fitted width / frame width
    scale_y: float
    left: int  # padding before the fitted frame
    top: int
    width: int  # of the frame
    height: int

    def to_frame(self, xy: np.ndarray) -> np.ndarray:
        """[..., 2] input-space points -> frame pixels, clipped to the frame; an infinite coordinate (a damaged
        model's) becomes NaN, as a NaN one stays, never the frame's edge (results/finite.py's finite
        then leaves its box out, or mends its keypoint)."""
        x = (xy[..., 0] - self.left) / self.scale_x
        y = (xy[..., 1] - self.top) / self.scale_y
        x, y = (np.where(np.isinf(v), np.nan, v) if np.isinf(v).any() else v for v in (x, y))
        return np.stack([x.clip(0, self.width), y.clip(0, self.height)], axis=-1)


def letterbox(image_bgr: np.ndarray, size: tuple[int, int], dynamic: bool) -> tuple[np.ndarray, FrameFit]:
    """The NCHW float32 RGB / 255 input for ``size`` (height, width), and the mapping back to the frame."""
    padded, fit = letterbox_image(image_bgr, size, dynamic)
    return rgb_tensor(padded), fit


def rgb_tensor(image_bgr: np.ndarray) -> np.ndarray:
    """An HWC BGR uint8 image as the [1, 3, H, W] float32 RGB / 255 tensor."""
    tensor = np.empty((1, 3, *image_bgr.shape[:2]), np.float32)
    for channel in range(3):  # RGB from BGR, /255 straight into the NCHW tensor: no intermediate copies
        np.divide(image_bgr[..., 2 - channel], np.float32(255), out=tensor[0, channel])
    return tensor


def letterbox_image(image_bgr: np.ndarray, size: tuple[int, int], dynamic: bool) -> tuple[np.ndarray, FrameFit]:
    """The frame resized and padded for ``size`` (height, width), still HWC BGR uint8, and the mapping back."""
    height, width = image_bgr.shape[:2]
    ratio = min(size[0] / height, size[1] / width)
    # At least one pixel: a 1x20000 frame would round to 0 rows (Ultralytics' own resize fails there).
    new_w, new_h = max(1, round(width * ratio)), max(1, round(height * ratio))
    pad_w, pad_h = size[1] - new_w, size[0] - new_h
    if dynamic:
        pad_w, pad_h = pad_w % STRIDE, pad_h % STRIDE
    if (new_w, new_h) != (width, height):
        image_bgr = cv2.resize(image_bgr, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    top, bottom = round(pad_h / 2 - 0.1), round(pad_h / 2 + 0.1)
    left, right = round(pad_w / 2 - 0.1), round(pad_w / 2 + 0.1)
    padded = cv2.copyMakeBorder(image_bgr, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(PAD_VALUE,) * 3)
    return padded, FrameFit(new_w / width, new_h / height, left, top, width, height)


def fit_frame(
    image_bgr: np.ndarray, size: tuple[int, int] | None, mode: str
) -> tuple[np.ndarray, FrameFit, tuple[int, int]]:
    """The frame fitted to ``size`` (height, width) by ``mode`` (RESIZE_MODES), the mapping back, and the fitted
    (height, width); with no ``size`` the frame is fed as it is."""
    height, width = image_bgr.shape[:2]
    if mode == "none" or size is None:
        return image_bgr, FrameFit(1.0, 1.0, 0, 0, width, height), (height, width)
    if mode == "letterbox":
        padded, fit = letterbox_image(image_bgr, size, dynamic=False)
        return padded, fit, size
    resized = image_bgr
    if (height, width) != size:
        resized = cv2.resize(image_bgr, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)
    return resized, FrameFit(size[1] / width, size[0] / height, 0, 0, width, height), size
