"""Several hosts from one hosts file (ros/hosts_launch.py, launch/multicamera_hosts.launch.py): the file's groups
read and refused as they should be, and two hosts stood in for on this machine by two ROS domains, each host's
multi-camera node answering its own cameras only, neither seeing the other."""

from __future__ import annotations

import os
from functools import partial

import numpy as np
import pytest
import yaml
from conftest import ROOT
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from support.models import SHAPES_MODEL
from support.ros_harness import PATIENCE_S, NodeProcess, Probe, late_node_params
from vision_msgs.msg import Detection2DArray

from vision_factory.families.registry import NODE_FAMILIES
from vision_factory.ros.hosts_launch import (
    HostNode,
    HostNodeError,
    HostsFileError,
    host_node,
    load_hosts,
    node_families,
    parse_hosts,
    this_host,
)
from vision_factory.ros.messages import bgr_to_message

EXAMPLE = """
hosts:
  front_pc:
    family: yolo
    namespace: robot/front
    cameras: [front, left]
    domain_id: 11
    parameters:
      model_path: /models/shapes.onnx
      confidence_threshold: 0.4
  rear_pc:
    family: tracknet
    namespace: robot/rear
    cameras: rear
    parameters: {model_path: "0123"}
"""


def test_each_host_group_is_its_node(tmp_path):
    """A group gives its node's executable, namespace, cameras (a parameter of the node), parameters as written
    (text stays text) and its ROS_DOMAIN_ID; without domain_id, the launching shell's."""
    path = tmp_path / "hosts.yaml"
    path.write_text(EXAMPLE)
    groups = load_hosts(path)
    assert list(groups) == ["front_pc", "rear_pc"]
    front = host_node(groups, "front_pc")
    assert (front.executable, front.namespace, front.cameras) == ("yolo_node", "robot/front", ("front", "left"))
    assert front.node_parameters == {
        "model_path": "/models/shapes.onnx",
        "confidence_threshold": 0.4,
        "cameras": ["front", "left"],
    }
    assert front.environment == {"ROS_DOMAIN_ID": "11"}
    rear = host_node(groups, "rear_pc")
    assert (rear.executable, rear.cameras, rear.environment) == ("tracknet_node", ("rear",), {})
    assert rear.node_parameters["model_path"] == "0123"
    assert this_host() and "." not in this_host()
    assert set(node_families()) == set(NODE_FAMILIES)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("hosts: []", "no 'hosts:' mapping"),
        ("- a", "no 'hosts:' mapping"),
        ("hosts: {a: {family: yolo, cameras: [x], gpu: 1}}", "unknown keys gpu"),
        ("hosts: {a: {family: reid, cameras: [x]}}", "family 'reid' has no node"),
        ("hosts: {a: {family: yolo, cameras: [x], namespace: 'a b'}}", "is not a ROS namespace"),
        ("hosts: {a: {family: yolo, cameras: ['1x']}}", "is not a relative ROS topic name"),
        ("hosts: {a: {family: yolo}}", "lists no cameras"),
        ("hosts: {a: {family: yolo, cameras: [x], domain_id: 300}}", "is no ROS domain"),
        ("hosts: {a: {family: yolo, cameras: [x], domain_id: true}}", "is no ROS domain"),
        ("hosts: {a: {family: yolo, cameras: [x], parameters: [1]}}", "parameters is not a mapping"),
        ("hosts: {a: {family: yolo, cameras: [x], parameters: {cameras: [y]}}}", "move it out of parameters"),
    ],
)
def test_a_hosts_file_that_cannot_be_used_says_why(text, says):
    with pytest.raises(HostsFileError, match=says):
        parse_hosts(yaml.safe_load(text))


def test_an_unknown_host_or_an_unreadable_file_names_the_fix(tmp_path):
    path = tmp_path / "hosts.yaml"
    path.write_text(EXAMPLE)
    with pytest.raises(HostsFileError, match="give host:= one of front_pc, rear_pc"):
        host_node(load_hosts(path), "side\x1b[2J")
    with pytest.raises(HostsFileError, match="cannot read the hosts file"):
        load_hosts(tmp_path / "absent.yaml")
    (tmp_path / "bad.yaml").write_text("hosts: [")
    with pytest.raises(HostsFileError, match="is not YAML"):
        load_hosts(tmp_path / "bad.yaml")


@pytest.mark.parametrize(
    "text, says",
    [
        ("hosts: " + "[" * 5000 + "]" * 5000, "nests deeper than a YAML reader can follow"),
        ("hosts: {a: {family: yolo, cameras: [x], parameters: {p: " + "[" * 40 + "]" * 40 + "}}}", "nests 44 levels"),
        ("hosts: {a: {family: yolo, cameras: [x], parameters: {p: &l [1, *l]}}}", "refers to itself"),
    ],
    ids=["lists-past-the-reader", "parameters-past-the-limit", "alias-inside-itself"],
)
def test_a_hosts_file_nested_too_deep_is_refused_by_name(tmp_path, text, says):
    """Deeply nested lists made RecursionError escape load_hosts, and ros2 launch named no file; a file whose
    nesting Python reads is refused past MAX_HOSTS_DEPTH too (launch_ros walks parameters recursively)."""
    path = tmp_path / "deep\nhosts.yaml"
    path.write_text(text)
    with pytest.raises(HostsFileError) as refused:
        load_hosts(path)
    message = str(refused.value)
    assert message.startswith(f"hosts file {tmp_path}/deep\\nhosts.yaml {says}"), message
    assert "nests at most 16 levels" in message


def test_a_hosts_file_of_shared_aliases_is_measured_once_per_list():
    """A mapping that names one list a thousand times through aliases (and lists of such lists) is measured in
    linear time, its depth that of its deepest path."""
    from vision_factory.ros.hosts_launch import nesting

    document = yaml.safe_load(
        "a: &a [[1]]\nb: &b [" + ", ".join(["*a"] * 1000) + "]\nc: [" + ", ".join(["*b"] * 1000) + "]"
    )
    assert nesting(document) == 5  # the root, c, b, a and [1]
    assert nesting(yaml.safe_load(EXAMPLE)) == 4 and nesting(7) == 0


def test_a_host_node_that_ended_with_an_error_is_named_with_its_exit_code():
    """What the launch file raises (ros2 launch then fails) when the host's node ends on its own with an error (run for
    real in test_launch.py, where ROS launch is installed): the host, escaped, and the node's exit code."""
    error = HostNodeError(HostNode("front_pc", "yolo", "robot/front", ("front",)), 2)
    assert str(error).startswith("the yolo node of host 'front_pc' ended with exit code 2: its log above says why")
    assert error.returncode == 2
    assert "\x1b" not in str(HostNodeError(HostNode("side\x1b[2J", "yolo", "robot/side", ("front",)), -11))


def test_the_launch_file_imports_no_launch_at_its_top_level():
    """The hosts launch file starts what host_node says (imported without ROS launch, as ros2 launch imports it)."""
    text = (ROOT / "launch" / "multicamera_hosts.launch.py").read_text()
    assert "host_node(load_hosts(" in text
    assert not [line for line in text.splitlines() if line.startswith(("import launch", "from launch"))]


def _frame(camera: str, index: int) -> Image:
    frame = np.full((240, 320, 3), 40 * index % 255, np.uint8)
    header = Header(frame_id=f"{camera}_optical")
    header.stamp.sec = 100 + index
    return bgr_to_message(frame, header)


def _matched(probe: Probe, publishers: list, answer_topics: list[str]) -> bool:
    """Whether the node takes ``publishers``' frames and publishes each of ``answer_topics`` in the probe's domain."""
    return all(p.get_subscription_count() > 0 for p in publishers) and all(
        probe.node.count_publishers(topic) > 0 for topic in answer_topics
    )


def _answered(answers: dict[str, list], count: int) -> bool:
    return all(len(messages) >= count for messages in answers.values())


def test_two_hosts_in_two_domains_answer_their_own_cameras_only(tmp_path, second_domain):
    """One hosts file, two groups in two ROS domains on this machine (two hosts' stand-ins): each group's node,
    started as the launch file starts it (its parameters, namespace and ROS_DOMAIN_ID), answers its own cameras in
    its own domain; a frame on the other host's topics or on a camera it does not serve gets no answer there, and
    neither domain's graph holds the other host's node."""
    domains = {"host_a": int(os.environ["ROS_DOMAIN_ID"]), "host_b": second_domain}
    hosts = {
        "hosts": {
            "host_a": {"family": "yolo", "namespace": "robot/a", "cameras": ["front", "left"]},
            "host_b": {"family": "yolo", "namespace": "robot/b", "cameras": ["rear"]},
        }
    }
    for name, group in hosts["hosts"].items():
        group["domain_id"] = domains[name]
        group["parameters"] = {"model_path": str(SHAPES_MODEL), "qos_reliability": "reliable", "queue_size": 8}
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump(hosts))
    groups = load_hosts(path)
    nodes, probes, answers, strays, publishers = {}, {}, {}, {}, {}
    try:
        for name in groups:
            node = host_node(groups, name)
            namespace = f"/{node.namespace}"
            params_file = tmp_path / f"{name}.params.yaml"
            params_file.write_text(yaml.safe_dump({"/**": {"ros__parameters": node.node_parameters}}))
            late = late_node_params([f"{namespace}/{camera}/detections" for camera in node.cameras])
            log_dir = tmp_path / name
            log_dir.mkdir()
            nodes[name] = NodeProcess(
                log_dir,
                late,
                params_file=params_file,
                namespace=namespace,
                module=f"vision_factory.{node.family}_onnx_node",
                env=node.environment,
            )
            probes[name] = Probe(f"probe_{name}", domain_id=domains[name])
        for name, probe in probes.items():
            own = groups[name]
            answers[name] = {
                camera: probe.subscribe(Detection2DArray, f"/{own.namespace}/{camera}/detections", late=True)
                for camera in own.cameras
            }
            other = groups["host_b" if name == "host_a" else "host_a"]
            # Topics nobody in this domain serves: the other host's camera, and that camera under this host's name.
            stray_topics = [f"/{other.namespace}/{other.cameras[0]}", f"/{own.namespace}/{other.cameras[0]}"]
            strays[name] = [probe.subscribe(Detection2DArray, f"{topic}/detections") for topic in stray_topics]
            publishers[name] = {
                topic: probe.publisher(Image, f"{topic}/image")
                for topic in [*(f"/{own.namespace}/{camera}" for camera in own.cameras), *stray_topics]
            }
        for name, probe in probes.items():
            mine = [publishers[name][f"/{groups[name].namespace}/{camera}"] for camera in groups[name].cameras]
            topics = [f"/{groups[name].namespace}/{camera}/detections" for camera in groups[name].cameras]
            assert probe.spin_until(partial(_matched, probe, mine, topics), PATIENCE_S), nodes[name].log()
        for index in range(3):
            for name in probes:
                for topic, publisher in publishers[name].items():
                    publisher.publish(_frame(topic.rsplit("/", 1)[-1], index))
        for name, probe in probes.items():
            got = answers[name]
            done = probe.spin_until(partial(_answered, got, 3), PATIENCE_S)
            assert done, (nodes[name].log(), {camera: len(messages) for camera, messages in got.items()})
        for name, probe in probes.items():
            probe.spin_until(lambda: False, 1.0)  # a stray answer, had there been one, has had its time
            seen = set(probe.node.get_node_names_and_namespaces())
            assert ("yolo", f"/{groups[name].namespace}") in seen, seen
            other = "host_b" if name == "host_a" else "host_a"
            assert ("yolo", f"/{groups[other].namespace}") not in seen, seen
    finally:
        for probe in probes.values():
            probe.close()
        for node in nodes.values():
            node.stop()
    for name in groups:
        for camera, got in answers[name].items():
            assert sorted(m.header.stamp.sec for m in got) == [100, 101, 102]
            assert {m.header.frame_id for m in got} == {f"{camera}_optical"}
        assert all(not stray for stray in strays[name]), name
