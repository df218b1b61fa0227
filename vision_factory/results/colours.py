"""The colours results are drawn in (BGR for OpenCV, RGB in 0..1 for ROS markers): a box's, a track's, a class's."""

from __future__ import annotations

import colorsys

BOX_COLOUR = (0, 200, 255)  # BGR


def track_colour(track_id: int) -> tuple[float, float, float]:
    """The colour of a track, RGB in 0..1: a stable function of its ID (hues a golden-ratio step apart), the same
    in the debug image and the track markers."""
    return colorsys.hsv_to_rgb((track_id * 0.6180339887498949) % 1.0, 0.85, 1.0)


def class_colour(class_id: int) -> tuple[int, int, int]:
    """A class's mask colour (BGR), from the same golden-ratio hues as the tracks'."""
    return tuple(int(255 * c) for c in reversed(track_colour(class_id + 1)))
