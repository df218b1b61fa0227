"""sensor_msgs image encodings <-> numpy BGR, without ROS types.

Raw images are described by the fields of ``sensor_msgs/Image`` (width, height,
encoding, step, data). Packed BGR data with no row padding is returned as a view of
the message buffer, without a copy; everything else is converted once.
"""

from __future__ import annotations

import cv2
import numpy as np


class ImageFormatError(ValueError):
    """An image that cannot be read: unknown encoding, short buffer, bad step.

    ``kind`` names the kind of problem in a few fixed words (the message adds the details), so
    that callers can count and report problems per kind rather than per distinct text.
    """

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind


# encoding -> (channels, dtype, cv2 conversion to BGR or None)
_DIRECT = {
    "bgr8": (3, np.uint8, None),
    "8UC3": (3, np.uint8, None),
    "rgb8": (3, np.uint8, cv2.COLOR_RGB2BGR),
    "bgra8": (4, np.uint8, cv2.COLOR_BGRA2BGR),
    "rgba8": (4, np.uint8, cv2.COLOR_RGBA2BGR),
    "mono8": (1, np.uint8, cv2.COLOR_GRAY2BGR),
    "8UC1": (1, np.uint8, cv2.COLOR_GRAY2BGR),
    "mono16": (1, np.uint16, cv2.COLOR_GRAY2BGR),
    "16UC1": (1, np.uint16, cv2.COLOR_GRAY2BGR),
    "bgr16": (3, np.uint16, None),
    "rgb16": (3, np.uint16, cv2.COLOR_RGB2BGR),
    # ROS names the Bayer pattern by its first row, OpenCV by the second pixel row:
    # rggb in ROS is OpenCV's BG pattern.
    "bayer_rggb8": (1, np.uint8, cv2.COLOR_BayerBG2BGR),
    "bayer_bggr8": (1, np.uint8, cv2.COLOR_BayerRG2BGR),
    "bayer_gbrg8": (1, np.uint8, cv2.COLOR_BayerGR2BGR),
    "bayer_grbg8": (1, np.uint8, cv2.COLOR_BayerGB2BGR),
    # 4:2:2 packed as 2 bytes per pixel.
    "uyvy": (2, np.uint8, cv2.COLOR_YUV2BGR_UYVY),
    "yuv422": (2, np.uint8, cv2.COLOR_YUV2BGR_UYVY),
    "yuyv": (2, np.uint8, cv2.COLOR_YUV2BGR_YUYV),
    "yuv422_yuy2": (2, np.uint8, cv2.COLOR_YUV2BGR_YUYV),
}
SUPPORTED_ENCODINGS = tuple(_DIRECT)


def image_to_bgr(width: int, height: int, encoding: str, step: int, data, is_bigendian: bool = False) -> np.ndarray:
    """Return an HxWx3 uint8 BGR array for an image message's fields.

    ``data`` is anything exposing the buffer protocol (bytes, array.array, memoryview).
    """
    if encoding not in _DIRECT:
        raise ImageFormatError(
            "unsupported encoding",
            f"unsupported image encoding '{encoding}'; supported: {', '.join(SUPPORTED_ENCODINGS)}",
        )
    channels, dtype, conversion = _DIRECT[encoding]
    if width <= 0 or height <= 0:
        raise ImageFormatError("image has no pixels", f"image has no pixels ({width}x{height})")
    itemsize = np.dtype(dtype).itemsize
    row_bytes = width * channels * itemsize
    if step < row_bytes:
        raise ImageFormatError(
            "step too small", f"step {step} is smaller than width x pixel size ({row_bytes}) for {encoding}"
        )
    buffer = np.frombuffer(data, dtype=np.uint8)
    if buffer.size < step * height:
        raise ImageFormatError(
            "image data too short", f"image data has {buffer.size} bytes, expected step x height = {step * height}"
        )
    rows = buffer[: step * height].reshape(height, step)[:, :row_bytes]
    pixels = rows.view(np.dtype(dtype).newbyteorder(">" if is_bigendian else "<")) if itemsize > 1 else rows
    pixels = pixels.reshape(height, width, channels)
    if itemsize > 1:
        pixels = (pixels >> 8).astype(np.uint8)  # keep the 8 most significant bits
    if conversion is None:
        return pixels
    if channels == 1:
        pixels = pixels[:, :, 0]
    return cv2.cvtColor(np.ascontiguousarray(pixels), conversion)


def compressed_to_bgr(data) -> np.ndarray:
    """Decode a sensor_msgs/CompressedImage payload (JPEG, PNG, ...) to BGR."""
    image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise ImageFormatError(
            "undecodable compressed image", "compressed image could not be decoded (not a JPEG/PNG/... payload)"
        )
    return image


_ENCODE = {
    "bgr8": (3, None),
    "rgb8": (3, cv2.COLOR_BGR2RGB),
    "bgra8": (4, cv2.COLOR_BGR2BGRA),
    "rgba8": (4, cv2.COLOR_BGR2RGBA),
    "mono8": (1, cv2.COLOR_BGR2GRAY),
}


def bgr_to_image_fields(bgr: np.ndarray, encoding: str = "bgr8") -> tuple[int, int, str, int, bytes]:
    """BGR array -> (width, height, encoding, step, data bytes) for a sensor_msgs/Image."""
    if encoding not in _ENCODE:
        raise ImageFormatError(
            "unsupported output encoding", f"cannot encode to '{encoding}'; use one of {', '.join(_ENCODE)}"
        )
    channels, conversion = _ENCODE[encoding]
    pixels = bgr if conversion is None else cv2.cvtColor(bgr, conversion)
    height, width = bgr.shape[:2]
    return width, height, encoding, width * channels, np.ascontiguousarray(pixels).tobytes()
