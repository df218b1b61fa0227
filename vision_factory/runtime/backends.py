"""The backends, as one table: each one's runner, template, install hints, what it runs on here; and targets.

A target is ``backend[:option]`` as the tools take it: ``onnx:cpu``, ``onnx:cuda`` (the
execution provider), ``openvino:CPU``, ``openvino:GPU`` (the device), ``tensorrt:fp16`` (the
precision). ``load_target`` turns one into a loaded runner. The runner modules are rendered
from templates/runners/ and copied into generated packages; they do not import this table.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from ..parameters import Parameter, Value
from .availability import BackendStatus, onnxruntime_status, openvino_status, tensorrt_status
from .providers import DEFAULT_PROVIDER
from .runner import Runner


@dataclass(frozen=True)
class Backend:
    name: str
    title: str
    runner_module: str  # module under runtime/, rendered from the template
    runner_class: str
    template: str  # under templates/runners/
    option: str  # the runner setting a target's ':option' sets
    pip: tuple[str, ...]  # what setup.py of a generated package requires
    rosdep: tuple[str, ...]  # what its package.xml declares
    install_hint: str
    probe: Callable[[str, str], BackendStatus]  # (name, install_hint) -> what really runs here
    bench_options: tuple[str, ...]  # the options `bench` tries by default
    tools: tuple[tuple[str, str], ...] = ()  # (executable, function in the runner module)
    # The runner parameters whose defaults its template states as constants (templates/runners/), and those
    # defaults: a generated package's runner may state others (`generate --backend tensorrt:fp16`).
    defaults: dict[str, Value] = field(default_factory=dict)

    def runner(self) -> type[Runner]:
        """The runner class, imported on first use (its runtime itself by its ``prepare`` or a model's load)."""
        module = importlib.import_module(f"{__package__}.{self.runner_module}")
        return getattr(module, self.runner_class)

    @property
    def parameters(self) -> tuple[Parameter, ...]:
        return self.runner().PARAMETERS

    def status(self) -> BackendStatus:
        return self.probe(self.name, self.install_hint)


BACKENDS: dict[str, Backend] = {
    spec.name: spec
    for spec in (
        Backend(
            name="onnx",
            title="ONNX Runtime",
            runner_module="onnx_runner",
            runner_class="OnnxRunner",
            template="onnx.py.j2",
            option="execution_provider",
            pip=("onnxruntime",),
            rosdep=("python3-onnxruntime-pip",),
            install_hint="pip install onnxruntime (CPU) or onnxruntime-gpu (CUDA, TensorRT provider); never both",
            probe=onnxruntime_status,
            bench_options=("cpu", "cuda"),
            defaults={"execution_provider": DEFAULT_PROVIDER},
        ),
        Backend(
            name="openvino",
            title="OpenVINO",
            runner_module="openvino_runner",
            runner_class="OpenVinoRunner",
            template="openvino.py.j2",
            option="device",
            pip=("openvino",),
            rosdep=("python3-openvino-pip",),
            install_hint="pip install openvino",
            probe=openvino_status,
            bench_options=("CPU", "GPU"),
            defaults={"device": "CPU", "inference_precision": "f32"},
        ),
        Backend(
            name="tensorrt",
            title="TensorRT",
            runner_module="tensorrt_runner",
            runner_class="TensorRtRunner",
            template="tensorrt.py.j2",
            option="precision",
            pip=("tensorrt", "cuda-python"),
            rosdep=("python3-tensorrt-pip", "python3-cuda-python-pip"),
            install_hint="pip install tensorrt cuda-python (needs an NVIDIA GPU and driver)",
            probe=tensorrt_status,
            bench_options=("fp32",),
            tools=(("build_engine", "build_engine_main"),),
            defaults={"precision": "fp32"},
        ),
    )
}
BENCH_TARGETS = ",".join(f"{spec.name}:{option}" for spec in BACKENDS.values() for option in spec.bench_options)


def backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend '{name}': choose one of {', '.join(BACKENDS)}")
    return BACKENDS[name]


def statuses() -> list[BackendStatus]:
    """Every backend's status on this machine, in the table's order."""
    return [spec.status() for spec in BACKENDS.values()]


@dataclass(frozen=True)
class Target:
    label: str  # as given, e.g. 'openvino:CPU'
    backend: Backend
    settings: dict[str, str] = field(default_factory=dict)  # the runner setting the option sets, if given


def parse_targets(text: str) -> list[Target]:
    """'onnx:cpu,openvino:CPU' -> its targets; an unknown backend is an error naming the known ones."""
    targets = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, option = item.partition(":")
        if name not in BACKENDS:
            raise ValueError(f"unknown backend '{name}' in '{item}': use {', '.join(BACKENDS)} (e.g. onnx:cpu)")
        spec = BACKENDS[name]
        targets.append(Target(item, spec, {spec.option: option} if option else {}))
    if not targets:
        raise ValueError("no backend given: e.g. --backends onnx:cpu,openvino:CPU")
    return targets


def load_target(target: str, model: str | os.PathLike, settings: dict | None = None) -> Runner:
    """A loaded runner for one target such as ``onnx:cpu``, ``openvino:CPU`` or ``tensorrt:fp16``; ``settings``
    adds runner settings (e.g. intra_op_threads)."""
    parsed = parse_targets(target)[0]
    return parsed.backend.runner().load(
        model, {**parsed.settings, **(settings or {})}, logging.getLogger("vision_factory")
    )


def describe_statuses(found: list[BackendStatus]) -> str:
    """Statuses as text: per backend its version, where it runs, and notes (or how to install it)."""
    lines = []
    for status in found:
        title = BACKENDS[status.name].title
        lines.append(
            f"{status.name}: {title} {status.version}" if status.installed else f"{status.name}: {title}: not installed"
        )
        lines += [f"  runs on: {target}" for target in status.targets]
        lines += [f"  {'note' if status.installed else 'install'}: {note}" for note in status.notes]
    return "\n".join(lines)
