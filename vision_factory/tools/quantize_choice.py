"""quantize's choices when they are left to it, and what it says about them.

``--backend auto`` (int8, both installed): the model is made for ONNX Runtime and for OpenVINO, both timed in turn
with the FP32 model on the calibration inputs, and the faster kept (OpenVINO only when OPENVINO_MARGIN faster).
``--target-cpu auto``: the weights are made for this CPU's kind first (runtime/cpu.py); with ``--data``, where that
model loses more than ``--max-loss``, 7-bit weights (``avx2``, which hold on every x86 CPU) are tried next, then the
other backend's. The first candidate within the limit is published; when none is, the least lossy is left as
NAME.rejected.EXT and the command names the options that would help (``ways_on``).

Measured on the shapes YOLOv8n (shapes-val, calibrated on its first 32 images, compared on all 40) on an AMD EPYC
with AVX-512 VNNI: full-range ONNX Runtime weights lost AP 0.0309 (over the 0.03 limit), 7-bit ones gained 0.0085
(docs/tools/quantize.md).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..runtime.backends import load_target
from ..runtime.runner import Runner
from ..text import shown_path
from .quantize_calibration import REFERENCE

BACKENDS = ("onnx", "openvino")
AUTO = "auto"
RUNS_ON = {"onnx": "onnx:cpu", "openvino": "openvino:CPU"}  # where each backend's quantized model runs here
THREADS = {"onnx": "intra_op_threads", "openvino": "inference_threads"}  # each backend's CPU threads setting
SUFFIXES = {"onnx": ".onnx", "openvino": ".xml"}  # the model file each writes (an IR: its .bin beside)
# OpenVINO's int8 model is chosen over ONNX Runtime's only when it runs at least this much faster: ONNX Runtime's runs
# in this package's own nodes, OpenVINO's IR in a generated OpenVINO package (or the tools' openvino:CPU), and two
# models timed in turn on a shared machine differ by a few percent from one run to the next.
OPENVINO_MARGIN = 1.10
WEIGHTS = {"vnni": "full-range", "other": "full-range", "avx2": "7-bit"}  # the int8 weights of each kind


@dataclass
class Attempt:
    """One candidate model: made for ``backend`` with weights for ``kind`` CPUs, staged (files.Stage) until chosen."""

    backend: str
    kind: str  # runtime/cpu.py's CPU kind its int8 weights are made for; "" for fp16
    staging: Any  # files.Stage
    provenance: Any  # quantize.Provenance
    speed: dict[str, float] = field(default_factory=dict)  # speed_of's
    record: dict[str, Any] | None = None  # compare's saved report (with --data)
    compared: Path | None = None  # where it is saved
    comparison: Any = None  # compare's CommandReport
    loss: dict[str, Any] | None = None  # quantize.accuracy_loss's

    @property
    def within(self) -> bool:
        """Not compared, or its accuracy loss within the limit."""
        return self.loss is None or self.loss["value"] <= self.loss["limit"]

    @property
    def name(self) -> str:
        """e.g. "onnx 7-bit (avx2)"."""
        return f"{self.backend} {WEIGHTS[self.kind]} ({self.kind})" if self.kind else self.backend

    def lost(self) -> str:
        """e.g. "AP lost 0.0309"."""
        return f"{self.loss['loss']} {self.loss['value']:.4f}" if self.loss else "not compared"

    def summary(self) -> dict[str, Any]:
        """Its entry in quantize.json's choice."""
        return {
            "backend": self.backend,
            "target_cpu": self.kind,
            "speed": self.speed,
            "loss": self.loss,
            "comparison": str(self.compared) if self.compared else None,
        }


def openvino_missing() -> str:
    """'' when OpenVINO and NNCF (its int8 quantizer) import here, else what to install."""
    import importlib.util

    missing = [name for name in ("openvino", "nncf") if importlib.util.find_spec(name) is None]
    return f"{' and '.join(missing)} not installed (pip install {' '.join(missing)})" if missing else ""


def backends_for(backend: str, precision: str, out: Path | None = None) -> tuple[list[str], str]:
    """The backends to make the model for (--backend; auto: the one ``out``'s suffix names, NAME.onnx or NAME.xml,
    else both for int8 where OpenVINO and NNCF are installed), and why auto gives one only ('' otherwise)."""
    if backend != AUTO:
        return [backend], ""
    named = {suffix: name for name, suffix in SUFFIXES.items()}.get(Path(out).suffix if out else "")
    if named is not None:
        why = f"{named}: --out names a {SUFFIXES[named]} file (--out NAME without a suffix lets auto time both)"
        return [named], why
    if precision != "int8":
        why = "onnx: --backend auto measures int8 on this CPU; fp16 is for GPUs (--backend openvino for an IR)"
        return ["onnx"], why
    missing = openvino_missing()
    return (["onnx"], f"onnx: OpenVINO's int8 not measured, {missing}") if missing else (list(BACKENDS), "")


def kinds_for(target_cpu: str, precision: str, this: str) -> list[str]:
    """The CPU kinds to make int8 weights for, in the order tried: --target-cpu's; auto: this CPU's kind, then 7-bit
    weights (avx2) where it has full-range ones (7-bit weights hold on every CPU; full range saturates on an x86
    without VNNI, so an avx2 CPU tries nothing else). [""] for fp16."""
    if precision != "int8":
        return [""]
    if target_cpu != AUTO:
        return [target_cpu]
    return [this] if this == "avx2" else [this, "avx2"]


def published_name(out: Path, backend: str) -> Path:
    """The name the model of ``backend`` is published under: --out as given (NAME.onnx, NAME.xml), or --out NAME with
    the backend's suffix when auto chose it (NAME.onnx for ONNX Runtime, NAME.xml with NAME.bin for OpenVINO)."""
    out = Path(out)
    return out if out.suffix == SUFFIXES[backend] else out.with_name(out.name + SUFFIXES[backend])


def staged_name(out: Path, backend: str, kind: str, first_kind: str) -> Path:
    """The name a candidate is staged, timed and compared under (compare's files are named after it): the published
    name, with ``-KIND`` for a weight range tried after the first (their comparisons never overwrite each other)."""
    path = published_name(out, backend)
    return path if kind == first_kind else path.with_name(f"{path.stem}-{kind}{path.suffix}")


def backend_order(medians: Mapping[str, float]) -> list[str]:
    """The backends fastest first by their int8 models' median ms, ONNX Runtime first unless OpenVINO's runs
    OPENVINO_MARGIN faster."""
    return sorted(medians, key=lambda name: medians[name] * (OPENVINO_MARGIN if name == "openvino" else 1.0))


def order(medians: Mapping[str, float], kinds: Sequence[str]) -> list[tuple[str, str]]:
    """The candidates (backend, kind) in the order tried: the faster backend's kinds first (backend_order)."""
    return [(backend, kind) for backend in backend_order(medians) for kind in kinds]


# --- timing ------------------------------------------------------------------------------------------------


def load(target: str, model: Path, threads: int) -> Runner:
    """``model`` on ``target`` with ``threads`` CPU threads (the backend's setting for it; 0: its default)."""
    setting = THREADS[target.partition(":")[0]]
    return load_target(target, model, {setting: threads} if threads else None)


def timed_in_turn(
    model: Path,
    quantized: Mapping[str, tuple[str, Path]],
    feeds: Sequence[dict[str, np.ndarray]] | None,
    runs: int,
    threads: int = 0,
    reference: str = REFERENCE,
) -> dict[str, dict[str, float]]:
    """``model`` on ``reference`` (ONNX Runtime CPU) and each of ``quantized`` (label: (target, path)) timed on the
    same inputs in turn (A, B, C, then B, C, A ...) after a warm-up: per label, speed_of its median ms against the
    FP32 model's. ``threads``: CPU threads of each runtime, 0 = the runtime decides (as the nodes' defaults)."""
    runners = {"": load(reference, model, threads)} | {
        label: load(target, path, threads) for label, (target, path) in quantized.items()
    }
    if not feeds:
        feeds = [{info.name: _random_input(info) for info in runners[""].inputs}]
    for runner in runners.values():
        for feed in feeds[:3]:
            runner.run(feed)
    labels, runs = list(runners), max(runs, 1)
    times: dict[str, list[float]] = {label: [] for label in labels}
    for index in range(runs):
        feed = feeds[index % len(feeds)]
        shift = index % len(labels)
        for label in labels[shift:] + labels[:shift]:
            start = time.perf_counter()
            runners[label].run(feed)
            times[label].append((time.perf_counter() - start) * 1000)
    reference = statistics.median(times[""])
    return {label: speed_of(reference, statistics.median(times[label]), runs) for label in quantized}


def speed_of(fp32_ms: float, quantized_ms: float, runs: int) -> dict[str, float]:
    """The speed record: both medians and their ratio (above 1: the quantized model is faster)."""
    return {"fp32_ms": fp32_ms, "quantized_ms": quantized_ms, "ratio": fp32_ms / quantized_ms, "runs": runs}


def _random_input(info) -> np.ndarray:
    shape = [dim if isinstance(dim, int) and dim > 0 else 1 for dim in info.shape]
    return np.random.default_rng(0).random(shape, dtype=np.float32)


# --- what it says --------------------------------------------------------------------------------------------


def chosen_line(chosen: Attempt, attempts: Sequence[Attempt], timed: Sequence[Attempt], note: str = "") -> str:
    """One line: what was kept and why ('' when nothing was left to choose). ``timed``: the candidates timed
    together (one per backend); ``attempts``: those compared, in the order tried."""
    why = []
    if len(timed) > 1:
        speeds = ", ".join(f"{one.backend} {one.speed['ratio']:.2f}x" for one in timed)
        margin = f"{(OPENVINO_MARGIN - 1) * 100:.0f}%"
        why.append(f"timed in turn against FP32, {speeds} (OpenVINO kept only when {margin} faster)")
    elif note:
        why.append(note)
    over = [one for one in attempts if not one.within]
    if over:
        losses = ", ".join(f"{one.name} {one.lost()}" for one in over)
        why.append(f"over --max-loss {over[0].loss['limit']:g}: {losses}")
    if not why:
        return ""
    head = f"kept {chosen.name}" if chosen.within else f"kept the least lossy, {chosen.name}"
    return f"{head}: " + "; ".join(why)


def ways_on(
    attempts: Sequence[Attempt], this: str, backends: Sequence[str], keep_tail: bool, calibrated: str = ""
) -> list[str]:
    """The options that would help a model that lost too much, most likely first: the float tail, a weight range or
    backend not tried, more calibration frames or another method (``calibrated``: how many were read and the method,
    '' for fp16), the --max-loss that keeps the least lossy, --accept-loss."""
    kinds = {one.kind for one in attempts}
    found = [] if keep_tail else ["--float-tail (the head's last convs and decode in float)"]
    if "avx2" not in kinds and "" not in kinds:
        without = "this CPU has no VNNI: full-range weights saturate here" if this == "avx2" else "they hold on any CPU"
        found.append(f"--target-cpu avx2 (7-bit weights: {without})")
    elif this != "avx2" and kinds == {"avx2"}:
        found.append(f"--target-cpu {this} (full-range weights, this CPU's)")
    others = [name for name in BACKENDS if name not in backends]
    found += [f"--backend {name}" for name in others if not (name == "openvino" and openvino_missing())]
    if calibrated:
        found.append(f"more --frames or another --method ({calibrated})")
    best = min(attempts, key=lambda one: one.loss["value"])
    keeps = math.ceil(best.loss["value"] * 1000) / 1000
    return [*found, f"--max-loss {keeps:g} (keeps {best.name})", "--accept-loss"]


def loss_text(attempts: Sequence[Attempt], published: Attempt, out: Path, ways: Sequence[str]) -> str:
    """Why the command failed, what it left where, and the ways on."""
    loss = published.loss
    tried = ""
    if len(attempts) > 1:
        tried = f" ({published.name}, the least lossy of {', '.join(f'{one.name} {one.lost()}' for one in attempts)})"
    return (
        f"the quantized model lost more accuracy than allowed: {loss['loss']} {loss['value']:.4f} > --max-loss "
        f"{loss['limit']:g}{tried}; written as {shown_path(out)} (not under the --out name); options that may help: "
        + ", ".join(ways)
    )


def rejected_name(out: Path) -> Path:
    """Where a quantized model that lost more than allowed is written instead of ``out``: NAME.rejected.EXT."""
    return out.with_name(f"{out.stem}.rejected{out.suffix}")
