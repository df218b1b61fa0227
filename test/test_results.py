"""The result kinds' own parts (vision_factory/results/): what the nodes draw and publish, without a node."""

from __future__ import annotations

import numpy as np
from std_msgs.msg import Header

from vision_factory.results.ball import draw_trajectory
from vision_factory.results.dense import DenseMap, from_message, to_message


def test_the_ball_debug_image_draws_the_trajectory_and_rings_the_newest_position():
    image = draw_trajectory(np.zeros((40, 80, 3), np.uint8), [(10, 20), (50, 20)])
    assert tuple(image[20, 30]) == (0, 200, 255)  # on the line between the two positions (BGR)
    assert tuple(image[20, 58]) == (0, 0, 255)  # on the ring of radius 8 around the newest
    assert not image[5, 5].any() and tuple(image[20, 50]) == (0, 200, 255)  # elsewhere untouched; the ring is open


def test_a_dense_map_goes_through_a_32fc1_image_unchanged_nan_included():
    values = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    values[1, 2] = np.nan
    message = to_message(Header(frame_id="camera"), DenseMap(values, "m", "depth"))
    assert (message.encoding, message.width, message.height, message.step) == ("32FC1", 4, 3, 16)
    back = from_message(message, "m", "depth")
    assert np.array_equal(back.values, values, equal_nan=True) and (back.unit, back.kind) == ("m", "depth")
