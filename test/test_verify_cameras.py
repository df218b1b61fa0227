"""vision-factory verify --camera: several cameras played through ONE node serving them all (real DDS, real models,
real bags), each camera's answers compared with the model offline on that camera's frames alone. It passes a
correct node camera by camera, reports a silent camera, and fails a node whose outputs are crossed between two
cameras (a real misconfiguration: topic remappings), naming those cameras and not the others."""

from __future__ import annotations

import json
import sys

import cv2
import numpy as np
import pytest
from conftest import SHARED
from support.cli import run_cli
from support.models import SHAPES_MODEL

from vision_factory.tools.bags import read_messages, write_image_bag, write_messages
from vision_factory.tools.replay_cameras import parse_cameras
from vision_factory.tools.verify_cameras import verify_cameras

START = 1_700_000_000_000_000_000
SHAPES_IMAGES = SHARED / "data" / "shapes-val" / "images"
pytestmark = pytest.mark.skipif(
    not (SHAPES_MODEL.is_file() and SHAPES_IMAGES.is_dir()), reason=f"shared model or data not found under {SHARED}"
)


def _rig(tmp_path):
    """Three cameras of different sizes and rates, each seeing images of the shapes validation set: front (384x256
    at 30 frames/s) and left (320x240 at 10/s, from +10 ms) as two image topics of one bag, right (its own bag,
    512x384 at 15/s, from +5 ms), and side, a camera whose bag holds no frame (silent)."""
    shapes = [cv2.imread(str(path)) for path in sorted(SHAPES_IMAGES.glob("*.jpg"))[:13]]
    frames = {
        "front": [cv2.resize(image, (384, 256)) for image in shapes[:6]],
        "left": [cv2.resize(image, (320, 240)) for image in shapes[6:9]],
        "right": [cv2.resize(image, (512, 384)) for image in shapes[9:13]],
    }
    front = write_image_bag(tmp_path / "front", frames["front"], "/front/image_raw", 30, "front", start_ns=START)
    left = write_image_bag(tmp_path / "left", frames["left"], "/left/image_raw", 10, "left", start_ns=START + 10**7)
    rig = write_messages(
        tmp_path / "rig",
        sorted(
            [*read_messages(front, "/front/image_raw"), *read_messages(left, "/left/image_raw")],
            key=lambda message: message.timestamp_ns,
        ),
    )
    right = write_image_bag(tmp_path / "right", frames["right"], fps=15, frame_id="right", start_ns=START + 5 * 10**6)
    side = write_image_bag(tmp_path / "side", [], frame_id="side")
    cameras = ["front=/front/image_raw", "left=/left/image_raw", f"right={right}", f"side={side}"]
    return rig, cameras, frames


def test_verify_passes_each_camera_of_one_node_and_reports_a_silent_one(tmp_path):
    rig, cameras, frames = _rig(tmp_path)
    out = tmp_path / "v"
    result = run_cli(
        "verify", str(rig), "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--out", str(out),
        *(word for camera in cameras for word in ("--camera", camera)),
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout, result.stderr)
    result.output = result.stdout
    assert result.output.startswith("verify: PASS (4 cameras through one node)"), result.output
    for camera, camera_frames in frames.items():
        count = len(camera_frames)
        assert f"camera {camera}: PASS: {count} frames, {count} matched, worst difference 0 px" in result.output
    assert "camera side: PASS: silent (no frames)" in result.output
    data = json.loads((out / "verify.json").read_text())
    assert data["verdict"] == "pass"
    assert {camera: figures["frames"] for camera, figures in data["cameras"].items()} == {
        "front": 6, "left": 3, "right": 4, "side": 0,
    }  # fmt: skip
    for camera in frames:  # each camera's own report, its frames each compared with the model offline
        report = json.loads((out / camera / "verify.json").read_text())
        assert report["verdict"] == "pass" and len(report["frames"]) == len(frames[camera])
        assert all(frame["answered"] and frame["unpaired"] == 0 for frame in report["frames"])
        assert sum(frame["model_count"] for frame in report["frames"]) > 0  # the model found shapes to compare
        assert [check["name"] for check in report["checks"]] == [
            "every frame answered",
            "header stamps and frame_ids carried",
            "class names",
            "boxes within tolerance",
        ]
    assert (out / "front" / "worst_frame.png").is_file()
    silent = json.loads((out / "side" / "verify.json").read_text())
    assert silent["verdict"] == "pass" and silent["frames"] == []
    assert silent["checks"][0]["compared"] is False and "silent" in silent["checks"][0]["numbers"]


def test_verify_fails_the_cameras_whose_outputs_the_node_crosses(tmp_path):
    """The node's front and left detections remapped onto each other's topics (each camera's answers published as
    the other's): verify fails front and left, naming the crossing, and passes right."""
    rig, cameras, _ = _rig(tmp_path)
    swap = ["--ros-args", "-r", "front/detections:=left/detections", "-r", "left/detections:=front/detections"]
    sources = parse_cameras(cameras[:3], rig)
    executable = [sys.executable, "-m", "vision_factory.yolo_onnx_node", *swap]
    report = verify_cameras(sources, "yolo", SHAPES_MODEL, tmp_path / "v", executable=executable)
    assert not report.passed
    assert [name for name, camera in report.cameras.items() if not camera.passed] == ["front", "left"]
    failures = "\n".join(report.failures())
    assert "camera front: header stamps and frame_ids carried: its answers carry other cameras' frames' stamps " \
        "(3 of camera left's) — outputs crossed" in failures  # fmt: skip
    assert "camera left: header stamps and frame_ids carried: its answers carry other cameras' frames' stamps " \
        "(6 of camera front's) — outputs crossed" in failures  # fmt: skip
    assert "camera front: every frame answered: its frames were answered on other cameras' topics (6 on camera " \
        "left's topic)" in failures  # fmt: skip
    assert "camera right" not in failures
    assert report.summary("right") == {
        "verdict": "pass", "frames": 4, "matched": 4, "worst_difference_px": 0.0, "unpaired": 0,
    }  # fmt: skip
    assert json.loads((tmp_path / "v" / "verify.json").read_text())["verdict"] == "fail"
    assert np.isnan(report.cameras["front"].latency_ms_p99)  # played as fast as the node keeps up: not measured
