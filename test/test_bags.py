"""rosbag2 reading and writing with rosbags (sqlite3 and mcap), and clear errors for bad bags."""

from __future__ import annotations

import numpy as np
import pytest

from vision_factory.tools.bags import (
    BagError,
    image_topics,
    read_ball_csv,
    read_messages,
    write_ball_csv,
    write_image_bag,
)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_image_bag_roundtrip(tmp_path, storage):
    frames = [np.full((6, 8, 3), i, np.uint8) for i in range(3)]
    bag = write_image_bag(tmp_path / "bag", frames, topic="/cam/image", fps=10, storage=storage)
    assert image_topics(bag) == {"/cam/image": "sensor_msgs/msg/Image"}
    messages = list(read_messages(bag, "/cam/image"))
    assert [m.timestamp_ns - messages[0].timestamp_ns for m in messages] == [0, 100_000_000, 200_000_000]
    assert all(m.data[-1] == i for i, m in enumerate(messages))  # last pixel byte of each frame


def test_bad_bags_are_clear_errors(tmp_path):
    with pytest.raises(BagError, match="bag not found"):
        image_topics(tmp_path / "missing")
    garbage = tmp_path / "garbage.mcap"
    garbage.write_bytes(b"\x00" * 64)
    with pytest.raises(BagError, match="cannot read bag .*garbage.mcap"):
        image_topics(garbage)
    bag = write_image_bag(tmp_path / "ok", [np.zeros((4, 4, 3), np.uint8)])
    with pytest.raises(BagError, match="no topic /other"):
        list(read_messages(bag, "/other"))


def test_ball_csv_roundtrip(tmp_path):
    path = write_ball_csv(tmp_path / "ball.csv", [(0, 1, 10, 20), (1, 0, 0, 0)])
    assert path.read_text().splitlines()[0] == "Frame,Visibility,X,Y"
    assert read_ball_csv(path) == [(0, 1, 10.0, 20.0), (1, 0, 0.0, 0.0)]
