"""launch/tracknet_onnx.launch.py, checked with the real launch / launch_ros.

The package is installed into a temporary ament prefix laid out as colcon would (index marker,
share/vision_factory/{package.xml,launch,config}, lib/vision_factory/tracknet_node), then
`ros2 launch vision_factory tracknet_onnx.launch.py ...` runs on a private ROS domain while a
separate rclpy process publishes camera frames and records the balls that come back.
Skipped where launch_ros is not importable (it has no PyPI wheel).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SKIP_REASON = "launch_ros is not importable (no PyPI wheel); runs where ROS 2 launch is installed"
try:
    import launch
    import launch_ros.actions
except ImportError:
    pytest.skip(SKIP_REASON, allow_module_level=True)

import yaml
from launch.utilities import perform_substitutions
from support.models import SHAPES_MODEL

import vision_factory
from vision_factory.families.registry import NODE_FAMILIES
from vision_factory.tools.synthetic import BallClip, build_tracknet_model

PACKAGE = "vision_factory"
REPO = Path(__file__).resolve().parents[1]
LAUNCH_FILE = REPO / "launch" / "tracknet_onnx.launch.py"
SOURCE_ROOT = Path(vision_factory.__file__).resolve().parents[1]  # where the node imports vision_factory from
SEQ_LEN = 8
FRAMES = 20
WARMUP = 5

# Runs in its own process: Fast DDS reads its XML profile once per process, and the frames must
# go over the same shared-memory profile as the node's (default UDP loses large best-effort frames).
PROBE = r"""
import json, sys, time
import rclpy
from geometry_msgs.msg import PointStamped
from sensor_msgs.msg import Image
from vision_factory.tools.synthetic import BallClip

image_topic, ball_topic, frames, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rclpy.init()
node = rclpy.create_node("tracknet_launch_probe")
received = []
subscription = node.create_subscription(PointStamped, ball_topic, received.append, 100)
publisher = node.create_publisher(Image, image_topic, 10)


def spin_until(condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.02)
    return condition()


publishers = getattr(subscription, "get_publisher_count", lambda: node.count_publishers(ball_topic))  # < Jazzy
matched = spin_until(lambda: publisher.get_subscription_count() > 0 and publishers() > 0, 30)
sent = []
if matched:
    clip = BallClip(num_frames=frames)
    for index in range(frames):
        image = clip.frame(index)
        msg = Image(height=image.shape[0], width=image.shape[1], encoding="bgr8",
                    step=image.shape[1] * 3, data=image.tobytes())
        msg.header.frame_id = "probe_camera"
        msg.header.stamp.sec, msg.header.stamp.nanosec = 1000 + index, 123
        publisher.publish(msg)
        sent.append([1000 + index, 123])
        spin_until(lambda: False, 0.1)  # 10 frames/s
    spin_until(lambda: len(received) >= frames, 15)  # the last ones come after flush_timeout (1 s)
balls = [{"stamp": [m.header.stamp.sec, m.header.stamp.nanosec], "frame_id": m.header.frame_id,
          "x": m.point.x, "y": m.point.y, "z": m.point.z} for m in received]
with open(out, "w") as f:
    json.dump({"matched": matched, "sent": sent, "received": balls}, f)
node.destroy_node()
rclpy.shutdown()
"""


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    """The package installed as colcon lays it out, with a node executable for this Python."""
    root = tmp_path_factory.mktemp("install")
    index = root / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    (index / PACKAGE).write_text("")
    share = root / "share" / PACKAGE
    share.mkdir()
    shutil.copy2(REPO / "package.xml", share)
    for folder in ("launch", "config"):
        shutil.copytree(REPO / folder, share / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "lib" / PACKAGE).mkdir(parents=True)
    for family in NODE_FAMILIES:
        executable = root / "lib" / PACKAGE / f"{family}_node"
        executable.write_text(
            f"#!{sys.executable}\n"
            "import sys\n"
            f"sys.path.insert(0, {str(SOURCE_ROOT)!r})\n"
            f"from vision_factory.{family}_onnx_node import main\n"
            "sys.exit(main())\n"
        )
        executable.chmod(0o755)
    return root


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_tracknet_model(tmp_path_factory.mktemp("model") / "tracknet.onnx", seq_len=SEQ_LEN, bg_mode="subtract")


@pytest.fixture
def ros_env(tmp_path, prefix) -> dict[str, str]:
    """Environment for every ROS process of one test: private domain, localhost only, logs in tmp_path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ROS_LOCALHOST_ONLY", "ROS_STATIC_PEERS", "FASTDDS_DEFAULT_PROFILES_FILE")
    }
    env.update(
        AMENT_PREFIX_PATH=os.pathsep.join(filter(None, [str(prefix), os.environ.get("AMENT_PREFIX_PATH")])),
        PYTHONPATH=os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")])),
        ROS_DOMAIN_ID=str(1 + os.getpid() % 101),
        ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
        ROS_HOME=str(tmp_path / "ros_home"),
        ROS_LOG_DIR=str(tmp_path / "ros_home" / "log"),
        RCUTILS_COLORIZED_OUTPUT="0",
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture
def ros2(ros_env) -> str:
    """The ros2 command (ros2cli with ros2launch, ros2lifecycle), beside this Python first."""
    found = shutil.which("ros2", path=os.pathsep.join([str(Path(sys.executable).parent), ros_env.get("PATH", "")]))
    if found is None:
        pytest.skip("the ros2 command (ros2cli + ros2launch) is not on PATH")
    return found


@pytest.fixture
def run_launch(tmp_path, ros_env, ros2):
    """Start `ros2 launch vision_factory tracknet_onnx.launch.py ARGS` (or a launch file's path given as
    launch_file with package=None); killed at teardown if still running."""
    started: list[subprocess.Popen] = []

    def start(
        *arguments: str, launch_file: str = "tracknet_onnx.launch.py", package: str | None = PACKAGE
    ) -> tuple[subprocess.Popen, Path]:
        log_path = tmp_path / f"launch{len(started)}.log"
        # An ignored SIGINT (pytest started in the background by a shell) would be inherited and make
        # ros2 launch ignore SIGINT; a handled one is reset to the default in the child.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            with open(log_path, "wb") as log:
                process = subprocess.Popen(
                    [ros2, "launch", *filter(None, [package, launch_file]), *arguments],
                    env=ros_env,
                    cwd=tmp_path,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        finally:
            signal.signal(signal.SIGINT, previous)
        started.append(process)
        return process, log_path

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def wait_for_log(log_path: Path, pattern: str, process: subprocess.Popen, timeout: float = 60) -> re.Match:
    """The first match of `pattern` in the launch output, failing on timeout or early exit."""
    deadline = time.monotonic() + timeout
    while True:
        match = re.search(pattern, log_path.read_text(errors="replace"))
        if match:
            return match
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"no {pattern!r} in the launch output (exit code {process.poll()}):\n{log_path.read_text()}")
        time.sleep(0.1)


def process_environment(pid: int) -> dict[str, str] | None:
    environ = Path(f"/proc/{pid}/environ")
    if not environ.exists():
        return None  # not Linux
    items = environ.read_bytes().decode(errors="replace").split("\0")
    return dict(item.split("=", 1) for item in items if "=" in item)


def _probe_then_stop(tmp_path, name, source, arguments, ros_env, shm_profile, timeout, process, log_path):
    """Run the probe script ``source`` (as NAME.py, with ``arguments`` and the path of its JSON result last) beside
    the launched ``process`` on the shared-memory profile, then end the launch with SIGINT (it must exit 0):
    the probe's result and the launch log."""
    probe, result_path = tmp_path / f"{name}.py", tmp_path / f"{name}.json"
    probe.write_text(source)
    subprocess.run(
        [sys.executable, str(probe), *arguments, str(result_path)],
        env={**ros_env, "FASTDDS_DEFAULT_PROFILES_FILE": shm_profile},
        cwd=tmp_path,
        check=True,
        timeout=timeout,
    )
    result = json.loads(result_path.read_text())
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    return result, log_path.read_text()


def test_launch_tracks_frames(run_launch, ros_env, prefix, model, tmp_path):
    process, log_path = run_launch(f"model_path:={model}", "bg_mode:=subtract", f"median_warmup:={WARMUP}")
    wait_for_log(log_path, r"listening on /camera/image_raw, publishing /ball", process)
    pid = int(wait_for_log(log_path, r"process started with pid \[(\d+)\]", process).group(1))

    # FASTDDS_DEFAULT_PROFILES_FILE was unset, so the launch file pointed it at the package profile.
    shm_profile = str(prefix / "share" / PACKAGE / "config" / "fastdds_shm.xml")
    environment = process_environment(pid)
    if environment is not None:
        assert environment.get("FASTDDS_DEFAULT_PROFILES_FILE") == shm_profile

    arguments = ["/camera/image_raw", "/ball", str(FRAMES)]
    result, log = _probe_then_stop(tmp_path, "probe", PROBE, arguments, ros_env, shm_profile, 120, process, log_path)
    assert result["matched"], f"the probe never matched the node's topics:\n{log}"

    # One PointStamped per frame, in order, carrying that frame's header.
    balls = result["received"]
    assert [ball["stamp"] for ball in balls] == result["sent"], log
    assert {ball["frame_id"] for ball in balls} == {"probe_camera"}
    # bg_mode and median_warmup reached the node: the frames that only feed the median come back as
    # misses, then (from the last warm-up frame on) the background-subtracting model follows the ball.
    truth = BallClip(num_frames=FRAMES).truth
    for index, (ball, expected) in enumerate(zip(balls, truth)):
        if index < WARMUP - 1:
            assert ball["z"] == 0.0, f"frame {index} is a warm-up frame"
            continue
        assert ball["z"] == float(expected.visibility), f"frame {index}"
        if expected.visibility:
            assert abs(ball["x"] - expected.x) <= 3 and abs(ball["y"] - expected.y) <= 3, f"frame {index}: {ball}"
    # SIGINT reached the node, which published what was pending and logged its statistics.
    assert f"frames in {FRAMES}, dropped 0, skipped 0, outputs {FRAMES}" in log


def test_rtmpose_launch_remaps_its_person_detections(run_launch, tmp_path):
    from support.models import spot_finder

    model = spot_finder(tmp_path / "spot.onnx")
    arguments = (f"model_path:={model}", "person_source:=topic", "person_detections_topic:=/people/detections")
    process, log_path = run_launch(*arguments, launch_file="rtmpose_onnx.launch.py")
    wait_for_log(log_path, r"listening on /camera/image_raw, publishing /poses", process)
    wait_for_log(log_path, r"posing the people of /people/detections, paired with images by stamp", process)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0


def test_launch_seq_len_reaches_node(run_launch, model):
    process, log_path = run_launch(f"model_path:={model}", "bg_mode:=subtract", "median_warmup:=5", "seq_len:=4")
    try:
        process.wait(timeout=60)  # the node exits at start-up, then launch has nothing left to run
    except subprocess.TimeoutExpired:
        pytest.fail(f"launch did not end after the node failed:\n{log_path.read_text()}")
    log = log_path.read_text()
    assert "cannot start" in log and "seq_len=4 was requested" in log, log
    assert "exit code 2" in log, log


# Runs in its own process, as PROBE does. Drives the node's lifecycle with `ros2 lifecycle set` (driver "cli") or
# over its change_state service (driver "service", as a system manager or launch's LifecycleNode calls it), sends
# frames in each state and records the state and what came back.
LIFECYCLE_PROBE = r"""
import importlib, json, subprocess, sys, time
import rclpy
from lifecycle_msgs.srv import ChangeState, GetState
from sensor_msgs.msg import Image
from vision_factory.tools.synthetic import BallClip

node_name, image_topic, output_topic, output_type, driver, ros2, out = sys.argv[1:8]
module, _, name = output_type.rpartition(".")
rclpy.init()
node = rclpy.create_node("lifecycle_launch_probe")
answers = []
node.create_subscription(getattr(importlib.import_module(module), name), output_topic, answers.append, 100)
publisher = node.create_publisher(Image, image_topic, 10)
get_state = node.create_client(GetState, f"{node_name}/get_state")
change_state = node.create_client(ChangeState, f"{node_name}/change_state")
clip = BallClip(num_frames=60)
sent = 0
record = {"transitions": {}}


def spin_until(condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.02)
    return condition()


def call(client, request):
    assert spin_until(client.service_is_ready, 30), f"{client.srv_name} is not offered"
    spin_until(lambda: False, 0.5)  # the reply writer can match a moment after the request reader
    future = client.call_async(request)
    assert spin_until(future.done, 30), f"{client.srv_name} did not answer"
    return future.result()


def state():
    return call(get_state, GetState.Request()).current_state.label


def transition(label):
    if driver == "cli":
        deadline = time.monotonic() + 30
        while True:  # until the daemon has discovered the node (seconds here)
            command = [ros2, "lifecycle", "set", node_name, label]
            result = subprocess.run(command, capture_output=True, text=True, timeout=60)
            if "Node not found" not in result.stderr + result.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        done = result.returncode == 0 and "Transitioning successful" in result.stdout
        record["transitions"][label] = done or (result.stdout + result.stderr)
    else:
        request = ChangeState.Request()
        request.transition.label = label
        record["transitions"][label] = call(change_state, request).success
    return state()


def send(count):
    # Frames at 10/s with stamps 1000 + n; returns the stamps sent.
    global sent
    stamps = []
    for _ in range(count):
        image = clip.frame(sent % clip.num_frames)
        msg = Image(height=image.shape[0], width=image.shape[1], encoding="bgr8", step=image.shape[1] * 3,
                    data=image.tobytes())
        msg.header.frame_id = "probe_camera"
        msg.header.stamp.sec = 1000 + sent
        publisher.publish(msg)
        stamps.append(1000 + sent)
        sent += 1
        spin_until(lambda: False, 0.1)
    return stamps


def answered_while(count, seconds=1.5):
    # How many answers came to ``count`` frames sent now (and up to ``seconds`` after).
    before = len(answers)
    send(count)
    spin_until(lambda: False, seconds)
    return len(answers) - before


if driver == "cli":
    # As users run it: through the ros2 daemon, started first (a ros2 command without one discovers the graph for
    # --spin-time only, 0.5 s, and discovery can take seconds here).
    subprocess.run([ros2, "daemon", "start"], check=True, timeout=60)
record["unconfigured"] = state()
spin_until(lambda: False, 1.0)  # time to discover the node's endpoints, if it had any
record["unconfigured_subscribed"] = publisher.get_subscription_count()
record["unconfigured_outputs"] = node.count_publishers(output_topic)
record["unconfigured_answered"] = answered_while(5)

record["inactive"] = transition("configure")
record["inactive_outputs"] = spin_until(lambda: node.count_publishers(output_topic) > 0, 10)
record["inactive_subscribed"] = publisher.get_subscription_count()
record["inactive_answered"] = answered_while(5)

record["active"] = transition("activate")
record["active_subscribed"] = spin_until(lambda: publisher.get_subscription_count() > 0, 10)
first = len(answers)
record["active_sent"] = send(12)
spin_until(lambda: len(answers) - first >= 12, 15)  # TrackNet's last ones come after flush_timeout (1 s)
record["active_answered"] = [m.header.stamp.sec for m in answers[first:]]

record["deactivated"] = transition("deactivate")
record["deactivated_unsubscribed"] = spin_until(lambda: publisher.get_subscription_count() == 0, 10)
record["deactivated_answered"] = answered_while(5)
with open(out, "w") as f:
    json.dump(record, f)
node.destroy_node()
rclpy.shutdown()
"""

# family: (launch file, node, output topic, output type, driver)
LIFECYCLE_CASES = {
    "tracknet": ("tracknet_onnx.launch.py", "/tracknet", "/ball", "geometry_msgs.msg.PointStamped", "cli"),
    "yolo": ("yolo_onnx.launch.py", "/yolo", "/detections", "vision_msgs.msg.Detection2DArray", "service"),
}


@pytest.fixture
def ros2_daemon(ros2, ros_env):
    """Stops the ros2 daemon of the test's private domain, if the test started one."""
    yield
    subprocess.run([ros2, "daemon", "stop"], env=ros_env, capture_output=True, timeout=60)


@pytest.mark.parametrize("family", LIFECYCLE_CASES)
def test_launch_autostart_false_waits_for_lifecycle_transitions(
    family, run_launch, ros_env, ros2, ros2_daemon, prefix, model, tmp_path
):
    """autostart:=false: the launched node waits unconfigured (no subscription, no output, nothing answered);
    configure makes its outputs but it answers nothing while inactive; activate answers every frame, in order;
    deactivate unsubscribes and it answers nothing again. TrackNet is driven with `ros2 lifecycle set`, YOLO over
    its change_state service."""
    launch_file, node_name, output_topic, output_type, driver = LIFECYCLE_CASES[family]
    if family == "yolo":
        from conftest import pypi_model
        from support.real_models import NUDENET_MODEL

        arguments = [f"model_path:={pypi_model(*NUDENET_MODEL)}"]
    else:
        arguments = [f"model_path:={model}", "bg_mode:=subtract", "median_warmup:=3"]
    process, log_path = run_launch(*arguments, "autostart:=false", launch_file=launch_file)
    wait_for_log(log_path, r"process started with pid \[(\d+)\]", process)

    shm_profile = str(prefix / "share" / PACKAGE / "config" / "fastdds_shm.xml")
    arguments = [node_name, "/camera/image_raw", output_topic, output_type, driver, ros2]
    result, log = _probe_then_stop(
        tmp_path, "lifecycle_probe", LIFECYCLE_PROBE, arguments, ros_env, shm_profile, 180, process, log_path
    )

    assert result["transitions"] == {"configure": True, "activate": True, "deactivate": True}, log
    assert (result["unconfigured"], result["inactive"], result["active"]) == ("unconfigured", "inactive", "active")
    assert result["deactivated"] == "inactive", log
    # No subscription and no output while unconfigured; outputs but no subscription while inactive; nothing
    # answered in either, nor after deactivate, which unsubscribes.
    silent = ("unconfigured_subscribed", "unconfigured_outputs", "unconfigured_answered", "inactive_subscribed")
    silent += ("inactive_answered", "deactivated_answered")
    assert {key: result[key] for key in silent} == dict.fromkeys(silent, 0), log
    assert result["inactive_outputs"] and result["active_subscribed"] and result["deactivated_unsubscribed"], log
    assert result["active_answered"] == result["active_sent"], log  # every frame, in order
    # It took in only the frames sent while it was active.
    assert "frames in 12, dropped 0, skipped 0, outputs 12" in log, log


# An including launch file drives the node with launch_ros's ChangeState events: configure once the process has
# started, activate once LifecycleNode reports the node inactive (its StateTransition event). The test puts
# PACKAGE, LAUNCH_FILE, NODE and ARGUMENTS above it.
CHANGE_STATE_LAUNCH = """
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import EmitEvent, IncludeLaunchDescription, LogInfo, RegisterEventHandler
from launch.event_handlers import OnProcessStart
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from launch_ros.events.matchers import matches_node_name
from lifecycle_msgs.msg import Transition


def change(transition):
    return EmitEvent(event=ChangeState(lifecycle_node_matcher=matches_node_name(NODE), transition_id=transition))


def generate_launch_description():
    included = os.path.join(get_package_share_directory(PACKAGE), "launch", LAUNCH_FILE)
    arguments = {**ARGUMENTS, "autostart": "false"}
    return LaunchDescription([
        IncludeLaunchDescription(PythonLaunchDescriptionSource(included), launch_arguments=arguments.items()),
        RegisterEventHandler(OnProcessStart(on_start=[change(Transition.TRANSITION_CONFIGURE)])),
        RegisterEventHandler(
            OnStateTransition(
                goal_state="inactive",
                entities=[LogInfo(msg="seen inactive"), change(Transition.TRANSITION_ACTIVATE)],
            )
        ),
        RegisterEventHandler(OnStateTransition(goal_state="active", entities=[LogInfo(msg="seen active")])),
    ])
"""


@pytest.mark.parametrize("case", ["yolo in a namespace", "generated openvino tracknet package"])
def test_launch_lifecycle_node_takes_change_state_events(case, run_launch, ros_env, model, tmp_path):
    """autostart:=false starts launch_ros's LifecycleNode, in this package's launch files and in a generated
    package's: it reports the node's transitions (StateTransition events) and takes ChangeState events."""
    if case == "yolo in a namespace":
        from conftest import pypi_model
        from support.real_models import NUDENET_MODEL

        package, launch_file, node = PACKAGE, "yolo_onnx.launch.py", "/cam1/yolo"
        arguments = {"model_path": str(pypi_model(*NUDENET_MODEL)), "namespace": "cam1"}
        listening = r"\[cam1\.yolo\]: listening on /camera/image_raw, publishing /cam1/detections"
    else:
        from support.generated import generate_and_install, site_packages

        package, launch_file, node = "gen_tracknet_openvino", "tracknet_openvino.launch.py", "/tracknet"
        generate_and_install("tracknet", "openvino", package, tmp_path / "generated")
        install = tmp_path / "generated" / "install"
        ros_env["AMENT_PREFIX_PATH"] = os.pathsep.join([str(install), ros_env["AMENT_PREFIX_PATH"]])
        ros_env["PYTHONPATH"] = os.pathsep.join([str(site_packages(install)), ros_env["PYTHONPATH"]])
        arguments = {"model_path": str(model), "bg_mode": "subtract"}
        listening = r"\[tracknet\]: listening on /camera/image_raw, publishing /ball"
    constants = {"PACKAGE": package, "LAUNCH_FILE": launch_file, "NODE": node, "ARGUMENTS": arguments}
    launch_file = tmp_path / "including.launch.py"
    launch_file.write_text("".join(f"{k} = {v!r}\n" for k, v in constants.items()) + CHANGE_STATE_LAUNCH)
    process, log_path = run_launch(launch_file=str(launch_file), package=None)
    wait_for_log(log_path, r"seen active", process)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    # The node waited for launch's events (an autostarted node would be listening before any of them), and
    # LifecycleNode saw each state it reached. (The node's own lines come through a pipe that launch reads apart from
    # the lifecycle events: its "listening" may be relayed after "seen active".)
    log = log_path.read_text()
    assert log.index("seen inactive") < re.search(listening, log).start() and "seen active" in log, log


def test_launch_refuses_an_argument_its_parameter_cannot_take(run_launch, model):
    """seq_len:=8.0 (a double; the node takes an int) ends the launch with an error naming the argument and the fix,
    before any node starts."""
    process, log_path = run_launch(f"model_path:={model}", "seq_len:=8.0")
    assert process.wait(timeout=60) != 0
    log = log_path.read_text()
    assert "seq_len:='8.0' is not a whole number: give digits, e.g. seq_len:=8" in log, log
    assert "Traceback" not in log and "process started" not in log, log


def test_launch_description(prefix, monkeypatch):
    """The launch file as data: arguments, typed parameter overrides, remappings, DDS profile."""
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", "/etc/my_profile.xml")  # never what --show-args shows
    spec = importlib.util.spec_from_file_location("tracknet_onnx_launch", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    share = prefix / "share" / PACKAGE

    context = launch.LaunchContext()
    arguments = {argument.name: argument for argument in description.get_launch_arguments()}
    defaults = {
        name: None if argument.default_value is None else perform_substitutions(context, argument.default_value)
        for name, argument in arguments.items()
    }
    # --show-args prints each default's describe(): the real fallback, a path, not the variable's name.
    shm_profile = str(share / "config" / "fastdds_shm.xml")
    assert [part.describe() for part in arguments["fastdds_profile"].default_value] == [repr(shm_profile)]
    assert defaults.pop("fastdds_profile") == shm_profile
    assert defaults == {
        "model_path": None,
        "inpaint_model_path": "",
        "image_topic": "/camera/image_raw",
        "input_transport": "raw",
        "execution_provider": "cpu",
        "seq_len": "8",
        "bg_mode": "model",
        "median_warmup": "10",
        "stride": "1",
        "autostart": "true",
        "params_file": str(share / "config" / "tracknet_onnx.yaml"),
        "namespace": "",
    }

    # The node action, as launch runs it (the description's last OpaqueFunction): the parameter arguments reach the
    # node in a parameter file after params_file, typed: values that YAML would turn into other types stay strings,
    # the ints are ints; the image topic is remapped, raw and compressed.
    *_, start = [e for e in description.entities if isinstance(e, launch.actions.OpaqueFunction)]

    def started(**values: str) -> launch_ros.actions.Node:
        context.launch_configurations.update(values)
        (node,) = start.execute(context)
        return node

    context.launch_configurations.update({name: value for name, value in defaults.items() if value is not None})
    node = started(
        model_path="123",
        seq_len="12",
        median_warmup="30",
        stride="4",
        execution_provider="tensorrt,cuda,cpu",
        image_topic="/cam1/image_raw",
    )
    node._perform_substitutions(context)
    command = node.cmd  # each part a list of substitutions; the node's name and namespace come at execute time
    flags = [i for i, part in enumerate(command) if [getattr(sub, "text", None) for sub in part] == ["--params-file"]]
    params_file, overrides_file = [perform_substitutions(context, command[i + 1]) for i in flags]
    assert Path(params_file) == share / "config" / "tracknet_onnx.yaml"
    (overrides,) = [section["ros__parameters"] for section in yaml.safe_load(Path(overrides_file).read_text()).values()]
    Path(overrides_file).unlink()
    expected = {
        "model_path": "123",
        "inpaint_model_path": "",
        "input_transport": "raw",
        "execution_provider": "tensorrt,cuda,cpu",
        "bg_mode": "model",
        "seq_len": 12,
        "median_warmup": 30,
        "stride": 4,
        "autostart": True,
    }
    assert overrides == expected
    assert {name: type(value) for name, value in overrides.items()} == {k: type(v) for k, v in expected.items()}
    # Every override is a parameter the config file (and so the node) knows.
    config = yaml.safe_load((share / "config" / "tracknet_onnx.yaml").read_text())
    assert set(overrides) <= set(config["/**"]["ros__parameters"])
    assert node.expanded_remapping_rules == [
        ("image", "/cam1/image_raw"),
        ("image/compressed", "/cam1/image_raw/compressed"),
    ]

    # fastdds_profile is exported when given; not given, the variable is kept when set (also by an including
    # launch file, before this one runs), else the shared-memory profile is exported; '' leaves the variable
    # alone, for nodes that must be reachable from other machines.
    export, _ = [e for e in description.entities if isinstance(e, launch.actions.OpaqueFunction)]

    def exported(argument: str, variable: str | None) -> str | None:
        if variable is None:
            monkeypatch.delenv("FASTDDS_DEFAULT_PROFILES_FILE", raising=False)
        else:
            monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", variable)
        context.launch_configurations["fastdds_profile"] = argument
        for action in export.execute(context) or []:
            action.execute(context)
        return context.environment.get("FASTDDS_DEFAULT_PROFILES_FILE")

    assert exported(shm_profile, None) == shm_profile
    assert exported(shm_profile, "/etc/my_profile.xml") == "/etc/my_profile.xml"
    assert exported("/etc/other.xml", "/etc/my_profile.xml") == "/etc/other.xml"
    assert exported("", None) is None and exported("", "/etc/my_profile.xml") == "/etc/my_profile.xml"

    # autostart:=true runs a plain Node (the node walks configure and activate itself); autostart:=false runs
    # launch_ros's LifecycleNode, which follows the node's transitions and takes ChangeState events.
    for autostart, action in (("true", launch_ros.actions.Node), ("false", launch_ros.actions.LifecycleNode)):
        node = started(autostart=autostart)
        assert type(node) is action
        assert (node.node_package, node.node_executable) == (PACKAGE, "tracknet_node")


# Runs in its own process, in the host group's domain, on Fast DDS defaults (the hosts launch file leaves
# FASTDDS_DEFAULT_PROFILES_FILE alone, so the node is on them too). Sends one real image to each camera topic of the
# config (own: the host's, stray: topics the host does not serve) and records what comes back and the graph.
HOSTS_PROBE = r"""
import json, sys, time
import cv2
import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
from vision_msgs.msg import Detection2DArray
from vision_factory.ros.messages import bgr_to_message
from std_msgs.msg import Header

config = json.loads(open(sys.argv[1]).read())
own, stray, frames = config["own"], config["stray"], config["frames"]
reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
late = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
rclpy.init()
node = rclpy.create_node("hosts_launch_probe")
answers = {topic: [] for topic in own + stray}
for topic in own + stray:  # the node keeps its answers on its own topics for a late reader (the hosts file says so)
    qos = late if topic in own else reliable
    node.create_subscription(Detection2DArray, f"{topic}/detections", answers[topic].append, qos)
publishers = {topic: node.create_publisher(Image, f"{topic}/image", reliable) for topic in own + stray}


def spin_until(condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.02)
    return condition()


def serves(topic):
    return publishers[topic].get_subscription_count() > 0 and node.count_publishers(f"{topic}/detections") > 0


matched = spin_until(lambda: all(serves(topic) for topic in own), 120)
image = cv2.imread(config["image"])
sent = []
for index in range(frames if matched else 0):
    for topic in own + stray:
        header = Header(frame_id=topic.rsplit("/", 1)[-1] + "_optical")
        header.stamp.sec = 100 + index
        publishers[topic].publish(bgr_to_message(image, header))
    sent.append(100 + index)
    spin_until(lambda: False, 0.2)
spin_until(lambda: all(len(answers[t]) >= frames for t in own), 120)
spin_until(lambda: False, 1.0)  # a stray answer, had there been one, has had its time


def boxes(message):
    return [{"class_id": d.results[0].hypothesis.class_id if d.results else None,
             "score": d.results[0].hypothesis.score if d.results else None,
             "center": [d.bbox.center.position.x, d.bbox.center.position.y], "size": [d.bbox.size_x, d.bbox.size_y]}
            for d in message.detections]


record = {
    "matched": matched,
    "sent": sent,
    "stray_subscribers": {t: publishers[t].get_subscription_count() for t in stray},
    "answers": {t: [{"stamp": m.header.stamp.sec, "frame_id": m.header.frame_id, "detections": boxes(m)}
                    for m in answers[t]] for t in own + stray},
    "nodes": sorted(node.get_node_names_and_namespaces()),
}
with open(sys.argv[2], "w") as f:
    json.dump(record, f)
node.destroy_node()
rclpy.shutdown()
"""
HOSTS_IMAGE = "0005.jpg"  # of the shapes validation set: its triangle the shapes model finds (score 0.73)


def _hosts_file(tmp_path: Path, domain_id: int) -> Path:
    """Two host groups of the shapes YOLOv8n: host_a (cameras front and left, in robot/a, on ``domain_id``) and host_b
    (camera rear, in robot/b). Each keeps its answers for a late reader and every frame (reliable, a deep queue)."""
    from support.ros_harness import LATE

    from vision_factory.parameters import kept_for_late_readers

    if not SHAPES_MODEL.exists():
        pytest.skip(f"{SHAPES_MODEL} is not here (the shared models)")
    groups = {"host_a": ("robot/a", ["front", "left"]), "host_b": ("robot/b", ["rear"])}
    hosts = {}
    for name, (namespace, cameras) in groups.items():
        parameters = {"model_path": str(SHAPES_MODEL), "qos_reliability": "reliable", "queue_size": 8}
        parameters.update(
            kept_for_late_readers([f"/{namespace}/{camera}/detections" for camera in cameras], LATE.depth)
        )
        hosts[name] = {"family": "yolo", "namespace": namespace, "cameras": cameras, "parameters": parameters}
    hosts["host_a"]["domain_id"] = domain_id
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump({"hosts": hosts}))
    return path


def _iou(a: list[float], b: list[float]) -> float:
    """Intersection over union of two [x1, y1, x2, y2] boxes."""
    width = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    height = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - width * height
    return width * height / union


def test_hosts_launch_starts_this_hosts_node_on_its_cameras_only(run_launch, ros_env, second_domain, tmp_path):
    """`ros2 launch vision_factory multicamera_hosts.launch.py hosts_file:=... host:=host_a` starts host_a's node
    only: in robot/a, under host_a's domain_id (not the launching shell's), serving front and left, each answered
    with the shapes model's detection of the image's triangle under that camera's header; the frames sent to host_b's
    camera, or to that camera under robot/a, reach no node, and host_b's node is in no graph."""
    from conftest import SHARED

    ros_env["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"]  # this run's domain (conftest), beside second_domain
    hosts_file = _hosts_file(tmp_path, second_domain)
    process, log_path = run_launch(
        f"hosts_file:={hosts_file}", "host:=host_a", launch_file="multicamera_hosts.launch.py"
    )
    listening = r"\[robot\.a\.yolo\]: listening on .*publishing /robot/a/front/detections, /robot/a/left/detections"
    wait_for_log(log_path, listening, process, timeout=120)
    pid = int(wait_for_log(log_path, r"process started with pid \[(\d+)\]", process).group(1))
    environment = process_environment(pid)
    if environment is not None:
        assert environment.get("ROS_DOMAIN_ID") == str(second_domain)
        assert "FASTDDS_DEFAULT_PROFILES_FILE" not in environment  # Fast DDS defaults: reachable from other hosts

    images = SHARED / "data" / "shapes-val"
    config = {
        "own": ["/robot/a/front", "/robot/a/left"],
        "stray": ["/robot/b/rear", "/robot/a/rear"],
        "frames": 3,
        "image": str(images / "images" / HOSTS_IMAGE),
    }
    config_path = tmp_path / "hosts_probe_config.json"
    config_path.write_text(json.dumps(config))
    probe, result_path = tmp_path / "hosts_probe.py", tmp_path / "hosts_probe.json"
    probe.write_text(HOSTS_PROBE)
    subprocess.run(
        [sys.executable, str(probe), str(config_path), str(result_path)],
        env={**ros_env, "ROS_DOMAIN_ID": str(second_domain)},
        cwd=tmp_path,
        check=True,
        timeout=300,
    )
    result = json.loads(result_path.read_text())
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    log = log_path.read_text()
    assert result["matched"], f"the probe never matched host_a's camera topics:\n{log}"

    # The truth of the image (the shapes validation set's annotations): the model's most confident detection is one
    # of its shapes, of that shape's class.
    annotations = json.loads((images / "annotations.json").read_text())
    (image_id,) = [image["id"] for image in annotations["images"] if image["file_name"] == HOSTS_IMAGE]
    names = {category["id"]: category["name"] for category in annotations["categories"]}
    truth = [
        (
            names[a["category_id"]],
            [a["bbox"][0], a["bbox"][1], a["bbox"][0] + a["bbox"][2], a["bbox"][1] + a["bbox"][3]],
        )
        for a in annotations["annotations"]
        if a["image_id"] == image_id
    ]
    for camera in ("front", "left"):
        got = result["answers"][f"/robot/a/{camera}"]
        assert [answer["stamp"] for answer in got] == result["sent"], log
        assert {answer["frame_id"] for answer in got} == {f"{camera}_optical"}
        for answer in got:
            best = max(answer["detections"], key=lambda d: d["score"])
            (cx, cy), (bw, bh) = best["center"], best["size"]
            box = [cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2]
            assert any(name == best["class_id"] and _iou(box, shape) >= 0.5 for name, shape in truth), (answer, truth)
    assert result["stray_subscribers"] == dict.fromkeys(config["stray"], 0), log
    assert all(not result["answers"][topic] for topic in config["stray"]), result["answers"]
    nodes = {tuple(node) for node in result["nodes"]}
    assert ("yolo", "/robot/a") in nodes and not any(namespace.startswith("/robot/b") for _, namespace in nodes), nodes


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("unknown host", "no host group 'host_c' in the hosts file: give host:= one of host_a, host_b"),
        ("not YAML", "is not YAML"),
        ("unknown family", "family 'reid' has no node: choose one of"),
        ("no file", "cannot read the hosts file"),
    ],
)
def test_hosts_launch_refuses_a_host_or_file_it_cannot_use(case, says, run_launch, tmp_path):
    """An unknown host or a hosts file it cannot use ends `ros2 launch` with the file's message naming the fix, and no
    traceback, before any node starts."""
    hosts_file, host = _hosts_file(tmp_path, 1), "host_a"
    if case == "unknown host":
        host = "host_c"
    elif case == "not YAML":
        hosts_file.write_text("hosts: [")
    elif case == "unknown family":
        hosts_file.write_text(hosts_file.read_text().replace("family: yolo", "family: reid", 1))
    else:
        hosts_file = tmp_path / "absent.yaml"
    process, log_path = run_launch(
        f"hosts_file:={hosts_file}", f"host:={host}", launch_file="multicamera_hosts.launch.py"
    )
    assert process.wait(timeout=60) != 0
    log = log_path.read_text()
    assert says in log, log
    assert "Traceback" not in log and "process started" not in log, log


def test_hosts_launch_fails_when_its_node_cannot_start(run_launch, tmp_path):
    """A group's parameter the node cannot start with (a model file that is not there) ends the launch with a failure
    (a service manager sees that host fail, where a launch that ran out of processes would exit 0), naming the
    host's node and its exit code after the node's own reason."""
    hosts_file = _hosts_file(tmp_path, 1)
    hosts_file.write_text(hosts_file.read_text().replace(str(SHAPES_MODEL), str(tmp_path / "absent.onnx")))
    process, log_path = run_launch(
        f"hosts_file:={hosts_file}", "host:=host_b", launch_file="multicamera_hosts.launch.py"
    )
    assert process.wait(timeout=120) == 1
    log = log_path.read_text()
    assert "cannot start: model file not found" in log, log
    reason = log.index("cannot start")
    assert log.index("the yolo node of host 'host_b' ended with exit code 2: its log above says why") > reason, log
    assert "Traceback" not in log, log
