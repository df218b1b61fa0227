"""sensor_msgs image encodings <-> numpy BGR, without ROS types.

Raw images are described by the fields of ``sensor_msgs/Image`` (width, height,
encoding, step, data). Packed BGR data with no row padding is returned as a view of
the message buffer, without a copy; everything else is converted once.

Compressed images (``sensor_msgs/CompressedImage``, image_transport's ``compressed``) are JPEG or
PNG, recognised by their first bytes whatever the message's ``format`` says. Their size is read
from the header (PNG's IHDR, JPEG's SOFn) and checked against ``max_pixels`` before anything is
decoded, so a small file declaring a huge image costs nothing; what libpng, libjpeg and OpenCV
say about bad data is caught (``quiet.quietly``) and becomes the detail of an ImageFormatError or
of a warning, never a line on stderr per frame.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np

from .parameters import MAX_IMAGE_PIXELS
from .quiet import quietly
from .text import untrusted


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
_PACKED_422 = {"uyvy": "UYVY", "yuv422": "UYVY", "yuyv": "YUYV", "yuv422_yuy2": "YUYV"}


CAMERA_FIX = "raise max_image_pixels if the camera really sends such images"
# The tools (bag, predict, eval, quantize, track) read files and videos of at most MAX_IMAGE_PIXELS pixels.
FILE_FIX = "the tools read images of at most 7680x4320 pixels: resize it"
TOO_LARGE = "image too large"


def check_pixels(width: int, height: int, max_pixels: int, what: str = "image", fix: str = CAMERA_FIX) -> None:
    """An ImageFormatError when a ``width`` x ``height`` image has more than ``max_pixels`` (0: no limit); ``fix``
    says what to do."""
    if max_pixels > 0 and width * height > max_pixels:
        raise ImageFormatError(
            TOO_LARGE,
            f"{what} of {width}x{height} = {width * height} pixels is larger than max_image_pixels {max_pixels}; {fix}",
        )


def image_to_bgr(
    width: int,
    height: int,
    encoding: str,
    step: int,
    data,
    is_bigendian: bool = False,
    max_pixels: int = MAX_IMAGE_PIXELS,
) -> np.ndarray:
    """Return an HxWx3 uint8 BGR array for an image message's fields.

    ``data`` is anything exposing the buffer protocol (bytes, array.array, memoryview). Images of
    more than ``max_pixels`` pixels (0: no limit) are refused.
    """
    if encoding not in _DIRECT:
        raise ImageFormatError(
            "unsupported encoding",
            f"unsupported image encoding '{untrusted(encoding, 100)}'; supported: {', '.join(SUPPORTED_ENCODINGS)}",
        )
    channels, dtype, conversion = _DIRECT[encoding]
    if width <= 0 or height <= 0:
        raise ImageFormatError("image has no pixels", f"image has no pixels ({width}x{height})")
    check_pixels(width, height, max_pixels)
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
    if encoding in _PACKED_422 and width % 2:
        return _odd_width_422(pixels, _PACKED_422[encoding], conversion)
    return cv2.cvtColor(np.ascontiguousarray(pixels), conversion)


def _odd_width_422(pixels: np.ndarray, order: str, conversion: int) -> np.ndarray:
    """4:2:2 of an odd width: its last pixel has a luma and one chroma byte, the other chroma is that of the
    pixel pair before it (neutral 128 for a one-pixel-wide image); converted one pixel wider and cut back."""
    height, width = pixels.shape[:2]
    wider = np.empty((height, width + 1, 2), np.uint8)
    wider[:, :width] = pixels
    # UYVY pairs are (U Y0)(V Y1): the last pixel holds (U Y) and needs (V Y); YUYV pairs are (Y0 U)(Y1 V).
    chroma, luma = (0, 1) if order == "UYVY" else (1, 0)
    wider[:, width, luma] = pixels[:, width - 1, luma]
    wider[:, width, chroma] = pixels[:, width - 2, chroma] if width > 1 else 128
    return np.ascontiguousarray(cv2.cvtColor(wider, conversion)[:, :width])


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers (SOF0..SOF15 but DHT C4, JPG C8 and DAC CC) and markers without a length.
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_STANDALONE = frozenset([0x01, *range(0xD0, 0xD8)])


def compressed_header(data) -> tuple[str, int, int]:
    """(format, width, height) a JPEG or PNG payload declares, read from its header without decoding.

    The format is recognised by the payload's first bytes; anything else (another format, garbage, a
    header cut short, a size of 0) is an ImageFormatError.
    """
    view = memoryview(np.frombuffer(data, dtype=np.uint8))
    if view[:8] == _PNG_SIGNATURE:
        if len(view) < 24 or view[12:16] != b"IHDR":
            raise ImageFormatError("unreadable compressed header", f"PNG of {len(view)} bytes has no IHDR header")
        width, height = struct.unpack(">II", view[16:24])
        return declared("png", width, height)
    if view[:2] == b"\xff\xd8":
        return declared("jpeg", *_jpeg_size(view))
    raise ImageFormatError(
        "unsupported compressed format",
        f"compressed image of {len(view)} bytes is neither JPEG nor PNG (it starts with {bytes(view[:8])!r}); "
        "publish jpeg or png (image_transport's compressed)",
    )


def _jpeg_size(view: memoryview) -> tuple[int, int]:
    """(width, height) from a JPEG's SOFn segment, walking the marker segments before it."""
    position = 2
    while position + 1 < len(view):
        if view[position] != 0xFF:
            break  # no marker where a segment must start
        marker = view[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in _JPEG_STANDALONE:
            position += 2
            continue
        if marker in (0xD8, 0xD9, 0xDA) or position + 4 > len(view):
            break  # a second start, the end or the scan before any frame header; or cut short
        length = view[position + 2] << 8 | view[position + 3]
        if marker in _JPEG_SOF:
            if length < 8 or position + 9 > len(view):
                break
            height, width = struct.unpack(">HH", view[position + 5 : position + 9])
            return width, height
        position += 2 + length
    raise ImageFormatError(
        "unreadable compressed header", f"JPEG of {len(view)} bytes has no readable frame header (SOFn) before its data"
    )


def declared(kind: str, width: int, height: int) -> tuple[str, int, int]:
    """(kind, width, height) when a header declares a size an image can have, else an ImageFormatError."""
    if width <= 0 or height <= 0 or width > 2**31 - 1 or height > 2**31 - 1:
        raise ImageFormatError("unreadable compressed header", f"{kind} header declares an image of {width}x{height}")
    return kind, width, height


UNKNOWN_FORMAT = "unsupported image format"


def file_header(data) -> tuple[str, int, int]:
    """(format, width, height) an image file's bytes declare, read without decoding: JPEG and PNG as
    ``compressed_header`` reads them, WebP from its first chunk. Another format is an ImageFormatError of kind
    UNKNOWN_FORMAT (the tools read more: tools/sources.image_header), a header cut short one of its own."""
    view = memoryview(np.frombuffer(data, dtype=np.uint8))
    if view[:8] == _PNG_SIGNATURE or view[:2] == b"\xff\xd8":
        return compressed_header(view)
    if view[:4] == b"RIFF" and view[8:12] == b"WEBP":
        return declared("webp", *_webp_size(view))
    raise ImageFormatError(UNKNOWN_FORMAT, f"image of {len(view)} bytes is no JPEG, PNG or WebP")


def _webp_size(view: memoryview) -> tuple[int, int]:
    """(width, height) a WebP's first chunk declares: VP8X's canvas (24 bits each, minus one), VP8L's (14 bits
    each, minus one) or VP8's frame (14 bits each, after the frame tag and start code)."""
    chunk, payload = bytes(view[12:16]), bytes(view[20:30])
    if len(payload) == 10:
        if chunk == b"VP8X":
            return int.from_bytes(payload[4:7], "little") + 1, int.from_bytes(payload[7:10], "little") + 1
        if chunk == b"VP8L" and payload[0] == 0x2F:
            bits = int.from_bytes(payload[1:5], "little")
            return (bits & 0x3FFF) + 1, (bits >> 14 & 0x3FFF) + 1
        if chunk == b"VP8 " and payload[3:6] == b"\x9d\x01\x2a":
            return int.from_bytes(payload[6:8], "little") & 0x3FFF, int.from_bytes(payload[8:10], "little") & 0x3FFF
    raise ImageFormatError(
        "unreadable image header", f"WebP of {len(view)} bytes has no readable VP8X, VP8L or VP8 header"
    )


def compressed_to_bgr(
    data,
    max_pixels: int = MAX_IMAGE_PIXELS,
    warn: Callable[[str, str], None] | None = None,
    header: Callable[[Any], tuple[str, int, int]] = compressed_header,
    fix: str = CAMERA_FIX,
) -> np.ndarray:
    """Decode a sensor_msgs/CompressedImage payload (JPEG or PNG; with another ``header``, e.g. ``file_header``, an
    image file's bytes of any format it reads) to BGR.

    The size its header declares is checked against ``max_pixels`` (0: no limit) first (``fix``: what to do when it
    is larger). Data the decoder cannot read is an ImageFormatError carrying what the decoder said; data it reads
    while complaining (a JPEG cut short is completed in grey) is decoded, and the complaint goes to
    ``warn(kind, detail)``.
    """
    buffer = np.frombuffer(data, dtype=np.uint8)
    kind, width, height = header(buffer)
    check_pixels(width, height, max_pixels, f"{kind} image", fix)
    try:
        image, said = quietly(cv2.imdecode, buffer, cv2.IMREAD_COLOR)
    except cv2.error as exc:
        image, said = None, str(exc).strip()
    if image is None:
        raise ImageFormatError(
            "undecodable compressed image",
            f"{kind} image of {len(buffer)} bytes declaring {width}x{height} could not be decoded: "
            f"{said or 'the decoder gave no image'}",
        )
    if said and warn is not None:
        warn("corrupt compressed image", f"{kind} image of {width}x{height} decoded despite: {said}")
    return image


BYTES_PER_PIXEL = 8  # the most an image file stores a pixel in (16-bit RGBA, uncompressed)
HEADER_BYTES = 16 << 20  # what a file may hold beside its pixels (metadata, an embedded preview)


def read_image_file(
    path, max_pixels: int = MAX_IMAGE_PIXELS, header: Callable[[Any], tuple[str, int, int]] = file_header
) -> np.ndarray:
    """The BGR image of an image file, its declared size (``header``: JPEG, PNG and WebP by default) checked against
    ``max_pixels`` (0: no limit) before it is decoded, and the file's size before it is read (no image of that many
    pixels takes more than BYTES_PER_PIXEL a pixel, plus HEADER_BYTES). An ImageFormatError (kind TOO_LARGE, or what
    made it no image) says why not, without the path."""
    size = os.stat(path).st_size
    if max_pixels > 0 and size > max_pixels * BYTES_PER_PIXEL + HEADER_BYTES:
        raise ImageFormatError(
            TOO_LARGE, f"the file is {size} bytes, more than any image of max_image_pixels {max_pixels}; {FILE_FIX}"
        )
    with open(path, "rb") as file:
        data = file.read()
    return compressed_to_bgr(data, max_pixels, header=header, fix=FILE_FIX)


_ENCODE = {
    "bgr8": (3, None),
    "rgb8": (3, cv2.COLOR_BGR2RGB),
    "bgra8": (4, cv2.COLOR_BGR2BGRA),
    "rgba8": (4, cv2.COLOR_BGR2RGBA),
    "mono8": (1, cv2.COLOR_BGR2GRAY),
}
OUTPUT_ENCODINGS = tuple(_ENCODE)  # what bgr_to_image_fields writes


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


class _Cdr:
    """Plain little-endian CDR (what rclpy's serialize_message writes for a ROS 2 message), written field by field:
    each field aligned to its size, counted from after the 4-byte representation header."""

    def __init__(self):
        self.parts: list = [b"\x00\x01\x00\x00"]
        self.position = 0

    def put(self, data: bytes, align: int = 1) -> None:
        padding = -self.position % align
        self.parts.append(b"\0" * padding + data)
        self.position += padding + len(data)

    def text(self, value: str) -> None:
        encoded = value.encode("utf-8") + b"\0"
        self.put(struct.pack("<I", len(encoded)), 4)
        self.put(encoded)

    def header(self, header: Any) -> None:
        """A std_msgs/Header (or anything with its stamp.sec, stamp.nanosec and frame_id)."""
        self.put(struct.pack("<iI", header.stamp.sec, header.stamp.nanosec), 4)
        self.text(header.frame_id)

    def octets(self, values: np.ndarray) -> None:
        """A uint8[] of ``values``' bytes (little endian), copied once, when the message is joined."""
        self.put(struct.pack("<I", values.nbytes), 4)
        self.parts.append(memoryview(np.ascontiguousarray(values)).cast("B"))
        self.position += values.nbytes

    def joined(self) -> bytes:
        return b"".join(self.parts)


def image_cdr(header: Any, height: int, width: int, encoding: str, step: int, pixels: np.ndarray) -> bytes:
    """A sensor_msgs/Image serialized as plain little-endian CDR, as rclpy's serialize_message would give it, the
    pixels (``pixels``' bytes, little endian: is_bigendian 0) copied once: a publisher takes the bytes as they are
    (rclpy's Image would copy them into a Python array, then into its C message)."""
    cdr = _Cdr()
    cdr.header(header)
    cdr.put(struct.pack("<II", height, width), 4)
    cdr.text(encoding)
    cdr.put(b"\0")  # is_bigendian
    cdr.put(struct.pack("<I", step), 4)
    cdr.octets(pixels)
    return cdr.joined()


POINT_FLOAT32 = 7  # sensor_msgs/PointField's FLOAT32


def xyz_cloud_cdr(header: Any, points: np.ndarray, dense: bool) -> bytes:
    """An organised sensor_msgs/PointCloud2 of ``points`` [height, width, 3] float32 (x, y, z; NaN where none;
    ``dense``: no NaN), serialized as image_cdr serializes an Image: the points copied once (rclpy's PointCloud2
    takes 20 ms more for a 1280x720 cloud, its data converted to a Python array)."""
    height, width, _ = points.shape
    points = np.asarray(points, "<f4")
    cdr = _Cdr()
    cdr.header(header)
    cdr.put(struct.pack("<III", height, width, 3), 4)  # height, width, then the fields' count
    for index, name in enumerate("xyz"):
        cdr.text(name)
        cdr.put(struct.pack("<I", 4 * index), 4)  # offset
        cdr.put(struct.pack("<B", POINT_FLOAT32))  # datatype
        cdr.put(struct.pack("<I", 1), 4)  # count
    cdr.put(b"\0")  # is_bigendian
    cdr.put(struct.pack("<II", 12, 12 * width), 4)  # point_step, row_step
    cdr.octets(points)
    cdr.put(struct.pack("<?", dense))  # is_dense
    return cdr.joined()
