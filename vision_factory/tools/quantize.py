"""vision-factory quantize: an INT8 (or FP16) copy of a model, calibrated on the family's own input tensors.

Calibration tensors are the ones the node would feed the model: the family is built from its parameters'
defaults as a node builds it (families/<name>.py), on a runner that keeps a copy of each feed it runs,
and the calibration frames go through it (letterbox for YOLO, TrackNet windows with the background median
for TrackNet, crops of the person detector's boxes for RTMPose and for re-identification embedders). One
reader serves every family; no pre-processing is written twice (tools/quantize_calibration.py).

The conversions (tools/quantize_backends.py): ONNX Runtime: static QDQ quantization, per-channel weights,
after ``quant_pre_process``. The tail of the graph - the last Conv on every path to an output, and everything
after it (for Ultralytics YOLO the detection head's final convs, the concat and the box decode) - stays in
float: quantizing it costs the most accuracy for the least time. OpenVINO: NNCF post-training quantization,
written as IR (.xml/.bin) that the OpenVINO runner reads, with the same nodes ignored. FP16: ONNX with float16
weights and float32 inputs/outputs (ONNX Runtime CUDA/TensorRT), or IR compressed to FP16 (OpenVINO GPU).

Every quantized model keeps the source model's metadata (names, imgsz, kpt_shape, seq_len ...) and adds
its provenance under ``quantization_*`` keys, which ``inspect`` shows. The command ends by comparing the
quantized model with the source (``compare``'s report; for rtmpose and reid, which no data set scores, their
outputs on the people the detector finds in frames) and timing both on the same inputs, interleaved.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..families.registry import FAMILIES, family
from ..files import UnsafeWrite, check_outputs, model_files, output_folder, stage, write_text
from ..runtime.backends import load_target
from ..runtime.cpu import this_cpu
from ..runtime.runner import Runner
from ..text import shown_path
from .commands import CommandReport, UsageError
from .evaluation import evaluation
from .quantize_backends import (
    float_tail,
    named_nodes,
    onnx_fp16,
    onnx_int8,
    openvino_model,
    save_openvino,
    source_metadata,
    write_onnx_metadata,
)
from .quantize_calibration import PERSON_DETECTOR, REFERENCE, calibration_frames, calibration_inputs

# The families a quantized model serves: those whose accuracy loss (Family.accuracy_loss) quantize knows. Those that
# run on people's boxes (Family.runs_on) calibrate and compare on the crops of the people a --detector finds.
QUANTIZE_TYPES = tuple(name for name, spec in FAMILIES.items() if spec.accuracy_loss is not None)
BACKENDS = ("onnx", "openvino")
PRECISIONS = ("int8", "fp16")
METHODS = ("minmax", "entropy", "percentile")
# Where each backend's quantized model runs for the comparison; the source model runs on REFERENCE.
RUNS_ON = {"onnx": "onnx:cpu", "openvino": "openvino:CPU"}
THREADS = {"onnx": "intra_op_threads", "openvino": "inference_threads"}  # each backend's CPU threads setting
KEY = "quantization_"  # metadata keys of the provenance
# --target-cpu: the CPU kind the int8 model is made for (runtime/cpu.py). avx2 (x86 without VNNI): 7-bit weights
# (ONNX Runtime's reduce_range, NNCF's overflow fix on every layer), which its int8 kernels do not saturate with.
TARGET_CPUS = ("auto", "vnni", "avx2")


# --- provenance --------------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class Provenance:
    source: Path
    calibration: Path | None
    frames: int  # calibration frames read; 0 for fp16
    tensors: int  # calibration inputs recorded
    precision: str
    backend: str
    method: str  # e.g. "onnxruntime 1.32.0 QDQ, per-channel, MinMax"
    float_nodes: list[str] = field(default_factory=list)
    target_cpu: str = ""  # int8: the CPU kind it is made for (runtime/cpu.py CPU_KINDS)

    def metadata(self) -> dict[str, str]:
        """The ``quantization_*`` metadata entries: short values first (inspect shows each on a line)."""
        entries = {
            "precision": self.precision,
            "source": self.source.name,
            "source_sha256": sha256(self.source),
            "method": self.method,
        }
        if self.target_cpu:
            entries |= {"target_cpu": self.target_cpu, "reduce_range": str(self.reduce_range).lower()}
        if self.calibration is not None:
            entries |= {"calibration": str(self.calibration), "frames": str(self.frames), "inputs": str(self.tensors)}
        if self.float_nodes:
            entries["float_nodes"] = f"{len(self.float_nodes)}: " + ", ".join(self.float_nodes)
        return {KEY + key: value for key, value in entries.items()}

    @property
    def reduce_range(self) -> bool:
        """7-bit weights: made for CPUs without VNNI."""
        return self.target_cpu == "avx2"


# --- the command -------------------------------------------------------------------------------------


def quantize(
    model_type: str,
    model: Path,
    calibration: Path | None,
    out: Path,
    backend: str = "onnx",
    precision: str = "int8",
    frames: int = 32,
    method: str = "minmax",
    data: Path | None = None,
    source: Path | None = None,
    options: Mapping[str, Any] | None = None,
    detector_model: Path | None = None,
    keep_tail: bool = True,
    speed_runs: int = 20,
    threads: int = 0,
    out_dir: Path | None = None,
    log: Callable[[str], None] = lambda text: None,
    target_cpu: str = "auto",
    max_loss: float | None = None,
    accept_loss: bool = False,
) -> CommandReport:
    """`vision-factory quantize`: ``model`` (FP32 ONNX of family ``model_type``) as ``precision`` for ``backend``
    into ``out``, calibrated on ``frames`` frames of ``calibration``, for ``target_cpu`` (TARGET_CPUS; auto: this
    one); then compared with ``model`` over ``data`` (COCO data set; tracknet: truth CSV with ``source``) and
    timed against it. When the comparison's accuracy loss (LOSSES) exceeds ``max_loss`` (None: the family's
    default) the model is written as NAME.rejected.EXT and AccuracyLost raised, unless ``accept_loss``; a
    comparison that fails (bad --data) leaves no model at all."""
    from ..models.model_file import require_file_family

    if model_type not in QUANTIZE_TYPES:
        raise UsageError(f"quantize takes --model-type {', '.join(QUANTIZE_TYPES)}", "--model-type")
    if backend not in BACKENDS:
        raise UsageError(f"--backend must be one of {', '.join(BACKENDS)}", "--backend")
    if precision not in PRECISIONS:
        raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)}", "--precision")
    if method not in METHODS:
        raise UsageError(f"--method must be one of {', '.join(METHODS)}", "--method")
    if target_cpu not in TARGET_CPUS:
        raise UsageError(f"--target-cpu must be one of {', '.join(TARGET_CPUS)}", "--target-cpu")
    if max_loss is not None and not (np.isfinite(max_loss) and max_loss >= 0):
        raise UsageError(f"--max-loss must be a number >= 0, got {max_loss}", "--max-loss")
    if backend == "openvino" and Path(out).suffix != ".xml":
        raise UsageError(f"OpenVINO writes IR: give --out as NAME.xml (got {Path(out).name})", "--out")
    if backend == "onnx" and Path(out).suffix != ".onnx":
        raise UsageError(f"give --out as NAME.onnx (got {Path(out).name})", "--out")
    require_file_family(model, model_type, "quantize")
    spec = family(model_type)
    if spec.runs_on and detector_model is None and (data is not None or precision == "int8"):
        raise UsageError(
            f"{model_type} calibrates and compares on crops of people: give --detector, a YOLO model finding them",
            "--detector",
        )
    if spec.runs_on and data is not None:
        calibration_frames(data, 0, "--data")  # a folder of images, a video or a rosbag2: checked before the work
    if precision == "int8" and calibration is None:
        raise UsageError("int8 needs --calibration: a folder of images, a video or a rosbag2", "--calibration")
    if spec.compares_over and data is not None and source is None:
        raise UsageError(f"{model_type} compares over --source: {spec.compares_over}", "--source")
    out = Path(out)
    inputs = [model, calibration, data, source, detector_model]
    written = model_files(out) if backend == "openvino" else [out]  # an IR is its .xml and its .bin
    written += [rejected_name(path) for path in written]  # where a model that lost too much goes instead
    try:
        check_outputs(written, inputs, "--out")
    except UnsafeWrite as exc:
        raise UsageError(str(exc), "--out") from None
    output_folder(out.parent, option="--out")

    feeds: list[dict[str, np.ndarray]] = []
    if calibration is not None:
        feeds, frames = calibration_inputs(model_type, model, calibration, frames, options, detector_model)
        log(f"calibration: {len(feeds)} inputs from {frames} frames of {shown_path(calibration)}")
    kind = (this_cpu() if target_cpu == "auto" else target_cpu) if precision == "int8" else ""
    if kind:
        log(f"int8 for {kind} CPUs ({'detected here' if target_cpu == 'auto' else '--target-cpu'})")
    companions = [".bin"] if backend == "openvino" else []
    target = RUNS_ON[backend]
    # The model is written under a temporary name beside --out, timed and compared there, and published (as --out,
    # or as NAME.rejected.EXT when it lost too much) only then: a comparison that fails leaves nothing under --out.
    with stage(out, inputs, "--out", companions) as staging:
        with tempfile.TemporaryDirectory(prefix="vf_quantize_") as work:  # lives until the model is saved
            provenance = _write_model(
                model,
                staging.fresh,
                backend,
                precision,
                feeds,
                method,
                keep_tail,
                kind,
                Path(work),
                calibration,
                frames,
            )
        speed = speed_ratio(model, staging.fresh, target, feeds or None, speed_runs, threads)
        # the comparison's reports: NAME_quantize/ beside the model (a link planted there refused), or ``out_dir``
        out_dir = (
            output_folder(out_dir, option="--out") if out_dir else output_folder(out.parent, f"{out.stem}_quantize")
        )
        comparison, record = None, None
        if data is not None:
            comparison = compare_models(
                model_type, model, staging.fresh, target, data, source, out_dir, options, detector_model
            )
            compared = max(out_dir.glob("compare_*.json"), key=lambda path: path.stat().st_mtime)
            record = json.loads(compared.read_text())
        loss = accuracy_loss(model_type, record, max_loss) if record else None
        rejected = loss is not None and loss["value"] > loss["limit"] and not accept_loss
        out = staging.publish(rejected_name(out) if rejected else out)
    if record is not None:  # the comparison names the model where it now is
        record["b"]["model"] = str(out)
        write_text(compared, json.dumps(record, indent=2) + "\n", inputs)
    recorded = provenance.metadata()
    summary = {
        "model_type": model_type,
        "model": str(model),
        "out": str(out),
        "runs_on": {"source": REFERENCE, "quantized": target},
        "metadata": recorded,
        "speed": speed | {"threads": threads},
        "comparison": record,
    }
    if loss is not None:
        summary["loss"] = loss | {"accepted": not rejected}
    files = {"summary": out_dir / "quantize.json"}
    write_text(files["summary"], json.dumps(summary, indent=2) + "\n", inputs)
    text = describe(out, provenance, speed, comparison, loss) + "\n"
    report = CommandReport(text, files, warnings=comparison.warnings if comparison else [])
    if rejected:
        raise AccuracyLost(report, loss_text(loss, out, provenance))
    return report


def _write_model(
    model: Path,
    fresh: Path,
    backend: str,
    precision: str,
    feeds: list[dict[str, np.ndarray]],
    method: str,
    keep_tail: bool,
    kind: str,
    work: Path,
    calibration: Path | None,
    frames: int,
) -> Provenance:
    """``model`` as ``precision`` for ``backend`` written at ``fresh`` (``kind``: the int8 CPU kind; ``work``: a
    scratch folder), with the source's metadata and its provenance, which it returns."""
    float_nodes: list[str] = []
    if backend == "onnx" and precision == "int8":
        how, float_nodes = onnx_int8(model, fresh, feeds, method, keep_tail, kind == "avx2")
    elif backend == "onnx":
        how, float_nodes = onnx_fp16(model, fresh, keep_tail, work)
    else:
        import onnx

        named = named_nodes(model, work / "named.onnx")
        if precision == "int8" and keep_tail:
            float_nodes = float_tail(onnx.load(named, load_external_data=False).graph)
        ov_model, how = openvino_model(named, precision, feeds, float_nodes, kind == "avx2")
    int8 = precision == "int8"
    provenance = Provenance(
        Path(model),
        calibration if int8 else None,
        frames if int8 else 0,
        len(feeds),
        precision,
        backend,
        how,
        float_nodes,
        kind,
    )
    metadata = source_metadata(model) | provenance.metadata()
    if backend == "openvino":
        save_openvino(ov_model, fresh, precision, metadata)
    else:
        write_onnx_metadata(fresh, metadata)
    return provenance


class AccuracyLost(ValueError):
    """The quantized model lost more accuracy than allowed; ``report`` is the command's report all the same."""

    def __init__(self, report: CommandReport, message: str):
        super().__init__(message)
        self.report = report


def accuracy_loss(model_type: str, comparison: Mapping[str, Any], limit: float | None = None) -> dict[str, Any]:
    """The accuracy the quantized model lost in ``comparison`` (compare's saved report), as the family's accuracy_loss
    defines it: {"loss": what, "value", "limit"} (``limit`` None: the family's default)."""
    loss = family(model_type).accuracy_loss
    limit = loss.default if limit is None else limit
    return {"loss": loss.what, "value": float(loss.measure(comparison)), "limit": float(limit)}


def loss_text(loss: Mapping[str, Any], out: Path, provenance: Provenance) -> str:
    """Why the command failed, and the ways on."""
    cpu = (
        f"; it was made for {provenance.target_cpu} CPUs and compared on this one, which has no VNNI: give "
        "--target-cpu avx2 (or auto)"
        if provenance.target_cpu == "vnni" and this_cpu() == "avx2"
        else ""
    )
    return (
        f"the quantized model lost more accuracy than allowed: {loss['loss']} {loss['value']:.4f} > --max-loss "
        f"{loss['limit']:g}; written as {shown_path(out)} (not under the --out name){cpu}; try more --frames or "
        "another --method, or give --accept-loss (or a larger --max-loss) to keep it"
    )


def rejected_name(out: Path) -> Path:
    """Where a quantized model that lost more than allowed is written instead of ``out``: NAME.rejected.EXT."""
    return out.with_name(f"{out.stem}.rejected{out.suffix}")


def speed_ratio(
    model: Path,
    quantized: Path,
    target: str,
    feeds: Sequence[dict[str, np.ndarray]] | None,
    runs: int,
    threads: int = 0,
) -> dict[str, float]:
    """Median ms per run of ``model`` on ONNX Runtime CPU and of ``quantized`` on ``target``, timed on the same
    inputs in turn (A, B, A, B ...) after a warm-up, and the ratio A / B (above 1: the quantized model is faster).
    ``threads``: CPU threads of each runtime, 0 = the runtime decides (as the nodes' defaults)."""
    a, b = (_load(target, path, threads) for target, path in ((REFERENCE, model), (target, quantized)))
    if not feeds:
        feeds = [{info.name: _random_input(info) for info in a.inputs}]
    times: dict[str, list[float]] = {"a": [], "b": []}
    for runner in (a, b):
        for feed in feeds[:3]:
            runner.run(feed)
    for index in range(max(runs, 1)):
        feed = feeds[index % len(feeds)]
        for key, runner in (("a", a), ("b", b)) if index % 2 == 0 else (("b", b), ("a", a)):
            start = time.perf_counter()
            runner.run(feed)
            times[key].append((time.perf_counter() - start) * 1000)
    median_a, median_b = statistics.median(times["a"]), statistics.median(times["b"])
    return {"fp32_ms": median_a, "quantized_ms": median_b, "ratio": median_a / median_b, "runs": max(runs, 1)}


def _load(target: str, model: Path, threads: int) -> Runner:
    """``model`` on ``target`` with ``threads`` CPU threads (the backend's setting for it; 0: its default)."""
    setting = THREADS[target.partition(":")[0]]
    return load_target(target, model, {setting: threads} if threads else None)


def _random_input(info) -> np.ndarray:
    shape = [dim if isinstance(dim, int) and dim > 0 else 1 for dim in info.shape]
    return np.random.default_rng(0).random(shape, dtype=np.float32)


def compare_models(
    model_type: str,
    model: Path,
    quantized: Path,
    target: str,
    data: Path,
    source: Path | None,
    out_dir: Path,
    options: Mapping[str, Any] | None = None,
    detector_model: Path | None = None,
) -> CommandReport:
    """`compare`: the source model on ONNX Runtime CPU (A) against the quantized one on ``target`` (B)."""
    configurations = ((Path(model), REFERENCE), (Path(quantized), target))
    if family(model_type).runs_on:
        return compare_on_people(model_type, configurations, data, options or {}, detector_model, out_dir)
    spec = family(model_type)  # the family's result kind compares (tools/evaluation.py)
    given = {"source": source, "data": data, "median_warmup": None, "out_dir": out_dir, "options": options or {}}
    given["heatmap_threshold"] = next((p.default for p in spec.parameters if p.name == "heatmap_threshold"), None)
    return evaluation(spec.result).compare(model_type, configurations, given)


def compare_on_people(
    model_type: str,
    configurations: Sequence[tuple[Path, str]],
    data: Path,
    options: Mapping[str, Any],
    detector_model: Path,
    out_dir: Path,
) -> CommandReport:
    """`compare` for the families that work on the crops of the people ``detector_model`` finds (rtmpose, reid),
    over every frame of ``data`` (a folder of images, a video or a rosbag2; no truth scores them): each
    configuration built as its node builds it, the person detector on onnx:cpu for both. rtmpose: its
    detections' differences (compare's, keypoints included); reid: the cosine of each person's two embeddings."""
    from ..results.coco import coco_results, differences
    from .compare import describe_comparison, save_comparison
    from .predict import detector_from_options

    frames = list(calibration_frames(data, None, "--data"))

    loaded: list[Runner] = []  # the compared model's runner of each configuration

    def loader(model: Path, target: str) -> Callable[[Any], Runner]:
        """Loads ``model`` on ``target`` (kept in ``loaded``), the pipeline's other models on onnx:cpu."""

        def load(path) -> Runner:
            if Path(path).resolve() != Path(model).resolve():
                return load_target(REFERENCE, Path(path))
            loaded.append(load_target(target, Path(path)))
            return loaded[-1]

        return load

    spec = family(model_type)
    if spec.result is not None:  # a pose family: its detections, keypoints included
        results = []
        for model, target in configurations:
            detector = detector_from_options(
                model_type, model, target, options, detector_model, load=loader(model, target)
            )
            found = [detector.detect(frame) for frame in frames]  # each class its own category
            categories = [{int(c): int(c) for c in result.boxes.class_ids} for result in found]
            results.append(
                [row for i, result in enumerate(found) for row in coco_results(i, result, categories[i], True)[0]]
            )
        outputs = differences(*results)
    else:
        people = detector_from_options(PERSON_DETECTOR, detector_model, REFERENCE, options)
        boxes = [people.detect(frame).boxes.xyxy for frame in frames]
        if not any(len(found) for found in boxes):
            raise ValueError(
                f"{Path(detector_model).name} finds no people in {shown_path(data)}: give --data with people to compare"
            )
        embeddings = []
        for model, target in configurations:
            embedder = spec.build(spec.values_from_model(model), loader(model, target))
            embeddings.append(
                np.vstack([embedder.embed(frame, found) for frame, found in zip(frames, boxes) if len(found)])
            )
        cosine = np.sum(embeddings[0] * embeddings[1], axis=1)  # unit rows (all-zero for a box outside the frame)
        outputs = {"frames": len(frames), "people": len(cosine), "cosine_min": float(cosine.min())}
        outputs["cosine_mean"] = float(cosine.mean())
    described = [runner.describe() for runner in loaded]
    report, path = save_comparison(configurations, described, ("data", data), {"outputs": outputs}, out_dir)
    return CommandReport(describe_comparison(report, path))


def describe(
    out: Path,
    provenance: Provenance,
    speed: Mapping[str, float],
    comparison: CommandReport | None,
    loss: Mapping[str, Any] | None = None,
) -> str:
    lines = [f"wrote {shown_path(out)}: {provenance.precision} for {provenance.backend} ({provenance.method})"]
    if provenance.target_cpu:
        weights = "7-bit weights (reduce_range)" if provenance.reduce_range else "full-range int8 weights"
        lines.append(f"made for {provenance.target_cpu} CPUs: {weights}")
    if provenance.float_nodes:
        lines.append(f"kept in float: {len(provenance.float_nodes)} nodes: {', '.join(provenance.float_nodes)}")
    lines.append(
        f"speed: source {speed['fp32_ms']:.2f} ms (onnx:cpu), quantized {speed['quantized_ms']:.2f} ms, "
        f"ratio {speed['ratio']:.2f}x (median of {speed['runs']} runs each, interleaved on the same inputs)"
    )
    if comparison is not None:
        lines.append(comparison.shown())
        if loss is not None:
            within = "within" if loss["value"] <= loss["limit"] else "OVER"
            lines.append(f"accuracy loss: {loss['loss']} {loss['value']:.4f}, {within} --max-loss {loss['limit']:g}")
    else:
        lines.append("no --data: accuracy not compared (give --data to run compare)")
    return "\n".join(lines)
