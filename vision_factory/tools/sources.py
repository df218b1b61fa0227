"""Where the tools' frames come from: image files, videos and rosbag2 bags, read as BGR arrays."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..quiet import quiet_videos
from ..text import shown_path
from .bags import read_frames

VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm")


def is_video(path: Path) -> bool:
    return Path(path).suffix.lower() in VIDEO_SUFFIXES


def read_image(path: Path) -> np.ndarray | None:
    """A BGR image, or None when ``path`` is no readable image."""
    import cv2

    return cv2.imread(str(path), cv2.IMREAD_COLOR)


def open_video(path: Path) -> Any:
    """An OpenCV capture of the video file ``path``, FFmpeg's own lines about it silenced (quiet.quiet_videos: the
    caller says what matters); a ValueError when it cannot be opened."""
    import cv2

    quiet_videos()
    capture = cv2.VideoCapture(str(path))
    if not capture.isOpened():
        raise ValueError(f"cannot open video {shown_path(path)}")
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
