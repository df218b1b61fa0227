"""vision-factory verify: it passes on a correct deployment (this package's nodes, real models, real DDS) and fails,
naming the cause, on each fault users hit. Each fault is planted by a small wrapper of this package's node written
into the test's folder (never in the product): the node runs as an --executable, as a generated package's would."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import cv2
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SHARED, pypi_model
from support.data import _photo_frames, _walk
from support.generated import generate_and_install, site_packages
from support.real_models import FALL_MODEL, NUDENET_MODEL, POSE_MODEL, REID_MODEL
from support.ros_harness import KEEP_EVERY_FRAME

from vision_factory.cli import main
from vision_factory.models.yolo import YoloDetector
from vision_factory.results.keypoints import COCO_KEYPOINTS
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.bags import read_ball_csv, read_frames, write_image_bag
from vision_factory.tools.commands import UsageError
from vision_factory.tools.replay import END_IDLE_S, replay
from vision_factory.tools.synthetic import BallClip, build_tracknet_model
from vision_factory.tools.verify import verify

SHAPES_MODEL = SHARED / "models" / "shapes-yolov8n.onnx"
SHAPES_IMAGES = SHARED / "data" / "shapes-val" / "images"
pytestmark = pytest.mark.skipif(
    not (SHAPES_MODEL.is_file() and SHAPES_IMAGES.is_dir()), reason=f"shared model or data not found under {SHARED}"
)


def _shapes_bag(tmp_path, count: int = 12):
    """``count`` frames of 384x256 (not square, so that the letterbox pads) made of the shapes validation images."""
    paths = sorted(SHAPES_IMAGES.glob("*.jpg"))
    frames = []
    for index in range(count):
        left, right = cv2.imread(str(paths[index])), cv2.imread(str(paths[index + 1]))
        frames.append(np.hstack([left, right[:, :128]]))
    return write_image_bag(tmp_path / "bag", frames, fps=10, frame_id="shapes_camera")


def _wrapper(tmp_path, body: str, node: str = "yolo") -> list[str]:
    """An executable: ``body`` (the planted fault) run in the node's process, then this package's ``node``."""
    script = tmp_path / "faulty_node.py"
    script.write_text(
        textwrap.dedent(body) + f"\nfrom vision_factory.{node}_onnx_node import main\n\nsys.exit(main())\n"
    )
    return [sys.executable, str(script)]


# What a test that needs every frame answered gives the node: verify plays the bag at its own rate, and a node on a
# loaded machine may not keep that rate; a detector's default queue_size 1 would then drop frames (rightly: it
# answers the newest), a tracknet node's 4 too. A queue as long as any bag here keeps every frame whatever the load
# (replay's subscription is reliable, depth 32). The tests of drops plant a node too slow on any machine instead.

# A detection node three times too slow for a 10 Hz camera: with queue_size 1 it drops frames.
SLOW = textwrap.dedent(
    """
    import sys
    import time
    from vision_factory.ros.detection_node import DetectionNode

    process = DetectionNode.process

    def slow(self, camera, item):
        time.sleep(0.35)
        process(self, camera, item)

    DetectionNode.process = slow
    """
)
needs_pose_model = pytest.mark.skipif(not POSE_MODEL.is_file(), reason=f"{POSE_MODEL} not found")


def _failed(report, name: str) -> str:
    (check,) = [check for check in report.checks if check.name.startswith(name)]
    assert not check.passed, check
    return check.cause


def test_verify_passes_a_correct_yolo_node_and_writes_the_report(tmp_path):
    bag = _shapes_bag(tmp_path)
    config = tmp_path / "yolo.yaml"  # a deployment's parameters file: for the node and the offline model alike
    config.write_text('/**:\n  ros__parameters:\n    model_path: ""\n    confidence_threshold: 0.4\n')
    report = verify(
        bag, "yolo", SHAPES_MODEL, tmp_path / "v", KEEP_EVERY_FRAME, latency_budget_ms=5000, params_file=config
    )
    # Every check passes but the latency's, which says what this machine's load made of the latency: it passes
    # exactly when the p99 is within the budget (the failing case: a node too slow on any machine, further down).
    latency = report.checks[-1]
    assert all(check.passed for check in report.checks[:-1]), report.text()
    assert latency.passed == (report.latency_ms_p99 <= 5000) and report.passed == latency.passed, report.text()
    everything = YoloDetector(OnnxRunner.load(SHAPES_MODEL, {}, logging.getLogger("test")))  # at 0.25
    found = sum(len(everything.detect(frame)) for frame in read_frames(bag))
    assert 8 <= sum(frame.model_count for frame in report.frames) < found  # the file's threshold, offline too
    names = [check.name for check in report.checks]
    assert names == [
        "every frame answered",
        "header stamps and frame_ids carried",
        "class names",
        "boxes within tolerance",
        "p99 pipeline latency within 5000 ms",
    ]
    assert len(report.frames) == 12 and all(frame.answered and frame.unpaired == 0 for frame in report.frames)
    assert max(frame.deviation_px for frame in report.frames) <= 1e-3
    assert 0 < report.latency_ms_p50 <= report.latency_ms_p99
    data = json.loads((tmp_path / "v" / "verify.json").read_text())
    verdict = "pass" if report.passed else "fail"
    assert data["verdict"] == verdict and len(data["frames"]) == 12 and data["tolerance"]["px"] == 1e-3
    assert verdict.upper() in (tmp_path / "v" / "verify.md").read_text()
    picture = cv2.imread(str(tmp_path / "v" / "worst_frame.png"))  # enlarged to 640 wide, a legend below
    assert picture.shape[1] == 640 and picture.shape[0] > 256 * 640 / 384
    # On a pass no frame differs: the one pictured (listed first) has the most answers, not frame 0's few or none.
    pictured = data["worst_frames"][0]
    assert pictured["model_count"] == max(frame.model_count for frame in report.frames) > 0
    assert not (tmp_path / "v" / "side_by_side.png").exists()  # drawn on a failure only


def test_verify_passes_the_tracknet_node_on_a_synthetic_clip(tmp_path):
    clip = BallClip(16, 512, 288)
    bag = write_image_bag(tmp_path / "clip", clip.frames(), fps=15)
    model = build_tracknet_model(tmp_path / "tracknet.onnx", 8, "subtract")
    params = {"seq_len": "8", "bg_mode": "subtract", "median_warmup": "4", **KEEP_EVERY_FRAME}
    report = verify(bag, "tracknet", model, tmp_path / "v", params)
    assert report.passed, report.text()
    assert [check.name for check in report.checks] == [
        "every frame answered",
        "header stamps and frame_ids carried",
        "ball positions within tolerance",
    ]
    seen = json.loads((tmp_path / "v" / "verify.json").read_text())["frames"]
    assert len(seen) == 16 and all(frame["answered"] for frame in seen)
    balls = read_ball_csv(tmp_path / "v" / "node" / "ball.csv")
    assert sum(visible for _, visible, _, _ in balls) >= 8  # positions really compared, not only misses


def test_verify_fails_a_tracknet_node_that_drops_frames_under_load(tmp_path):
    # TrackNet answers a frame dropped from its full queue at once, 'not seen': every frame is answered, but wrong.
    script = tmp_path / "slow_tracknet.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            import time
            from vision_factory.ros.tracknet_node import TrackNetNode

            process = TrackNetNode.process
            TrackNetNode.process = lambda self, camera, item: (time.sleep(0.2), process(self, camera, item))
            from vision_factory.tracknet_onnx_node import main

            sys.exit(main())
            """
        )
    )
    bag = write_image_bag(tmp_path / "clip", BallClip(16, 512, 288).frames(), fps=15)
    model = build_tracknet_model(tmp_path / "tracknet.onnx", 8, "subtract")
    params = {"seq_len": "8", "bg_mode": "subtract", "median_warmup": "4", "queue_size": "1"}
    report = verify(bag, "tracknet", model, tmp_path / "v", params, executable=[sys.executable, str(script)])
    cause = _failed(report, "ball positions")
    assert "whether the ball is seen" in cause and "dropped under load" in cause, cause
    assert report.checks[0].passed  # answered, each dropped frame 'not seen'


def test_verify_fails_a_node_fed_the_wrong_colour_order(tmp_path):
    executable = _wrapper(
        tmp_path,
        """
        import sys
        import vision_factory.ros.node_inputs as node

        to_bgr = node.message_to_bgr
        node.message_to_bgr = lambda *args, **kwargs: to_bgr(*args, **kwargs)[..., ::-1].copy()  # RGB to the model
        """,
    )
    report = verify(
        _shapes_bag(tmp_path), "yolo", SHAPES_MODEL, tmp_path / "v", KEEP_EVERY_FRAME, executable=executable
    )
    assert not report.passed
    assert "wrong colour order" in _failed(report, "boxes")
    assert [check.passed for check in report.checks[:3]] == [True, True, True]  # answered, stamped, same classes
    # The failure drawn side by side (model | node, each 640 wide) and named in the report.
    picture = cv2.imread(str(tmp_path / "v" / "side_by_side.png"))
    assert picture.shape[1] == 2 * (640 + 4) and "side_by_side.png" in (tmp_path / "v" / "verify.md").read_text()


def test_verify_fails_a_node_with_a_wrong_letterbox(tmp_path):
    # The frame is stretched to the model's input, but the boxes are mapped back as from the letterbox.
    executable = _wrapper(
        tmp_path,
        """
        import sys
        import cv2
        import vision_factory.models.yolo as yolo
        from vision_factory.models import geometry

        def stretched(image, size, dynamic):
            _, fit = geometry.letterbox(image, size, dynamic)
            tensor, _ = geometry.letterbox(cv2.resize(image, (size[1], size[0])), size, dynamic)
            return tensor, fit

        yolo.letterbox = stretched
        """,
    )
    report = verify(_shapes_bag(tmp_path), "yolo", SHAPES_MODEL, tmp_path / "v", executable=executable)
    cause = _failed(report, "boxes")
    assert "letterbox" in cause and "scaled by" in cause, cause
    assert "wrong colour order" not in cause


def test_verify_fails_a_node_running_another_model(tmp_path):
    other = pypi_model(*NUDENET_MODEL)  # YOLOv8n with 18 classes of its own
    params = {"model_path": str(other), "confidence_threshold": "0.05"}  # the node's model; the threshold for both
    report = verify(_shapes_bag(tmp_path), "yolo", SHAPES_MODEL, tmp_path / "v", params)
    assert "a different model" in _failed(report, "class names")
    assert "different model" in _failed(report, "boxes")


def test_verify_fails_a_node_that_restamps_headers(tmp_path):
    executable = _wrapper(
        tmp_path,
        """
        import copy
        import sys
        import time
        from vision_factory.results.frame import FrameResult

        message = FrameResult.to_message

        def restamped(self, header, *args, **kwargs):
            header = copy.deepcopy(header)
            header.stamp.sec, header.stamp.nanosec = divmod(time.time_ns(), 10**9)
            return message(self, header, *args, **kwargs)

        FrameResult.to_message = restamped
        """,
    )
    report = verify(
        _shapes_bag(tmp_path), "yolo", SHAPES_MODEL, tmp_path / "v", KEEP_EVERY_FRAME, executable=executable
    )
    assert "headers restamped" in _failed(report, "header stamps")
    by_name = {check.name: check for check in report.checks}
    assert by_name["every frame answered"].passed  # paired by order: nothing was dropped
    assert by_name["boxes within tolerance"].passed  # the answers themselves are right


def test_replay_waits_for_a_node_whose_every_frame_takes_longer_than_the_end_wait(tmp_path):
    # 4 s a frame (a heavy model on a loaded machine): longer than replay's END_IDLE_S with no answer, yet the node
    # answers every frame it keeps. Replay (as verify runs it) times the warm-up frame and waits as the pace needs.
    executable = _wrapper(tmp_path, SLOW.replace("time.sleep(0.35)", f"time.sleep({END_IDLE_S + 1})"))
    bag = _shapes_bag(tmp_path, count=2)
    result = replay(
        bag,
        tmp_path / "r",
        node="yolo",
        params={"model_path": str(SHAPES_MODEL), **KEEP_EVERY_FRAME},
        executable=executable,
        warm_up=True,
    )
    assert result.missing_frames == [] and result.outputs == 2, result
    # The replay ended after the answers, not before them (a node drains its queue as it stops, so the answers
    # were counted even then, but frames/s was over a wall time that ended before them).
    assert result.latency_ms_p99 <= result.wall_s * 1000, result


def test_verify_fails_a_node_that_drops_frames_under_load_and_the_cli_exits_non_zero(tmp_path):
    script = _wrapper(tmp_path, SLOW)
    command = [sys.executable, "-m", "vision_factory.cli", "verify", str(_shapes_bag(tmp_path))]
    command += ["--model-type", "yolo", "--model", str(SHAPES_MODEL), "--out", str(tmp_path / "v")]
    command += ["--executable", " ".join(script), "-p", "queue_size:=1", "--latency-budget-ms", "200"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stderr.splitlines() if line.startswith("verify failed: ")]
    assert any("every frame answered" in line and "dropped under load" in line for line in failed), done.stderr
    assert any("latency" in line and "over the budget of 200 ms" in line for line in failed), done.stderr
    assert "FAIL every frame answered" in done.stdout
    data = json.loads((tmp_path / "v" / "verify.json").read_text())
    assert data["verdict"] == "fail" and data["node_counts"]["source"].startswith("/diagnostics")
    assert "from /diagnostics" in done.stdout


def test_verify_reads_the_nodes_counts_from_diagnostics_when_its_log_is_elsewhere(tmp_path):
    # The node logs to a file of its own (as under a launch file's logging), not to what verify reads: its
    # /diagnostics status still says it dropped the frames it did not answer.
    executable = _wrapper(tmp_path, "import os\nos.dup2(os.open(os.devnull, os.O_WRONLY), 1)\nos.dup2(1, 2)\n" + SLOW)
    bag = _shapes_bag(tmp_path, count=6)
    report = verify(bag, "yolo", SHAPES_MODEL, tmp_path / "v", {"queue_size": "1"}, executable=executable)
    cause = _failed(report, "every frame answered")
    assert f"dropped under load: the node dropped {report.counts.dropped} frames" in cause, cause
    assert 1 <= report.counts.dropped < 6 and report.counts.skipped == 0
    assert report.counts.source == "/diagnostics (its last status, 'yolo: inference')"
    assert "frames in" not in Path(report.node_log).read_text()  # no closing line to read


def test_verify_falls_back_to_the_closing_log_line_for_a_node_without_diagnostics(tmp_path):
    # An executable that publishes no /diagnostics (as an older build would): its closing log line is read.
    no_diagnostics = "from vision_factory.ros.monitor import Monitor\nMonitor.tick = Monitor.watch_silence\n"
    executable = _wrapper(tmp_path, SLOW + no_diagnostics)
    bag = _shapes_bag(tmp_path, count=6)
    report = verify(bag, "yolo", SHAPES_MODEL, tmp_path / "v", {"queue_size": "1"}, executable=executable)
    assert "dropped under load" in _failed(report, "every frame answered")
    assert report.counts.source.startswith("its closing log line (it published no /diagnostics")
    assert 1 <= report.counts.dropped < 6
    assert "from its closing log line" in (tmp_path / "v" / "verify.md").read_text()


@needs_pose_model
def test_verify_passes_the_yolo_pose_node_comparing_keypoints_on_photos(tmp_path):
    frames = _photo_frames()  # six frames of people: four with one, two with two or three
    bag = write_image_bag(tmp_path / "bag", frames, fps=5, frame_id="camera")
    report = verify(bag, "yolo_pose", POSE_MODEL, tmp_path / "v", KEEP_EVERY_FRAME)
    assert report.passed, report.text()
    (output,) = [check for check in report.checks if check.name == "boxes and keypoints within tolerance"]
    people = sum(frame.model_count for frame in report.frames)
    assert people >= 8 and all(frame.model_count >= 1 for frame in report.frames)
    assert sum(frame.keypoints for frame in report.frames) == len(COCO_KEYPOINTS) * people  # every one compared
    assert f"{len(COCO_KEYPOINTS) * people} keypoints compared" in output.numbers
    assert max(frame.deviation_px for frame in report.frames) <= 1e-3
    assert report.counts.source.startswith("/diagnostics") and report.counts.dropped == 0


@needs_pose_model
def test_verify_fails_a_pose_node_that_exchanges_left_and_right_keypoints(tmp_path):
    executable = _wrapper(
        tmp_path,
        """
        import sys
        from dataclasses import replace
        from vision_factory.models.yolo import YoloDetector

        detect = YoloDetector.detect
        MIRRORED = [0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15]  # a flip index applied by mistake

        def mirrored(self, image):
            result = detect(self, image)
            keypoints = result.keypoints
            return result.with_parts(keypoints=replace(keypoints, points=keypoints.points[:, MIRRORED]))

        YoloDetector.detect = mirrored
        """,
        node="yolo_pose",
    )
    bag = write_image_bag(tmp_path / "bag", _photo_frames()[:4], fps=5)
    report = verify(bag, "yolo_pose", POSE_MODEL, tmp_path / "v", KEEP_EVERY_FRAME, executable=executable)
    cause = _failed(report, "boxes and keypoints")
    assert "the boxes agree, the keypoints do not" in cause and "left and right exchanged" in cause, cause
    assert "wrong colour order" not in cause and "letterbox" not in cause
    assert [check.passed for check in report.checks[:3]] == [True, True, True]  # answered, stamped, same classes


def test_verify_passes_a_generated_packages_node(tmp_path, monkeypatch):
    """A generated yolo package on ONNX Runtime, installed as colcon installs it, run as its own executable
    (nothing of vision_factory on its path) and verified through the command line's --executable."""
    executable = generate_and_install("yolo", "onnx", "gen_yolo_onnx", tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(site_packages(tmp_path / "install")))
    bag = _shapes_bag(tmp_path, count=6)
    arguments = ["verify", str(bag), "--model-type", "yolo", "--model", str(SHAPES_MODEL)]
    arguments += ["--executable", str(executable), "-p", "confidence_threshold:=0.3", "--out", str(tmp_path / "v")]
    arguments += [option for name, value in KEEP_EVERY_FRAME.items() for option in ("-p", f"{name}:={value}")]
    done = CliRunner().invoke(main, arguments)
    assert done.exit_code == 0, done.output
    assert "verify: PASS" in done.output and "ok   boxes within tolerance: 6 of 6 answered frames" in done.output
    data = json.loads((tmp_path / "v" / "verify.json").read_text())
    assert sum(frame["model_count"] for frame in data["frames"]) >= 4  # boxes really compared
    assert data["node_counts"]["source"].startswith("/diagnostics")


def _walk_bag(tmp_path, count: int = 8, fps: float = 4):
    """Two people (real photos) moving across the picture: tracks that last, for the fall detector's node."""
    return write_image_bag(tmp_path / "walk", _walk(count), fps=fps, frame_id="camera")


def test_verify_passes_a_yolo_node_with_tracking_comparing_its_track_ids(tmp_path):
    if not REID_MODEL.is_file():
        pytest.skip(f"{REID_MODEL} is not there (shared models, see ../shared/models/README)")
    params = {"tracking": "true", "reid_model_path": str(REID_MODEL), **KEEP_EVERY_FRAME}  # embedder: in the tracker
    report = verify(_walk_bag(tmp_path), "yolo", pypi_model(*FALL_MODEL), tmp_path / "v", params)
    assert report.passed, report.text()
    (ids,) = [check for check in report.checks if check.name == "track IDs"]
    assert ids.compared and ids.passed and ids.numbers.endswith("(2 tracks)"), ids  # the astronaut, Grace Hopper
    paired = int(ids.numbers.split(" of ")[1].split()[0])
    assert paired == sum(frame.model_count for frame in report.frames) >= 8  # every detection compared
    assert all(frame.answered and frame.unpaired == 0 for frame in report.frames)
    assert "--   track IDs" not in report.text() and "ok   track IDs" in report.text()


def test_verify_fails_a_tracking_node_with_other_tracking_parameters_naming_the_frame_and_ids(tmp_path):
    # The deployed node runs with its own track_match_threshold (0.3; verify was not told): the same detections,
    # other IDs. The model's tracker keeps the astronaut as track 1 from frame 0 on; the node's loses her at frame 1.
    executable = [sys.executable, "-m", "vision_factory.yolo_onnx_node", "--ros-args"]
    executable += ["-p", "track_match_threshold:=0.3"]
    report = verify(
        _walk_bag(tmp_path, 4),
        "yolo",
        pypi_model(*FALL_MODEL),
        tmp_path / "v",
        {"tracking": "true", **KEEP_EVERY_FRAME},
        executable=executable,
    )
    cause = _failed(report, "track IDs")
    assert cause.startswith("frame 1: the node's ID '' (no track), the model's '1'"), cause
    assert "frames dropped or reordered before the node" in cause and "different tracking parameters" in cause
    assert [check.passed for check in report.checks[:4]] == [True, True, True, True]  # the detections agree
    assert "track IDs: " + cause in report.failures()


def test_verify_does_not_compare_track_ids_when_frames_went_unanswered(tmp_path):
    # Frames dropped under load: the node's tracker saw another stream, its IDs may rightly differ; the answered
    # check says so, the ID check does not pile on.
    executable = _wrapper(tmp_path, SLOW)
    params = {"tracking": "true", "queue_size": "1"}
    report = verify(
        _walk_bag(tmp_path, 6, fps=10), "yolo", pypi_model(*FALL_MODEL), tmp_path / "v", params, executable=executable
    )
    assert "dropped under load" in _failed(report, "every frame answered")
    (ids,) = [check for check in report.checks if check.name == "track IDs"]
    assert not ids.compared and ids.passed and ids.numbers.startswith("not compared: frames went unanswered"), ids
    assert not any(failure.startswith("track IDs") for failure in report.failures())
    assert "--   track IDs: not compared" in report.text()
    assert "| track IDs | not compared |" in (tmp_path / "v" / "verify.md").read_text()


def test_verify_refuses_what_it_cannot_compare_before_a_node_starts(tmp_path):
    bag = _shapes_bag(tmp_path, count=2)
    with pytest.raises(UsageError, match=r"verify checks tracknet, yolo, .* nodes, not 'track' .*-p tracking:=true"):
        verify(bag, "track", SHAPES_MODEL, tmp_path / "v")
    with pytest.raises(UsageError, match="person_source topic its people come from another node"):
        verify(bag, "rtmpose", SHAPES_MODEL, tmp_path / "v", {"person_source": "topic"})
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "verify.json").write_text("{}")
    with pytest.raises(FileExistsError, match="holds an earlier verification .*--force"):
        verify(bag, "yolo", SHAPES_MODEL, tmp_path / "v")
