"""The vision-factory command line, run as a user would (a real subprocess)."""

from __future__ import annotations

import importlib.util
import re

import cv2
import numpy as np
import pytest
from conftest import ROOT, SHARED
from support.cli import run_cli

from vision_factory.tools.bags import image_topics, write_image_bag
from vision_factory.tools.synthetic import BallClip


def test_demo_tracks_the_ball_and_draws_it(tmp_path):
    done = run_cli("demo", "--out", str(tmp_path / "demo"), "--frames", "48", "--size", "640x360")
    assert done.returncode == 0, done.stderr
    lines = {line.split(":")[0].strip(): line for line in done.stdout.splitlines() if ": " in line}
    tracked = lines["tracked"]
    assert "error mean" in tracked and int(tracked.split(":")[1].split()[0]) >= 30
    assert float(tracked.split("max ")[1].split()[0]) <= 4.5
    assert lines["missed"].strip().startswith("missed: 0 ")
    picture = cv2.imread(str(tmp_path / "demo" / "trajectory.png"))
    assert picture is not None and picture.shape == (360, 640, 3)
    assert (tmp_path / "demo" / "replay" / "ball.csv").exists()
    # The demo's bag is on the camera topic the launch files listen on by default.
    assert image_topics(tmp_path / "demo" / "clip") == {_launch_default("image_topic"): "sensor_msgs/msg/Image"}


def test_a_second_demo_replaces_the_first_and_nothing_else(tmp_path):
    """A second run into the same folder failed with a traceback (the bag writer refuses an existing clip/)."""
    out = tmp_path / "demo"
    first = run_cli("demo", "--out", str(out), "--frames", "24", "--size", "320x180", "--no-inpaint")
    assert first.returncode == 0, first.stderr
    (out / "notes.txt").write_text("mine")
    first_csv = (out / "replay" / "ball.csv").read_text()
    second = run_cli("demo", "--out", str(out), "--frames", "24", "--size", "320x180", "--no-inpaint")
    assert second.returncode == 0 and "Traceback" not in second.stderr, second.stderr
    assert (out / "replay" / "ball.csv").read_text() == first_csv  # the same demo again, replaced whole
    assert (out / "notes.txt").read_text() == "mine"


def _launch_default(argument: str) -> str:
    """The default of a launch argument of launch/tracknet_onnx.launch.py, as --show-args shows it: its NodeLaunch's
    (the file imports launch, which has no PyPI wheel, only when it builds the description)."""
    path = ROOT / "launch" / "tracknet_onnx.launch.py"
    spec = importlib.util.spec_from_file_location("tracknet_onnx_launch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (default,) = [a.default for a in module.LAUNCH.arguments(share="share") if a.name == argument]
    return default


def test_replay_errors_name_the_problem(tmp_path):
    garbage = tmp_path / "garbage.mcap"
    garbage.write_bytes(b"\x00" * 64)
    done = run_cli("replay", str(garbage), "--out", str(tmp_path / "o"), "-p", "model_path:=x.onnx")
    assert done.returncode != 0 and "cannot read bag" in done.stderr and "Traceback" not in done.stderr
    two_topics = write_image_bag(tmp_path / "bag", [BallClip(2, 64, 64).frame(0)], topic="/a")
    done = run_cli("replay", str(two_topics), "--out", str(tmp_path / "o"), "--topic", "/b")
    assert done.returncode != 0 and "no image topic /b" in done.stderr
    done = run_cli("replay", str(two_topics), "--out", str(tmp_path / "o"), "-p", "model_path")
    assert done.returncode != 0 and "NAME:=VALUE" in done.stderr
    done = run_cli("replay", str(two_topics), "--out", str(tmp_path / "o"), "-p", "model_path:=/missing.onnx")
    assert done.returncode != 0 and "model file not found: /missing.onnx" in done.stderr


def test_replay_refuses_an_earlier_run_at_once_and_replaces_it_with_force(tmp_path, synthetic_models):
    bag = write_image_bag(tmp_path / "bag", BallClip(10, 320, 180).frames())
    out = tmp_path / "out"
    arguments = ("replay", str(bag), "--out", str(out), "-p", f"model_path:={synthetic_models['']}", "-p", "bg_mode:=")
    first = run_cli(*arguments)
    assert first.returncode == 0, first.stderr
    (out / "notes.txt").write_text("mine")
    earlier = {path.name: path.read_bytes() for path in out.iterdir() if path.is_file()}
    assert {"tracknet_node.log", "ball.csv", "replay.json"} <= set(earlier)

    again = run_cli(*arguments)
    assert again.returncode == 1 and "Traceback" not in again.stderr
    assert f"{out} holds an earlier run (tracknet_outputs, tracknet_node.log, replay.json, ball.csv)" in again.stderr
    assert "--force to replace that run" in again.stderr
    # Refused before anything ran: the earlier run is untouched (its log was truncated by the new node before).
    assert {path.name: path.read_bytes() for path in out.iterdir() if path.is_file()} == earlier

    forced = run_cli(*arguments, "--force")
    assert forced.returncode == 0, forced.stderr
    assert (out / "notes.txt").read_text() == "mine"  # only the run's own outputs are replaced
    assert (out / "ball.csv").read_bytes() == earlier["ball.csv"]  # the same answers, written anew
    assert (out / "tracknet_node.log").read_bytes() != earlier["tracknet_node.log"]  # a new node's log


def test_help_has_examples():
    for command in ("demo", "replay"):
        done = run_cli(command, "--help")
        assert done.returncode == 0 and "Example" in done.stdout


def test_reid_tune_prints_the_distributions_and_inspect_shows_the_thresholds(tmp_path):
    from support.data import TUNING_SCENE, scene_files
    from support.real_models import REID_MODEL

    if not REID_MODEL.is_file():
        pytest.skip(f"no re-id model at {REID_MODEL}")
    frames, truth = scene_files(tmp_path, TUNING_SCENE)
    out = tmp_path / "tuned.onnx"
    done = run_cli(
        "reid-tune", "--model", str(REID_MODEL), "--frames", str(frames), "--truth", str(truth), "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert "same person" in done.stdout and "different people" in done.stdout and "p99=" in done.stdout
    chosen = dict(line.split(": ") for line in done.stdout.splitlines() if line.startswith("track_"))
    assert set(chosen) == {"track_appearance_threshold", "track_appearance_veto", "track_reentry_threshold"}
    shown = run_cli("inspect", str(out))
    assert shown.returncode == 0, shown.stderr
    for name, value in chosen.items():
        assert f"  {name.replace('track_', 'reid_')}: {value}" in shown.stdout
    assert "reid_tune_source_sha256: " in shown.stdout and "reid_tune_crops: " in shown.stdout
    # the input model as --out is refused
    refused = run_cli(
        "reid-tune", "--model", str(out), "--frames", str(frames), "--truth", str(truth), "--out", str(out)
    )
    assert refused.returncode == 2 and "is an input of this command" in refused.stderr


def test_reid_tune_errors_name_the_problem_and_the_fix(tmp_path):
    from support.real_models import REID_MODEL

    if not REID_MODEL.is_file():
        pytest.skip(f"no re-id model at {REID_MODEL}")
    frames = tmp_path / "frames"
    frames.mkdir()
    for number in range(1, 4):
        cv2.imwrite(str(frames / f"{number:04d}.png"), np.full((240, 320, 3), 60 * number, np.uint8))
    people = "1,1,10,10,50,100,1,-1,-1,-1\n1,2,200,10,50,100,1,-1,-1,-1\n2,1,12,10,50,100,1,-1,-1,-1\n"
    cases = {
        "": "holds no boxes",
        people.replace(",1,-1,-1,-1", ",0,-1,-1,-1"): "has no box to score",
        people + "9,1,12,10,50,100,1,-1,-1,-1\n": "boxes up to frame 9 but the frames end at frame 3",
        people.replace(",10,", ",5000,"): "has a pixel inside the frames (320x240)",
    }
    for index, (text, error) in enumerate(cases.items()):
        truth = tmp_path / f"gt{index}.txt"
        truth.write_text(text)
        out = tmp_path / f"out{index}.onnx"
        done = run_cli(
            "reid-tune", "--model", str(REID_MODEL), "--frames", str(frames), "--truth", str(truth), "--out", str(out)
        )
        assert done.returncode == 1 and error in done.stderr, (text, done.stderr)
        assert "give" in done.stderr and "Traceback" not in done.stderr
        assert not out.exists()
    # a detector is not a re-id model
    detector = SHARED / "models" / "shapes-yolov8n.onnx"
    if detector.is_file():
        done = run_cli(
            "reid-tune", "--model", str(detector), "--frames", str(frames), "--truth", str(truth), "--out", str(out)
        )
        assert done.returncode == 2 and "--model" in done.stderr and "looks like a yolo model" in done.stderr
        assert "re-identification" in done.stderr
    missing = run_cli(
        "reid-tune",
        "--model",
        str(REID_MODEL),
        "--frames",
        str(tmp_path / "nowhere"),
        "--truth",
        str(truth),
        "--out",
        str(out),
    )
    assert missing.returncode == 2 and "--frames" in missing.stderr and "not found" in missing.stderr


def test_reid_tune_warns_when_the_embedder_cannot_tell_the_people_apart(tmp_path):
    """Two 'people' of the truth who are the same photo (the astronaut twice, walking apart, their sizes changing
    out of step): the different-people distances are as small as the same-person ones, the distributions overlap,
    and the tool says so; each threshold keeps its side of the rule."""
    from support.real_models import REID_MODEL

    from vision_factory.tools.compose import background, person

    if not REID_MODEL.is_file():
        pytest.skip(f"no re-id model at {REID_MODEL}")
    frames = tmp_path / "frames"
    frames.mkdir()
    rows = []
    for number in range(1, 31):
        frame = background((640, 360))
        for who, x, height in (
            (1, 40 + 3 * number, 130 + 4 * (number % 6)),
            (2, 450 - 3 * number, 130 + 4 * ((number + 3) % 6)),
        ):
            crop = person("astronaut", height)
            frame[100 : 100 + crop.shape[0], x : x + crop.shape[1]] = crop
            rows.append(f"{number},{who},{x},100,{crop.shape[1]},{crop.shape[0]},1,-1,-1,-1\n")
        cv2.imwrite(str(frames / f"{number:04d}.png"), frame)
    truth = tmp_path / "gt.txt"
    truth.write_text("".join(rows))
    out = tmp_path / "tuned.onnx"
    done = run_cli(
        "reid-tune", "--model", str(REID_MODEL), "--frames", str(frames), "--truth", str(truth), "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert "warning: the distributions overlap" in done.stderr and "expect ID switches" in done.stderr
    assert "overlapping: no threshold separates them" in done.stdout
    chosen = {
        key: float(value)
        for key, value in (line.split(": ") for line in done.stdout.splitlines() if line.startswith("track_"))
    }
    same, different = (
        dict(re.findall(r"p(\d+)=([\d.]+)", line)) for line in done.stdout.splitlines() if "pairs)" in line
    )
    assert float(same["99"]) >= float(different["1"])  # overlapping
    assert chosen["track_appearance_veto"] == pytest.approx(float(same["99"]), abs=1e-4)
    assert chosen["track_appearance_threshold"] == chosen["track_reentry_threshold"]
    assert chosen["track_appearance_threshold"] == pytest.approx(float(different["1"]), abs=1e-4)
