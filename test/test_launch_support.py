"""ros/launch_description.py without launch or launch_ros: the launch files' arguments, the typing of their values,
the Fast DDS profile rule and which node action autostart picks. (test_launch.py runs the same code under the real
`ros2 launch` where launch_ros is installed.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from support.launch import launch_of

from vision_factory.families.registry import NODE_FAMILIES, family
from vision_factory.generator.package import package_files
from vision_factory.ros.launch_description import (
    PROFILE_VARIABLE,
    LaunchArgumentError,
    NodeLaunch,
    profile_to_export,
    typed_value,
)
from vision_factory.runtime.onnx_runner import OnnxRunner

SHARE = "/opt/ros/share/vision_factory"


def top_level_imports(path: Path) -> list[str]:
    """The modules ``path`` imports when it is imported (not inside a function, nor for type checking only)."""
    found = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom):
            found.append(node.module or "")
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found


def defaults(launch: NodeLaunch) -> dict[str, str | None]:
    return {argument.name: argument.default for argument in launch.arguments(SHARE)}


def test_launch_files_are_thin_and_import_no_launch():
    """Each checked-in launch file is its docstring, three imports of this package and one NodeLaunch; neither it
    nor the module imports launch or launch_ros at its top level (they come when the description is built)."""
    for name in NODE_FAMILIES:
        path = ROOT / "launch" / f"{name}_onnx.launch.py"
        assert len(path.read_text().splitlines()) < 60, path
        assert all(module.startswith("vision_factory.") for module in top_level_imports(path)), path
        launch = launch_of(path)
        assert (launch.family, launch.runner, launch.package) == (family(name), OnnxRunner, "vision_factory")
        assert (launch.executable, launch.config_file) == (f"{name}_node", f"{name}_onnx.yaml")
    module = top_level_imports(ROOT / "vision_factory" / "ros" / "launch_description.py")
    assert module and not {name.split(".")[0] for name in module} & {"launch", "launch_ros", "ament_index_python"}


def test_tracknet_arguments_and_their_defaults():
    """What --show-args lists for tracknet_onnx.launch.py: the parameter arguments with the config file's defaults
    (booleans as ROS writes them, model_path required), then the launch file's own, file defaults under share/."""
    launch = launch_of(ROOT / "launch" / "tracknet_onnx.launch.py")
    config = yaml.safe_load((ROOT / "config" / "tracknet_onnx.yaml").read_text())["/**"]["ros__parameters"]
    found = defaults(launch)
    own = {
        "image_topic": "/camera/image_raw",
        "namespace": "",
        "params_file": f"{SHARE}/config/tracknet_onnx.yaml",
        "fastdds_profile": f"{SHARE}/config/fastdds_node.xml",
    }
    assert list(found)[-4:] == list(own) and {name: found.pop(name) for name in own} == own
    assert found.pop("model_path") is None
    assert found["autostart"] == "true" and found["seq_len"] == "8"
    expected = {
        name: str(config[name]).lower() if isinstance(config[name], bool) else str(config[name]) for name in found
    }
    assert found == expected
    parameters = {"seq_len", "bg_mode", "stride", "median_warmup", "inpaint_model_path", "input_transport"}
    assert set(found) == parameters | {"autostart", "execution_provider"}


@pytest.mark.parametrize(
    ("value_type", "text", "value"),
    [
        (str, "123", "123"),  # a numeric model path stays a string
        (str, "", ""),
        (str, "tensorrt,cuda,cpu", "tensorrt,cuda,cpu"),
        (int, "12", 12),
        (int, "-3", -3),
        (int, str(-(2**63)), -(2**63)),
        (float, "0.5", 0.5),
        (float, "1", 1.0),
        (bool, "true", True),
        (bool, "False", False),
    ],
)
def test_typed_values(value_type, text, value):
    typed = typed_value("x", text, value_type)
    assert typed == value and type(typed) is value_type


@pytest.mark.parametrize(
    ("value_type", "text", "message"),
    [
        (int, "8.0", "seq_len:='8.0' is not a whole number: give digits, e.g. seq_len:=8"),
        (int, "", "seq_len:='' is not a whole number"),
        (int, "9" * 5000, "is out of a ROS integer's range (64 bits): give a smaller one"),
        (int, str(2**63), "is out of a ROS integer's range"),
        (float, "fast", "seq_len:='fast' is not a finite number: give one, e.g. seq_len:=0.5"),
        (float, "nan", "is not a finite number"),
        (bool, "yes", "seq_len:='yes' is not a boolean: give seq_len:=true or seq_len:=false"),
        (int, "1\x1b[2J\n" + "9" * 500, r"seq_len:='1\\x1b[2J\\n999"),  # escaped, one line, cut
    ],
)
def test_a_value_its_type_cannot_take_is_a_clear_error(value_type, text, message):
    with pytest.raises(LaunchArgumentError) as raised:
        typed_value("seq_len", text, value_type)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value) and "\x1b" not in str(raised.value) and len(str(raised.value)) < 400


def test_the_fastdds_profile_rule():
    """Given: exported. Not given (the default, the node profile): a transport chosen in the environment is kept
    (either profile variable, or Fast DDS's builtin transports: the node's own rule), else the default is exported.
    '': left alone."""
    default, mine = f"{SHARE}/config/fastdds_node.xml", "/etc/my_profile.xml"
    assert profile_to_export(default, default, {}) == default
    assert profile_to_export(default, default, {PROFILE_VARIABLE: mine}) is None
    for chosen in ({"FASTRTPS_DEFAULT_PROFILES_FILE": mine}, {"FASTDDS_BUILTIN_TRANSPORTS": "LARGE_DATA"}):
        assert profile_to_export(default, default, chosen) is None, chosen
    assert profile_to_export(default, default, {PROFILE_VARIABLE: ""}) is None  # set to '': Fast DDS defaults
    assert profile_to_export("/etc/other.xml", default, {PROFILE_VARIABLE: mine}) == "/etc/other.xml"
    assert (
        profile_to_export("", default, {}) is None and profile_to_export("", default, {PROFILE_VARIABLE: mine}) is None
    )


def test_node_start_from_the_launch_configuration():
    """The launch configuration's values (strings) -> the node to start: typed overrides, remappings of the image
    topic (raw and compressed) and of the family's other inputs, the namespace, and LifecycleNode for
    autostart:=false."""
    launch = launch_of(ROOT / "launch" / "rtmpose_onnx.launch.py")
    values = {name: default for name, default in defaults(launch).items() if default is not None}
    values.update(model_path="007", confidence_threshold="0.4", image_topic="/cam1/image", namespace="cam1")
    values["person_detections_topic"] = "/people"
    start = launch.node_start(values)
    assert not start.lifecycle
    assert (start.namespace, start.params_file) == ("cam1", f"{SHARE}/config/rtmpose_onnx.yaml")
    assert start.overrides == {
        "model_path": "007",
        "person_source": "detector",
        "person_detector_path": "",
        "confidence_threshold": 0.4,
        "input_transport": "raw",
        "autostart": True,
        "execution_provider": "cpu",
    }
    assert start.remappings == [
        ("image", "/cam1/image"),
        ("image/compressed", "/cam1/image/compressed"),
        ("person_detections", "/people"),
    ]
    assert launch.node_start({**values, "autostart": "false"}).lifecycle
    with pytest.raises(LaunchArgumentError, match="confidence_threshold:='high' is not a finite number"):
        launch.node_start({**values, "confidence_threshold": "high"})
    # Every override is a parameter of the node's config file.
    config = yaml.safe_load((ROOT / "config" / "rtmpose_onnx.yaml").read_text())["/**"]["ros__parameters"]
    assert set(start.overrides) <= set(config)


@pytest.mark.parametrize("backend", ["onnx", "openvino", "tensorrt"])
def test_a_generated_launch_file_runs_its_own_packages_module(backend):
    """A generated package carries ros/launch_description.py byte for byte, and its launch file imports it, its
    family and its runner from the package itself, never from vision_factory."""
    files = package_files("tracknet", backend, "court")
    source = files[f"launch/tracknet_{backend}.launch.py"]
    assert files["court/ros/launch_description.py"] == (ROOT / "vision_factory/ros/launch_description.py").read_bytes()
    imported = [node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)]
    assert imported and all(module.startswith("court.") for module in imported), imported
    assert "vision_factory" not in source.split('"""')[2]  # the code, past the docstring
    assert f"court/{imported[2].removeprefix('court.').replace('.', '/')}.py" in files
    call = next(node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call))
    keywords = {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords}
    assert keywords == {"package": "court", "executable": "court_node", "config_file": f"tracknet_{backend}.yaml"}
