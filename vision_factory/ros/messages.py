"""Conversions between ROS image messages and the core's numpy images (results: results/frame.py and its parts)."""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
from builtin_interfaces.msg import Time
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from ..images import ImageFormatError, bgr_to_image_fields, compressed_to_bgr, image_to_bgr
from ..parameters import MAX_IMAGE_PIXELS

# The serialized data's first two bytes name its representation: plain CDR, big or little endian.
_CDR_BYTE_ORDER = {b"\x00\x00": ">", b"\x00\x01": "<"}


class ImageView:
    """A sensor_msgs/Image read from its serialized bytes: the same fields, ``header`` a std_msgs Header,
    ``data`` a read-only memoryview of those bytes (the pixels are never copied)."""

    __slots__ = ("header", "height", "width", "encoding", "is_bigendian", "step", "data")

    def __init__(self, header: Header, height: int, width: int, encoding: str, is_bigendian: int, step: int, data):
        self.header, self.height, self.width, self.encoding = header, height, width, encoding
        self.is_bigendian, self.step, self.data = is_bigendian, step, data


def image_from_cdr(data: bytes) -> ImageView | Image:
    """A serialized sensor_msgs/Image (a raw subscription's bytes) as an ImageView, without rclpy's two
    copies of the pixels (into a C message, then into a Python array). Another representation than plain
    CDR is left to rclpy (a full Image message); data that ends inside a field is an ImageFormatError."""
    order = _CDR_BYTE_ORDER.get(bytes(data[:2]))
    if order is None:
        return deserialize_message(data, Image)
    view = memoryview(data)
    size = len(view)
    position = 4  # CDR aligns each field to its size, counted from after the 4-byte representation header

    def unsigned(field: str) -> int:
        nonlocal position
        position += -(position - 4) % 4
        if position + 4 > size:
            raise _short(size, field)
        (value,) = struct.unpack_from(order + "I", view, position)
        position += 4
        return value

    def sequence(field: str) -> memoryview:
        nonlocal position
        length = unsigned(field)
        if position + length > size:
            raise _short(size, field)
        position += length
        return view[position - length : position]

    def text(field: str) -> str:
        return bytes(sequence(field)).split(b"\0", 1)[0].decode("utf-8", "replace")

    sec = unsigned("header.stamp.sec")
    nanosec = unsigned("header.stamp.nanosec")
    frame_id = text("header.frame_id")
    height, width = unsigned("height"), unsigned("width")
    encoding = text("encoding")
    if position >= size:
        raise _short(size, "is_bigendian")
    is_bigendian = view[position]
    position += 1
    step = unsigned("step")
    pixels = sequence("data")
    sec -= (sec >> 31) << 32  # int32
    header = Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=frame_id)
    return ImageView(header, height, width, encoding, is_bigendian, step, pixels.toreadonly())


def _short(size: int, field: str) -> ImageFormatError:
    return ImageFormatError("malformed image message", f"serialized sensor_msgs/Image of {size} bytes ends in {field}")


def message_to_bgr(
    msg: Image | ImageView | CompressedImage,
    max_pixels: int = MAX_IMAGE_PIXELS,
    warn: Callable[[str, str], None] | None = None,
) -> np.ndarray:
    """BGR view or copy of an Image / CompressedImage message of at most ``max_pixels`` pixels (0: any).

    ``warn(kind, detail)`` hears of compressed data decoded despite the decoder's complaints.
    """
    if isinstance(msg, CompressedImage):
        return compressed_to_bgr(msg.data, max_pixels, warn)
    return image_to_bgr(msg.width, msg.height, msg.encoding, msg.step, msg.data, bool(msg.is_bigendian), max_pixels)


def bgr_to_message(bgr: np.ndarray, header: Header, encoding: str = "bgr8") -> Image:
    width, height, encoding, step, data = bgr_to_image_fields(bgr, encoding)
    # Bytes, never a numpy array: assigning an array to msg.data is very slow.
    return Image(header=header, width=width, height=height, encoding=encoding, step=step, data=data)
