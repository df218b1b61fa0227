"""`vision-factory node|topic|param|lifecycle`: a real yolo_node (a constant model: one square, score 0.9, in every
frame) watched and steered over real DDS by the command line, run as a user runs it, with no ros2cli: its outputs
listed, echoed (a transient-local class map, a best-effort detections topic, a best-effort camera's frames saved)
and timed, its parameters read and set (the node's refusal shown with its reason), its lifecycle walked, a missing
node or topic named with those that exist, Ctrl-C honoured."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from click.testing import CliRunner
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image
from support.cli import assert_refused, run_cli
from support.models import _constant_model
from support.nodes import YOLO, _yolo_output
from support.ros_harness import PATIENCE_S, NodeProcess, Probe, stamped_anew

from vision_factory.cli import main

FRAME = np.full((256, 256, 3), 90, np.uint8)  # the constant model's input size: a frame of its size is not scaled
FRAME[10:50, 20:80] = (0, 0, 255)
WAIT = ("--timeout", str(PATIENCE_S))  # a loaded machine's discovery and answers: the bound, never the time taken
# The node's detections best effort and volatile (a reliable reader would never match them); its class map stays
# transient local (latched), as every detection node's.
BEST_EFFORT_DETECTIONS = {
    "qos_overrides./t/detections.publisher.reliability": "best_effort",
    "qos_overrides./t/detections.publisher.durability": "volatile",
}


def _path_without_ros2() -> str:
    """A PATH with this environment's commands (vision-factory among them) and the system's, and no ros2."""
    commands = Path(sys.executable).parent
    assert (commands / "vision-factory").is_file(), "vision-factory is not installed in this environment"
    return os.pathsep.join([str(commands), "/usr/bin", "/bin"])


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    """The node (misspelt confidence_treshold given: warned about), a probe and its best-effort camera."""
    folder = tmp_path_factory.mktemp("node_tools")
    model = _constant_model(folder / "m.onnx", _yolo_output())
    params = {"model_path": str(model), "qos_reliability": "best_effort", "confidence_treshold": "0.3"}
    node = NodeProcess(folder, {**params, **BEST_EFFORT_DETECTIONS}, module=YOLO, env={"PATH": _path_without_ros2()})
    probe = Probe()
    camera = probe.node.create_publisher(Image, "/t/image", qos_profile_sensor_data)
    try:
        assert probe.spin_until(lambda: camera.get_subscription_count() > 0, PATIENCE_S), node.log()
        yield node, probe, camera
    finally:
        probe.close()
        node.stop()


def cli(*args: str) -> subprocess.CompletedProcess:
    """The command run in this process (no interpreter to start: the checks that need no process of their own), as
    Click runs it for a user: its exit code, stdout and stderr."""
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def _started(*args: str) -> subprocess.Popen:
    """The command line started as a process, its stdout and stderr read as text."""
    command = [sys.executable, "-m", "vision_factory.cli", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _sending_until_done(probe: Probe, camera, process: subprocess.Popen) -> subprocess.CompletedProcess:
    """``process``'s end, the camera sending a frame every 0.2 s meanwhile; no traceback."""
    send, deadline = stamped_anew(camera, FRAME), time.monotonic() + 2 * PATIENCE_S
    while process.poll() is None:
        assert time.monotonic() < deadline, "the command did not end"
        send()
        probe.spin_until(lambda: process.poll() is not None, 0.2)
    out, err = process.communicate()
    assert "Traceback" not in err, err
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _while_sending(probe: Probe, camera, *args: str) -> subprocess.CompletedProcess:
    """The command line run while the camera sends a frame every 0.2 s, until the command ends."""
    return _sending_until_done(probe, camera, _started(*args))


def test_topic_list_names_each_output_with_its_type(running):
    node, _, _ = running
    done = run_cli("topic", "list", "--spin-time", "5")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for line in ("/t/detections [vision_msgs/msg/Detection2DArray]", "/t/labels [vision_msgs/msg/LabelInfo]"):
        assert line in lines, (done.stdout, node.log_tail())
    done = run_cli("node", "list", "--spin-time", "5")
    assert done.returncode == 0 and "/t/yolo" in done.stdout.splitlines(), done


def test_echo_gets_the_latched_class_map_and_the_best_effort_detections(running):
    node, probe, camera = running
    done = run_cli("topic", "echo", "labels", "--once", *WAIT)  # published once, at configure, long before
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"\d+\.\d{9}: 2 classes: 0 circle, 1 square; threshold 0\.25\n", done.stdout), done.stdout
    assert "QoS reliable, transient_local" in done.stderr

    done = _while_sending(probe, camera, "topic", "echo", "t/detections", "-n", "2", *WAIT)
    assert done.returncode == 0, (done.stderr, node.log_tail())
    assert "QoS best_effort, volatile" in done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(re.fullmatch(r"\d+\.000000250 camera: 1 detection: square 0\.90", x) for x in lines)

    done = _while_sending(probe, camera, "topic", "echo", "/t/detections", "--once", "--fields", *WAIT)
    assert done.returncode == 0 and "      class_id: 'square'" in done.stdout.splitlines(), done.stdout
    assert done.stdout.endswith("---\n")


def test_hz_gives_the_rate_over_its_window(running):
    _, probe, camera = running
    done = _while_sending(probe, camera, "topic", "hz", "/t/detections", "-n", "6", *WAIT)
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    found = re.fullmatch(
        r"average rate: ([\d.]+) Hz  period min ([\d.]+) s, max ([\d.]+) s, std dev ([\d.]+) s, window 6", last
    )
    assert found, done.stdout
    rate, low, high, _ = map(float, found.groups())
    assert rate > 0 and 0 < low <= 1 / rate <= high


def test_echo_saves_a_best_effort_cameras_frames_as_png(running, tmp_path):
    _, probe, camera = running
    folder = tmp_path / "frames"
    done = _while_sending(probe, camera, "topic", "echo", "/t/image", "-n", "2", "--save", str(folder), *WAIT)
    assert done.returncode == 0, done.stderr
    assert "QoS best_effort" in done.stderr
    assert sorted(path.name for path in folder.iterdir()) == ["000001.png", "000002.png"]
    for path in folder.iterdir():
        assert np.array_equal(cv2.imread(str(path)), FRAME)  # lossless: the frame the camera sent
    assert all(line.endswith(".png") and "256x256 bgr8" in line for line in done.stdout.splitlines())

    # Never through a link planted at a frame's name: refused, naming it, and its target untouched.
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "000001.png").symlink_to(outside)
    done = _while_sending(probe, camera, "topic", "echo", "/t/image", "--once", "--save", str(linked), *WAIT)
    assert_refused(done, "000001.png is a symbolic link")
    assert outside.read_text() == "keep"

    done = run_cli("topic", "echo", "/t/labels", "--once", "--save", str(tmp_path / "no"), *WAIT)
    assert done.returncode == 2 and "/t/labels carries vision_msgs/msg/LabelInfo, not images" in done.stderr


def test_echo_takes_the_qos_of_a_publisher_that_comes_after_it(running):
    """A topic seen through its subscriber alone is read with the defaults (reliable), then, once a best-effort
    publisher comes, with its QoS: its frames are received (a reliable reader would never get them)."""
    _, probe, _ = running
    waiting = probe.node.create_subscription(Image, "/t/late", lambda _: None, 10)
    process = _started("topic", "echo", "/t/late", "--once", *WAIT)
    try:
        said = process.stderr.readline()
        assert "with QoS reliable, volatile, keep_last 10 (no publisher yet)" in said, said
        late = probe.node.create_publisher(Image, "/t/late", qos_profile_sensor_data)
        done = _sending_until_done(probe, late, process)
    finally:
        if process.poll() is None:
            process.kill()
        probe.node.destroy_subscription(waiting)
    assert done.returncode == 0, done.stderr
    assert (
        "reading /t/late with QoS best_effort, volatile, keep_last 10 now (as its 1 publisher(s) offer)" in done.stderr
    )
    assert re.fullmatch(r"\d+\.000000250 camera: 256x256 bgr8, 196608 bytes\n", done.stdout), done.stdout


def test_param_get_set_and_the_nodes_refusal_with_its_reason(running):
    node, _, _ = running
    done = cli("param", "list", "yolo", *WAIT)
    assert done.returncode == 0 and {"confidence_threshold", "model_path"} <= set(done.stdout.split()), done
    done = cli("param", "get", "/t/yolo", "confidence_threshold", *WAIT)
    assert done.stdout == "Double value is: 0.25\n", done

    done = cli("param", "set", "t/yolo", "confidence_threshold", "0.4", *WAIT)
    assert done.returncode == 0 and done.stdout == "Set parameter successful\n", done
    done = cli("param", "get", "yolo", "confidence_threshold", *WAIT)
    assert done.stdout == "Double value is: 0.4\n", done

    refused = cli("param", "set", "yolo", "confidence_threshold", "1.5", *WAIT)
    assert_refused(refused, "Setting parameter failed: confidence_threshold must be a finite number in 0..1, not 1.5")
    refused = cli("param", "set", "yolo", "confidence_threshold", "1", *WAIT)
    assert_refused(refused, "Setting parameter failed: ", "ROS reads 1 as an integer: write 1.0")
    refused = cli("param", "set", "yolo", "confidence_treshold", "0.3", *WAIT)
    assert_refused(refused, "/t/yolo has no parameter confidence_treshold; its parameters, closest first: "
                   "confidence_threshold, ")  # fmt: skip
    done = cli("param", "get", "yolo", "confidence_threshold", *WAIT)
    assert done.stdout == "Double value is: 0.4\n", done

    done = cli("param", "describe", "yolo", "confidence_threshold", *WAIT)
    assert "    Additional constraints: a finite number in 0..1" in done.stdout.splitlines(), done


def test_the_misspelt_parameter_warning_names_the_command_that_works_where_the_node_runs(running, tmp_path):
    node, _, _ = running
    assert "(`vision-factory param list /t/yolo` lists its own)" in node.log()  # no ros2 on its PATH
    ros2 = tmp_path / "bin" / "ros2"  # where ros2cli is installed, its command is named
    ros2.parent.mkdir()
    ros2.write_text("#!/bin/sh\nexit 0\n")
    ros2.chmod(0o755)
    path = f"{ros2.parent}{os.pathsep}{_path_without_ros2()}"
    other = NodeProcess(
        tmp_path, {"autostart": "false", "confidence_treshold": "0.3"}, namespace="/u", module=YOLO, env={"PATH": path}
    )
    try:
        deadline = time.monotonic() + PATIENCE_S
        while "ignoring parameters" not in other.log() and time.monotonic() < deadline:
            assert other.process.poll() is None, other.log()
            time.sleep(0.2)
    finally:
        other.stop()
    assert "(`ros2 param list /u/yolo` lists its own)" in other.log(), other.log()


def test_lifecycle_walks_the_node_and_a_failed_transition_says_why(running):
    node, _, _ = running
    assert cli("lifecycle", "get", "yolo", *WAIT).stdout == "active [3]\n"
    listed = cli("lifecycle", "list", "/t/yolo", *WAIT).stdout.splitlines()
    assert listed == [
        "deactivate [4]: active [3] -> deactivating [14]",
        "shutdown [7]: active [3] -> shuttingdown [12]",
    ]

    assert cli("lifecycle", "set", "yolo", "deactivate", *WAIT).stdout == "Transitioning successful: inactive [2]\n"
    assert cli("lifecycle", "get", "yolo", *WAIT).stdout == "inactive [2]\n"
    refused = cli("lifecycle", "set", "yolo", "deactivate", *WAIT)
    assert_refused(refused, "/t/yolo is inactive [2], where deactivate is not a transition: it offers ")

    # A model that does not load: configure fails, and the node's own reason is shown.
    assert cli("lifecycle", "set", "yolo", "cleanup", *WAIT).returncode == 0
    model = cli("param", "get", "yolo", "model_path", *WAIT).stdout.removeprefix("String value is: ").strip()
    assert cli("param", "set", "yolo", "model_path", "/nonexistent/m.onnx", *WAIT).returncode == 0
    refused = cli("lifecycle", "set", "yolo", "configure", *WAIT)
    assert_refused(refused, "Transitioning failed: /t/yolo is unconfigured [1]; the node said: cannot configure: "
                   "model file not found: /nonexistent/m.onnx")  # fmt: skip

    assert cli("param", "set", "yolo", "model_path", model, *WAIT).returncode == 0
    assert cli("lifecycle", "set", "yolo", "configure", *WAIT).stdout == "Transitioning successful: inactive [2]\n"
    assert cli("lifecycle", "set", "yolo", "activate", *WAIT).stdout == "Transitioning successful: active [3]\n"
    assert node.process.poll() is None, node.log_tail()


def test_a_missing_node_or_topic_is_named_with_those_that_exist(running):
    refused = run_cli("param", "list", "/t/yolov8", "--timeout", "10")  # a process, as a user runs it
    assert_refused(refused, "no node /t/yolov8 seen in 10 s (--timeout) on ROS_DOMAIN_ID ", "closest first: /t/yolo")
    refused = cli("topic", "echo", "/t/detection", "--timeout", "10")
    assert_refused(refused, "no topic /t/detection seen in 10 s (--timeout)", "closest first: /t/detections, ")


def test_ctrl_c_stops_an_echo_waiting_for_messages(running):
    """An echo of a topic nothing is published on (the node's processing times: no frame comes) ends at Ctrl-C,
    quietly."""
    process = _started("topic", "echo", "/t/yolo/debug/processing_time_ms", *WAIT)
    try:
        said = process.stderr.readline()  # the line saying what it echoes, once subscribed
        assert "Ctrl-C stops" in said, said
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=PATIENCE_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0 and out == "" and "Traceback" not in err, err
