"""Build the files of a standalone ROS 2 package for one (family, backend), and write them safely.

A generated package holds three kinds of files:
- copies of this package's own modules, byte for byte: the family's node and everything it
  imports (pre/post-processing, image conversion, parameters), found by following relative
  imports, so there is one source for that code and no hand-kept second copy;
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
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import yaml

from .. import __version__
from ..parameters import CAMERA_TOPIC, Parameter
from ..share import share_path
from .registry import BACKENDS, FAMILIES, BackendSpec, FamilySpec, backend, family
from .render import render

SOURCE_ROOT = Path(__file__).resolve().parent.parent  # vision_factory/
PACKAGE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
MAX_PACKAGE_NAME = 50  # longer names push rendered lines past the line length
ABOUT_DEFAULTS = {
    "maintainer": "Package maintainer",
    "maintainer_email": "maintainer@example.com",
    "license": "Apache-2.0",
}
ROS_WHEELS = {"rclpy": "ros-rclpy", "rcl_interfaces": "ros-rcl-interfaces"}  # others: ros-<name with dashes>
NO_WHEEL = ("vision_msgs",)  # built on pip-only machines by `vision-factory install-vision-msgs`


class GeneratorError(ValueError):
    """A request the generator refuses; the message says how to fix it."""


def check_package_name(name: str) -> None:
    """ROS package naming rules (REP 144), and a name Python can import without shadowing."""
    problem = None
    if len(name) > MAX_PACKAGE_NAME:
        problem = f"at most {MAX_PACKAGE_NAME} characters"
    elif not PACKAGE_NAME.match(name):
        problem = "use lowercase letters, digits and underscores, starting with a letter"
    elif "__" in name or name.endswith("_"):
        problem = "no double underscore and no trailing underscore"
    elif keyword.iskeyword(name) or name in sys.stdlib_module_names or name == "vision_factory":
        problem = "it would shadow a Python keyword or module; pick a more specific name"
    if problem:
        raise GeneratorError(f"package name '{name}' is not a valid ROS package name: {problem} (e.g. my_ball_tracker)")


def node_module_name(spec: FamilySpec, backend_spec: BackendSpec) -> str:
    return f"{spec.name}_{backend_spec.name}_node"


def launch_file_name(spec: FamilySpec, backend_spec: BackendSpec) -> str:
    return f"{spec.name}_{backend_spec.name}.launch.py"


def config_file_name(spec: FamilySpec, backend_spec: BackendSpec) -> str:
    return f"{spec.name}_{backend_spec.name}.yaml"


def _launch_argument(parameter: Parameter) -> dict[str, object]:
    default = parameter.default
    text = str(default).lower() if isinstance(default, bool) else str(default)
    return {
        "name": parameter.name,
        "launch_default": None if parameter.required else text,
        "type_name": type(default).__name__,
        "description": parameter.description,
    }


def template_context(spec: FamilySpec, backend_spec: BackendSpec, package: str, **about: str) -> dict[str, object]:
    """What every template may use; ``about``: maintainer, maintainer_email, license."""
    parameters = (*spec.parameters, *backend_spec.parameters)
    return {
        **ABOUT_DEFAULTS,
        **about,
        "package": package,
        "family": spec,
        "backend": backend_spec,
        "parameters": parameters,
        "launch_parameters": [_launch_argument(p) for p in parameters if p.launch_argument],
        "launch_file": launch_file_name(spec, backend_spec),
        "config_file": config_file_name(spec, backend_spec),
        "node_module": node_module_name(spec, backend_spec),
        "camera_topic": CAMERA_TOPIC,
        "generator_version": __version__,
    }


def own_files() -> Iterator[tuple[str, str, str]]:
    """vision_factory's own files that are renders: (repository path, template, content).

    Runners come first: the other renders read the runners' parameter lists.
    """
    for spec in BACKENDS.values():
        template = f"runners/{spec.template}"
        yield f"vision_factory/runtime/{spec.runner_module}.py", template, render(template)
    for name in FAMILIES:
        context = template_context(family(name), backend("onnx"), "vision_factory")
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


def copied_modules(spec: FamilySpec, backend_spec: BackendSpec) -> list[str]:
    """Paths (relative to vision_factory/) of the modules a package needs, roots excluded from rendering."""
    rendered = SOURCE_ROOT / "runtime" / f"{backend_spec.runner_module}.py"
    seen: set[Path] = set()
    pending = [SOURCE_ROOT / "ros" / f"{spec.node_module}.py", rendered]
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


def package_files(family_name: str, backend_name: str, package: str, **about: str) -> dict[str, str | bytes]:
    """Every file of the generated package, by path relative to the package directory."""
    check_package_name(package)
    spec, backend_spec = family(family_name), backend(backend_name)
    if backend_spec.name not in spec.backends:
        raise GeneratorError(
            f"family '{spec.name}' does not support backend '{backend_spec.name}': use {', '.join(spec.backends)}"
        )
    context = template_context(spec, backend_spec, package, **about)
    wheels = [_ros_wheel(name) for name in spec.ros_dependencies if name not in NO_WHEEL]
    context["ros_wheels"] = wheels + ["ros-rmw-fastrtps-cpp"]
    context["built_interfaces"] = [name for name in spec.ros_dependencies if name in NO_WHEEL]
    context["custom_rosdep_keys"] = [key for key in backend_spec.rosdep if key in custom_rosdep_keys()]
    files: dict[str, str | bytes] = {}
    for relative in copied_modules(spec, backend_spec):
        files[f"{package}/{relative}"] = (SOURCE_ROOT / relative).read_bytes()
    runner = f"runners/{backend_spec.template}"
    files[f"{package}/runtime/{backend_spec.runner_module}.py"] = render(runner)
    files[f"{package}/__init__.py"] = render("package/init.py.j2", **context)
    files[f"{package}/{context['node_module']}.py"] = render("package/node.py.j2", **context)
    files[f"launch/{context['launch_file']}"] = render("package/launch.py.j2", **context)
    files[f"config/{context['config_file']}"] = render("package/config.yaml.j2", **context)
    files["config/fastdds_shm.xml"] = share_path("config", "fastdds_shm.xml").read_bytes()
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


def _manifest(spec: FamilySpec, backend_spec: BackendSpec, package: str, files: dict[str, str | bytes]) -> str:
    """What generated the package, and a hash of every file, to tell local edits from a regeneration."""
    hashes = {
        path: hashlib.sha256(content.encode() if isinstance(content, str) else content).hexdigest()
        for path, content in sorted(files.items())
    }
    record = {"generator": f"vision_factory {__version__}", "family": spec.name, "backend": backend_spec.name}
    return json.dumps({**record, "package": package, "sha256": hashes}, indent=2) + "\n"


def write_package(
    family_name: str,
    backend_name: str,
    package: str,
    out: Path,
    force: bool = False,
    make_zip: bool = False,
    **about: str,
) -> Path:
    """Write the package to out/<package> (and out/<package>.zip): all of it, or nothing."""
    files = package_files(family_name, backend_name, package, **about)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise GeneratorError(f"--out {out} is a file; give a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GeneratorError(f"cannot write to {out}: {exc.strerror}; choose a writable --out") from exc
    out = out.resolve()
    target = out / package
    if target.is_symlink() or (target.exists() and target.resolve().parent != out):
        raise GeneratorError(f"{target} is a link leading outside --out; remove it or choose another --out")
    if target.exists() and not force:
        raise GeneratorError(f"{target} already exists; pass --force to replace it")
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{package}-", dir=out))
    except OSError as exc:
        raise GeneratorError(f"cannot write to {out}: {exc.strerror}; choose a writable --out") from exc
    try:
        for relative, content in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content.encode() if isinstance(content, str) else content)
        if make_zip:
            _zip(staging, package, out / f"{package}.zip.partial")
        if target.exists():  # the old package goes only once the new one is complete
            target.rename(staging / ".replaced")
        staging.rename(target)
        shutil.rmtree(target / ".replaced", ignore_errors=True)
        if make_zip:
            (out / f"{package}.zip.partial").replace(out / f"{package}.zip")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        (out / f"{package}.zip.partial").unlink(missing_ok=True)
    return target


def _zip(folder: Path, package: str, archive: Path) -> None:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                bundle.write(path, Path(package) / path.relative_to(folder))
