"""Image encodings -> BGR, honouring step, zero-copy where possible."""

from __future__ import annotations

import array

import cv2
import numpy as np
import pytest

from vision_factory.images import ImageFormatError, bgr_to_image_fields, compressed_to_bgr, image_to_bgr


@pytest.fixture(scope="module")
def bgr():
    """A smooth real-looking image (gradients), so demosaicing and chroma subsampling are near exact."""
    y, x = np.mgrid[0:48, 0:64]
    return np.dstack([x * 3, y * 4, (x + y) * 2]).astype(np.uint8)


def test_bgr8_is_a_view_of_the_message_buffer(bgr):
    data = array.array("B", bgr.tobytes())
    out = image_to_bgr(64, 48, "bgr8", 64 * 3, data)
    np.testing.assert_array_equal(out, bgr)
    assert np.shares_memory(out, np.frombuffer(data, np.uint8))


@pytest.mark.parametrize("encoding", ["rgb8", "bgra8", "rgba8", "mono8", "bgr8"])
def test_roundtrip_with_row_padding(bgr, encoding):
    width, height, enc, step, data = bgr_to_image_fields(bgr, encoding)
    padded_step = step + 13
    rows = np.frombuffer(data, np.uint8).reshape(height, step)
    padded = np.zeros((height, padded_step), np.uint8)
    padded[:, :step] = rows
    out = image_to_bgr(width, height, enc, padded_step, padded.tobytes())
    expected = cv2.cvtColor(cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR) if encoding == "mono8" else bgr
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("bigendian", [False, True])
def test_mono16_keeps_the_high_byte(bigendian):
    values = (np.arange(12, dtype=np.uint16) * 5000).reshape(3, 4)
    data = values.astype(">u2" if bigendian else "<u2").tobytes()
    out = image_to_bgr(4, 3, "mono16", 8, data, is_bigendian=bigendian)
    np.testing.assert_array_equal(out[:, :, 0], (values >> 8).astype(np.uint8))


@pytest.mark.parametrize(
    "pattern,offsets",
    [
        ("bayer_rggb8", {"r": (0, 0), "g1": (0, 1), "g2": (1, 0), "b": (1, 1)}),
        ("bayer_bggr8", {"b": (0, 0), "g1": (0, 1), "g2": (1, 0), "r": (1, 1)}),
        ("bayer_gbrg8", {"g1": (0, 0), "b": (0, 1), "r": (1, 0), "g2": (1, 1)}),
        ("bayer_grbg8", {"g1": (0, 0), "r": (0, 1), "b": (1, 0), "g2": (1, 1)}),
    ],
)
def test_bayer_patterns_demosaic_to_the_right_colours(bgr, pattern, offsets):
    mosaic = np.zeros(bgr.shape[:2], np.uint8)
    channel = {"b": 0, "g1": 1, "g2": 1, "r": 2}
    for name, (dy, dx) in offsets.items():
        mosaic[dy::2, dx::2] = bgr[dy::2, dx::2, channel[name]]
    out = image_to_bgr(64, 48, pattern, 64, mosaic.tobytes())
    inner = (slice(2, -2), slice(2, -2))
    assert np.abs(out[inner].astype(int) - bgr[inner].astype(int)).max() <= 6


@pytest.mark.parametrize(
    "encoding,order", [("uyvy", "UYVY"), ("yuv422", "UYVY"), ("yuyv", "YUYV"), ("yuv422_yuy2", "YUYV")]
)
def test_yuv422_packings(bgr, encoding, order):
    # BT.601 video range, as 4:2:2 cameras send it
    b, g, r = (bgr[:, :, i].astype(np.float32) for i in range(3))
    y = 16 + 0.257 * r + 0.504 * g + 0.098 * b
    u_full = 128 - 0.148 * r - 0.291 * g + 0.439 * b
    v_full = 128 + 0.439 * r - 0.368 * g - 0.071 * b
    u = (u_full[:, 0::2] + u_full[:, 1::2]) / 2
    v = (v_full[:, 0::2] + v_full[:, 1::2]) / 2
    packed = np.zeros((48, 64 * 2), np.float32)
    if order == "UYVY":
        packed[:, 0::4], packed[:, 1::4], packed[:, 2::4], packed[:, 3::4] = u, y[:, 0::2], v, y[:, 1::2]
    else:
        packed[:, 0::4], packed[:, 1::4], packed[:, 2::4], packed[:, 3::4] = y[:, 0::2], u, y[:, 1::2], v
    out = image_to_bgr(64, 48, encoding, 128, np.round(packed).astype(np.uint8).tobytes())
    assert np.abs(out.astype(int) - bgr.astype(int)).mean() < 4


def test_compressed_png_roundtrip_and_garbage(bgr):
    ok, png = cv2.imencode(".png", bgr)
    np.testing.assert_array_equal(compressed_to_bgr(png.tobytes()), bgr)
    with pytest.raises(ImageFormatError, match="could not be decoded"):
        compressed_to_bgr(b"not an image")


def test_bad_images_are_clear_errors(bgr):
    with pytest.raises(ImageFormatError, match="unsupported image encoding '32FC1'"):
        image_to_bgr(64, 48, "32FC1", 256, bytes(256 * 48))
    with pytest.raises(ImageFormatError, match="expected step x height"):
        image_to_bgr(64, 48, "bgr8", 192, bytes(100))
    with pytest.raises(ImageFormatError, match="step 100 is smaller"):
        image_to_bgr(64, 48, "bgr8", 100, bytes(100 * 48))
    with pytest.raises(ImageFormatError, match="no pixels"):
        image_to_bgr(0, 48, "bgr8", 0, b"")
