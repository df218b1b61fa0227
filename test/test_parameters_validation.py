"""Parameters refused when wrong, warned when unknown (issue 21, item 5): real rclpy nodes (in this process, and
as node processes over real DDS), and the replay and verify commands, with the shapes model.

A value that is not valid for its parameter (NaN or a negative threshold, max_detections <= 0, a tracking
threshold that is infinite, a QoS depth DDS cannot take, 10000 threads, a labels 'file' that is a device) is
refused: when set at run time, by the node's set-parameters callback, the reason naming the parameter, the value
and the valid values; at start-up, at configure (the node exits 2 saying why); by replay and verify before
anything runs. A parameter the node does not have is named with the closest one it has."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import cv2
import pytest
import rclpy
from click.testing import CliRunner
from conftest import SHARED
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from support.ros_harness import PATIENCE_S, NodeProcess, Probe

from vision_factory.cli import main
from vision_factory.families.registry import NODE_FAMILIES
from vision_factory.families.yolo import FAMILY as YOLO
from vision_factory.ros.detection_node import DetectionNode
from vision_factory.runtime.backends import BACKENDS
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.bags import write_image_bag

SHAPES_MODEL = SHARED / "models" / "shapes-yolov8n.onnx"
SHAPES_IMAGES = SHARED / "data" / "shapes-val" / "images"
YOLO_NODE = "vision_factory.yolo_onnx_node"
needs_shapes = pytest.mark.skipif(
    not (SHAPES_MODEL.is_file() and SHAPES_IMAGES.is_dir()), reason=f"shared model or data not found under {SHARED}"
)

# (parameter, a value that is not valid for it, what the refusal says is valid)
BAD_VALUES = [
    ("confidence_threshold", math.nan, "a finite number in 0..1"),
    ("confidence_threshold", -0.1, "a finite number in 0..1"),
    ("iou_threshold", math.nan, "a finite number in 0..1"),
    ("max_detections", 0, "an integer in 1..10000"),
    ("max_detections", -3, "an integer in 1..10000"),
    ("track_high_threshold", math.inf, "a finite number in 0..1"),
    ("track_match_threshold", math.nan, "a finite number in 0..1"),
    ("track_buffer", -1, "an integer in 0..10000"),
    ("silence_timeout", math.nan, "a finite number >= 0"),
    ("qos_depth", 2**31, "an integer in 1..10000"),
    ("intra_op_threads", 10000, "an integer in 0..256"),
    ("input_transport", "raw2", "one of 'raw', 'compressed'"),
    # sizes and counts: each has an upper bound (issue 31)
    ("max_detections", 10**6, "an integer in 1..10000"),
    ("image_size", 10**5, "an integer in 0..5760"),
    ("track_buffer", 10**9, "an integer in 0..10000"),
    ("reid_batch", 10**6, "an integer in 0..1024"),
    ("reid_input_size", "100000x100000", "WIDTHxHEIGHT of at most 33177600 pixels, or empty"),
    ("reid_input_size", "big", "WIDTHxHEIGHT of at most 33177600 pixels, or empty"),
]


@pytest.fixture
def yolo_node():
    """A yolo node in this process (autostart off: nothing loaded), on its own context."""
    context = rclpy.Context()
    rclpy.init(context=context)
    overrides = [Parameter("autostart", value=False), Parameter("model_path", value=str(SHAPES_MODEL))]
    node = DetectionNode(OnnxRunner, YOLO, context=context, parameter_overrides=overrides)
    yield node
    node.destroy_node()
    rclpy.try_shutdown(context=context)


@pytest.mark.parametrize("name,value,valid", BAD_VALUES)
def test_a_bad_value_set_at_run_time_is_refused_with_its_range(yolo_node, name, value, valid):
    before = yolo_node.get_parameter(name).value
    (result,) = yolo_node.set_parameters([Parameter(name, value=value)])
    assert not result.successful
    assert result.reason == f"{name} must be {valid}, not {value!r}", result.reason
    assert yolo_node.get_parameter(name).value == before  # kept


@needs_shapes
def test_a_good_value_set_at_run_time_is_taken_at_the_next_configure(yolo_node):
    changes = [Parameter("confidence_threshold", value=0.5), Parameter("track_buffer", value=0)]
    results = yolo_node.set_parameters(changes)
    assert all(result.successful for result in results)
    assert yolo_node.trigger_configure() == TransitionCallbackReturn.SUCCESS, yolo_node.failure
    assert yolo_node.confidence == 0.5


def test_the_valid_values_are_described_to_ros(yolo_node):
    """``ros2 param describe`` shows each parameter's valid values."""
    (descriptor,) = yolo_node.describe_parameters(["max_detections"])
    assert isinstance(descriptor, ParameterDescriptor) and descriptor.additional_constraints == "an integer in 1..10000"


def test_every_default_is_valid():
    """The tables agree with themselves: each parameter's default is among its valid values."""
    for spec in NODE_FAMILIES.values():
        for parameter in (*spec.node_parameters, *(p for backend in BACKENDS.values() for p in backend.parameters)):
            assert parameter.check(parameter.default) == parameter.default, parameter


# The numbers that size or count nothing held in memory, and why they need no upper bound.
NOT_SIZES = {
    "max_frame_age": "a time (ms): an older frame is skipped, nothing is kept for it",
    "silence_timeout": "a time (s) before the node warns",
    "flush_timeout": "a time (s) without frames that ends a stream",
    "max_depth": "metres beyond which depth is invalid",
    "max_image_pixels": "the bound on a frame itself; 0 turns it off, the user's choice",
}


def _every_parameter() -> dict:
    """Each parameter of every family (its node's, with the image input and run-time ones), every backend and
    detect_3d_node, by name (a name means one parameter: test_every_default_is_valid's tables agree)."""
    from vision_factory.families.registry import FAMILIES
    from vision_factory.ros.detect_3d_node import PARAMETERS as DETECT_3D

    tables = [spec.node_parameters for spec in FAMILIES.values()]
    tables += [backend.parameters for backend in BACKENDS.values()] + [DETECT_3D]
    return {parameter.name: parameter for table in tables for parameter in table}


def test_every_size_and_count_a_parameter_sets_has_an_upper_bound_refused_beyond_it():
    """Every number (but NOT_SIZES) has a maximum, every WIDTHxHEIGHT size (a text named *_size) a largest number of
    pixels; one beyond is refused naming the parameter and its valid values."""
    parameters = _every_parameter()
    assert set(NOT_SIZES) <= set(parameters)
    for name, parameter in parameters.items():
        if name.endswith("_size") and isinstance(parameter.default, str):
            assert parameter.max_pixels > 0, name
            side = math.isqrt(parameter.max_pixels) + 1
            with pytest.raises(ValueError, match=f"{name} must be WIDTHxHEIGHT of at most {parameter.max_pixels} "):
                parameter.check(f"{side}x{side}")
            assert parameter.check(f"{side - 1}x{side - 1}")
        elif isinstance(parameter.default, int | float) and not isinstance(parameter.default, bool):
            if name in NOT_SIZES:
                continue
            assert parameter.maximum is not None, name
            bound = parameter.maximum
            beyond, shown = (bound + 1, str(bound)) if isinstance(bound, int) else (bound + 0.5, f"{bound:g}")
            with pytest.raises(ValueError, match=f"{name} must be .*\\.\\.{shown}, not {beyond}"):
                parameter.check(beyond)


@pytest.mark.parametrize(
    "text", ["0.3", "1", "-3", "abc", ".nan", "nan", ".inf", "-.inf", "1e-3", "true", "yes", "Off", "'0'", "0x10"]
)
def test_values_are_read_as_ros_reads_them(text):
    """The tools read ``-p NAME:=TEXT`` as rcl does (checked against rcl itself, in a context of our own)."""
    from vision_factory.parameters import ros_scalar

    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "-p", f"value:={text}"], context=context)
    try:
        node = Node("reader", context=context, automatically_declare_parameters_from_overrides=True)
        read = node.get_parameter("value").value
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
    ours = ros_scalar(text)
    assert type(ours) is type(read)
    assert ours == read or (math.isnan(ours) and math.isnan(read))


@needs_shapes
@pytest.mark.parametrize(
    "params,message",
    [
        pytest.param({"max_detections": "-3"}, "max_detections must be an integer in 1..10000, not -3", id="max"),
        pytest.param(
            {"confidence_threshold": ".nan"},
            "confidence_threshold must be a finite number in 0..1, not nan",
            id="nan",
        ),
        pytest.param({"qos_depth": str(2**31)}, f"qos_depth must be an integer in 1..10000, not {2**31}", id="qos"),
        pytest.param(
            {"intra_op_threads": "10000"},
            "intra_op_threads must be an integer in 0..256, not 10000",
            id="threads",
        ),
        pytest.param(
            {"tracking": "true", "track_buffer": "-1"},
            "track_buffer must be an integer in 0..10000, not -1",
            id="buffer",
        ),
        pytest.param(
            {"confidence_threshold": "abc"},
            "confidence_threshold must be a finite number in 0..1, not 'abc'",
            id="text",
        ),
        pytest.param({"confidence_threshold": "1"}, "confidence_threshold 1 is an integer to ROS", id="integer"),
        pytest.param({"labels_path": "{fifo}"}, "is not a regular file", id="fifo"),
        pytest.param({"labels_path": "/dev/zero"}, "labels_path /dev/zero is not a regular file", id="zero"),
    ],
)
def test_a_node_started_with_a_bad_value_says_why_and_exits(tmp_path, params, message):
    fifo = tmp_path / "labels.fifo"
    os.mkfifo(fifo)
    params = {name: value.format(fifo=fifo) for name, value in params.items()}
    node = NodeProcess(tmp_path, {"model_path": str(SHAPES_MODEL), **params}, module=YOLO_NODE)
    try:
        code = node.wait(30)
    finally:
        node.stop()
    log = node.log()
    assert code == 2 and "cannot start: " in log and message in log, log
    assert "Traceback" not in log


def test_a_depth_node_started_with_a_processor_size_beyond_its_bound_says_why_and_exits(tmp_path):
    """It started, and then skipped every frame: the processor's input could not be made."""
    model = Path(__file__).resolve().parent / "data" / "depth" / "depth-anything-relative.onnx"
    params = {"model_path": str(model), "processor_size": "100000x100000"}
    node = NodeProcess(tmp_path, params, module="vision_factory.depth_onnx_node")
    try:
        code = node.wait(30)
    finally:
        node.stop()
    log = node.log()
    message = "processor_size must be WIDTHxHEIGHT of at most 33177600 pixels, or empty, not '100000x100000'"
    assert code == 2 and "cannot start: " in log and message in log and "Traceback" not in log, log


@needs_shapes
@pytest.mark.parametrize(
    "policy, value, says",
    [
        ("depth", "2147483648", "is 2147483648: a history depth is a whole number of messages in 1..10000; give e.g."),
        ("depth", "-1", "is -1: a history depth is a whole number of messages in 1..10000; give e.g."),
        ("depth", "deep", "is 'deep': a history depth is a whole number of messages in 1..10000; give e.g."),
        ("reliability", "bogus", "is 'bogus': a reliability is one of system_default, reliable, best_effort, "),
        ("durability", "3", "is 3: a durability is one of system_default, transient_local, volatile, best_available"),
    ],
    ids=["depth-2^31", "depth-negative", "depth-text", "reliability", "durability-number"],
)
def test_a_node_started_with_a_qos_override_it_cannot_take_names_it_and_exits(tmp_path, policy, value, says):
    """ROS reads a publisher's QoS overrides only as it makes the publisher: depth 2^31 gave a pybind11 dump, -1
    rmw's 'queue size exceeds the DDS type', naming neither parameter nor topic. Refused at start-up, before the
    model loads, naming the parameter, the value, the valid values and the fix."""
    parameter = f"qos_overrides./t/detections.publisher.{policy}"
    node = NodeProcess(tmp_path, {"model_path": str(SHAPES_MODEL), parameter: value}, module=YOLO_NODE)
    try:
        code = node.wait(30)
    finally:
        node.stop()
    log = node.log()
    assert code == 2 and f"cannot start: {parameter} {says}" in log, log
    assert f"give e.g. -p {parameter}:=" in log, log
    assert not any(word in log for word in ("Traceback", "pybind11", "incompatible", "rmw", "ONNX Runtime")), log


@needs_shapes
def test_a_node_names_the_parameters_it_does_not_have_with_the_closest(tmp_path):
    """Refused over the parameter service too, with the reason; a misspelt start-up parameter is named once."""
    params = {"autostart": "false", "model_path": str(SHAPES_MODEL), "confidence_treshold": "0.3"}
    node = NodeProcess(tmp_path, params, module=YOLO_NODE)
    probe = Probe()
    try:
        client = AsyncParameterClient(probe.node, "/t/yolo")
        assert probe.spin_until(client.services_are_ready, PATIENCE_S), node.log()
        (result,) = probe.answer(
            lambda: client.set_parameters([Parameter("confidence_threshold", value=math.nan)])
        ).results
        assert not result.successful
        assert result.reason == "confidence_threshold must be a finite number in 0..1, not nan"
    finally:
        probe.close()
        node.stop()
    log = node.log()
    warning = "ignoring parameters yolo does not have: confidence_treshold (did you mean confidence_threshold?)"
    assert log.count(warning) == 1, log


def _bag(tmp_path, count: int = 2):
    frames = [cv2.imread(str(path)) for path in sorted(SHAPES_IMAGES.glob("*.jpg"))[:count]]
    return write_image_bag(tmp_path / "bag", frames, fps=10, frame_id="camera")


@needs_shapes
@pytest.mark.parametrize(
    "param,message",
    [
        ("max_detections:=-3", "max_detections must be an integer in 1..10000, not -3"),
        ("confidence_treshold:=0.3", "the yolo node has no parameter confidence_treshold (did you mean "),
        ("confidence_threshold:=abc", "confidence_threshold must be a finite number in 0..1, not 'abc'"),
        ("confidence_threshold:=1", "write 1.0"),
    ],
)
def test_verify_refuses_a_bad_or_misspelt_parameter_before_running(tmp_path, param, message):
    bag = _bag(tmp_path)
    command = ["verify", str(bag), "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--out", str(tmp_path / "v")]
    result = CliRunner().invoke(main, [*command, "-p", param])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "v").exists()  # refused before anything ran


@needs_shapes
@pytest.mark.parametrize(
    "param,message",
    [
        ("max_detections:=-3", "max_detections must be an integer in 1..10000, not -3"),
        ("confidence_treshold:=0.3", "the yolo node has no parameter confidence_treshold (did you mean "),
    ],
)
def test_replay_refuses_a_bad_or_misspelt_parameter_before_running(tmp_path, param, message):
    bag = _bag(tmp_path)
    command = ["replay", str(bag), "--node", "yolo", "--out", str(tmp_path / "r"), "-p", f"model_path:={SHAPES_MODEL}"]
    result = CliRunner().invoke(main, [*command, "-p", param])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "r").exists()


@needs_shapes
def test_replay_passes_parameters_without_a_false_remap_warning(tmp_path):
    """-p NAME:=VALUE where both sides look like ROS names (classes:=circle) once made rcl warn of a 'deprecated
    remap rule' in the replaying process; the node takes the value (text that looks like a number stays text)."""
    bag = _bag(tmp_path)
    code = "import sys; from vision_factory.cli import main; sys.exit(main())"
    command = [sys.executable, "-c", code, "replay", str(bag), "--node", "yolo", "--out", str(tmp_path / "r")]
    params = ["-p", f"model_path:={SHAPES_MODEL}", "-p", "classes:=circle", "-p", "labels_path:=''"]
    started = time.monotonic()
    result = subprocess.run([*command, *params], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr + f" ({time.monotonic() - started:.0f} s)"
    assert "remap rule" not in result.stderr + result.stdout, result.stderr
    log = (tmp_path / "r" / "yolo_node.log").read_text()
    assert "frames in 2, dropped 0, skipped 0, outputs 2" in log and "ignoring parameters" not in log, log


def test_a_labels_file_is_read_within_its_bound(tmp_path):
    from vision_factory.families.detection import MAX_LABELS_BYTES, read_labels

    labels = tmp_path / "labels.txt"
    labels.write_text("circle\n\nsquare\n")
    assert read_labels(str(labels)) == ["circle", "square"]
    labels.write_bytes(b"x\n" * (MAX_LABELS_BYTES // 2 + 1))
    with pytest.raises(ValueError, match=f"is larger than {MAX_LABELS_BYTES} bytes"):
        read_labels(str(labels))
    labels.write_bytes(b"\xff\xfe circle\n")
    with pytest.raises(ValueError, match="is not UTF-8 text"):
        read_labels(str(labels))


@needs_shapes
@pytest.mark.parametrize(
    "command,message",
    [
        (["predict", "--conf", "nan"], "confidence_threshold must be a finite number in 0..1, not nan"),
        (["predict", "--max-det", "0"], "max_detections must be an integer in 1..10000, not 0"),
        (["predict", "--iou", "1.5"], "iou_threshold must be a finite number in 0..1, not 1.5"),
        (["track", "--track-match-threshold", "nan"], "track_match_threshold must be a finite number in 0..1, not nan"),
    ],
)
def test_the_tools_refuse_what_the_node_refuses(tmp_path, command, message):
    """predict and track take the node's parameters through the same table: the same values are refused."""
    image = str(sorted(SHAPES_IMAGES.glob("*.jpg"))[0])
    model = ["--model-type", "yolo", "--model", str(SHAPES_MODEL), image]
    out = ["--out", str(tmp_path / "t")] if command[0] == "track" else []
    result = CliRunner().invoke(main, [*command, *model, *out])
    assert result.exit_code != 0 and message in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
