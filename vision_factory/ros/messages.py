"""Conversions between ROS messages and the core's numpy images and predictions."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from geometry_msgs.msg import Point, PointStamped
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from ..images import bgr_to_image_fields, compressed_to_bgr, image_to_bgr
from ..parameters import MAX_IMAGE_PIXELS


def message_to_bgr(
    msg: Image | CompressedImage, max_pixels: int = MAX_IMAGE_PIXELS, warn: Callable[[str, str], None] | None = None
) -> np.ndarray:
    """BGR view or copy of an Image / CompressedImage message of at most ``max_pixels`` pixels (0: any).

    ``warn(kind, detail)`` hears of compressed data decoded despite the decoder's complaints.
    """
    if isinstance(msg, CompressedImage):
        return compressed_to_bgr(msg.data, max_pixels, warn)
    return image_to_bgr(msg.width, msg.height, msg.encoding, msg.step, msg.data, bool(msg.is_bigendian), max_pixels)


def bgr_to_message(bgr: np.ndarray, header: Header, encoding: str = "bgr8") -> Image:
    width, height, encoding, step, data = bgr_to_image_fields(bgr, encoding)
    # Bytes, never a numpy array: assigning an array to msg.data is very slow.
    return Image(header=header, width=width, height=height, encoding=encoding, step=step, data=data)


def ball_message(header: Header, x: int, y: int, visible: bool) -> PointStamped:
    """The ball in image pixels; point.z carries visibility (1.0 seen, 0.0 not seen, x = y = 0)."""
    return PointStamped(header=header, point=Point(x=float(x), y=float(y), z=1.0 if visible else 0.0))


def trajectory_markers(header: Header, points: Iterable[tuple[int, int]], namespace: str = "ball") -> MarkerArray:
    """A line through recent ball positions and a sphere on the newest, in pixel units."""
    positions = [Point(x=float(x), y=float(y), z=0.0) for x, y in points]
    line = Marker(header=header, ns=namespace, id=0, type=Marker.LINE_STRIP, action=Marker.ADD)
    line.points = positions
    line.scale.x = 2.0
    line.color = ColorRGBA(r=1.0, g=0.8, b=0.0, a=1.0)
    ball = Marker(header=header, ns=namespace, id=1, type=Marker.SPHERE, action=Marker.ADD)
    if positions:
        ball.pose.position = positions[-1]
    else:
        ball.action = Marker.DELETE
    ball.scale.x = ball.scale.y = ball.scale.z = 8.0
    ball.color = ColorRGBA(r=1.0, g=0.2, b=0.0, a=1.0)
    return MarkerArray(markers=[line, ball])
