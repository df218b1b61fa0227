"""The colours results are drawn in (BGR for OpenCV, RGB in 0..1 for ROS markers): a track's, a class's."""

from __future__ import annotations

import colorsys


def track_colour(track_id: int) -> tuple[float, float, float]:
    """The colour of a track, RGB in 0..1: a stable function of its ID (hues a golden-ratio step apart), the same
    in the debug image and the track markers."""
    return colorsys.hsv_to_rgb((track_id * 0.6180339887498949) % 1.0, 0.85, 1.0)


def bgr(rgb: tuple[float, float, float]) -> tuple[int, int, int]:
    """An RGB colour in 0..1 (track_colour's) as OpenCV's BGR in 0..255."""
    red, green, blue = rgb
    return int(255 * blue), int(255 * green), int(255 * red)


def class_colour(class_id: int) -> tuple[int, int, int]:
    """A class's colour (BGR: its boxes, labels and masks), from the same golden-ratio hues as the tracks'."""
    return bgr(track_colour(class_id + 1))
