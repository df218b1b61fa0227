"""Frames, images, scenes and annotations the tests share."""

from __future__ import annotations

import json
import shutil
import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
from support.real_models import PHOTOS

from vision_factory.tools.bags import read_messages, write_image_bag, write_messages
from vision_factory.tools.compose import SCENES, compose
from vision_factory.tools.mot_files import write_mot

TUNING_SCENE = "hide_behind_person"  # the scene reid-tune measures the embedder on
RIG_START_NS = 1_700_000_000_000_000_000  # camera_rig's first frame, bag time


def camera_rig(folder: Path, frames: dict[str, list[np.ndarray]]) -> tuple[Path, Path]:
    """Three cameras' ``frames`` as bags: front (30 frames/s from RIG_START_NS) and left (10/s, from +10 ms) as two
    image topics of one bag, /front/image_raw and /left/image_raw; right (15/s, from +5 ms) as its own bag. The
    two bags (front and left's, right's)."""
    front = write_image_bag(folder / "front", frames["front"], "/front/image_raw", 30, "front", start_ns=RIG_START_NS)
    left_start = RIG_START_NS + 10**7
    left = write_image_bag(folder / "left", frames["left"], "/left/image_raw", 10, "left", start_ns=left_start)
    rig = write_messages(
        folder / "rig",
        sorted(
            [*read_messages(front, "/front/image_raw"), *read_messages(left, "/left/image_raw")],
            key=lambda message: message.timestamp_ns,
        ),
    )
    right_start = RIG_START_NS + 5 * 10**6
    right = write_image_bag(folder / "right", frames["right"], fps=15, frame_id="right", start_ns=right_start)
    return rig, right


def scene_files(folder: Path, name: str) -> tuple[Path, Path]:
    """The frames of scene ``name`` as PNG files in folder/frames and its truth as folder/gt.txt."""
    composed = compose(next(scene for scene in SCENES if scene.name == name))
    frames = folder / "frames"
    frames.mkdir(parents=True)
    for number, frame in enumerate(composed.frames, start=1):
        cv2.imwrite(str(frames / f"{number:04d}.png"), frame)
    return frames, write_mot(folder / "gt.txt", composed.truth)


def _walk(count: int = 8) -> list[np.ndarray]:
    """Real photos of two people side by side, seen through a 640-pixel window sliding 24 pixels a frame: both
    move left across the picture, as if the camera panned."""
    astronaut, grace = PHOTOS["astronaut"][0], PHOTOS["grace_hopper"][0]
    scene = np.hstack([astronaut, cv2.resize(grace, (512, 512), interpolation=cv2.INTER_AREA)])
    return [scene[:, 24 * i : 24 * i + 640].copy() for i in range(count)]


def _photo_frames() -> list[np.ndarray]:
    """Six frames of two sizes and content: the photos, mirrored, scaled, and with a second person."""
    astronaut, grace = PHOTOS["astronaut"][0], PHOTOS["grace_hopper"][0]
    both = np.hstack([astronaut, cv2.resize(grace, (512, 512), interpolation=cv2.INTER_AREA)])
    return [astronaut, grace, astronaut[:, ::-1].copy(), cv2.resize(grace, (768, 900)), both, both[:, ::-1].copy()]


def _red_spots(frames: list[np.ndarray]) -> list[np.ndarray]:
    """Each frame with a red 9x9 spot on the person, brightest at its centre: spot_finder puts every keypoint there."""
    spotted = []
    for index, frame in enumerate(frames):
        frame = frame.copy()
        frame[..., 2] = frame[..., 2] // 4  # no other pixel nearly as red as the spot, even after the crop's scaling
        x, y = 150 + 5 * index, 200 + 7 * index
        offsets = np.abs(np.arange(-4, 5))
        frame[y - 4 : y + 5, x - 4 : x + 5, 2] = 255 - 20 * np.maximum.outer(offsets, offsets)  # peak in the middle
        spotted.append(frame)
    return spotted


# Frames that are valid but unusual: extreme aspect ratios, tiny, odd sizes.
UNUSUAL_SHAPES = [(1, 20000), (20000, 1), (3, 1600), (1600, 3), (600, 1), (1, 600), (1, 1), (2, 2), (3, 5), (7, 9)]


def _bytes_per_pixel(encoding: str) -> int:
    """From the encoding's name alone (not from the code under test)."""
    channels = {"bgra": 4, "rgba": 4, "bgr": 3, "rgb": 3, "8UC3": 3, "uyvy": 2, "yuyv": 2, "yuv422": 2}
    count = next((value for key, value in channels.items() if encoding.startswith(key)), 1)
    return count * (2 if "16" in encoding else 1)


def huge_png(width: int = 30000, height: int = 30000) -> bytes:
    """A valid 8-bit grey PNG of ``width`` x ``height`` zeros, under a megabyte: deflate segments of 100 zero
    rows, each compressed independently (full flush), repeated; the zlib trailer's Adler-32 computed for all."""
    rows = bytes(width + 1) * 100  # filter byte + pixels, 100 rows
    compressor = zlib.compressobj(9)
    first = compressor.compress(rows) + compressor.flush(zlib.Z_FULL_FLUSH)
    segment = compressor.compress(rows) + compressor.flush(zlib.Z_FULL_FLUSH)
    end = compressor.flush()[:-4]  # final empty block, without the compressor's Adler-32 of what it saw
    adler = 1
    for _ in range(height // 100):
        adler = zlib.adler32(rows, adler)
    stream = first + segment * (height // 100 - 1) + end + struct.pack(">I", adler)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", stream) + chunk(b"IEND", b"")


def _damaged(data: bytes, rng: np.random.Generator) -> bytes:
    """Cut short, bytes overwritten, a run of random bytes, or a piece missing: as a lossy link or a fuzzer does."""
    damaged = bytearray(data)
    way = rng.integers(0, 4)
    if way == 0:
        return bytes(damaged[: rng.integers(1, len(damaged))])
    if way == 1:
        for _ in range(rng.integers(1, 10)):
            damaged[rng.integers(0, len(damaged))] = rng.integers(0, 256)
    elif way == 2:
        start = rng.integers(0, len(damaged))
        damaged[start : start + 20] = rng.integers(0, 256, 20, dtype=np.uint8).tobytes()
    else:
        start = rng.integers(2, len(damaged))
        del damaged[start : start + rng.integers(1, 50)]
    return bytes(damaged)


def _boxes():
    """Three images, five 100x100 boxes of two classes."""
    placements = [(1, 1, 10, 10), (1, 2, 200, 50), (2, 1, 30, 300), (3, 2, 150, 150), (3, 1, 400, 20)]
    return [(image, category, x, y, 100.0, 100.0) for image, category, x, y in placements]


def _truth(keypoints: bool = False) -> dict:
    annotations = []
    for index, (image, category, x, y, w, h) in enumerate(_boxes(), start=1):
        annotation = {"id": index, "image_id": image, "category_id": category, "bbox": [x, y, w, h]}
        annotation |= {"area": w * h, "iscrowd": 0}
        if keypoints:
            points = [[x + 5 + 5 * k, y + 10 + 4 * k, 2] for k in range(17)]
            annotation |= {"keypoints": [v for point in points for v in point], "num_keypoints": 17}
        annotations.append(annotation)
    categories = [{"id": 1, "name": "person", "keypoints": [f"k{i}" for i in range(17)]}, {"id": 2, "name": "ball"}]
    images = [{"id": i, "width": 640, "height": 480, "file_name": f"{i}.jpg"} for i in (1, 2, 3)]
    return {"images": images, "annotations": annotations, "categories": categories}


def declaring(kind: str, width: int, height: int) -> bytes:
    """A small image file of ``kind`` (webp, webp-vp8x, bmp, tiff, ppm, gif) whose header declares ``width`` x
    ``height``: a 64x48 image Pillow writes, its size fields rewritten (the format's own layout, written out here),
    so that a decoder trusting the header allocates for the declared size."""
    import io

    from PIL import Image

    image = Image.new("RGB", (64, 48), (10, 20, 30))
    written = io.BytesIO()
    extra = {"webp": {"lossless": True}, "webp-vp8x": {"exif": b"Exif\0\0II*\0\x08\0\0\0\0\0"}}.get(kind, {})
    image.save(written, {"webp-vp8x": "WEBP", "ppm": "PPM"}.get(kind, kind.upper()), **extra)
    data = bytearray(written.getvalue())
    if kind == "webp":  # RIFF, WEBP, VP8L: signature 0x2f, then width - 1 and height - 1 in 14 bits each
        assert data[12:16] == b"VP8L" and data[20] == 0x2F
        bits = struct.unpack_from("<I", data, 21)[0] & ~0xFFFFFFF
        struct.pack_into("<I", data, 21, bits | (width - 1) | (height - 1) << 14)
    elif kind == "webp-vp8x":  # VP8X: flags, 3 reserved bytes, canvas width - 1 and height - 1 in 24 bits each
        assert data[12:16] == b"VP8X"
        data[24:30] = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    elif kind == "bmp":  # BITMAPINFOHEADER after the 14-byte file header: width, height (int32)
        struct.pack_into("<ii", data, 18, width, height)
    elif kind == "tiff":  # little-endian IFD: entries of tag, type, count, value; ImageWidth 256, ImageLength 257
        assert data[:4] == b"II*\0"
        ifd = struct.unpack_from("<I", data, 4)[0]
        for entry in range(struct.unpack_from("<H", data, ifd)[0]):
            at = ifd + 2 + 12 * entry
            tag, kind_of = struct.unpack_from("<HH", data, at)
            if tag in (256, 257):
                value = width if tag == 256 else height
                struct.pack_into("<H" if kind_of == 3 else "<I", data, at + 8, value)
    elif kind == "ppm":  # P6, then the size in text
        data = bytearray(f"P6\n{width} {height}\n255\n".encode()) + bytes(64 * 48 * 3)
    elif kind == "gif":  # the logical screen and the first image descriptor, little-endian 16 bits each
        struct.pack_into("<HH", data, 6, width, height)
        descriptor = data.index(b"\x2c", 13)
        struct.pack_into("<HH", data, descriptor + 5, width, height)
    return bytes(data)


def declaring_avi(path: Path, width: int, height: int) -> Path:
    """A three-frame Motion JPEG AVI of 64x48 frames whose headers (avih, strh's frame, strf, each frame's SOF0)
    declare ``width`` x ``height``."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (64, 48))
    for index in range(3):
        writer.write(np.full((48, 64, 3), 40 * index, np.uint8))
    writer.release()
    data = bytearray(path.read_bytes())
    struct.pack_into("<II", data, data.index(b"avih") + 8 + 32, width, height)  # dwWidth, dwHeight
    struct.pack_into("<hhhh", data, data.index(b"strh") + 8 + 48, 0, 0, min(width, 32767), min(height, 32767))
    struct.pack_into("<ii", data, data.index(b"strf") + 8 + 4, width, height)  # biWidth, biHeight
    start = 0
    while (start := data.find(b"\xff\xc0", start) + 2) > 1:  # SOF0: length, precision, height, width
        struct.pack_into(">HH", data, start + 3, height, width)
    path.write_bytes(bytes(data))
    return path


def coco_split(source: Path, root: Path, calibration: int, held_out: slice) -> Path:
    """A COCO folder ``source`` (images/ and annotations.json) split by file name: its first ``calibration`` images
    copied into ROOT/calibration, the ``held_out`` ones into ROOT/eval as a COCO folder with their annotations."""
    truth = json.loads((source / "annotations.json").read_text())
    images = sorted(truth["images"], key=lambda image: image["file_name"])
    (root / "calibration").mkdir(parents=True)
    (root / "eval" / "images").mkdir(parents=True)
    for image in images[:calibration]:
        shutil.copy(source / "images" / image["file_name"], root / "calibration")
    kept = images[held_out]
    for image in kept:
        shutil.copy(source / "images" / image["file_name"], root / "eval" / "images")
    ids = {image["id"] for image in kept}
    subset = {**truth, "images": kept, "annotations": [a for a in truth["annotations"] if a["image_id"] in ids]}
    (root / "eval" / "annotations.json").write_text(json.dumps(subset))
    return root
