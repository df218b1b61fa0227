"""Where the tools' frames come from: image files, videos and rosbag2 bags, read as BGR arrays."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..text import shown_path
from .bags import read_frames

VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm")


def is_video(path: Path) -> bool:
    return Path(path).suffix.lower() in VIDEO_SUFFIXES


def read_image(path: Path) -> np.ndarray | None:
    """A BGR image, or None when ``path`` is no readable image."""
    import cv2

    return cv2.imread(str(path), cv2.IMREAD_COLOR)


def video_frames(path: Path) -> Iterator[np.ndarray]:
    """BGR frames of a video file."""
    import cv2

    capture = cv2.VideoCapture(str(path))
    if not capture.isOpened():
        raise ValueError(f"cannot open video {shown_path(path)}")
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        yield frame
    capture.release()


def source_frames(source: Path) -> Iterator[np.ndarray]:
    """BGR frames of a video file or a rosbag2."""
    if is_video(source):
        yield from video_frames(source)
    else:
        yield from read_frames(source)


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
