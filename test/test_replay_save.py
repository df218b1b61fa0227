"""replay --save DIR (tools/replay_pictures.py): the frames the real node answered, drawn with its answers (a box's
edges in its class's colour, as predict --save draws them), one in --save-every, at most --save-max, into DIR only;
an earlier replay's pictures refused before anything plays unless --force. Read from the drawn pixels and the
node's own detections.json, not against a reference picture."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SHARED
from support.cli import run_cli

from vision_factory.cli import main
from vision_factory.results.colours import class_colour
from vision_factory.tools.bags import write_image_bag

SEG_MODEL = SHARED / "models" / "shapes-yolov8n-seg.onnx"
SEG_IMAGES = SHARED / "data" / "shapes-seg-val" / "images"
needs_seg = pytest.mark.skipif(
    not (SEG_MODEL.is_file() and SEG_IMAGES.is_dir()), reason=f"{SEG_MODEL} or {SEG_IMAGES} not found"
)


def _bag(tmp_path, count: int):
    frames = [cv2.imread(str(path)) for path in sorted(SEG_IMAGES.glob("*.jpg"))[:count]]
    return write_image_bag(tmp_path / "bag", frames, fps=10, frame_id="camera"), frames


def _edge_share(picture: np.ndarray, box, colour) -> float:
    """The share of a box's left and right edge pixels (its label's rows left out) drawn in ``colour``."""
    x1, y1, x2, y2 = (int(round(v)) for v in box)
    rows = slice(min(y1 + 20, y2), y2)
    edges = np.concatenate([picture[rows, x1], picture[rows, min(x2, picture.shape[1] - 1)]])
    return float((np.abs(edges.astype(int) - np.array(colour)).max(axis=1) <= 1).mean()) if len(edges) else 0.0


@needs_seg
def test_replay_save_draws_every_nth_answered_frame_with_the_nodes_answers_up_to_the_most(tmp_path):
    bag, frames = _bag(tmp_path, 5)
    out, save = tmp_path / "out", tmp_path / "pictures"
    done = run_cli(
        "replay", bag, "--out", out, "--model", SEG_MODEL, "--save", save, "--save-every", "2", "--save-max", "2"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Frames 0, 2 and 4 are one in two; at most two: 0 and 2.
    assert sorted(path.name for path in save.iterdir()) == ["frame_000000.png", "frame_000002.png"]
    summary = json.loads((out / "replay.json").read_text())
    assert summary["pictures"] == {
        "folder": str(save), "frames": 2, "every": 2, "first": "frame_000000.png", "last": "frame_000002.png"
    }  # fmt: skip
    records = json.loads((out / "detections.json").read_text())
    drawn = 0
    for index in (0, 2):
        picture = cv2.imread(str(save / f"frame_{index:06d}.png"))
        assert picture.shape == frames[index].shape and not np.array_equal(picture, frames[index])
        detections = records[index]["detections"]
        assert detections, f"frame {index}: the node found nothing to draw"
        for detection in detections:  # each of the node's boxes in its class's colour (most of its edges)
            share = _edge_share(picture, detection["xyxy"], class_colour(detection["class_id"]))
            assert share > 0.6, (index, detection["class_name"], share)
            drawn += 1
    assert drawn >= 2


@needs_seg
def test_replay_save_refuses_an_earlier_replays_pictures_before_anything_plays(tmp_path):
    save = tmp_path / "pictures"
    save.mkdir()
    (save / "frame_000003.png").write_bytes(b"earlier")
    bag = write_image_bag(tmp_path / "bag", [np.zeros((64, 64, 3), np.uint8)], fps=10)
    # A unit test: starting the node here would fail it (tiers.py's guard), so the refusal comes first.
    result = CliRunner().invoke(main, ["replay", str(bag), "--out", str(tmp_path / "out"), "--node", "yolo",
                                       "-p", f"model_path:={SEG_MODEL}", "--save", str(save)])  # fmt: skip
    assert result.exit_code != 0 and "holds an earlier replay's pictures (frame_000003.png" in result.output
    assert "--force" in result.output and "Traceback" not in result.output
    assert (save / "frame_000003.png").read_bytes() == b"earlier"


def test_replay_save_with_cameras_is_refused_naming_the_way(tmp_path):
    bag = write_image_bag(tmp_path / "bag", [np.zeros((64, 64, 3), np.uint8)], fps=10)
    result = CliRunner().invoke(main, ["replay", str(bag), "--out", str(tmp_path / "out"), "--node", "yolo",
                                       "--camera", f"a={bag}", "--save", str(tmp_path / "p")])  # fmt: skip
    assert result.exit_code == 2 and "--save draws one camera's replay" in result.output
