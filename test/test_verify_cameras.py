"""vision-factory verify --camera: several cameras played through ONE node serving them all (real DDS, real models,
real bags), each camera's answers compared with the model offline on that camera's frames alone. It passes a
correct node camera by camera, reports a silent camera, and fails a node whose outputs are crossed between two
cameras (a real misconfiguration: topic remappings), naming those cameras and not the others."""

from __future__ import annotations

import json
import logging
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SHARED, pypi_model
from support.cli import run_cli
from support.data import RIG_START_NS, _walk, camera_rig
from support.models import SHAPES_MODEL, wrap_yolo
from support.real_models import FALL_MODEL, POSE_MODEL, REID_MODEL

from vision_factory.cli import main
from vision_factory.models.yolo import YoloDetector
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.bags import read_ball_csv, write_image_bag
from vision_factory.tools.replay_frames import parse_cameras
from vision_factory.tools.synthetic import BallClip, build_tracknet_model
from vision_factory.tools.verify import verify

START = RIG_START_NS
SHAPES_IMAGES = SHARED / "data" / "shapes-val" / "images"
SEG_MODEL = SHARED / "models" / "shapes-yolov8n-seg.onnx"
TEST_DATA = Path(__file__).resolve().parent / "data"
pytestmark = pytest.mark.skipif(
    not (SHAPES_MODEL.is_file() and SHAPES_IMAGES.is_dir()), reason=f"shared model or data not found under {SHARED}"
)


def _rig(tmp_path, images: list | None = None):
    """Three cameras of different sizes and rates, each seeing images of the shapes validation set (or 13
    ``images``): front (384x256 at 30 frames/s) and left (320x240 at 10/s, from +10 ms) as two image topics of one
    bag, right (its own bag, 512x384 at 15/s, from +5 ms), and side, a camera whose bag holds no frame (silent)."""
    shapes = images or [cv2.imread(str(path)) for path in sorted(SHAPES_IMAGES.glob("*.jpg"))[:13]]
    frames = {
        "front": [cv2.resize(image, (384, 256)) for image in shapes[:6]],
        "left": [cv2.resize(image, (320, 240)) for image in shapes[6:9]],
        "right": [cv2.resize(image, (512, 384)) for image in shapes[9:13]],
    }
    rig, right = camera_rig(tmp_path, frames)
    side = write_image_bag(tmp_path / "side", [], frame_id="side")
    cameras = ["front=/front/image_raw", "left=/left/image_raw", f"right={right}", f"side={side}"]
    return rig, cameras, frames


def test_verify_passes_each_camera_of_one_node_and_reports_a_silent_one(tmp_path):
    """The command line: three cameras and a silent one, the node's parameters file (a confidence threshold) read
    by the node and for the offline model alike."""
    rig, cameras, frames = _rig(tmp_path)
    out = tmp_path / "v"
    config = tmp_path / "yolo.yaml"
    config.write_text("/**:\n  ros__parameters:\n    confidence_threshold: 0.3\n")
    done = run_cli(
        "verify", str(rig), "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--out", str(out),
        "--params-file", str(config), *(word for camera in cameras for word in ("--camera", camera)),
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr)
    result = SimpleNamespace(output=done.stdout)
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
    assert "stamp): not measured." in (out / "front" / "verify.md").read_text()  # as fast as the node keeps up
    compared = sum(frame["model_count"] for camera in frames for frame in json.loads(
        (out / camera / "verify.json").read_text())["frames"])  # fmt: skip
    everything = YoloDetector(OnnxRunner.load(SHAPES_MODEL, {}, logging.getLogger("test")))  # at 0.25
    assert 0 < compared < sum(len(everything.detect(frame)) for camera in frames.values() for frame in camera)
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
    report = verify(rig, "yolo", SHAPES_MODEL, tmp_path / "v", executable=executable, cameras=sources)
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


def test_verify_names_crossed_outputs_of_cameras_whose_frames_share_their_stamps(tmp_path):
    """Two cameras triggered together (the same stamps) and their outputs crossed: every answer carries a stamp of
    its camera's frames, so the crossing shows in the frame_ids and in the answers themselves, which are what the
    model gives for the other camera's frame of the same stamp."""
    shapes = [cv2.imread(str(path)) for path in sorted(SHAPES_IMAGES.glob("*.jpg"))[13:19]]
    bags = {
        "front": write_image_bag(tmp_path / "front", [cv2.resize(i, (384, 256)) for i in shapes[:3]], fps=10,
                                 frame_id="front_optical"),
        "back": write_image_bag(tmp_path / "back", [cv2.resize(i, (320, 320)) for i in shapes[3:]], fps=10,
                                frame_id="back_optical"),
    }  # fmt: skip
    sources = parse_cameras([f"{camera}={bag}" for camera, bag in bags.items()], bags["front"])
    swap = ["--ros-args", "-r", "front/detections:=back/detections", "-r", "back/detections:=front/detections"]
    executable = [sys.executable, "-m", "vision_factory.yolo_onnx_node", *swap]
    report = verify(bags["front"], "yolo", SHAPES_MODEL, tmp_path / "v", executable=executable, cameras=sources)
    assert not report.passed and not report.cameras["front"].passed and not report.cameras["back"].passed
    failures = "\n".join(report.failures())
    for camera, other in (("front", "back"), ("back", "front")):
        checks = {check.name: check for check in report.cameras[camera].checks}
        assert checks["every frame answered"].passed  # each answer carries a stamp of the camera's own frames
        assert f"camera {camera}: header stamps and frame_ids carried: its answers carry camera {other}'s " \
            "frame_id — outputs crossed" in failures  # fmt: skip
        assert f"camera {camera}: boxes within tolerance: its answers are what the model gives for camera " \
            f"{other}'s frames of the same stamps, not for its own — outputs crossed" in failures  # fmt: skip


def _shared_state(tmp_path, node: str) -> list[str]:
    """A planted fault (in the node's process, never in the product): every camera of this package's ``node`` given
    the first camera's pipeline, so that one stream state (a TrackNet window, a tracker) serves all the cameras."""
    script = tmp_path / "shared_state.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            from vision_factory.ros.inference_node import InferenceNode

            own = InferenceNode.camera_pipelines

            def shared(self, make):
                pipelines = own(self, make)
                first = next(iter(pipelines.values()))
                return {camera: first for camera in pipelines}

            InferenceNode.camera_pipelines = shared
            """
        )
        + f"from vision_factory.{node}_onnx_node import main\n\nsys.exit(main())\n"
    )
    return [sys.executable, str(script)]


def test_verify_compares_each_cameras_tracknet_window_and_fails_one_window_for_all(tmp_path):
    """Two ball clips as two cameras (15 and 10 frames/s) through one tracknet node: verify passes, each camera's
    positions those of a TrackNet window over its own frames alone; a node whose cameras share one window (each
    camera's frames then answered from a window of both clips) fails."""
    clips = {"court_a": BallClip(12, 512, 288, seed=3), "court_b": BallClip(10, 512, 288, seed=7)}
    bags = {
        "court_a": write_image_bag(tmp_path / "a", clips["court_a"].frames(), fps=15, frame_id="a", start_ns=START),
        "court_b": write_image_bag(tmp_path / "b", clips["court_b"].frames(), fps=10, frame_id="b",
                                   start_ns=START + 2 * 10**7),
    }  # fmt: skip
    sources = parse_cameras([f"{camera}={bag}" for camera, bag in bags.items()], bags["court_a"])
    model = build_tracknet_model(tmp_path / "tracknet.onnx", 8, "subtract")
    params = {"seq_len": "8", "bg_mode": "subtract", "median_warmup": "4"}
    report = verify(bags["court_a"], "tracknet", model, tmp_path / "v", params, cameras=sources)
    assert report.passed, report.text()
    for camera, clip in clips.items():
        assert report.summary(camera)["matched"] == clip.num_frames, report.text()
        balls = read_ball_csv(tmp_path / "v" / "node" / camera / "ball.csv")
        assert sum(visible for _, visible, _, _ in balls) >= clip.num_frames // 2  # positions really compared
    shared = verify(
        bags["court_a"],
        "tracknet",
        model,
        tmp_path / "shared",
        params,
        _shared_state(tmp_path, "tracknet"),
        cameras=sources,
    )
    # One window for both clips: a frame's position comes out when a later frame of either camera fills the window,
    # on that frame's camera: each camera's frames are answered, in part, on the other's topic.
    assert not shared.passed and not any(camera.passed for camera in shared.cameras.values()), shared.text()
    failures = "\n".join(shared.failures())
    for camera, other in (("court_a", "court_b"), ("court_b", "court_a")):
        assert f"camera {camera}: every frame answered: its frames were answered on other cameras' topics (" in failures
        assert f"on camera {other}'s topic) — outputs crossed" in failures


def test_verify_cameras_refuses_what_it_does_not_take(tmp_path):
    """Refused before anything plays, naming the option: one camera's --rate, --topic and --latency-budget-ms, a
    cameras parameter beside --camera, a camera that is neither a topic of the bag nor a bag."""
    bag = write_image_bag(tmp_path / "bag", [np.zeros((64, 64, 3), np.uint8)], frame_id="cam")
    verify = ["verify", str(bag), "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--out", str(tmp_path / "v")]
    camera = ["--camera", "front=/camera/image_raw"]
    for extra, named in (
        (["--rate", "2"], "takes no --rate"),
        (["--latency-budget-ms", "100"], "takes no --latency-budget-ms"),
        (["--topic", "/camera/image_raw"], "takes no --topic"),
        (["-p", "cameras:=[a, b]"], "give no -p cameras"),
    ):
        done = CliRunner().invoke(main, [*verify, *camera, *extra])
        assert done.exit_code == 2 and named in done.output and "Traceback" not in done.output, done.output
    done = CliRunner().invoke(main, [*verify, "--camera", "front=/nowhere"])
    assert done.exit_code == 2 and "/nowhere is neither an image topic of" in done.output, done.output
    assert not (tmp_path / "v").exists()


def test_replay_takes_the_same_camera_option_on_the_command_line(tmp_path):
    """`replay --camera` on the command line (it failed with a KeyError before), now with --params-file too: each
    camera's answers in OUT/<camera>/detections.json."""
    rig, cameras, frames = _rig(tmp_path)
    config = tmp_path / "yolo.yaml"
    config.write_text("/**:\n  ros__parameters:\n    confidence_threshold: 0.3\n")
    out = tmp_path / "r"
    done = run_cli(
        "replay", str(rig), "--node", "yolo", "-p", f"model_path:={SHAPES_MODEL}", "--params-file", str(config),
        "--out", str(out), *(word for camera in cameras[:3] for word in ("--camera", camera)),
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["frames_sent"] == {camera: len(found) for camera, found in frames.items()}
    for camera, camera_frames in frames.items():
        records = json.loads((out / camera / "detections.json").read_text())
        assert [record["frame"] for record in records] == list(range(len(camera_frames)))
        scores = [d["score"] for record in records for d in record["detections"]]
        assert scores and min(scores) >= 0.3  # the file's threshold, read by the node


def test_verify_compares_each_cameras_track_ids_and_fails_one_tracker_for_all(tmp_path):
    """Two cameras of people walking (real photos; the second mirrored, 3 frames/s against 4) through one yolo node
    tracking with re-identification: verify passes, each camera's track IDs those of a tracker over its own frames
    alone; a node whose cameras share one tracker fails on the track IDs, naming the shared tracker."""
    if not REID_MODEL.is_file():
        pytest.skip(f"{REID_MODEL} is not there (shared models, see ../shared/models/README)")
    bags = {
        "a": write_image_bag(tmp_path / "a", _walk(), fps=4, frame_id="a", start_ns=START),
        "b": write_image_bag(tmp_path / "b", [frame[:, ::-1].copy() for frame in _walk(6)], fps=3, frame_id="b",
                             start_ns=START + 10**8),
    }  # fmt: skip
    sources = parse_cameras([f"{camera}={bag}" for camera, bag in bags.items()], bags["a"])
    model, params = pypi_model(*FALL_MODEL), {"tracking": "true", "reid_model_path": str(REID_MODEL)}
    report = verify(bags["a"], "yolo", model, tmp_path / "v", params, cameras=sources)
    assert report.passed, report.text()
    for camera in bags:
        (tracks,) = [check for check in report.cameras[camera].checks if check.name == "track IDs"]
        assert tracks.compared and "(2 tracks)" in tracks.numbers, report.text()
    shared = verify(
        bags["a"], "yolo", model, tmp_path / "shared", params, _shared_state(tmp_path, "yolo"), cameras=sources
    )
    for camera in bags:
        (tracks,) = [check for check in shared.cameras[camera].checks if check.name == "track IDs"]
        assert not tracks.passed and "cameras sharing one tracker" in tracks.cause, shared.text()
        assert all(check.passed for check in shared.cameras[camera].checks if check is not tracks)


def test_verify_compares_each_cameras_masks(tmp_path):
    """A segmentation model through one node of two cameras: each camera's ~/masks recorded with its detections
    and every paired detection's mask compared with the model's."""
    if not SEG_MODEL.is_file():
        pytest.skip(f"{SEG_MODEL} is not there (shared models)")
    rig, cameras, frames = _rig(tmp_path)
    report = verify(rig, "yolo", SEG_MODEL, tmp_path / "v", cameras=parse_cameras([cameras[0], cameras[2]], rig))
    assert report.passed, report.text()
    for camera in ("front", "right"):
        (masks,) = [check for check in report.cameras[camera].checks if check.name == "masks within tolerance"]
        assert sum(frame.masks for frame in report.cameras[camera].frames) >= len(frames[camera]), masks.numbers


def test_verify_of_silent_cameras_alone_fails_for_want_of_frames(tmp_path):
    silent = write_image_bag(tmp_path / "side", [], frame_id="side")
    report = verify(silent, "yolo", SHAPES_MODEL, tmp_path / "v", cameras=parse_cameras([f"side={silent}"], silent))
    assert not report.passed and report.cameras["side"].passed  # the camera itself: silent, nothing wrong
    assert report.failures() == ["no camera's source holds a frame: nothing was compared (are these the cameras' "
                                 "bags and topics?)"]  # fmt: skip
    assert json.loads((tmp_path / "v" / "verify.json").read_text())["verdict"] == "fail"


def _people() -> list:
    """13 frames of real people: the two-person walk, its mirror image, and the walk's first frame again."""
    walk = _walk()
    return [*walk, *[frame[:, ::-1].copy() for frame in walk[:4]], walk[0]]


@pytest.mark.parametrize("model_type", ["yolo_pose", "fasterrcnn", "detr", "depth"])
def test_every_single_image_familys_node_serves_each_camera_as_its_model_offline(tmp_path, model_type):
    """Each family's node (beside yolo's and tracknet's above) with the rig's cameras of three sizes and rates and a
    silent one: every camera's answers are the model's offline on that camera's frames, with their own headers,
    and something was compared (people for the pose model; a depth map is compared at every pixel)."""
    models = {
        "yolo_pose": POSE_MODEL,
        "fasterrcnn": wrap_yolo(tmp_path / "wrapped.onnx", "tflite"),
        "detr": TEST_DATA / "detr_heads" / "rtdetr-hf.onnx",
        "depth": TEST_DATA / "depth" / "depth-anything-relative.onnx",
    }
    rig, cameras, frames = _rig(tmp_path, _people() if model_type == "yolo_pose" else None)
    report = verify(rig, model_type, models[model_type], tmp_path / "v", cameras=parse_cameras(cameras, rig))
    assert report.passed, report.text()
    assert report.cameras["side"].passed and not report.cameras["side"].frames  # silent: reported, nothing wrong
    for camera, camera_frames in frames.items():
        checked = report.cameras[camera]
        assert len(checked.frames) == len(camera_frames) and all(frame.answered for frame in checked.frames)
        if model_type != "depth":
            assert sum(frame.model_count for frame in checked.frames) > 0, (camera, report.text())
