"""Build the files of a standalone ROS 2 package for one (family, backend), and write them safely.

A generated package holds three kinds of files:
- copies of this package's own modules, byte for byte: the family's module (families/<name>.py),
  its node, what its launch file runs (ros/launch_description.py) and everything they import
  (pre/post-processing, image conversion, parameters, every family's recognition rule), found by
  following relative imports, so there is one source for that code and no hand-kept second copy;
  no other family's module or adapter;
- the backend's runner, rendered from templates/runners/;
- the package's own wiring, rendered from templates/package/.
Some of vision_factory's own files are renders of the same templates (``own_files``).
"""

from __future__ import annotations

import ast
import hashlib
import json
import keyword
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import yaml

from .. import __version__
from ..families.family import Family
from ..families.registry import NODE_FAMILIES, family
from ..models.model_file import summarize
from ..parameters import CAMERA_TOPIC, with_new_defaults
from ..ros.launch_description import Argument, NodeLaunch
from ..ros.transport import NODE_PROFILE, SHARED_MEMORY_PROFILE
from ..runtime.backends import BACKENDS, Backend, backend
from ..runtime.providers import resolve_provider_names
from ..runtime.runner import model_inputs
from ..runtime.tensorrt_runner import PRECISIONS as TENSORRT_PRECISIONS
from ..share import share_path
from ..text import untrusted
from ..usage import UsageError
from . import ABOUT_DEFAULTS, ABOUT_OPTIONS
from .render import control_character, render

SOURCE_ROOT = Path(__file__).resolve().parent.parent  # vision_factory/
PACKAGE_CHARACTERS = re.compile(r"[a-z0-9_]+")
PACKAGE_NAME_RULE = (
    "The rule (REP 144): lowercase letters, digits and single underscores between them (no double or trailing "
    "underscore), starting with a letter, 2 to 50 characters, e.g. my_ball_tracker"
)
MAX_PACKAGE_NAME = 50  # in PACKAGE_NAME_RULE; longer names push rendered lines past the line length
BACKEND_EXAMPLES = "onnx:cuda, openvino:GPU, tensorrt:fp16"  # backend:option, a runner's default provider...
MAX_ABOUT = 100  # characters of a maintainer, email or license (setup.py keeps within its line length)
# The address catkin_pkg (colcon, rosdep, bloom) accepts in <maintainer email="...">; it refuses the package otherwise.
EMAIL = re.compile(r"[-a-zA-Z0-9_%+]+(\.[-a-zA-Z0-9_%+]+)*@[-a-zA-Z0-9%]+(\.[-a-zA-Z0-9%]+)*\.[a-zA-Z]{2,}")
ROS_WHEELS = {"rclpy": "ros-rclpy", "rcl_interfaces": "ros-rcl-interfaces"}  # others: ros-<name with dashes>
NO_WHEEL = ("vision_msgs", "vision_factory_interfaces")
LAUNCH_MODULE = "ros/launch_description.py"  # what the launch file runs (it imports it from the package)
START_MODULE = "ros/start.py"  # what the rendered node module starts its node through
TOKENIZERS_ROSDEP = "python3-tokenizers-pip"  # rosdep/vision_factory.yaml's


class GeneratorError(ValueError):
    """A request the generator refuses; the message says how to fix it."""


def check_package_name(name: str) -> None:
    """ROS package naming rules (REP 144), and a name Python can import without shadowing.

    REP 144 (mandatory rules): only lowercase alphanumerics and "_" separators, starting with an
    alphabetic character, no multiple "_" separators in a row, at least two characters. It does not
    name a trailing underscore; a separator stands between two words, so none may end the name.
    """
    problem = None
    if len(name) > MAX_PACKAGE_NAME:
        problem = f"at most {MAX_PACKAGE_NAME} characters"
    elif len(name) < 2:
        problem = "at least two characters"
    elif not PACKAGE_CHARACTERS.fullmatch(name):
        problem = "only lowercase letters, digits and underscores (no spaces, dashes, dots or other characters)"
    elif not name[0].isalpha():
        problem = "starting with a letter"
    elif "__" in name:
        problem = "no double underscore"
    elif name.endswith("_"):
        problem = "no trailing underscore"
    elif keyword.iskeyword(name) or name in sys.stdlib_module_names or name == "vision_factory":
        problem = "it would shadow a Python keyword or module; pick a more specific name"
    elif node_executable(name) in {spec.executable for spec in NODE_FAMILIES.values()}:
        problem = (
            f"its node command {node_executable(name)} would be vision_factory's own, and installing both would "
            f"replace one with the other; pick a more specific name, e.g. my_{name}"
        )
    if problem:
        raise GeneratorError(
            f"package name '{untrusted(name)}' is not a valid ROS package name: {problem}. {PACKAGE_NAME_RULE}"
        )


def node_executable(package: str) -> str:
    """A generated package's node command: named after the package, so that no two packages' commands collide."""
    return f"{package}_node"


def check_about(about: dict[str, str]) -> None:
    """Maintainer, email and license: one printable line each (escaped in every file), the email as ROS reads it."""
    for key, value in about.items():
        option = ABOUT_OPTIONS[key]
        char = control_character(value)
        if char is not None:
            raise UsageError(
                f"'{untrusted(value)}' holds the control character {char!r} (a newline, tab or escape): give it on one "
                "line, without control characters",
                option,
            )
        if not value.strip() or len(value) > MAX_ABOUT:
            raise UsageError(f"give 1 to {MAX_ABOUT} characters (this has {len(value.strip())})", option)
        if key == "maintainer_email" and not EMAIL.fullmatch(value):
            raise UsageError(
                f"'{untrusted(value)}' is not an email address ROS tools accept (catkin_pkg refuses the package.xml): "
                "give one like name@example.com (letters, digits, . _ % + - before the @)",
                option,
            )


def node_module_name(spec: Family, backend_spec: Backend) -> str:
    return f"{spec.name}_{backend_spec.name}_node"


def launch_file_name(spec: Family, backend_spec: Backend) -> str:
    return f"{spec.name}_{backend_spec.name}.launch.py"


def config_file_name(spec: Family, backend_spec: Backend) -> str:
    return f"{spec.name}_{backend_spec.name}.yaml"


def _usage_arguments(spec: Family, launch_parameters: list[Argument]) -> list[str]:
    """The launch usage line's ``argument:=example``: each required model (a path under /models), the camera topic,
    then the family's ``usage_arguments``."""
    required = [argument.name for argument in launch_parameters if argument.default is None]
    models = [f"{name}:=/models/{name.removesuffix('_path')}.onnx" for name in required]
    return [*models, f"image_topic:={CAMERA_TOPIC}", *spec.usage_arguments]


def template_context(
    spec: Family,
    backend_spec: Backend,
    package: str,
    executable: str | None = None,
    runner: dict[str, object] | None = None,
    **about: str,
) -> dict[str, object]:
    """What every template may use; ``executable``: the node's command (default: named after the package);
    ``runner``: what the runner template states (``runner_context``; default: the backend's own defaults, any model);
    ``about``: maintainer, maintainer_email, license."""
    runner = runner or runner_context(backend_spec)
    parameters = (*spec.node_parameters, *with_new_defaults(backend_spec.parameters, **runner["defaults"]))
    executable = executable or node_executable(package)
    launch = NodeLaunch(spec, backend_spec.runner(), package, executable, config_file_name(spec, backend_spec))
    launch_parameters = launch.parameters
    return {
        **ABOUT_DEFAULTS,
        **about,
        **runner,
        "package": package,
        "family": spec,
        "backend": backend_spec,
        "parameters": parameters,
        "launch_parameters": launch_parameters,
        "launch_argument_lines": textwrap.wrap(", ".join(a.name for a in launch.arguments(share="")) + ".", 100),
        "usage_arguments": _usage_arguments(spec, launch_parameters),
        "launch_file": launch_file_name(spec, backend_spec),
        "config_file": config_file_name(spec, backend_spec),
        "node_module": node_module_name(spec, backend_spec),
        "executable": executable,
        "tools": [(f"{package}_{script}", function) for script, function in backend_spec.tools],
        "camera_topic": CAMERA_TOPIC,
        "generator_version": __version__,
    }


def runner_context(backend_spec: Backend, model: Path | None = None, option: str = "") -> dict[str, object]:
    """What a runner template states as constants: the inputs of ``model`` (the model file the package is generated
    for; None: any model), and its runner's defaults, the target ``option`` (``tensorrt:fp16``'s fp16) setting the
    backend's option (provider, device, precision)."""
    defaults = dict(backend_spec.defaults)
    if option:
        defaults[backend_spec.option] = _checked_option(backend_spec, option)
    if model is None:
        return {"defaults": defaults, "model_inputs": None, "model_file": ""}
    inputs = model_inputs(summarize(model).inputs)
    return {"defaults": defaults, "model_inputs": inputs, "model_file": model.name}


def _checked_option(backend_spec: Backend, option: str) -> str:
    """A target option as a generated runner's default, refused as its runner would refuse it (and on one line)."""
    where = f"--backend {backend_spec.name}:{untrusted(option, 100)}"
    if control_character(option) is not None or not option.strip():
        raise GeneratorError(f"{where}: give the {backend_spec.option} on one line, e.g. {BACKEND_EXAMPLES}")
    if backend_spec.name == "onnx":
        try:
            resolve_provider_names(option)
        except ValueError as exc:
            raise GeneratorError(f"{where}: {exc}") from None
    if backend_spec.name == "tensorrt" and option not in TENSORRT_PRECISIONS:
        raise GeneratorError(f"{where}: the precision is one of {', '.join(TENSORRT_PRECISIONS)}")
    return option


def own_files() -> Iterator[tuple[str, str, str]]:
    """vision_factory's own files that are renders: (repository path, template, content).

    Runners come first: the other renders read the runners' parameter lists.
    """
    for spec in BACKENDS.values():
        template = f"runners/{spec.template}"
        yield f"vision_factory/runtime/{spec.runner_module}.py", template, render(template, **runner_context(spec))
    for name in NODE_FAMILIES:
        spec = family(name)
        context = template_context(spec, backend("onnx"), "vision_factory", spec.executable)
        for path, template in (
            (f"vision_factory/{context['node_module']}.py", "package/node.py.j2"),
            (f"launch/{context['launch_file']}", "package/launch.py.j2"),
            (f"config/{context['config_file']}", "package/config.yaml.j2"),
        ):
            yield path, template, render(template, **context)


def _relative_imports(path: Path) -> set[Path]:
    """Files under SOURCE_ROOT that ``path`` imports relatively; an absolute vision_factory import is an error."""
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
            names = [node.module] if isinstance(node, ast.ImportFrom) else [alias.name for alias in node.names]
            if any(name and name.split(".")[0] == "vision_factory" for name in names):
                raise GeneratorError(f"{path} imports vision_factory absolutely; use a relative import")
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        base = path.parent
        for _ in range(node.level - 1):
            base = base.parent
        modules = [base.joinpath(*node.module.split("."))] if node.module else []
        modules += [module / alias.name for module in modules or [base] for alias in node.names]
        for module in modules:
            for candidate in (module.with_suffix(".py"), module / "__init__.py"):
                if candidate.is_file():
                    found.add(candidate)
    return found


def copied_modules(spec: Family, backend_spec: Backend) -> list[str]:
    """Paths (relative to vision_factory/) of the modules a package needs, roots excluded from rendering: the
    family's, its node's, the runner's, the launch file's and the rendered node module's, and what they import."""
    rendered = SOURCE_ROOT / "runtime" / f"{backend_spec.runner_module}.py"
    seen: set[Path] = set()
    pending = [SOURCE_ROOT / "families" / f"{spec.name}.py", SOURCE_ROOT / "ros" / f"{spec.node_module}.py", rendered]
    pending += [SOURCE_ROOT / LAUNCH_MODULE, SOURCE_ROOT / START_MODULE]
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        pending += _relative_imports(path)
        for folder in path.relative_to(SOURCE_ROOT).parents:
            if folder != Path("."):
                pending.append(SOURCE_ROOT / folder / "__init__.py")
    return sorted(str(path.relative_to(SOURCE_ROOT)) for path in seen if path != rendered)


def custom_rosdep_keys() -> dict[str, object]:
    """rosdep keys ros/rosdistro lacks, defined by rosdep/vision_factory.yaml."""
    return yaml.safe_load(share_path("rosdep", "vision_factory.yaml").read_text())


def _rosdep_definitions(package: str, keys: list[str]) -> str:
    definitions = custom_rosdep_keys()
    header = "# rosdep keys of this package that ros/rosdistro lacks; register once, then `rosdep update`:\n"
    register = '#   echo "yaml file://$(pwd)/rosdep.yaml" | sudo tee /etc/ros/rosdep/sources.list.d/50-{}.list\n'
    return header + register.format(package) + yaml.safe_dump({key: definitions[key] for key in keys}, sort_keys=False)


def _ros_wheel(dependency: str) -> str:
    return ROS_WHEELS.get(dependency, "ros-" + dependency.replace("_", "-"))


def package_files(
    family_name: str, backend_name: str, package: str, model: Path | None = None, **about: str
) -> dict[str, str | bytes]:
    """Every file of the generated package, by path relative to the package directory. ``backend_name``:
    ``backend[:option]`` (``tensorrt:fp16``: the runner's default precision); ``model``: the model file it is
    generated for (its runner refuses a model of other inputs; None: any model of the family)."""
    check_package_name(package)
    check_about(about)
    name, _, option = backend_name.partition(":")
    spec, backend_spec = family(family_name), backend(name)  # every family runs on every backend
    if not spec.has_node:
        raise GeneratorError(
            f"{spec.name} has no node of its own ({spec.summary}): generate one of {', '.join(NODE_FAMILIES)}"
        )
    context = template_context(spec, backend_spec, package, runner=runner_context(backend_spec, model, option), **about)
    wheels = [_ros_wheel(name) for name in spec.ros_dependencies if name not in NO_WHEEL]
    context["ros_wheels"] = wheels + ["ros-rmw-fastrtps-cpp"]
    context["built_interfaces"] = [name for name in spec.ros_dependencies if name in NO_WHEEL]
    modules = copied_modules(spec, backend_spec)
    sources = [(SOURCE_ROOT / module).read_bytes() for module in modules]

    def imports(module: str, lazily: bool = True) -> bool:  # a module the package carries imports it (in a function)
        indent = rb"[ \t]*" if lazily else b""
        return any(re.search(rb"^" + indent + rb"(from|import) " + module.encode() + rb"\b", s, re.M) for s in sources)

    # the tracker's assignment solver, OWLv2's resize (results/part.py's, in a function, is the tools' comparison)
    context["carries_scipy"] = imports("scipy", lazily=False)
    context["carries_pillow"] = imports("PIL")  # DETR's, depth's, open_vocab's and yolo_cls's resize
    # open_vocab: the export's own tokenizer, read with the tokenizers library (rosdep key python3-tokenizers-pip)
    context["carries_tokenizers"] = imports("tokenizers")
    custom = [key for key in backend_spec.rosdep if key in custom_rosdep_keys()]
    context["custom_rosdep_keys"] = custom + ([TOKENIZERS_ROSDEP] if context["carries_tokenizers"] else [])
    files: dict[str, str | bytes] = {}
    for relative in modules:
        files[f"{package}/{relative}"] = (SOURCE_ROOT / relative).read_bytes()
    runner = f"runners/{backend_spec.template}"
    files[f"{package}/runtime/{backend_spec.runner_module}.py"] = render(runner, **context)
    files[f"{package}/__init__.py"] = render("package/init.py.j2", **context)
    files[f"{package}/{context['node_module']}.py"] = render("package/node.py.j2", **context)
    files[f"launch/{context['launch_file']}"] = render("package/launch.py.j2", **context)
    files[f"config/{context['config_file']}"] = render("package/config.yaml.j2", **context)
    for profile in (SHARED_MEMORY_PROFILE, NODE_PROFILE):  # the launch files' and the nodes' own (ros/transport.py)
        files[f"config/{profile}"] = share_path("config", profile).read_bytes()
    if context["custom_rosdep_keys"]:
        files["rosdep.yaml"] = _rosdep_definitions(package, context["custom_rosdep_keys"])
    files["package.xml"] = render("package/package.xml.j2", **context)
    files["setup.py"] = render("package/setup.py.j2", **context)
    files["setup.cfg"] = render("package/setup.cfg.j2", **context)
    files[f"resource/{package}"] = ""
    files["README.md"] = render("package/README.md.j2", **context)
    files["test/test_smoke.py"] = render("package/test_smoke.py.j2", **context)
    files["generated.json"] = _manifest(spec, backend_spec, package, files)
    return files


def _manifest(spec: Family, backend_spec: Backend, package: str, files: dict[str, str | bytes]) -> str:
    """What generated the package, and a hash of every file, to tell local edits from a regeneration."""
    hashes = {
        path: hashlib.sha256(content.encode() if isinstance(content, str) else content).hexdigest()
        for path, content in sorted(files.items())
    }
    record = {"generator": f"vision_factory {__version__}", "family": spec.name, "backend": backend_spec.name}
    return json.dumps({**record, "package": package, "sha256": hashes}, indent=2) + "\n"
