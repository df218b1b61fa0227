"""Progress of the long commands (vision_factory/progress.py): a tqdm bar on stderr with the count reaching the
total, shown on a terminal or when asked (--progress, VISION_FACTORY_PROGRESS=1), never under --quiet nor in a
pipe (CliRunner's stderr is not a terminal), and stdout the same either way."""

from __future__ import annotations

import io
import json

import cv2
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SHARED

from vision_factory.cli import main
from vision_factory.progress import ENVIRONMENT, Bars, shown

DETECTOR = SHARED / "models" / "shapes-yolov8n.onnx"
BAR = "%|"  # tqdm's bar: the percentage, then the bar's left edge


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _images(folder, count: int, size: int = 64):
    folder.mkdir()
    for index in range(count):
        frame = np.full((size, size, 3), 20 * index, np.uint8)
        cv2.rectangle(frame, (size // 4, size // 4), (size // 2, size // 2), (255, 255, 255), -1)
        cv2.imwrite(str(folder / f"{index:03d}.png"), frame)
    return folder


def _run(arguments, environment=None):
    result = CliRunner().invoke(main, [str(part) for part in arguments], env=environment or {ENVIRONMENT: ""})
    assert result.exit_code == 0, result.output + result.stderr
    return result


def test_shown_follows_the_flag_then_the_environment_then_the_terminal(monkeypatch):
    monkeypatch.delenv(ENVIRONMENT, raising=False)
    assert shown(None, Terminal()) is True
    assert shown(None, io.StringIO()) is False  # a pipe, a file
    assert shown(False, Terminal()) is False  # --quiet
    assert shown(True, io.StringIO()) is True  # --progress
    monkeypatch.setenv(ENVIRONMENT, "1")
    assert shown(None, io.StringIO()) is True
    assert shown(False, io.StringIO()) is False
    monkeypatch.setenv(ENVIRONMENT, "0")
    assert shown(None, Terminal()) is False
    assert shown(True, Terminal()) is True


def test_bars_count_each_stage_to_its_total_and_draw_nothing_when_off():
    stream = io.StringIO()
    with Bars(True, stream) as bars:
        for done in range(4):
            bars("calibration frames", done, 3)
        bars("frames played", 1, None)
        bars("frames played", 2, None)
    text = stream.getvalue()
    assert "calibration frames: 100%" in text and "3/3" in text
    assert "frames played: 2" in text  # no total: a count
    silent = io.StringIO()
    with Bars(False, silent) as bars:
        bars("calibration frames", 3, 3)
    assert silent.getvalue() == ""


def test_bag_shows_its_images_counted_to_the_total_only_when_asked(tmp_path):
    images = _images(tmp_path / "images", 5)
    piped = _run(["bag", images, "--out", tmp_path / "a"])
    assert BAR not in piped.stderr and "5/5" not in piped.stderr
    forced = _run(["bag", images, "--out", tmp_path / "b"], {ENVIRONMENT: "1"})
    assert "bag: images: 100%" in forced.stderr and "5/5" in forced.stderr
    flagged = _run(["bag", images, "--out", tmp_path / "c", "--progress"])
    assert "5/5" in flagged.stderr
    quiet = _run(["bag", images, "--out", tmp_path / "d", "--quiet"], {ENVIRONMENT: "1"})
    assert BAR not in quiet.stderr and "5/5" not in quiet.stderr
    # stdout is the report whatever the bar does (only the bag's name differs)
    for result, name in ((forced, "b"), (flagged, "c"), (quiet, "d")):
        assert result.stdout == piped.stdout.replace(str(tmp_path / "a"), str(tmp_path / name))


def test_eval_counts_the_images_of_the_data_set(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _images(data / "images", 3, 256)
    truth = {
        "images": [{"id": i, "width": 256, "height": 256, "file_name": f"{i:03d}.png"} for i in range(3)],
        "annotations": [
            {"id": i + 1, "image_id": i, "category_id": 1, "bbox": [64, 64, 64, 64], "area": 4096, "iscrowd": 0}
            for i in range(3)
        ],
        "categories": [{"id": 1, "name": "circle"}, {"id": 2, "name": "square"}],
    }
    (data / "annotations.json").write_text(json.dumps(truth))
    arguments = ["eval", "--model-type", "yolo", "--model", DETECTOR, "--data", data]
    piped = _run([*arguments, "--out", tmp_path / "a"])
    forced = _run([*arguments, "--out", tmp_path / "b", "--progress"])
    assert BAR not in piped.stderr
    assert "data: images: 100%" in forced.stderr and "3/3" in forced.stderr
    assert forced.stdout == piped.stdout.replace(str(tmp_path / "a"), str(tmp_path / "b"))  # the metrics table
    quiet = _run([*arguments, "--out", tmp_path / "c", "--quiet"], {ENVIRONMENT: "1"})
    assert BAR not in quiet.stderr and "3/3" not in quiet.stderr


@pytest.mark.parametrize("quiet", [False, True], ids=["progress", "quiet"])
def test_track_counts_its_frames(tmp_path, quiet):
    images = _images(tmp_path / "images", 4, 128)
    frames = sorted(images.glob("*.png"))  # image files, each a frame
    arguments = ["track", "--model-type", "yolo", "--model", DETECTOR, *frames, "--out", tmp_path / "out"]
    result = _run([*arguments, "--quiet" if quiet else "--progress"])
    summary = json.loads(result.stdout)  # stdout stays the JSON summary
    assert summary["frames"] == 4
    assert ("track: frames: 4" in result.stderr) is not quiet


def test_quantize_counts_the_comparisons_images_too(tmp_path):
    """quantize --data: beside its calibration, the comparison of each model kept counts the data set's images
    (compare's own bars; before, quantize's comparison ran silent)."""
    data = tmp_path / "data"
    data.mkdir()
    _images(data / "images", 3, 256)
    truth = {
        "images": [{"id": i, "width": 256, "height": 256, "file_name": f"{i:03d}.png"} for i in range(3)],
        "annotations": [
            {"id": i + 1, "image_id": i, "category_id": 1, "bbox": [64, 64, 64, 64], "area": 4096, "iscrowd": 0}
            for i in range(3)
        ],
        "categories": [{"id": 1, "name": "circle"}, {"id": 2, "name": "square"}],
    }
    (data / "annotations.json").write_text(json.dumps(truth))
    arguments = ["quantize", "--model-type", "yolo", "--model", DETECTOR, "--calibration", data / "images"]
    arguments += ["--backend", "onnx", "--data", data, "--speed-runs", "1", "--accept-loss", "--progress"]
    result = _run([*arguments, "--out", tmp_path / "q.onnx"])
    assert result.stderr.count("data: images: 100%") >= 2 and "3/3" in result.stderr, result.stderr
