"""The result kinds' own parts (vision_factory/results/): what the nodes draw and publish, without a node."""

from __future__ import annotations

import json

import numpy as np
from std_msgs.msg import Header

from vision_factory.results.ball import draw_trajectory
from vision_factory.results.dense import DenseMap
from vision_factory.results.frame import FrameResult, write_results


def test_the_ball_debug_image_draws_the_trajectory_and_rings_the_newest_position():
    image = draw_trajectory(np.zeros((40, 80, 3), np.uint8), [(10, 20), (50, 20)])
    assert tuple(image[20, 30]) == (0, 200, 255)  # on the line between the two positions (BGR)
    assert tuple(image[20, 58]) == (0, 0, 255)  # on the ring of radius 8 around the newest
    assert not image[5, 5].any() and tuple(image[20, 50]) == (0, 200, 255)  # elsewhere untouched; the ring is open


def test_a_dense_map_goes_through_a_32fc1_image_unchanged_nan_included():
    values = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    values[1, 2] = np.nan
    message = DenseMap(values, "m", "depth").to_message(Header(frame_id="camera"))
    assert (message.encoding, message.width, message.height, message.step) == ("32FC1", 4, 3, 16)
    back = DenseMap.from_message(message, "m", "depth")
    assert np.array_equal(back.values, values, equal_nan=True) and (back.unit, back.kind) == ("m", "depth")


def test_replay_writes_a_dense_nodes_answers_as_records_in_frame_order(tmp_path):
    maps = {3: np.full((2, 3), 4.0, np.float32), 1: np.array([[1, np.nan, 3]], np.float32)}
    messages = {frame: DenseMap(values, "m", "depth").to_message(Header()) for frame, values in maps.items()}
    answers = {
        frame: FrameResult.from_message(("dense",), message, measures=("depth", "m"))
        for frame, message in messages.items()
    }
    path = write_results(tmp_path / "dense.json", answers, "run.bag")
    records = json.loads(path.read_text())
    assert {(record["kind"], record["unit"]) for record in records} == {("depth", "m")}
    assert [(r["image"], r["frame"], r["width"], r["height"], r["valid"]) for r in records] == [
        ("run.bag:1", 1, 3, 1, 2),
        ("run.bag:3", 3, 3, 2, 6),
    ]
    assert (records[0]["min"], records[0]["max"], records[1]["mean"]) == (1.0, 3.0, 4.0)
