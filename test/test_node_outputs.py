"""What each node publishes is what `vision-factory models` and its generated package's README say it publishes:
the topics (and their types) a real running node advertises over DDS, read by another participant with
get_publisher_names_and_types_by_node, against those two texts. The nodes run in this process, each in its own
ROS context, with every optional output on (tracking: true)."""

from __future__ import annotations

import gc
import importlib
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SHARED
from rclpy.node import NodeNameNonExistentError
from rclpy.parameter import Parameter
from support.models import spot_finder, wrap_yolo
from support.real_models import POSE_MODEL
from support.ros_harness import PATIENCE_S, Probe

from vision_factory.cli import main
from vision_factory.families.registry import NODE_FAMILIES
from vision_factory.generator.package import package_files
from vision_factory.ros.inference_node import InferenceNode
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.synthetic import build_tracknet_model

NAMESPACE = "/described"
SHAPES_MODEL = SHARED / "models" / "shapes-yolov8n.onnx"
TEST_DATA = Path(__file__).resolve().parent / "data"
# What rclpy itself publishes for every (lifecycle) node, described by ROS, not by us.
ROS_OWN = {"/rosout", "/parameter_events", "{node}/transition_event"}


def _parameters(tmp_path) -> dict[str, dict]:
    """Each node family's parameters for a node publishing all it can: a model of its family, tracking on."""
    tracking = {"tracking": True}
    return {
        "tracknet": {"model_path": str(build_tracknet_model(tmp_path / "tracknet.onnx", 8, "subtract"))},
        "yolo": {"model_path": str(SHAPES_MODEL), **tracking},
        "yolo_pose": {"model_path": str(POSE_MODEL), **tracking},
        "fasterrcnn": {"model_path": str(wrap_yolo(tmp_path / "wrapped.onnx", "tflite")), **tracking},
        "rtmpose": {"model_path": str(spot_finder(tmp_path / "spot.onnx")), "person_source": "topic"},
        "track": {},
        "depth": {"model_path": str(TEST_DATA / "depth" / "depth-anything-relative.onnx")},
        "detr": {"model_path": str(TEST_DATA / "detr_heads" / "rtdetr-hf.onnx"), **tracking},
        "open_vocab": {"model_path": str(TEST_DATA / "open_vocab" / "owl" / "owlv2.onnx"), "prompt": "a flag"},
        "sam": {"model_path": str(TEST_DATA / "sam" / "meta-encoder.onnx")},
        "yolo_cls": {"model_path": str(TEST_DATA / "yolo_tasks" / "yolo11n-cls.onnx")},
        "florence2": {"model_path": str(TEST_DATA / "florence2"), "prompt": "<OD>", "max_new_tokens": 8},
    }


def _node_class(module: str) -> type[InferenceNode]:
    found = vars(importlib.import_module(f"vision_factory.ros.{module}")).values()
    return next(v for v in found if isinstance(v, type) and issubclass(v, InferenceNode) and v is not InferenceNode)


def _described(line: str) -> tuple[list[str], str]:
    """'a, b (pkg/Type, what it is)' -> (['a', 'b'], 'pkg/msg/Type')."""
    names, _, rest = line.partition(" (")
    kind = re.match(r"([a-z_]+)/([A-Za-z0-9]+)", rest)
    assert kind, line
    return names.split(", "), f"{kind[1]}/msg/{kind[2]}"


def _models_outputs() -> dict[str, list[str]]:
    """`vision-factory models`: each family's 'out:' lines."""
    result = CliRunner().invoke(main, ["models"])
    assert result.exit_code == 0, result.output
    outputs: dict[str, list[str]] = {}
    for line in result.output.splitlines():
        if not line.startswith(" "):
            family = line.split(":")[0]
        elif line.strip().startswith("out:"):
            outputs.setdefault(family, []).append(line.strip().removeprefix("out:").strip())
    return outputs


def _readme_outputs(name: str) -> list[str]:
    """The generated package's README: its Topics section's '- out:' items (continued lines joined)."""
    readme = package_files(name, "onnx", "described_pkg")["README.md"]
    section = readme.split("## Topics\n", 1)[1].split("\n## ", 1)[0]
    items: list[str] = []
    for line in section.splitlines():
        if line.startswith("- "):
            items.append(line)
        elif line.startswith("  ") and items:
            items[-1] += " " + line.strip()
    return [item.removeprefix("- out:").strip() for item in items if item.startswith("- out:")]


def _resolved(topic: str, node: str) -> str:
    if topic.startswith("~/"):
        return f"{NAMESPACE}/{node}/{topic[2:]}"
    return topic if topic.startswith("/") else f"{NAMESPACE}/{topic}"


def _advertised(probe: Probe, node: str) -> dict[str, str]:
    try:
        found = probe.node.get_publisher_names_and_types_by_node(node, NAMESPACE)
    except NodeNameNonExistentError:  # not discovered yet
        return {}
    own = {topic.format(node=f"{NAMESPACE}/{node}") for topic in ROS_OWN}
    return {topic: ",".join(types) for topic, types in found if topic not in own}


def _destroy(started: list) -> None:
    """The in-process nodes and their contexts destroyed, and collected (reference cycles), so that their DDS
    participants end now: later tests of this process see no /described nodes (seen: `param list yolo` found
    /described/yolo beside the test's /t/yolo)."""
    for node, context in started:
        node.destroy_node()
        context.try_shutdown()
        context.destroy()
    started.clear()
    gc.collect()


def test_every_node_advertises_what_models_and_its_readme_describe(tmp_path, second_domain):
    """The track markers of a tracking detector were published but described nowhere (issue 22). The nodes run in
    this process on a domain of their own: a participant of theirs that outlives its test would otherwise show their
    names to later tests (seen: `param list yolo` found /described/yolo beside the node tools' /t/yolo)."""
    for path in (SHAPES_MODEL, POSE_MODEL):
        if not path.is_file():
            pytest.skip(f"{path} is not there (shared models)")
    parameters = _parameters(tmp_path)
    assert set(parameters) == set(NODE_FAMILIES)  # every family with a node is checked
    described_by_models = _models_outputs()
    import rclpy

    probe, started = Probe("outputs_probe", domain_id=second_domain), []
    try:
        expected: dict[str, dict[str, str]] = {}
        for name, spec in NODE_FAMILIES.items():
            readme = _readme_outputs(name)
            for line in described_by_models[name]:
                assert line in readme, (name, line)  # the family's own outputs, as `models` says them
            readme_topics: dict[str, str] = {}
            for line in readme:
                names, kind = _described(line)
                readme_topics |= {_resolved(topic, name): kind for topic in names}
            models_topics = {_resolved(_described(line)[0][0], name) for line in described_by_models[name]}
            assert models_topics <= set(readme_topics), name
            expected[name] = readme_topics

            context = rclpy.Context()
            rclpy.init(context=context, domain_id=second_domain)
            overrides = [Parameter(key, value=value) for key, value in parameters[name].items()]
            node = _node_class(spec.node_module)(
                OnnxRunner, spec, context=context, namespace=NAMESPACE, parameter_overrides=overrides
            )
            started.append((node, context))
        for name in NODE_FAMILIES:
            probe.spin_until(lambda name=name: _advertised(probe, name) == expected[name], PATIENCE_S)
            assert _advertised(probe, name) == expected[name], name
            # `models` names every topic of the node but the monitor's, which every node has (~/debug/, /diagnostics)
            own = {topic for topic in _advertised(probe, name) if not topic.startswith(f"{NAMESPACE}/{name}/debug/")}
            own -= {"/diagnostics"}
            models_topics = {_resolved(_described(line)[0][0], name) for line in described_by_models[name]}
            assert own == models_topics, name
    finally:
        probe.close()
        node = None  # the last node's reference
        _destroy(started)


def test_an_output_kept_for_late_readers_reaches_a_reader_that_subscribes_after_it_was_published(tmp_path):
    """ROS's QoS overrides on a node's output (here transient local, as replay asks for): answers published while no
    reader was there reach one that subscribes afterwards, and the node does not call the overrides unknown."""
    import numpy as np
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header
    from support.nodes import YOLO, _latest
    from support.ros_harness import NodeProcess, late_node_params
    from vision_msgs.msg import Detection2DArray

    from vision_factory.ros.messages import bgr_to_message

    params = {"model_path": str(SHAPES_MODEL), "qos_reliability": "reliable", "queue_size": "8"}
    node = NodeProcess(tmp_path, {**params, **late_node_params(["/t/detections"])}, module=YOLO)
    probe = Probe()
    try:
        diagnostics = probe.subscribe(DiagnosticArray, "/diagnostics")
        publisher = probe.publisher(Image, "/t/image")
        assert probe.spin_until(lambda: publisher.get_subscription_count() > 0, PATIENCE_S), node.log()
        stamps = []
        for index in range(3):
            header = Header(frame_id="camera")
            header.stamp.sec = 100 + index
            stamps.append(100 + index)
            publisher.publish(bgr_to_message(np.full((64, 64, 3), 30 * index, np.uint8), header))

        def answered() -> bool:
            status = _latest(diagnostics, "yolo: inference")
            return status is not None and {v.key: v.value for v in status.values}["frames answered"] == "3"

        assert probe.spin_until(answered, PATIENCE_S), node.log()
        answers = probe.subscribe(Detection2DArray, "/t/detections", late=True)  # only now
        assert probe.spin_until(lambda: len(answers) == 3, PATIENCE_S), node.log()
        assert [answer.header.stamp.sec for answer in answers] == stamps
    finally:
        probe.close()
        node.stop()
    assert "ignoring parameters" not in node.log()
