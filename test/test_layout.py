"""The layout docs/develop/layout.md describes, checked on the source tree: one module per family read through one
registry, recognition beside the adapters, import rules between the layers, and what a generated package carries."""

from __future__ import annotations

import ast
import fnmatch
import inspect
import logging
from pathlib import Path

import pytest
from support.models import build_model

from vision_factory.families.registry import FAMILIES, NODE_FAMILIES, family
from vision_factory.generator.package import SOURCE_ROOT, copied_modules, package_files
from vision_factory.models import recognition
from vision_factory.models.fasterrcnn import FasterRCNNDetector
from vision_factory.models.model_file import recognise, summarize
from vision_factory.models.rtmpose import RTMPoseEstimator, TopDownPose
from vision_factory.models.yolo import YoloDetector
from vision_factory.runtime.backends import BACKENDS
from vision_factory.runtime.onnx_runner import OnnxRunner

ROS_MODULES = {"rclpy", "rcl_interfaces", "std_msgs", "sensor_msgs", "geometry_msgs", "visualization_msgs"}
ROS_MODULES |= {"diagnostic_msgs"}
ROS_MODULES |= {"vision_msgs", "builtin_interfaces", "rosbag2_py", "rosidl_runtime_py", "launch", "launch_ros"}
# Besides ros/, what drives nodes over DDS or builds their messages.
ROS_USERS = {"tools/replay.py", "tools/fuzz.py", "tools/bags.py", "tools/interfaces.py", "tools/demo.py"}
ROS_USERS |= {"tools/verify.py", "tools/replay_outputs.py", "tools/bench_cameras.py"}
ROS_USERS |= {"tools/replay_node.py"}
ROS_USERS |= {"tools/ros_graph.py", "tools/topics.py", "tools/params.py", "tools/lifecycle.py"}  # the node tools
ROS_USERS |= {"tools/answers.py"}
# Modules that entry points run: every rendered *_onnx_node.py binds a runner to a node.
ENTRY_POINTS = {path.name for path in SOURCE_ROOT.glob("*_onnx_node.py")}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(SOURCE_ROOT.parent).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path, top_level_only: bool = False) -> set[str]:
    """The modules ``path`` imports (vision_factory's as absolute names); only the top level's, if asked."""
    tree = ast.parse(path.read_text(), str(path))
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
                # "from . import yolo" imports the module yolo of the package
                found |= {f"{module}.{alias.name}" for alias in node.names} if not node.module else {module}
            else:
                found.add(node.module)
    return found


SOURCES = {str(path.relative_to(SOURCE_ROOT)): path for path in sorted(SOURCE_ROOT.rglob("*.py"))}


def _known(name: str) -> str | None:
    """The vision_factory module (as a path under vision_factory/) ``name`` is, None for another package's."""
    if not name.startswith("vision_factory."):
        return None
    parts = name.split(".")[1:]
    for candidate in ("/".join(parts) + ".py", "/".join(parts) + "/__init__.py"):
        if candidate in SOURCES:
            return candidate
    return "/".join(parts[:-1]) + ".py" if "/".join(parts[:-1]) + ".py" in SOURCES else None


# The layers of the package, lowest first: a module imports modules of its own layer and the layers below it, never
# one above (every import counted: at the top, inside functions and under TYPE_CHECKING alike). results/ is the core's
# bottom: what every family's pipeline returns, with no knowledge of models, families, nodes or tools.
LAYERS = (
    ("foundations", ("__init__.py", "text.py", "quiet.py", "share.py", "usage.py", "parameters.py", "streaming.py",
                     "files.py", "images.py", "camera_infos.py", "progress.py")),
    ("runtime", ("runtime/",)),
    ("results", ("results/",)),
    ("models", ("models/",)),
    ("families", ("families/", "cameras.py", "workers.py")),
    ("ros", ("ros/", "*_onnx_node.py", "detect_3d_node.py")),
    ("generator", ("generator/",)),
    ("tools", ("tools/",)),
    ("cli", ("cli_support.py", "cli_nodes.py", "cli_bags.py", "cli_measure.py", "cli_predict.py", "cli.py")),
)  # fmt: skip


def _layer(relative: str) -> int:
    """The index in LAYERS of the layer a module (a path under vision_factory/) belongs to."""
    found = [
        index
        for index, (_, members) in enumerate(LAYERS)
        for member in members
        if (relative.startswith(member) if member.endswith("/") else fnmatch.fnmatch(relative, member))
    ]
    assert len(found) == 1, f"{relative} is in {len(found)} layers of LAYERS: put it in one"
    return found[0]


def _graph(top_level_only: bool = False) -> dict[str, set[str]]:
    """Each module's imports of this package's modules (every import, or the top level's only)."""
    return {
        relative: {module for module in map(_known, _imports(path, top_level_only)) if module and module != relative}
        for relative, path in SOURCES.items()
    }


@pytest.mark.parametrize("relative", sorted(SOURCES))
def test_layers_import_only_downwards(relative):
    imported = _imports(SOURCES[relative])
    ours = {module for module in map(_known, imported) if module}
    roots = {name.split(".")[0] for name in imported}
    layer = relative.split("/")[0]
    if layer == "results":  # a result's messages: their types imported inside its functions, never rclpy
        top = {name.split(".")[0] for name in _imports(SOURCES[relative], top_level_only=True)}
        assert not top & ROS_MODULES and "rclpy" not in roots, f"{relative} imports ROS at import time, or rclpy"
        by_name = {"import_module", "__import__"} & {
            node.attr if isinstance(node, ast.Attribute) else node.id
            for node in ast.walk(ast.parse(SOURCES[relative].read_text()))
            if isinstance(node, ast.Attribute | ast.Name)
        }
        assert not by_name, f"{relative} imports by name ({sorted(by_name)}): an import this test cannot see"
    elif layer not in ("ros", "cli.py") and relative not in ROS_USERS and relative not in ENTRY_POINTS:
        assert not roots & ROS_MODULES, f"{relative} imports ROS ({sorted(roots & ROS_MODULES)}): only ros/ may"
    own = _layer(relative)
    upward = sorted(module for module in ours if _layer(module) > own)
    assert not upward, f"{relative} ({LAYERS[own][0]}) imports {upward}, of a layer above it"
    if layer == "tools":
        generator = {module for module in ours if module.startswith("generator/")}
        allowed = {"generator/package.py", "generator/writing.py"}
        assert generator <= allowed, f"{relative} takes model knowledge from {sorted(generator)}"
    if layer in ("ros", "models", "runtime") or relative in ENTRY_POINTS:
        assert "families/registry.py" not in ours, f"{relative} imports every family: a node needs only its own"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected components of more than one module (Tarjan's search,
    iterative), each sorted, in the order found."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_search_finds_every_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"f"}, "f": {"e"}, "g": {"g"}}
    assert cycles(graph) == [["a", "b", "c"], ["e", "f"]]  # a module importing itself is no cycle between modules
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    """No two modules import each other, directly or through others, counting every import (lazy ones inside
    functions and those under TYPE_CHECKING too: each is a dependency, whatever Python makes of it at run time)."""
    found = cycles(_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(component) for component in found)


def _family_comparisons(path: Path) -> list[tuple[int, str]]:
    """The comparisons in ``path`` of a value with a family's name or a result kind's message type."""
    kinds = {spec.result.message for spec in FAMILIES.values() if spec.result}
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and (side.value in FAMILIES or side.value in kinds):
                    found.append((node.lineno, side.value))
    return found


@pytest.mark.parametrize("relative", [name for name in sorted(SOURCES) if name.startswith(("cli", "tools/"))])
def test_the_cli_and_tools_ask_a_familys_result_kind_not_its_name(relative):
    """cli*.py and tools/ tell families apart by their data (result kind, runs_on, pipeline, values_from_model,
    accuracy_loss), never by comparing a name or a message type."""
    found = _family_comparisons(SOURCES[relative])
    assert not found, f"{relative} compares family names: {found}"


def test_recognition_rules_import_no_adapter():
    """Every node recognises every family's models at start-up: the rules must stay light, so that a package
    carries every rule but only its own family's adapter."""
    light = ["models/recognition.py", "models/interface.py", "models/ultralytics.py", "models/bounds.py"]
    light += [relative for relative in SOURCES if relative.endswith("_interface.py")]
    allowed = {"runtime/runner.py", "text.py", "parameters.py", "files.py", *light}  # files.py: bounded reads
    for relative in light:
        ours = {module for module in map(_known, _imports(SOURCES[relative])) if module}
        assert ours <= allowed, f"{relative} imports {sorted(ours - allowed)}"
    assert _imports(SOURCES["families/__init__.py"]) == set()


def test_the_registry_and_the_rules_know_the_same_families():
    # InpaintNet: TrackNet's companion, no node; track: no model of its own (its re-id model is reid's)
    assert set(recognition.FAMILY_NAMES) == {*FAMILIES, "inpaintnet"} - {"track"}
    assert [name for name, spec in FAMILIES.items() if spec.rule is None] == ["track"]
    for name, spec in FAMILIES.items():
        assert spec.rule is None or (spec.rule.family == name and spec.rule in recognition.RULES)


def test_a_family_without_a_node_is_listed_but_has_no_node_files():
    """reid has no node (node_module None): no rendered entry point, launch file or config; every other family has."""
    assert [name for name, spec in FAMILIES.items() if not spec.has_node] == ["reid"]
    assert list(NODE_FAMILIES) == [name for name in FAMILIES if name != "reid"]
    root = SOURCE_ROOT.parent
    for name in FAMILIES:
        files = (SOURCE_ROOT / f"{name}_onnx_node.py", root / "launch" / f"{name}_onnx.launch.py")
        assert all(path.is_file() for path in files) == (name in NODE_FAMILIES), name
        assert (root / "config" / f"{name}_onnx.yaml").is_file() == (name in NODE_FAMILIES), name


@pytest.mark.parametrize(
    ("name", "adapter", "skip"),
    [
        ("yolo", YoloDetector.__init__, ("pose",)),
        ("yolo_pose", YoloDetector.__init__, ("pose",)),
        ("fasterrcnn", FasterRCNNDetector.__init__, ()),
        ("rtmpose", RTMPoseEstimator.__init__, ()),
    ],
)
def test_family_options_are_the_adapters_keyword_arguments(name, adapter, skip):
    """Each detector family lists its adapter's options once; they must be the adapter's own."""
    options = [option for option in inspect.signature(adapter).parameters if option not in ("self", "runner", *skip)]
    if name == "rtmpose":
        top_down = [option for option in inspect.signature(TopDownPose.__init__).parameters if option != "self"]
        options = [option.replace("estimator", "") for option in top_down if option != "estimator"] + options
    assert list(family(name).options) == options


# What a generated package copies of this package's modules: its own family's, every family's (light) rule, and what
# its launch file runs. Every family's pipeline returns FrameResults (results/frame.py): every package carries their
# parts (but the COCO metrics of the tools, results/coco.py).
RESULTS = [f"results/{name}.py" for name in ("__init__", "ball", "boxes", "colours", "dense", "drawing", "frame")]
RESULTS += ["results/classes.py", "results/keypoints.py", "results/rotated.py"]
RESULTS += ["results/masks.py", "results/part.py", "results/text.py"]
SHARED = [
    "families/__init__.py",
    "cameras.py",  # several cameras on one node (ros/inference_node.py)
    "families/family.py",
    "families/prompts.py",
    "files.py",  # the results' file writer
    "images.py",
    "models/__init__.py",
    "models/bounds.py",
    "models/depth_interface.py",
    "models/detr_interface.py",
    "models/fasterrcnn_interface.py",
    "models/florence2_interface.py",
    "models/interface.py",
    "models/open_vocab_interface.py",
    "models/recognition.py",
    "models/reid_interface.py",
    "models/rtmpose_interface.py",
    "models/sam_interface.py",
    "models/tracknet_interface.py",
    "models/ultralytics.py",
    "models/yolo_interface.py",
    "parameters.py",
    "quiet.py",
    *RESULTS,
    "ros/__init__.py",
    "ros/cameras.py",
    "ros/inference_node.py",
    "ros/launch_description.py",
    "ros/messages.py",
    "ros/monitor.py",
    "ros/node_diagnostics.py",
    "ros/node_inputs.py",
    "ros/node_live.py",
    "ros/node_outputs.py",
    "ros/node_prompts.py",
    "ros/node_workers.py",
    "ros/parameters.py",
    "ros/spin.py",
    "ros/start.py",
    "ros/transport.py",  # the Fast DDS transport a node chooses for itself, and its loss advice
    "runtime/__init__.py",
    "runtime/cpu.py",
    "runtime/providers.py",
    "runtime/runner.py",
    "streaming.py",
    "text.py",
    "workers.py",
]
# The tracker and its re-identification embedder (on the package's own runner), in every detection node, with the
# frame pipeline holding it and the new-stream rule (families/pipeline.py); identities across cameras.
TRACKER = [
    "families/frame_pipeline.py",
    "families/pipeline.py",
    "results/finite.py",  # what every detection passes (the pipeline's, the track node's)
    "families/reid.py",
    "families/tracking.py",
    "models/global_ids.py",
    "models/reid.py",
    "models/reid_calibration.py",
    "models/tracker.py",
]
CARRIED = {
    "tracknet": [
        "families/tracknet.py",
        "models/ball_stream.py",
        "models/tracknet_background.py",
        "models/tracknet_stream.py",
        "models/inpaint_stream.py",
        "ros/tracknet_node.py",
    ],
    "yolo": [
        "families/detection.py",
        "families/yolo.py",
        "models/geometry.py",
        "models/masks.py",
        "models/yolo.py",
        "ros/detection_node.py",
        *TRACKER,
    ],
    "yolo_cls": [
        "families/detection.py",
        "families/yolo_cls.py",
        "models/geometry.py",
        "models/yolo_cls.py",  # Pillow's resize, as Ultralytics' classify_transforms
        "ros/detection_node.py",
        *TRACKER,  # the detection families' pipeline (no tracking parameters)
    ],
    "detr": [
        "families/detection.py",
        "families/detr.py",
        "models/detr.py",
        "models/geometry.py",
        "ros/detection_node.py",
        *TRACKER,
    ],
    "sam": [
        "families/detection.py",
        "families/sam.py",
        "models/detr.py",  # Pillow's resize, as SamProcessor's
        "models/geometry.py",
        "models/masks.py",
        "models/sam.py",
        "models/sam_detector.py",
        "ros/detection_node.py",
        *TRACKER,  # the detection families' pipeline (tracking off)
    ],
    "track": [
        "families/detection.py",
        "families/track.py",
        "ros/track_node.py",
        "ros/tracks.py",
        *TRACKER,
    ],
    "open_vocab": [
        "families/detection.py",
        "families/open_vocab.py",
        "models/detr.py",  # Pillow's resize, as the processors'
        "models/geometry.py",
        "models/grounding_dino.py",
        "models/masks.py",  # models/yolo.py's segmentation heads
        "models/open_vocab.py",
        "models/owl.py",
        "models/tokenizer_file.py",
        "models/yolo.py",  # YOLO-World / YOLOE with text embeddings: YOLO's letterbox and NMS
        "models/yolo_world.py",
        "ros/detection_node.py",
        *TRACKER,
    ],
    "florence2": [
        "families/detection.py",
        "families/florence2.py",
        "models/florence2.py",
        "models/florence2_answer.py",
        "models/florence2_beams.py",
        "models/tokenizer_file.py",
        "ros/detection_node.py",
        *TRACKER,
    ],
    "depth": [
        "camera_infos.py",
        "families/depth.py",
        "families/frame_pipeline.py",
        "models/depth.py",
        "ros/depth_node.py",
    ],
}


@pytest.mark.parametrize("name", sorted(CARRIED))
def test_a_generated_package_carries_only_its_own_familys_code(name):
    assert copied_modules(family(name), BACKENDS["onnx"]) == sorted(SHARED + CARRIED[name])
    files = package_files(name, "onnx", "carried")
    python = sorted(path.removeprefix("carried/") for path in files if path.endswith(".py"))
    rendered = ["__init__.py", f"{name}_onnx_node.py", "runtime/onnx_runner.py", f"launch/{name}_onnx.launch.py"]
    assert python == sorted([*SHARED, *CARRIED[name], *rendered, "setup.py", "test/test_smoke.py"])
    # The tracker's assignment solver and OWLv2's resize are scipy's: declared where either is carried, only there.
    scipy = set(TRACKER) <= set(CARRIED[name]) or "models/owl.py" in CARRIED[name]
    assert ("<exec_depend>python3-scipy</exec_depend>" in files["package.xml"]) == scipy
    # The export's own tokenizer is read with the tokenizers library: open_vocab's, under its custom rosdep key.
    tokenizers = "models/tokenizer_file.py" in CARRIED[name]
    assert ("<exec_depend>python3-tokenizers-pip</exec_depend>" in files["package.xml"]) == tokenizers
    assert ('"tokenizers",' in files["setup.py"]) == tokenizers
    assert ("python3-tokenizers-pip:" in files.get("rosdep.yaml", "")) == tokenizers
    assert ('"scipy",' in files["setup.py"]) == scipy
    # DETR and open-vocabulary frames (models/detr.py's pil_resize), depth models', Ultralytics classifiers' and
    # Florence-2's inputs are resized by PIL, as the exporters resize them: Pillow declared where one is carried.
    pillow = bool(
        {"models/detr.py", "models/depth.py", "models/yolo_cls.py", "models/florence2.py"} & set(CARRIED[name])
    )
    assert ("<exec_depend>python3-pil</exec_depend>" in files["package.xml"]) == pillow
    assert ('"pillow",' in files["setup.py"]) == pillow


def test_recognition_pairs_simcc_outputs_as_the_adapter_does(tmp_path):
    """Two unnamed SimCC outputs whose lengths are both near twice the input's sides in either order: inspect names
    as x and y what the adapter reads as x and y (the order whose lengths share one split ratio)."""
    model = build_model(tmp_path / "r.onnx", {"input": [1, 3, 24, 28]}, {"a": [1, 17, 44], "b": [1, 17, 47]})
    found = recognise(summarize(model))
    estimator = RTMPoseEstimator(OnnxRunner.load(model, {}, logging.getLogger("test")))
    assert found.family == "rtmpose"
    assert (found.details["simcc_x"], found.details["simcc_y"]) == estimator.output_names == ("b", "a")


def test_an_adapter_is_put_on_a_runner_one_way():
    """Family.detector is the one way to a family's adapter from a runner and options (Family.build, and the
    pipeline, from parameter values): no module calls a family's ``make`` but family.py, none defines a twin."""
    twins = {"make_detector", "build_detector", "make_adapter", "build_adapter"}
    for folder in ("vision_factory", "test", "benchmarks"):
        for path in (SOURCE_ROOT.parent / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    assert node.name not in twins, f"{path}:{node.lineno} defines {node.name}: use Family.detector"
                called = node.func.attr if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else ""
                assert called != "make" or path.name == "family.py", f"{path}:{node.lineno} calls make: use detector"
