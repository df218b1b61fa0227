"""vision-factory generate: renders, lints, installs and runs for real.

Generated packages are installed as colcon lays them out (lib/<pkg>/<exe>, share/<pkg>, the
ament index marker), their nodes run as their own processes over real DDS, and their outputs
are compared with this package's own node on the same bag.
"""

from __future__ import annotations

import ast
import configparser
import contextlib
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import cv2
import pytest
import yaml
from click.testing import CliRunner
from conftest import ROOT
from support.generated import generate_and_install, install_like_colcon, site_packages
from support.ros_harness import PATIENCE_S, Lifecycle, NodeProcess, Probe

from vision_factory.cli import main
from vision_factory.families.registry import NODE_FAMILIES
from vision_factory.generator.package import (
    MAX_PACKAGE_NAME,
    NO_WHEEL,
    SOURCE_ROOT,
    copied_modules,
    own_files,
    package_files,
)
from vision_factory.generator.writing import write_package
from vision_factory.runtime.backends import BACKENDS
from vision_factory.tools.bags import read_ball_csv, write_image_bag
from vision_factory.tools.replay import replay
from vision_factory.tools.synthetic import BallClip

COMBINATIONS = [(family, backend) for family in NODE_FAMILIES for backend in BACKENDS]
RUNTIME_MODULES = {"onnx": "onnxruntime", "openvino": "openvino", "tensorrt": "tensorrt"}
# The OpenVINO node (f32) may differ from ONNX Runtime's by float rounding in the heatmaps: the same
# visibility on every frame and positions within this many pixels.
OPENVINO_TOLERANCE_PX = 1
# System (non-ROS-package) rosdep keys that ros/rosdistro defines, as read from its rosdep/python.yaml of
# August 2026; any other python3-* key must be defined by rosdep/vision_factory.yaml.
ROSDISTRO_PYTHON_KEYS = {
    "python3-numpy",
    "python3-opencv",
    "python3-click",
    "python3-jinja2",
    "python3-matplotlib",
    "python3-pil",
    "python3-scipy",
    "python3-yaml",
    "python3-pytest",
    "python3-onnxruntime-pip",
    "python3-onnxruntime-gpu-pip",
}


def _imported_modules(folder: Path) -> set[str]:
    """Top-level names of every absolute import in the Python files under ``folder``."""
    names = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def test_own_files_are_renders_of_the_templates():
    for path, template, content in own_files():
        assert (ROOT / path).read_text() == content, (
            f"{path} differs from templates/{template}: run `python -m vision_factory.generator`"
        )


@pytest.mark.parametrize("family,backend", COMBINATIONS)
def test_every_combination_renders_compiles_and_lints_clean(tmp_path, synthetic_models, family, backend):
    package = f"my_{family}_{backend}_{'x' * 50}"[:MAX_PACKAGE_NAME]  # the longest name: lines stay within the limit
    about = {k[2:].replace("-", "_"): v for k, v in HOSTILE.items()}
    model = synthetic_models[""]  # a model file: its inputs are the runner's constants
    target = write_package(family, backend, package, tmp_path, model=model, **about)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(target)], check=True)
    settings = ["--config", str(ROOT / "ruff.toml"), "--config", f"lint.isort.known-first-party=['{package}']"]
    for command in (["check"], ["format", "--check"]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *command, *settings, str(target)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    # Only its own runtime: no other backend's module is imported, nothing from vision_factory.
    imported = _imported_modules(target)
    assert "vision_factory" not in imported
    assert RUNTIME_MODULES[backend] in imported
    assert not imported & {module for name, module in RUNTIME_MODULES.items() if name != backend}
    depends = {element.text for element in ElementTree.parse(target / "package.xml").getroot().iter("exec_depend")}
    for name, spec in BACKENDS.items():
        assert set(spec.rosdep) <= depends if name == backend else not set(spec.rosdep) & depends
    _check_rosdep_keys(target / "package.xml", target / "rosdep.yaml")
    setup = (target / "setup.py").read_text()
    assert all(f'"{requirement}"' in setup for requirement in BACKENDS[backend].pip)
    # Every message package its code imports is a dependency, with its wheel (diagnostic_msgs: /diagnostics).
    for module in sorted(name for name in imported if name.endswith("_msgs")):
        assert module in depends, f"package.xml lacks {module}"
        assert module in NO_WHEEL or f'"ros-{module.replace("_", "-")}"' in setup, f"setup.py lacks {module}'s wheel"
    assert "diagnostic_msgs" in imported
    assert (target / "resource" / package).is_file()
    assert (target / "launch" / f"{family}_{backend}.launch.py").is_file()


def _check_rosdep_keys(package_xml: Path, definitions: Path) -> None:
    """Every python3-* key resolves: ros/rosdistro has it, or the package's rosdep YAML defines it via pip."""
    root = ElementTree.parse(package_xml).getroot()
    keys = {element.text for tag in ("depend", "exec_depend", "test_depend") for element in root.iter(tag)}
    custom = yaml.safe_load(definitions.read_text()) if definitions.is_file() else {}
    for key in sorted(key for key in keys if key.startswith("python3-")):
        assert key in ROSDISTRO_PYTHON_KEYS or key in custom, f"{package_xml}: rosdep cannot resolve {key}"
        if key in custom:
            assert {"debian", "ubuntu"} <= set(custom[key]) and custom[key]["ubuntu"]["pip"]["packages"], key
    assert not set(custom) & ROSDISTRO_PYTHON_KEYS, "never redefine a key rosdistro already has"


def test_this_packages_rosdep_keys_resolve():
    _check_rosdep_keys(ROOT / "package.xml", ROOT / "rosdep" / "vision_factory.yaml")


@pytest.mark.parametrize("family,backend", COMBINATIONS)
def test_copied_modules_are_this_packages_own_bytes(tmp_path, family, backend):
    target = write_package(family, backend, "copy_check", tmp_path)
    modules = copied_modules(NODE_FAMILIES[family], BACKENDS[backend])
    assert f"ros/{NODE_FAMILIES[family].node_module}.py" in modules
    for relative in modules:
        assert (target / "copy_check" / relative).read_bytes() == (SOURCE_ROOT / relative).read_bytes(), relative


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Generated onnx and openvino TrackNet packages, installed into one prefix."""
    root = tmp_path_factory.mktemp("generated")
    prefix = root / "install"
    executables = {}
    for backend in ("onnx", "openvino"):
        package_dir = write_package("tracknet", backend, f"gen_tracknet_{backend}", root / "src")
        executables[backend] = install_like_colcon(package_dir, prefix)
    return executables, site_packages(prefix), root


def test_generated_packages_run_standalone_and_pass_their_smoke_tests(installed, synthetic_models):
    executables, site, root = installed
    env = {**os.environ, "PYTHONPATH": str(site)}
    for backend in ("onnx", "openvino"):
        package = f"gen_tracknet_{backend}"
        check = (
            f"import sys, {package}.tracknet_{backend}_node as node; "
            "assert callable(node.main); "
            "assert not [m for m in sys.modules if m.startswith('vision_factory')], 'imports vision_factory'"
        )
        subprocess.run([sys.executable, "-c", check], env=env, check=True, cwd=root)
        smoke = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root / "src" / package / "test")],
            env={**env, f"{package.upper()}_TEST_MODEL": str(synthetic_models["subtract"])},
            capture_output=True,
            text=True,
            cwd=root,
        )
        assert smoke.returncode == 0 and "3 passed" in smoke.stdout, smoke.stdout + smoke.stderr


def test_generated_node_is_a_lifecycle_node(installed, synthetic_models, tmp_path, monkeypatch):
    """The generated package's own executable, driven over its lifecycle services: autostart:=false waits
    unconfigured, configure and activate make it listen, shutdown ends it."""
    executables, site, _ = installed
    monkeypatch.setenv("PYTHONPATH", str(site))
    params = {"autostart": "false", "model_path": str(synthetic_models[""])}
    node = NodeProcess(tmp_path, params, executable=[str(executables["onnx"])])
    probe = Probe()
    try:
        lifecycle = Lifecycle(probe, "/t/tracknet")
        assert lifecycle.state() == "unconfigured", node.log()
        assert lifecycle.set("configure") and lifecycle.state() == "inactive"
        assert probe.node.count_subscribers("/t/image") == 0
        assert lifecycle.set("activate") and lifecycle.state() == "active"
        assert probe.spin_until(lambda: probe.node.count_subscribers("/t/image") == 1, PATIENCE_S), node.log()
        assert lifecycle.set("shutdown")
        assert node.wait() == 0
    finally:
        probe.close()
        node.stop()
    assert "Traceback" not in node.log()


def test_generated_nodes_match_this_packages_node(installed, synthetic_models, tmp_path, monkeypatch):
    executables, site, _ = installed
    monkeypatch.setenv("PYTHONPATH", str(site))
    clip = BallClip(num_frames=40, width=640, height=360, seed=5)
    bag = write_image_bag(tmp_path / "clip", clip.frames())
    params = {
        "model_path": str(synthetic_models["subtract"]),
        "bg_mode": "subtract",
        "median_warmup": "8",
        "inpaint_model_path": str(synthetic_models["inpaint"]),
    }
    results = {"vision_factory": replay(bag, tmp_path / "own", params=params)}
    for backend, executable in executables.items():
        results[backend] = replay(bag, tmp_path / backend, params=params, executable=[str(executable)])
    rows = {name: read_ball_csv(result.answers) for name, result in results.items()}
    assert len(rows["vision_factory"]) == clip.num_frames
    assert sum(row[1] for row in rows["vision_factory"]) > clip.num_frames // 2, "the ball must be tracked"
    assert rows["onnx"] == rows["vision_factory"]  # same runtime, same code: identical
    assert "openvino" in Path(results["openvino"].node_log).read_text()
    for ours, theirs in zip(rows["onnx"], rows["openvino"], strict=True):
        assert ours[:2] == theirs[:2], (ours, theirs)
        assert abs(ours[2] - theirs[2]) <= OPENVINO_TOLERANCE_PX and abs(ours[3] - theirs[3]) <= OPENVINO_TOLERANCE_PX


def test_generated_openvino_detection_nodes_match_this_packages_onnx_nodes(tmp_path, monkeypatch):
    """Each detection family, generated for OpenVINO and installed, against vision_factory's ONNX Runtime node."""
    from conftest import pypi_model
    from support.data import _photo_frames, _red_spots
    from support.models import spot_finder, wrap_yolo
    from support.real_models import FALL_MODEL, POSE_MODEL, SHAPES_IMAGES

    if not (POSE_MODEL.is_file() and SHAPES_IMAGES.is_dir()):
        pytest.skip("the shared models and data are not there (see ../shared/models/README)")
    fall = str(pypi_model(*FALL_MODEL))
    photos = _photo_frames()[:4]
    shapes = [cv2.imread(str(path)) for path in sorted(SHAPES_IMAGES.glob("*.jpg"))[:4]]
    cases = {
        "yolo": (photos, {"model_path": fall}),
        "yolo_pose": (photos, {"model_path": str(POSE_MODEL)}),
        "fasterrcnn": (shapes, {"model_path": str(wrap_yolo(tmp_path / "wrapped.onnx"))}),
        "rtmpose": (
            _red_spots(photos),
            {"model_path": str(spot_finder(tmp_path / "spot.onnx")), "person_detector_path": fall},
        ),
    }
    monkeypatch.setenv("PYTHONPATH", str(site_packages(tmp_path / "install")))
    for family, (frames, params) in cases.items():
        executable = generate_and_install(family, "openvino", f"gen_{family}_openvino", tmp_path)
        bag = write_image_bag(tmp_path / f"{family}_bag", frames)
        ours = replay(bag, tmp_path / f"{family}_onnx", node=family, params=params)
        theirs = replay(bag, tmp_path / f"{family}_openvino", node=family, params=params, executable=[str(executable)])
        assert ": openvino 20" in Path(theirs.node_log).read_text(), family  # what runs the model, logged
        a, b = (json.loads(Path(result.answers).read_text()) for result in (ours, theirs))
        assert len(a) == len(b) == len(frames) and sum(len(record["detections"]) for record in a) >= 4, family
        for frame_a, frame_b in zip(a, b):
            confident = [d for d in frame_a["detections"] if d["score"] > 0.35]  # clear of the threshold
            for detection in confident:
                match = min(
                    frame_b["detections"], key=lambda d: max(abs(u - v) for u, v in zip(d["xyxy"], detection["xyxy"]))
                )
                assert match["class_name"] == detection["class_name"], family
                assert max(abs(u - v) for u, v in zip(match["xyxy"], detection["xyxy"])) < 2.0, family
                for p, q in zip(match.get("keypoints", []), detection.get("keypoints", [])):
                    if q[2] > 0.5:
                        assert abs(p[0] - q[0]) < 3.0 and abs(p[1] - q[1]) < 3.0, family


def _generate(*arguments: str):
    return CliRunner().invoke(main, ["generate", *arguments])


@pytest.mark.parametrize(
    "arguments,message",
    [
        (["--model", "yolo9000"], "unknown model family 'yolo9000'"),
        (["--backend", "coreml"], "unknown backend 'coreml'"),
        (["--package-name", "Court_Tracker"], "not a valid ROS package name"),
        (["--package-name", "1tracker"], "starting with a letter"),
        (["--package-name", "court__tracker"], "no double underscore"),
        (["--package-name", "../escape"], "not a valid ROS package name"),
        (["--package-name", "json"], "shadow a Python keyword or module"),
    ],
)
def test_bad_arguments_are_refused_with_the_fix(tmp_path, arguments, message):
    defaults = {"--model": "tracknet", "--backend": "onnx", "--package-name": "court_tracker"}
    defaults.update(dict(zip(arguments[::2], arguments[1::2])))
    result = _generate(*[item for pair in defaults.items() for item in pair], "--out", str(tmp_path / "out"))
    assert result.exit_code != 0 and message in result.output, result.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_existing_target_needs_force_and_out_must_be_writable(tmp_path):
    arguments = ["--model", "tracknet", "--backend", "onnx", "--package-name", "court_tracker"]
    assert _generate(*arguments, "--out", str(tmp_path)).exit_code == 0
    marker = tmp_path / "court_tracker" / "my_notes.txt"
    marker.write_text("mine")
    refused = _generate(*arguments, "--out", str(tmp_path))
    assert refused.exit_code != 0 and "already exists; pass --force" in refused.output
    assert marker.read_text() == "mine"
    replaced = _generate(*arguments, "--out", str(tmp_path), "--force", "--zip")
    assert replaced.exit_code == 0 and not marker.exists() and (tmp_path / "court_tracker.zip").is_file()
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []
    a_file = tmp_path / "file"
    a_file.write_text("")
    assert "is a file" in _generate(*arguments, "--out", str(a_file)).output
    unwritable = _generate(*arguments, "--out", "/proc/vision_factory_out")
    assert unwritable.exit_code != 0 and "cannot write" in unwritable.output, unwritable.output


def test_a_model_of_another_family_is_refused(tmp_path, synthetic_models):
    arguments = ["--model", "tracknet", "--backend", "onnx", "--package-name", "court_tracker", "--out", str(tmp_path)]
    wrong = _generate(*arguments, "--model-file", str(synthetic_models["inpaint"]))
    assert wrong.exit_code != 0, wrong.output
    expected = "looks like an inpaintnet model (output output [1, 16, 2]); --model tracknet needs a TrackNet"
    assert expected in wrong.output, wrong.output
    assert not (tmp_path / "court_tracker").exists()
    right = _generate(*arguments, "--model-file", str(synthetic_models["subtract"]))
    assert right.exit_code == 0, right.output


# What a runner template states for the package it is generated for, one constant a line (templates/runners/).
RUNNER_DEFAULTS = {"onnx": "EXECUTION_PROVIDER", "openvino": "DEVICE", "tensorrt": "PRECISION"}


def _changed_lines(a: str, b: str) -> list[tuple[str, str]]:
    lines = list(zip(a.splitlines(), b.splitlines(), strict=True))
    return [(x, y) for x, y in lines if x != y]


@pytest.mark.parametrize("backend", BACKENDS)
def test_runners_generated_for_two_models_differ_in_their_constants_alone(synthetic_models, backend):
    """A runner rendered for a model states its file and input as constants; for another model of the family only
    those lines differ, and a target option (onnx:cuda, openvino:GPU, tensorrt:fp16) changes only the default it
    sets, in the runner and in the package's parameter file alike."""
    runner = f"court_tracker/runtime/{BACKENDS[backend].runner_module}.py"
    rgb = package_files("tracknet", backend, "court_tracker", synthetic_models[""])
    subtract = package_files("tracknet", backend, "court_tracker", synthetic_models["subtract"])
    assert _changed_lines(rgb[runner], subtract[runner]) == [
        ('MODEL_FILE = "tracknet_rgb.onnx"', 'MODEL_FILE = "tracknet_subtract.onnx"'),
        (
            'MODEL_INPUTS: ModelInputs | None = (("input", (1, 24, 288, 512)),)',
            'MODEL_INPUTS: ModelInputs | None = (("input", (1, 8, 288, 512)),)',
        ),
    ]
    assert {path for path in rgb if rgb[path] != subtract[path]} == {runner, "README.md", "generated.json"}
    assert "generated for tracknet_rgb.onnx: it takes\ninput \\[1, 24, 288, 512\\] (`MODEL_INPUTS`)" in rgb["README.md"]
    option = {"onnx": "cuda", "openvino": "GPU", "tensorrt": "fp16"}[backend]
    targeted = package_files("tracknet", f"{backend}:{option}", "court_tracker", synthetic_models[""])
    name = BACKENDS[backend].option
    default = next(p.default for p in BACKENDS[backend].parameters if p.name == name)
    assert _changed_lines(rgb[runner], targeted[runner]) == [
        (f'{RUNNER_DEFAULTS[backend]} = "{default}"', f'{RUNNER_DEFAULTS[backend]} = "{option}"')
    ]
    config = f"config/tracknet_{backend}.yaml"
    ours, theirs = yaml.safe_load(rgb[config]), yaml.safe_load(targeted[config])
    assert theirs["/**"]["ros__parameters"] == {**ours["/**"]["ros__parameters"], name: option}
    for files in (rgb, subtract, targeted):  # every Python file still parses
        for path, content in files.items():
            if path.endswith(".py"):
                ast.parse(content, path)


def test_a_package_without_a_model_runs_any_model_and_states_the_backends_defaults():
    """Without --model-file the runner states no input (any model of the family) and the backend's defaults: it is
    vision_factory's own runner, byte for byte."""
    for backend, spec in BACKENDS.items():
        files = package_files("yolo", backend, "any_detector")
        own = (SOURCE_ROOT / "runtime" / f"{spec.runner_module}.py").read_text()
        assert files[f"any_detector/runtime/{spec.runner_module}.py"] == own
        assert "MODEL_INPUTS: ModelInputs | None = None" in own


@pytest.mark.parametrize(
    "target,message",
    [
        ("onnx:cudda", "--backend onnx:cudda: unknown execution provider 'cudda'"),
        ("tensorrt:fp8", "--backend tensorrt:fp8: the precision is one of fp32, fp16"),
        ("openvino:GPU\n", "--backend openvino:GPU\\n: give the device on one line"),
    ],
)
def test_a_target_option_the_runner_would_refuse_is_refused_when_generating(tmp_path, target, message):
    arguments = ["--model", "yolo", "--package-name", "my_detector", "--out", str(tmp_path)]
    result = _generate(*arguments, "--backend", target.replace("\\n", "\n"))
    assert result.exit_code != 0 and message in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "my_detector").exists()


@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_a_generated_package_refuses_a_model_of_another_input(tmp_path, monkeypatch, synthetic_models, backend):
    """The package's own runner (real ONNX Runtime and OpenVINO, real files) loads the model it was generated for and
    refuses one of another input at load, naming both inputs and the fix."""
    package = f"court_tracker_{backend}"
    generated = _generate(
        *("--model", "tracknet", "--backend", backend, "--package-name", package, "--out", str(tmp_path)),
        *("--model-file", str(synthetic_models[""])),
    )
    assert generated.exit_code == 0, generated.output
    monkeypatch.syspath_prepend(str(tmp_path / package))  # the package's folder holds its Python package
    spec = BACKENDS[backend]
    try:
        runner_class = getattr(importlib.import_module(f"{package}.runtime.{spec.runner_module}"), spec.runner_class)
        log = logging.getLogger("test")
        assert runner_class.load(synthetic_models[""], {}, log).inputs[0].shape == (1, 24, 288, 512)
        with pytest.raises(ValueError) as refused:
            runner_class.load(synthetic_models["subtract"], {}, log)
        # The node's other model (its InpaintNet: coords and mask in) loads on the same runner, unchecked against it
        assert [tensor.name for tensor in runner_class.load(synthetic_models["inpaint"], {}, log).inputs] == [
            "coords",
            "mask",
        ]
    finally:
        for name in [name for name in sys.modules if name.partition(".")[0] == package]:
            del sys.modules[name]
    assert str(refused.value) == (
        f"model {synthetic_models['subtract']} takes input [1, 8, 288, 512], but this package was generated for a "
        "model that takes input [1, 24, 288, 512] (tracknet_rgb.onnx): regenerate the package for this model "
        f"(vision-factory generate ... --model-file {synthetic_models['subtract']}), or give it a model of that input"
    )


def test_a_generated_node_refuses_a_model_of_another_input_at_start_up(tmp_path, monkeypatch, synthetic_models):
    """The installed node command of a package generated for one model, given a model of another input: it does not
    start, and its log names both inputs and the fix, without a traceback."""
    package_dir = write_package("tracknet", "onnx", "rgb_tracker", tmp_path / "src", model=synthetic_models[""])
    executable = install_like_colcon(package_dir, tmp_path / "install")
    monkeypatch.setenv("PYTHONPATH", str(site_packages(tmp_path / "install")))
    node = NodeProcess(tmp_path, {"model_path": str(synthetic_models["subtract"])}, executable=[str(executable)])
    try:
        assert node.wait(60) == 2, node.log()
    finally:
        node.stop()
    assert "cannot start" in node.log() and "Traceback" not in node.log()
    assert (
        "takes input [1, 8, 288, 512], but this package was generated for a model that takes input [1, 24, 288, "
        "512] (tracknet_rgb.onnx): regenerate the package for this model" in node.log()
    ), node.log()


def test_inspect_command(tmp_path, synthetic_models):
    runner = CliRunner()
    text = runner.invoke(main, ["inspect", str(synthetic_models["subtract"])])
    assert text.exit_code == 0 and "[1, 8, 288, 512]" in text.output
    assert "looks like: tracknet" in text.output and "'subtract'" in text.output
    record = json.loads(runner.invoke(main, ["inspect", "--format", "json", str(synthetic_models["inpaint"])]).output)
    assert record["recognition"]["family"] == "inpaintnet"
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07not a model")
    failed = runner.invoke(main, ["inspect", str(corrupt)])
    assert failed.exit_code == 1 and "is not a readable ONNX model" in failed.output


def test_models_and_backends_commands(tmp_path):
    runner = CliRunner()
    models = runner.invoke(main, ["models"])
    assert models.exit_code == 0 and "tracknet:" in models.output and "onnx, openvino, tensorrt" in models.output
    # reid has no node: listed as such, and refused by generate with the families that have one.
    assert "reid: re-identification embeddings" in models.output
    assert "node:     none (serves the tracker)" in models.output
    refused = runner.invoke(
        main, ["generate", "--model", "reid", "--backend", "onnx", "--package-name", "x1", "--out", str(tmp_path)]
    )
    assert refused.exit_code != 0 and "reid has no node of its own" in refused.output, refused.output
    assert not any(tmp_path.iterdir())
    backends = runner.invoke(main, ["backends"])
    assert backends.exit_code == 0
    assert "runs on: CPUExecutionProvider" in backends.output and "runs on: CPU" in backends.output
    assert "tensorrt:" in backends.output


def _launch_arguments(path: Path) -> dict[str, bool]:
    """A rendered launch file's arguments, name -> whether required: its NodeLaunch's, which --show-args lists (the
    file imports launch only when it builds the description)."""
    spec = importlib.util.spec_from_file_location(path.name.removesuffix(".launch.py") + "_launch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {argument.name: argument.default is None for argument in module.LAUNCH.arguments(share="share")}


@pytest.mark.parametrize("family", NODE_FAMILIES)
def test_launch_usage_line_names_what_the_node_needs(family):
    """Each launch file's usage line (its docstring) passes only arguments it declares, and every required one: the
    track node's has no model_path (it has no model of its own) but its detections topic."""
    path = ROOT / "launch" / f"{family}_onnx.launch.py"
    arguments = _launch_arguments(path)
    assert "image_topic" in arguments and "params_file" in arguments  # the reading above finds both kinds
    usage = ast.get_docstring(ast.parse(path.read_text())).split("Usage:", 1)[1].split("\n\n", 1)[0]
    assert f"ros2 launch vision_factory {path.name}" in usage
    given = dict(re.findall(r"(\w+):=(\S+)", usage))
    assert set(given) <= set(arguments), usage
    assert {name for name, required in arguments.items() if required} <= set(given), usage
    if family == "track":
        assert "detections_topic" in given


# Values an attacker or an unusual user gives to every option of `generate` that reaches a generated file: XML
# that closes the element and adds a dependency, an ampersand and angle brackets, Python and YAML quotes and
# backslashes, INI interpolation, Markdown that formats, links and ends table cells, Jinja, shell and non-ASCII.
HOSTILE = {
    "--maintainer": 'Eve</maintainer><exec_depend>python3-evil-pip</exec_depend><maintainer email="e@x">Eve',
    "--maintainer-email": "eve.o+ros_1%x@lab-1.example.org",
    "--license": 'AT&T <lab> """ \' \\ %(h)s `x` *b* _i_ | [l](http://e) ~~s~~ {{ j }} $(id) # Ève',
}
RUN_ARGUMENTS = "--ros-args -p model_path:=/path/to/model.onnx -r image:=/camera/image_raw"
BENIGN = {"--maintainer": "Ada", "--maintainer-email": "ada@example.com", "--license": "MIT"}


def _parse_every_file(package: Path) -> dict[str, object]:
    """Every file of a generated package read with its own syntax's parser; what each gave, by relative path."""
    from markdown_it import MarkdownIt  # markdown-it-py: with rich, from nncf (test extra)

    parsed: dict[str, object] = {}
    for path in sorted(p for p in package.rglob("*") if p.is_file()):
        relative, text = str(path.relative_to(package)), path.read_text()
        if path.suffix == ".xml":
            parsed[relative] = ElementTree.fromstring(text.encode())
        elif path.suffix == ".py":
            parsed[relative] = ast.parse(text, relative)
        elif path.suffix == ".yaml":
            parsed[relative] = yaml.safe_load(text)
        elif path.suffix == ".cfg":
            config = configparser.ConfigParser()  # with its % interpolation, as setuptools reads setup.cfg
            config.read_string(text)
            parsed[relative] = {section: dict(config[section]) for section in config.sections()}
        elif path.suffix == ".json":
            parsed[relative] = json.loads(text)
        elif path.suffix == ".md":
            parsed[relative] = MarkdownIt("commonmark").enable("table").parse(text)
        else:
            assert relative == f"resource/{package.name}" and text == "", relative
    return parsed


def _markdown_text(tokens) -> str:
    """The text a Markdown document shows (text and code), one line per inline token."""
    return "\n".join(
        "".join(child.content for child in token.children if child.type in ("text", "code_inline"))
        for token in tokens
        if token.type == "inline"
    )


def _setup_keywords(tree: ast.Module) -> dict[str, object]:
    (call,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup"]
    literals = {}
    for keyword in call.keywords:
        with contextlib.suppress(ValueError):  # name=PACKAGE, packages=find_packages(...): not literals
            literals[keyword.arg] = ast.literal_eval(keyword.value)
    return literals


@pytest.mark.parametrize("family,backend", COMBINATIONS)
def test_hostile_values_are_escaped_in_every_generated_file(tmp_path, family, backend):
    """Each value `generate` renders reaches every generated file as data: each file parses with its own parser, the
    structure is the one benign values give (no dependency added to package.xml) and the value reads back as given."""
    parsed = {}
    for name, values in (("hostile", HOSTILE), ("benign", BENIGN)):
        arguments = ["--model", family, "--backend", backend, "--package-name", "my_pkg", "--out", str(tmp_path / name)]
        result = _generate(*arguments, *[item for pair in values.items() for item in pair])
        assert result.exit_code == 0, result.output
        parsed[name] = _parse_every_file(tmp_path / name / "my_pkg")
    hostile, benign = parsed["hostile"], parsed["benign"]
    assert hostile.keys() == benign.keys()
    # package.xml: the dependencies benign values give, one maintainer whose name, email and the license read back.
    root = hostile["package.xml"]
    depends = {
        tag: [e.text for e in root.iter(tag)] for tag in ("depend", "exec_depend", "test_depend", "build_depend")
    }
    benign_root = benign["package.xml"]
    assert depends == {tag: [e.text for e in benign_root.iter(tag)] for tag in depends}
    assert "python3-evil-pip" not in depends["exec_depend"]
    assert [child.tag for child in root] == [child.tag for child in benign_root]
    (maintainer,) = root.findall("maintainer")
    assert maintainer.text == HOSTILE["--maintainer"] and maintainer.get("email") == HOSTILE["--maintainer-email"]
    assert root.find("license").text == HOSTILE["--license"]
    # setup.py: the same literals; setup.cfg, YAML, JSON and every Python file as with benign values.
    about = _setup_keywords(hostile["setup.py"])
    assert (about["maintainer"], about["maintainer_email"], about["license"]) == tuple(HOSTILE.values())
    assert {k: v for k, v in about.items() if k not in ("maintainer", "maintainer_email", "license")} == {
        k: v
        for k, v in _setup_keywords(benign["setup.py"]).items()
        if k not in ("maintainer", "maintainer_email", "license")
    }
    for relative, value in hostile.items():
        if relative.endswith((".yaml", ".cfg")):
            assert value == benign[relative], relative
        if relative.endswith(".py") and relative != "setup.py":
            assert ast.dump(value) == ast.dump(benign[relative]), relative
    # README: the document's structure is the benign one's, and it shows each value as given.
    readme, benign_readme = hostile["README.md"], benign["README.md"]
    assert [t.type for t in readme] == [t.type for t in benign_readme]
    inline = [[c.type for c in t.children] for t in readme if t.type == "inline"]
    assert inline == [[c.type for c in t.children] for t in benign_readme if t.type == "inline"]
    shown = _markdown_text(readme)
    assert all(value in shown for value in HOSTILE.values()), shown[:2000]
    # ROS's own parser (colcon, rosdep, bloom) where installed: the same dependencies and maintainer.
    try:
        from catkin_pkg.package import parse_package_string
    except ImportError:
        return
    package = parse_package_string((tmp_path / "hostile" / "my_pkg" / "package.xml").read_text())
    assert [d.name for d in package.exec_depends] == depends["exec_depend"]
    assert [(m.name, m.email) for m in package.maintainers] == [
        (HOSTILE["--maintainer"], HOSTILE["--maintainer-email"])
    ]


@pytest.mark.parametrize(
    "option,value,message",
    [
        ("--maintainer", "Eve\nEvil <evil@x.org>", "holds the control character '\\n'"),
        ("--maintainer", "Eve\x1b[2J", "holds the control character '\\x1b'"),
        ("--license", "MIT\r\nX", "holds the control character '\\r'"),
        ("--license", "\u2028", "holds the control character"),
        ("--maintainer-email", "e@x", "is not an email address ROS tools accept"),
        ("--maintainer-email", 'e@x.org"><exec_depend>evil</exec_depend>', "give one like name@example.com"),
        ("--maintainer", "x" * 101, "give 1 to 100 characters"),
        ("--maintainer", " ", "give 1 to 100 characters"),
    ],
)
def test_values_that_cannot_be_rendered_are_refused_naming_the_option(tmp_path, option, value, message):
    result = _generate(
        "--model", "yolo", "--backend", "onnx", "--package-name", "my_pkg", "--out", str(tmp_path), option, value
    )
    assert result.exit_code == 2 and f"Invalid value for {option}" in result.output, result.output
    assert message in result.output and "Traceback" not in result.output, result.output
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("backend", BACKENDS)
def test_generated_commands_are_named_after_the_package(tmp_path, backend):
    """No command of a generated package is one of vision_factory's (installing both replaced the package's node),
    and its launch file starts the command its setup.py installs."""
    import importlib.metadata

    own = {entry.name for entry in importlib.metadata.distribution("vision_factory").entry_points}
    assert {"vision-factory", "yolo_node", "tracknet_node"} <= own
    executable = generate_and_install("yolo", backend, "my_detector", tmp_path)
    target = tmp_path / "src" / "my_detector"
    commands = {path.name for path in executable.parent.iterdir()}  # what the install put in lib/my_detector
    assert executable.name == "my_detector_node" and all(command.startswith("my_detector_") for command in commands)
    assert len(commands) == 1 + len(BACKENDS[backend].tools) and not commands & own, commands
    launch = ast.parse((target / "launch" / f"yolo_{backend}.launch.py").read_text())
    executables = {k.value.value for k in ast.walk(launch) if isinstance(k, ast.keyword) and k.arg == "executable"}
    assert executables == {"my_detector_node"}
    readme = (target / "README.md").read_text()
    assert "my_detector_node " + RUN_ARGUMENTS in readme
    assert "yolo_node" not in readme
    # A package name whose node command would be vision_factory's own is refused.
    refused = _generate("--model", "yolo", "--backend", backend, "--package-name", "yolo", "--out", str(tmp_path / "o"))
    assert refused.exit_code != 0 and "its node command yolo_node would be vision_factory's own" in refused.output


@pytest.mark.parametrize("family,backend", [("yolo", "onnx"), ("tracknet", "openvino"), ("yolo_pose", "tensorrt")])
def test_readme_commands_are_one_per_line(tmp_path, family, backend):
    """The rendered README's shell blocks: each line one command (a missing newline ran `... scipycolcon build`)."""
    target = write_package(family, backend, "my_pkg", tmp_path)
    lines = (target / "README.md").read_text().splitlines()
    blocks = "\n".join(lines).split("```bash\n")[1:]
    commands = [line for block in blocks for line in block.split("```")[0].splitlines() if not line.startswith("#")]
    known = ("rosdep ", "colcon ", "source ", "ros2 ", "python3 ", "pip ", "vision-factory ", "my_pkg_node ")
    assert commands and all(command.startswith(known) for command in commands), commands
    assert "colcon build --packages-select my_pkg" in lines
    rosdep = next(line for line in lines if line.startswith("rosdep install"))
    assert rosdep.endswith(" ".join(BACKENDS[backend].pip) + (" scipy" if family != "tracknet" else "")), rosdep
    if "vision_msgs" in NODE_FAMILIES[family].ros_dependencies:  # no wheel: vision_factory builds it
        assert "pip install '.[ros]' '/path/to/vision_factory[ros]'" in lines, lines
        assert lines.index("vision-factory install-vision-msgs") < lines.index("my_pkg_node " + RUN_ARGUMENTS)
    else:
        assert "pip install '.[ros]'" in lines and "vision-factory install-vision-msgs" not in lines


@pytest.mark.parametrize(
    "missing,advice",
    [
        ("vision_msgs", "build it into this environment once with `vision-factory install-vision-msgs` (where"),
        ("rclpy", "Without one: pip install '.[ros]' in the folder of my_detector installs ROS 2 from PyPI wheels"),
    ],
)
def test_generated_node_without_ros_packages_says_what_to_do(tmp_path, missing, advice):
    """The installed command of a generated package, where a ROS 2 Python package cannot be imported (made so in its
    interpreter, as on a pip-only machine before install-vision-msgs): a message naming it and the fix, no traceback."""
    executable = generate_and_install("yolo", "onnx", "my_detector", tmp_path)
    run = (
        f"import runpy, sys; sys.modules[{missing!r}] = None; runpy.run_path({str(executable)!r}, run_name='__main__')"
    )
    env = {**os.environ, "PYTHONPATH": str(site_packages(tmp_path / "install"))}
    done = subprocess.run([sys.executable, "-c", run], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"my_detector_node: the ROS 2 Python package {missing} is not installed" in done.stderr, done.stderr
    assert advice in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    "template,executable,refused",
    [
        ("package/node.py.j2", 'x"\nimport os  # ', "control character '\\n'"),
        ("package/launch.py.j2", 'x", shell=True, y="', "'\"', not safe raw in python: render it with |py"),
        ("package/config.yaml.j2", "x\\", "'\\\\', not safe raw in yaml: render it with |yaml"),
    ],
)
def test_a_value_rendered_without_its_filter_is_refused_not_written(template, executable, refused):
    """A template value given no escaping filter (here the node's command, which only the package name makes) is
    rendered raw only where it cannot end a string or a line; anything else fails the rendering."""
    from vision_factory.generator.package import template_context
    from vision_factory.generator.render import RenderError, render
    from vision_factory.runtime.backends import backend

    context = template_context(NODE_FAMILIES["yolo"], backend("onnx"), "my_pkg", executable)
    with pytest.raises(RenderError, match=re.escape(refused)):
        render(template, **context)
    extra = {"maintainer": "A&B <c>", "carries_scipy": False, "carries_pillow": False, "carries_tokenizers": False}
    xml = render("package/package.xml.j2", **{**context, **extra})  # XML: escaped, not refused
    assert ElementTree.fromstring(xml.encode()).find("maintainer").text == "A&B <c>"
