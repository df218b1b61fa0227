"""What a new user tripped on (issue 21, item 9): the tools say what they do and do what they say."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import click
import cv2
import numpy as np
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from conftest import ROOT, SHARED
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from sensor_msgs.msg import CompressedImage, Image
from support import camera_process
from support.models import _constant_model
from support.nodes import YOLO, _latest, _yolo_output, closing_counts
from support.ros_harness import KEEP_EVERY_FRAME, PATIENCE_S, NodeProcess, Probe
from vision_msgs.msg import Detection2DArray

from vision_factory.cli import main
from vision_factory.ros.monitor import NAMED_TOPICS
from vision_factory.tools import bags
from vision_factory.tools.bags import write_image_bag
from vision_factory.tools.demo import run_demo
from vision_factory.tools.replay import replay
from vision_factory.tools.sources import video_frames

SHAPES_MODEL = SHARED / "models" / "shapes-yolov8n.onnx"
SHAPES_IMAGES = SHARED / "data" / "shapes-val" / "images"
needs_shapes = pytest.mark.skipif(not SHAPES_MODEL.is_file(), reason=f"needs {SHAPES_MODEL}")


@needs_shapes
def test_replay_writes_detections_as_predict_prints_them(tmp_path):
    """replay's detections.json holds, per frame, the record `predict --format json` prints for that image: the same
    keys, the same class ids (from the node's class map, not -1) and names, the same boxes."""
    images = sorted(SHAPES_IMAGES.glob("*.jpg"))[:3]
    printed = CliRunner().invoke(
        main, ["predict", "--model-type", "yolo", "--model", str(SHAPES_MODEL), *map(str, images), "--format", "json"]
    )
    assert printed.exit_code == 0, printed.output
    predicted = [json.loads(line) for line in printed.output.splitlines()]
    assert sum(len(record["detections"]) for record in predicted) >= 3

    bag = write_image_bag(tmp_path / "bag", [cv2.imread(str(image)) for image in images])
    result = replay(bag, tmp_path / "out", node="yolo", params={"model_path": str(SHAPES_MODEL), **KEEP_EVERY_FRAME})
    assert result.missing_frames == [], open(result.node_log).read()
    replayed = json.loads(open(result.answers).read())
    assert len(replayed) == len(predicted)
    for frame, (ours, theirs) in enumerate(zip(replayed, predicted)):
        assert ours.keys() == theirs.keys()
        assert (ours["image"], ours["frame"]) == (f"{bag}:{frame}", frame)
        assert (ours["width"], ours["height"]) == (theirs["width"], theirs["height"])
        assert [d.keys() for d in ours["detections"]] == [d.keys() for d in theirs["detections"]]
        assert [d["class_id"] for d in ours["detections"]] == [d["class_id"] for d in theirs["detections"]]
        assert [d["class_name"] for d in ours["detections"]] == [d["class_name"] for d in theirs["detections"]]
        for a, b in zip(ours["detections"], theirs["detections"]):
            assert a["xyxy"] == pytest.approx(b["xyxy"], abs=1e-3)
            assert a["score"] == pytest.approx(b["score"], abs=1e-5)


@needs_shapes
def test_bench_node_runs_a_detector_node_on_each_target(tmp_path):
    """`bench --node` replays frames through the detector's node, this package's (onnx:cpu) and a generated
    package's (openvino:CPU), as help and docs say for every family; it was refused for all but tracknet."""
    result = CliRunner().invoke(
        main,
        ["bench", str(SHAPES_MODEL), "--model-type", "yolo", "--node", "--runs", "5", "--warmup", "1"]
        + ["--backends", "onnx:cpu,openvino:CPU", "--out", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "bench.json").read_text())["results"]
    assert [r["target"] for r in results] == ["onnx:cpu", "openvino:CPU"]
    for measured in results:
        assert measured["available"], measured
        node = measured["node"]
        assert node["frames"] == 60 and node["steady_fps"] > 0 and node["replay_fps"] > 0
        assert 0 < node["node_processing_p50_ms"] <= node["node_processing_p99_ms"]
    assert "openvino:CPU node over DDS: steady" in result.output


@pytest.mark.skipif("CUDAExecutionProvider" in ort.get_available_providers(), reason="CUDA runs here")
def test_bench_advice_for_an_absent_provider_names_a_bench_option(tmp_path):
    """A provider this ONNX Runtime lacks is reported with what bench can do (its --backends), not with the node's
    provider_fallback parameter, which bench does not take."""
    model = tmp_path / "identity.onnx"
    from vision_factory.runtime.runner import PROBE_MODEL

    model.write_bytes(PROBE_MODEL)
    result = CliRunner().invoke(
        main, ["bench", str(model), "--backends", "onnx:cpu,onnx:cuda", "--runs", "2", "--out", str(tmp_path / "b")]
    )
    assert result.exit_code == 0, result.output
    reason = json.loads((tmp_path / "b" / "bench.json").read_text())["results"][1]["reason"]
    assert "CUDAExecutionProvider not available" in reason
    assert "provider_fallback" not in reason and "leave onnx:cuda out of --backends" in reason


def test_backends_lists_only_providers_that_run_here():
    """`backends` lists the providers that run the model on this machine; one that serves it elsewhere (Azure, listed
    by ONNX Runtime's builds) is not a place to run, and the note says why."""
    result = CliRunner().invoke(main, ["backends"])
    assert result.exit_code == 0, result.output
    runs_on = [line for line in result.output.splitlines() if line.strip().startswith("runs on:")]
    assert "  runs on: CPUExecutionProvider" in runs_on
    assert not any("Azure" in line for line in runs_on)
    if "AzureExecutionProvider" in ort.get_available_providers():
        assert "note: AzureExecutionProvider is not a place to run: it sends the inputs to a model served on Azure" in (
            result.output
        )


def test_a_node_without_a_publisher_names_the_image_topics_that_have_one(tmp_path):
    """A live node on a topic nobody publishes, while images are published elsewhere (a remap left out), says so
    after silence_timeout, once, naming those topics (at most NAMED_TOPICS) and their types, not its own."""
    model = _constant_model(tmp_path / "m.onnx", _yolo_output())
    probe = Probe()  # the cameras first, and 3 s of silence: a loaded machine's node had discovered 10 of 11 in 1 s
    diagnostics = probe.subscribe(DiagnosticArray, "/diagnostics")
    cameras = [probe.publisher(CompressedImage, "/a_cam/image/compressed")]
    cameras += [probe.publisher(Image, f"/cam{index}/image_raw") for index in range(10)]
    try:
        node = NodeProcess(tmp_path, {"model_path": str(model), "silence_timeout": "3.0"}, module=YOLO)
    except BaseException:
        probe.close()
        raise
    try:

        def warned() -> bool:
            status = _latest(diagnostics, "yolo: inference")
            return status is not None and "no publisher on /t/image" in status.message

        assert probe.spin_until(warned, PATIENCE_S), node.log()
        assert _latest(diagnostics, "yolo: inference").level == DiagnosticStatus.WARN
        probe.spin_until(lambda: False, 4.0)  # still no publisher: not said again
    finally:
        probe.close()
        node.stop()
    lines = [line for line in node.log().splitlines() if "no publisher on /t/image" in line]
    assert len(lines) == 1, node.log()
    # Other image topics of this test run's domain (another test's node still going) may be named too: the
    # probe's are, in order, and the list stops at NAMED_TOPICS.
    found = re.search(
        r"while image topics have publishers: (.*?)(?: and (\d+) more)?; remap this node's input", lines[0]
    )
    assert found, lines[0]
    named = found[1].split(", ")
    assert len(named) == NAMED_TOPICS and int(found[2]) >= 11 - NAMED_TOPICS, lines[0]
    ours = [name for name in named if re.match(r"/(a_cam/image/compressed|cam\d+/image_raw) ", name)]
    assert ours[:2] == ["/a_cam/image/compressed (CompressedImage)", "/cam0/image_raw (Image)"], lines[0]
    assert "-r image:=TOPIC" in lines[0] and "debug_image" not in lines[0]  # the node's own images are not named


def test_the_readme_pip_route_gets_a_camera_sized_stream_whole(tmp_path):
    """The README's pip-only command (no Fast DDS profile set) and a camera in another process on Fast DDS defaults,
    rclpy's default QoS: 1280x720 bgr8 frames reach the node (issue 31: 0-4 of ~100 did, the node on Fast DDS
    defaults; it now receives over UDP into a large buffer, ros/transport.py). Slack for a loaded machine."""
    model = _constant_model(tmp_path / "m.onnx", _yolo_output())
    node = NodeProcess(tmp_path, {"model_path": str(model)}, module=YOLO, env=camera_process.NO_TRANSPORT_CHOSEN)
    probe = Probe()  # this process, on the tests' shared-memory profile: another transport reads the answers
    try:
        answers = probe.subscribe(Detection2DArray, "/t/detections")
        sent = camera_process.send("/t/image", 1280, 720, rate=10, count=60)
        time.sleep(1.0)  # the last frames' way in
    finally:
        node.stop()
    counts = closing_counts(node.log())
    try:
        assert counts["frames_in"] >= 0.8 * sent, node.log_tail()
        assert probe.spin_until(lambda: len(answers) == counts["outputs"], PATIENCE_S), node.log_tail()
    finally:
        probe.close()
    assert "frames received over UDP into a 32.0 MiB buffer, or TCP from a LARGE_DATA publisher" in node.log()


def _invoke_bag(*arguments):
    return CliRunner().invoke(main, ["bag", *map(str, arguments)])


def _stamps_ns(bag, topic="/camera/image_raw") -> tuple[list[int], list[int]]:
    """Bag times and header stamps of the topic's messages, in nanoseconds."""
    store = bags._typestore()
    messages = list(bags.read_messages(bag, topic))
    headers = [store.deserialize_cdr(m.data, m.msgtype).header.stamp for m in messages]
    return [m.timestamp_ns for m in messages], [s.sec * 10**9 + s.nanosec for s in headers]


def test_bag_makes_a_rosbag_from_a_folder_of_images_that_reads_back_frame_for_frame(tmp_path):
    rng = np.random.default_rng(7)
    frames = [rng.integers(0, 256, (48, 64, 3), dtype=np.uint8) for _ in range(5)]
    folder = tmp_path / "images"
    folder.mkdir()
    for index, frame in enumerate(frames):  # names sort as the frames' order; a non-image file is not taken
        cv2.imwrite(str(folder / f"frame_{index:03d}.png"), frame)
    (folder / "notes.txt").write_text("not an image")
    for name, extra in (("raw", ()), ("png", ("--compressed", "png"))):
        out = tmp_path / f"{name}_bag"
        result = _invoke_bag(folder, "--out", out, "--fps", "10", *extra)
        assert result.exit_code == 0, result.output
        assert f"5 images on /camera/image_raw as sensor_msgs/{'CompressedImage' if extra else 'Image'}" in (
            result.output
        )
        kind = "sensor_msgs/msg/CompressedImage" if extra else "sensor_msgs/msg/Image"
        assert bags.image_topics(out) == {"/camera/image_raw": kind}
        back = list(bags.read_frames(out))
        assert len(back) == len(frames) and all(np.array_equal(a, b) for a, b in zip(back, frames))
        times, stamps = _stamps_ns(out)
        assert times == stamps and np.diff(times).tolist() == [100_000_000] * 4  # 1/fps apart


def test_bag_from_a_video_stamps_at_its_rate_on_the_topic_given(tmp_path):
    video = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (64, 48))
    for index in range(6):
        writer.write(np.full((48, 64, 3), 40 * index, np.uint8))
    writer.release()
    out = tmp_path / "bag"
    result = _invoke_bag(video, "--out", out, "--topic", "/cam/image_raw", "--encoding", "rgb8")
    assert result.exit_code == 0, result.output
    expected = list(video_frames(video))
    back = list(bags.read_frames(out, "/cam/image_raw"))
    assert len(back) == 6 and all(np.array_equal(a, b) for a, b in zip(back, expected))
    times, stamps = _stamps_ns(out, "/cam/image_raw")
    assert times == stamps and np.diff(times).tolist() == [40_000_000] * 5  # the video's 25 fps


def test_bag_refuses_to_write_over_anything_or_through_a_link(tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    cv2.imwrite(str(folder / "a.png"), np.zeros((48, 64, 3), np.uint8))
    existing = tmp_path / "existing"
    existing.write_text("keep me")
    target = tmp_path / "elsewhere"
    link = tmp_path / "link"
    link.symlink_to(target)  # dangling: writing would create a bag outside the name given
    for out in (existing, link, folder):
        result = _invoke_bag(folder, "--out", out)
        assert result.exit_code == 2 and f"{out} exists: bag writes a new bag only" in result.output, result.output
    assert existing.read_text() == "keep me" and not target.exists() and sorted(folder.iterdir()) == [folder / "a.png"]
    both = _invoke_bag(folder, "--out", tmp_path / "b", "--encoding", "rgb8", "--compressed", "jpeg")
    assert both.exit_code == 2 and "--encoding and --compressed exclude each other" in both.output
    empty = tmp_path / "empty"
    empty.mkdir()
    none = _invoke_bag(empty, "--out", tmp_path / "c")
    assert none.exit_code == 2 and "holds no image files" in none.output and not (tmp_path / "c").exists()
    bad_topic = _invoke_bag(folder, "--out", tmp_path / "d", "--topic", "cam image")
    assert bad_topic.exit_code == 2 and "is not a ROS topic name" in bad_topic.output


def _apart(frame, others) -> bool:
    """Whether ``frame``'s position is clear of every one of ``others``' markers (10 px wide)."""
    return all(
        abs(frame.predicted[1] - o.predicted[1]) + abs(frame.predicted[2] - o.predicted[2]) >= 12 for o in others
    )


def test_demo_marks_inpainted_positions_apart_and_says_what_its_latency_measures(tmp_path):
    """The demo's picture marks the positions filled in where the ball was hidden in another colour than the
    tracked ones (and its summary says how); its latency line says what it measures, beside the node's own time
    per frame."""
    report = run_demo(tmp_path / "demo", num_frames=48, width=640, height=360)
    picture = cv2.imread(str(report.picture))
    inpainted = [f for f in report.frames if f.status == "inpainted"]
    tracked = [f for f in report.frames if f.status == "tracked"]
    colours = {
        status: {tuple(picture[f.predicted[2], f.predicted[1]]) for f in frames if _apart(f, others)}
        for status, frames, others in (("inpainted", inpainted, tracked), ("tracked", tracked, inpainted))
    }
    assert colours["inpainted"] and colours["tracked"], report.text()
    assert len(colours["inpainted"]) == len(colours["tracked"]) == 1  # one mark for each kind
    assert colours["inpainted"] != colours["tracked"]
    text = report.text()
    assert "orange x: hidden ball, position filled in (InpaintNet)" in text
    assert "red +: tracked by tracknet_node" in text
    latency = next(line for line in text.splitlines() if line.startswith("latency from a frame sent to its ball"))
    assert "Not the node's work" in latency and "up to 32 unanswered" in latency and "window of 8" in latency
    assert "node's own time per frame (its ~/debug/processing_time_ms): p50" in text


def _help(*command: str) -> str:
    result = CliRunner().invoke(main, [*command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def _option_help(text: str, option: str) -> str:
    """The help of ``option`` in a command's --help (200 columns: one line each)."""
    line = next(line for line in text.splitlines() if line.strip().startswith(option + " "))
    return line.strip()[len(option) :].strip()


def test_every_option_of_eval_and_replay_has_help_and_track_describes_only_its_own_families():
    eval_out = _option_help(_help("eval"), "--out")
    assert "folder for eval.json and eval.md" in eval_out and "[default: vision_factory_eval]" in eval_out
    storage = _option_help(_help("replay"), "--storage")
    assert "storage of the bag of the node's outputs" in storage and "[default: mcap]" in storage
    for command in ("replay", "bag", "bench", "predict", "track", "backends", "inspect", "verify", "demo"):
        bare = [p.opts[0] for p in main.commands[command].params if isinstance(p, click.Option) and not p.help]
        assert bare == [], (command, bare)  # options with no help
    track = _help("track")
    assert "rtmpose" not in track  # track takes yolo, yolo_pose, fasterrcnn
    assert "fasterrcnn: WIDTHxHEIGHT for a model with dynamic input size" in track
    assert "rtmpose: the detector's" in _help("predict")  # predict takes rtmpose


def test_install_vision_msgs_states_the_time_it_takes_as_measured():
    """13 s here with the toolchain installed, 103 s on a user's machine: the help and the docs' Install page say so
    (they said about a minute, 20-60 s)."""
    text = " ".join(_help("install-vision-msgs").split())
    assert "13 s to about two minutes" in text
    install = (ROOT / "docs" / "install.md").read_text()
    assert "13 s to about two minutes" in install and "20–60 s" not in install
    assert "103 s on a user's machine" in install


def test_a_node_command_with_help_says_how_to_start_it_and_every_parameter():
    """`yolo_node --help` (the pip route's node command, as a new user tries it first) prints how to start it, its
    topics and each parameter with its default, valid values and when a new value applies, and exits 0 without
    starting ROS (before: "cannot start: parameter model_path is empty", exit 2); -h after --ros-args is ROS's."""
    from vision_factory.families.yolo import FAMILY
    from vision_factory.runtime.onnx_runner import OnnxRunner

    shown = subprocess.run(
        [sys.executable, "-m", "vision_factory.yolo_onnx_node", "--help"], capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert text.startswith("yolo_node: ") and "usage: yolo_node --ros-args -p model_path:=..." in text
    assert "cannot start" not in text + shown.stderr and "Fast DDS" not in shown.stderr  # ROS never started
    for parameter in (*FAMILY.node_parameters, *OnnxRunner.PARAMETERS):
        assert f"  {parameter.name} " in text and parameter.valid in text, parameter.name
    assert "(0.25; a finite number in 0..1; live)" in text  # confidence_threshold
    assert "(required; text; configure)" in text  # model_path
    assert "detections (vision_msgs/Detection2DArray" in text and "vision-factory param set" in text


def test_help_is_asked_before_the_ros_arguments_only():
    from vision_factory.ros.start import wants_help

    assert wants_help(["--help"]) and wants_help(["-h", "--ros-args", "-p", "a:=1"])
    assert not wants_help(["--ros-args", "-h"]) and not wants_help([]) and not wants_help(["--ros-args", "--help"])
