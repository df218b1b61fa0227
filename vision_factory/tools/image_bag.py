"""vision-factory bag: a rosbag2 of camera images made from a folder of images or a video, without ROS."""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..files import UnsafeWrite, output_folder
from ..progress import Progress
from ..text import shown_path, untrusted
from .bags import write_image_bag
from .commands import CommandReport, UsageError
from .sources import VIDEO_SUFFIXES, VideoFrames, is_video, open_video, read_image

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
DEFAULT_FPS = 30.0  # a folder of images, or a video that records no rate
# A ROS 2 topic name: tokens of letters, digits and underscores, not starting with a digit, separated by '/'.
TOPIC_NAME = re.compile(r"/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*")


def folder_images(folder: Path) -> list[Path]:
    """The image files of ``folder`` (IMAGE_SUFFIXES, any case), sorted by name: the bag's frame order."""
    images = sorted(path for path in folder.iterdir() if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES)
    if not images:
        raise UsageError(f"{shown_path(folder)} holds no image files ({', '.join(IMAGE_SUFFIXES)})", "IMAGES_OR_VIDEO")
    return images


def _image_frames(images: list[Path]) -> Iterator[np.ndarray]:
    for path in images:
        frame = read_image(path)
        if frame is None:
            raise ValueError(f"{shown_path(path)} is not a readable image: remove it or convert it")
        yield frame


def video_rate(path: Path) -> float:
    """The frames per second a video records, or 0.0 when it records none."""
    import cv2

    capture = open_video(path)  # cannot be opened: a ValueError naming it
    rate = float(capture.get(cv2.CAP_PROP_FPS) or 0.0)
    capture.release()
    return rate if math.isfinite(rate) and rate > 0 else 0.0


def make_bag(
    source: Path,
    out: Path,
    topic: str,
    fps: float | None = None,
    encoding: str = "bgr8",
    compressed: str = "",
    storage: str = "mcap",
    progress: Progress | None = None,
) -> CommandReport:
    """A new rosbag2 ``out`` of ``source``'s frames (a folder's images by name, or a video's) on ``topic``,
    stamped at ``fps`` (default: the video's rate, else DEFAULT_FPS): sensor_msgs/Image in ``encoding``, or with
    ``compressed`` (jpeg, png) sensor_msgs/CompressedImage. ``out`` must not exist (nor be a link). ``progress``
    (progress.py) gets the frames written of the images found or the frames the video declares."""
    if not TOPIC_NAME.fullmatch(topic):
        raise UsageError(f"'{untrusted(topic, 200)}' is not a ROS topic name (e.g. /camera/image_raw)", "--topic")
    topic = topic if topic.startswith("/") else f"/{topic}"
    if fps is not None and not (math.isfinite(fps) and fps > 0):
        raise UsageError(f"{fps} is not a frame rate: give frames per second > 0", "--fps")
    if out.exists() or out.is_symlink():
        raise UsageError(f"{shown_path(out)} exists: bag writes a new bag only; give a new name", "--out")
    try:
        output_folder(out.parent, option="--out")  # the bag's own folder is made new by the writer (mkdir)
    except UnsafeWrite as exc:
        raise UsageError(str(exc), "--out") from None
    notes = []
    video = None  # a video's frames: how many it declares, and whether it ends before
    if source.is_dir():
        images = folder_images(source)
        frames, what, total = _image_frames(images), "images", len(images)
        rate = fps or DEFAULT_FPS
    elif is_video(source):
        video = VideoFrames(source)
        frames, what, total = iter(video), "video frames", video.declared or None
        recorded = video_rate(source)
        rate = fps or recorded or DEFAULT_FPS
        if not fps and not recorded:
            notes.append(f"the video records no frame rate: stamped at {DEFAULT_FPS:g} fps (set --fps)")
    else:
        raise UsageError(
            f"{shown_path(source)} is neither a folder of images nor a video ({', '.join(VIDEO_SUFFIXES)})",
            "IMAGES_OR_VIDEO",
        )
    count = 0  # frames handed to the bag (all of them written when it returns)

    def counted(frames: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        nonlocal count
        for frame in frames:
            count += 1
            yield frame
            if progress:
                progress(f"bag: {what}", count, total)

    try:
        path = write_image_bag(
            out, counted(frames), topic, rate, encoding=encoding, compressed=compressed, storage=storage
        )
    except BaseException:
        _remove_partial(out)
        raise
    if count == 0:
        _remove_partial(out)
        raise ValueError(f"{shown_path(source)} has no frames: no bag written")
    kind = f"sensor_msgs/CompressedImage ({compressed})" if compressed else f"sensor_msgs/Image ({encoding})"
    if video is not None and video.shortfall():  # a truncated video: its bag holds the frames before the damage
        notes.append(video.shortfall())
        what += f" (of the {video.declared} the video declares)"
    text = (
        f"{count} {what} on {topic} as {kind}, stamped at {rate:g} fps "
        f"(0 to {(count - 1) / rate:.3f} s)\n"
        f"next: vision-factory replay {shlex.quote(shown_path(path))} --out RUN --node yolo -p model_path:=MODEL.onnx\n"
    )
    return CommandReport(text, {"bag": path}, notes)


def _remove_partial(out: Path) -> None:
    """The folder this command created for a bag it did not finish (only its own files: it was new)."""
    import shutil

    if out.is_dir() and not out.is_symlink():
        shutil.rmtree(out)
