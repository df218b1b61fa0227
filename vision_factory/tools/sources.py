"""Where the tools' frames come from: image files, videos and rosbag2 bags, read as BGR arrays."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..images import (
    FILE_FIX,
    TOO_LARGE,
    UNKNOWN_FORMAT,
    ImageFormatError,
    check_pixels,
    declared,
    file_header,
    read_image_file,
)
from ..parameters import MAX_IMAGE_PIXELS
from ..quiet import quiet_videos
from ..text import shown_path, untrusted
from .bags import read_frames

VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm")


def is_video(path: Path) -> bool:
    return Path(path).suffix.lower() in VIDEO_SUFFIXES


# The other formats OpenCV decodes whose size Pillow reads from the header alone (its WebP open allocates the canvas:
# images.file_header reads WebP's).
PILLOW_HEADERS = ("BMP", "DIB", "TIFF", "PPM", "SUN", "JPEG2000", "GIF")


def image_header(data) -> tuple[str, int, int]:
    """(format, width, height) an image file's bytes declare, read without decoding: JPEG, PNG and WebP as
    images.file_header reads them, PILLOW_HEADERS' formats by Pillow's lazy open. An image Pillow calls a
    decompression bomb (over twice its MAX_IMAGE_PIXELS, far above ours) is one too large; one of another format,
    or a header cut short, is an ImageFormatError."""
    try:
        return file_header(data)
    except ImageFormatError as exc:
        if exc.kind != UNKNOWN_FORMAT:
            raise
    import io
    import warnings

    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # over our bound: refused by the caller
            with Image.open(io.BytesIO(data), formats=PILLOW_HEADERS) as image:
                kind, (width, height) = (image.format or "image").lower(), image.size
    except Image.DecompressionBombError:
        raise ImageFormatError(
            TOO_LARGE,
            f"image declares more than {2 * Image.MAX_IMAGE_PIXELS} pixels (Pillow's own bound, above "
            f"max_image_pixels {MAX_IMAGE_PIXELS}); {FILE_FIX}",
        ) from None
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ImageFormatError(
            "unreadable image header", f"no image this package reads (JPEG, PNG, WebP, BMP, TIFF...): {untrusted(exc)}"
        ) from None
    return declared(kind, width, height)


def read_image(path: Path) -> np.ndarray | None:
    """A BGR image, or None when ``path`` is no readable image; one declaring more than MAX_IMAGE_PIXELS pixels is
    a ValueError naming the file, raised before it is decoded (images.read_image_file, with image_header)."""
    try:
        return read_image_file(path, header=image_header)
    except ImageFormatError as exc:
        if exc.kind == TOO_LARGE:
            raise ValueError(f"{shown_path(path)}: {exc}") from None
        return None
    except OSError:
        return None


def open_video(path: Path) -> Any:
    """An OpenCV capture of the video file ``path``, FFmpeg's own lines about it silenced (quiet.quiet_videos: the
    caller says what matters); a ValueError when it cannot be opened, or when the frame size it declares is larger
    than MAX_IMAGE_PIXELS (checked before any frame is decoded)."""
    import cv2

    quiet_videos()
    capture = cv2.VideoCapture(str(path))
    if not capture.isOpened():
        raise ValueError(f"cannot open video {shown_path(path)}")
    width, height = (int(capture.get(prop)) for prop in (cv2.CAP_PROP_FRAME_WIDTH, cv2.CAP_PROP_FRAME_HEIGHT))
    try:
        check_pixels(width, height, MAX_IMAGE_PIXELS, "video frames", FILE_FIX)
    except ImageFormatError as exc:
        capture.release()
        raise ValueError(f"{shown_path(path)}: {exc}") from None
    return capture


class VideoFrames:
    """The BGR frames of a video file, in order (iterated once); once they are read, ``read`` counts them, and
    ``shortfall`` says when the video ends before the frames its container declares (a truncated or damaged file,
    whose decoding stopped there; or, rarely, a whole file whose container counts frames it does not show, as an
    edit list can: so a shortfall is said, not refused)."""

    def __init__(self, path: Path):
        import cv2

        self.path = path
        self.capture = open_video(path)
        declared = self.capture.get(cv2.CAP_PROP_FRAME_COUNT)
        self.declared = int(round(declared)) if math.isfinite(declared) and declared > 0 else 0  # 0: not said
        self.read = 0

    def __iter__(self) -> Iterator[np.ndarray]:
        try:
            while True:
                ok, frame = self.capture.read()
                if not ok:
                    break
                self.read += 1
                yield frame
        finally:
            self.capture.release()

    def shortfall(self) -> str:
        """ "" when every frame the container declares was read (or it declares none); else what is missing."""
        if self.read >= self.declared:
            return ""
        return (
            f"{shown_path(self.path)} declares {self.declared} frames and {self.read} could be read: it is "
            f"truncated or damaged (or its container counts frames it does not show); only the first {self.read} "
            "are used"
        )


def video_frames(path: Path) -> Iterator[np.ndarray]:
    """BGR frames of a video file."""
    yield from VideoFrames(path)


def source_frames(source: Path) -> Iterator[np.ndarray]:
    """BGR frames of a video file or a rosbag2."""
    if is_video(source):
        yield from video_frames(source)
    else:
        yield from read_frames(source)


def source_files(source: Path) -> list[Path]:
    """The files a --source names: a folder's, in name order (images, videos), else the one file."""
    return sorted(path for path in source.iterdir() if path.is_file()) if source.is_dir() else [source]


def file_frames(path: Path) -> Iterator[tuple[str, int | None, np.ndarray]]:
    """(name, frame index or None, frame) of an image (its path) or of each frame of a video (PATH:INDEX)."""
    if is_video(path):
        for index, frame in enumerate(video_frames(path)):
            yield f"{path}:{index}", index, frame
        return
    image = read_image(path)
    if image is None:
        raise ValueError(f"{shown_path(path)} is neither a readable image nor a video ({', '.join(VIDEO_SUFFIXES)})")
    yield str(path), None, image


def image_file(annotations: Path, name: str) -> Path | None:
    """A data set's image ``name`` (a ``file_name`` of its annotations): beside the annotation file, directly or
    under images/; None when neither is a file."""
    candidates = [annotations.parent / "images" / name, annotations.parent / name]
    return next((path for path in candidates if path.is_file()), None)
