"""Image encodings -> BGR, honouring step, zero-copy where possible."""

from __future__ import annotations

import array
import os
import struct
import subprocess
import sys
import zlib

import cv2
import numpy as np
import pytest
from support.data import UNUSUAL_SHAPES, _bytes_per_pixel, _damaged, huge_png

from vision_factory.images import (
    SUPPORTED_ENCODINGS,
    ImageFormatError,
    bgr_to_image_fields,
    compressed_header,
    compressed_to_bgr,
    image_to_bgr,
)
from vision_factory.parameters import MAX_IMAGE_PIXELS


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
    with pytest.raises(ImageFormatError, match="neither JPEG nor PNG") as error:
        compressed_to_bgr(b"not an image")
    assert error.value.kind == "unsupported compressed format"


def test_bad_images_are_clear_errors(bgr):
    with pytest.raises(ImageFormatError, match="unsupported image encoding '32FC1'"):
        image_to_bgr(64, 48, "32FC1", 256, bytes(256 * 48))
    with pytest.raises(ImageFormatError, match="expected step x height"):
        image_to_bgr(64, 48, "bgr8", 192, bytes(100))
    with pytest.raises(ImageFormatError, match="step 100 is smaller"):
        image_to_bgr(64, 48, "bgr8", 100, bytes(100 * 48))
    with pytest.raises(ImageFormatError, match="no pixels"):
        image_to_bgr(0, 48, "bgr8", 0, b"")


@pytest.mark.parametrize("encoding", SUPPORTED_ENCODINGS)
def test_every_encoding_converts_unusual_shapes_with_padded_rows(encoding):
    rng = np.random.default_rng(0)
    for height, width in UNUSUAL_SHAPES:
        step = width * _bytes_per_pixel(encoding) + 5  # padded rows
        data = rng.integers(0, 256, step * height, dtype=np.uint8).tobytes()
        out = image_to_bgr(width, height, encoding, step, data)
        assert out.shape == (height, width, 3) and out.dtype == np.uint8, (encoding, height, width)


@pytest.mark.parametrize("encoding,pair", [("uyvy", (90, 140, 200, 140)), ("yuyv", (140, 90, 140, 200))])
def test_odd_width_422_decodes_its_last_pixel_like_the_others(encoding, pair):
    """An odd width: the last pixel has its luma and one chroma byte; it shares the other with the pair before."""
    row = np.tile(np.array(pair, np.uint8), 4)  # 8 pixels of one colour
    even = image_to_bgr(8, 3, encoding, 16, np.tile(row, 3).tobytes())
    odd = image_to_bgr(7, 3, encoding, 16, np.tile(row, 3).tobytes())  # same rows, 7 pixels used
    np.testing.assert_array_equal(odd, even[:, :7])
    one = image_to_bgr(1, 2, encoding, 4, np.tile(row[:4], 2).tobytes())  # no pair before: neutral chroma
    assert one.shape == (2, 1, 3)


def test_raw_images_beyond_max_pixels_are_refused():
    width, height = 8000, 4400  # more than 8K
    assert width * height > MAX_IMAGE_PIXELS
    with pytest.raises(ImageFormatError, match="larger than max_image_pixels") as error:
        image_to_bgr(width, height, "mono8", width, bytes(width * height))
    assert error.value.kind == "image too large"
    assert image_to_bgr(width, height, "mono8", width, bytes(width * height), max_pixels=0).shape == (height, width, 3)
    with pytest.raises(ImageFormatError, match="image too large|larger than max_image_pixels"):
        image_to_bgr(64, 48, "bgr8", 192, bytes(192 * 48), max_pixels=64 * 47)


def test_huge_png_is_refused_from_its_header_without_decoding():
    png = huge_png()
    assert len(png) < 1_000_000
    decompressed = zlib.decompressobj()
    assert len(decompressed.decompress(png[41:141_000])) > 100_000_000  # it really holds that many zero rows
    assert compressed_header(png) == ("png", 30000, 30000)
    with pytest.raises(ImageFormatError, match="30000x30000 = 900000000 pixels is larger") as error:
        compressed_to_bgr(png)
    assert error.value.kind == "image too large"
    # Refused before any decoding, which would take 2.7 GB: the same refusal in a process that cannot map 1 GB more.
    script = """
import resource, sys
from vision_factory.images import ImageFormatError, compressed_to_bgr
png = sys.stdin.buffer.read()
with open("/proc/self/status") as status:
    mapped = next(int(line.split()[1]) for line in status if line.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (mapped + 2**30, resource.RLIM_INFINITY))
try:
    compressed_to_bgr(png)
except ImageFormatError as error:
    print(error.kind)
"""
    done = subprocess.run([sys.executable, "-c", script], input=png, capture_output=True, timeout=120)
    assert done.stdout.decode().strip() == "image too large", done.stderr.decode()[-2000:]


def _app1(payload: bytes) -> bytes:
    return b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload


def test_compressed_headers_give_the_declared_size_whatever_comes_before_it(bgr):
    jpeg = cv2.imencode(".jpg", bgr)[1].tobytes()
    png = cv2.imencode(".png", bgr)[1].tobytes()
    assert compressed_header(jpeg) == ("jpeg", 64, 48) and compressed_header(png) == ("png", 64, 48)
    # An EXIF-like segment of 60 kB, then fill bytes, before the rest: the size is still found.
    padded = jpeg[:2] + _app1(b"Exif\0\0" + bytes(60_000)) + b"\xff\xff" + jpeg[2:]
    assert compressed_header(padded) == ("jpeg", 64, 48)
    np.testing.assert_array_equal(compressed_to_bgr(padded), compressed_to_bgr(jpeg))
    progressive = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes()
    assert compressed_header(progressive) == ("jpeg", 64, 48)
    for cut, kind in [(png[:20], "unreadable compressed header"), (jpeg[:30], "unreadable compressed header")]:
        with pytest.raises(ImageFormatError) as error:
            compressed_header(cut)
        assert error.value.kind == kind


def test_damaged_compressed_data_is_an_error_or_a_warning_and_the_libraries_print_nothing(bgr, capfd):
    rng = np.random.default_rng(7)
    big = cv2.resize(bgr, (320, 240))
    originals = [cv2.imencode(".png", big)[1].tobytes(), cv2.imencode(".jpg", big)[1].tobytes()]
    errors, warnings, decoded = {}, [], 0
    for index in range(400):
        data = _damaged(originals[index % 2], rng)
        try:
            image = compressed_to_bgr(data, warn=lambda kind, detail: warnings.append((kind, detail)))
            decoded += 1
            assert image.shape[2] == 3
        except ImageFormatError as exc:
            errors[exc.kind] = errors.get(exc.kind, 0) + 1
    out, err = capfd.readouterr()
    assert out == "" and err == "", err[:2000]  # today: libpng, libjpeg and OpenCV lines, one or more per image
    assert sum(errors.values()) + decoded == 400
    kinds = {"undecodable compressed image", "unreadable compressed header", "unsupported compressed format"}
    assert set(errors) <= kinds
    assert errors["undecodable compressed image"] > 50 and decoded > 50
    assert {kind for kind, _ in warnings} == {"corrupt compressed image"}  # decoded despite the decoder's complaint
    assert any("Corrupt JPEG data" in detail for _, detail in warnings)


def test_other_writers_to_stderr_keep_their_lines_during_a_decode(bgr, capfd):
    """What is not the decoders' (another thread's log line, say) is passed on, not swallowed."""
    from vision_factory.quiet import quietly

    def noisy():
        os.write(2, b"[INFO] [1.0] [node]: a line of another thread\n")
        return cv2.imdecode(np.frombuffer(cv2.imencode(".png", bgr)[1][:100].tobytes(), np.uint8), cv2.IMREAD_COLOR)

    result, said = quietly(noisy)
    assert result is None and "PNG input buffer is incomplete" in said
    assert capfd.readouterr().err == "[INFO] [1.0] [node]: a line of another thread\n"
