"""vision-factory quantize: an INT8 (or FP16) copy of a model, calibrated on the family's own input tensors.

Calibration tensors are the ones the node would feed the model: the family is built from its parameters'
defaults as a node builds it (families/<name>.py), on a runner that keeps a copy of each feed it runs,
and the calibration frames go through it (letterbox for YOLO, TrackNet windows with the background median
for TrackNet, crops of the person detector's boxes for RTMPose and for re-identification embedders). One
reader serves every family; no pre-processing is written twice (tools/quantize_calibration.py).

The conversions (tools/quantize_backends.py): ONNX Runtime: static QDQ quantization, per-channel weights,
after ``quant_pre_process``. The tail of the graph - the last Conv on every path to an output (a transformer's
whose convs are its patch embedding: the last MatMul), and everything after it (for Ultralytics YOLO the head's
final convs, concat and box decode) - stays in float, as does a mask's fill (-inf). OpenVINO: NNCF post-training
quantization, written as IR (.xml/.bin) that the OpenVINO runner reads, the same nodes ignored. FP16: ONNX with float16
weights and float32 inputs/outputs (ONNX Runtime CUDA/TensorRT), or IR compressed to FP16 (OpenVINO GPU).

Every quantized model keeps the source model's metadata (names, imgsz, kpt_shape, seq_len ...) and adds
its provenance under ``quantization_*`` keys, which ``inspect`` shows. The command ends by comparing the
quantized model with the source (``compare``'s report; for rtmpose and reid, which no data set scores, their
outputs on the people the detector finds in frames) and timing both on the same inputs, interleaved.

sam: the encoder alone is quantized, on its image input; its decoder (beside it, or --decoder), kept as it is, serves
both sides of the comparison (the masks the truth's boxes prompt). open_vocab: calibrated with the prompt its check
uses (--prompt, else --data's categories); its tokenizer and text encoder (FP32), found beside it, serve both sides.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..families.registry import FAMILIES, family
from ..files import UnsafeWrite, check_outputs, model_files, output_folder, stage, write_text
from ..progress import Progress
from ..runtime.backends import load_target
from ..runtime.cpu import this_cpu
from ..runtime.runner import Runner
from ..text import shown_path
from .commands import CommandReport, UsageError
from .compare import configuration_name
from .evaluation import evaluation
from .predict import PROMPTED
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
from .quantize_calibration import PERSON_DETECTOR, REFERENCE, calibration_frames, calibration_inputs, with_companions
from .quantize_choice import (
    AUTO,
    RUNS_ON,
    SUFFIXES,
    Attempt,
    backends_for,
    chosen_line,
    kinds_for,
    loss_text,
    order,
    published_name,
    rejected_name,
    staged_name,
    timed_in_turn,
    ways_on,
)

# The families a quantized model serves: those whose accuracy loss (Family.accuracy_loss) quantize knows. Those that
# run on people's boxes (Family.runs_on) calibrate and compare on the crops of the people a --detector finds.
QUANTIZE_TYPES = tuple(name for name, spec in FAMILIES.items() if spec.accuracy_loss is not None)
# The families quantize refuses at once, each with its reason (Family.not_quantized): --model-type takes them to say
# why.
REFUSED_TYPES = tuple(name for name, spec in FAMILIES.items() if spec.not_quantized)
BACKENDS = (AUTO, *RUNS_ON)  # auto: int8 for both where OpenVINO and NNCF are installed, the faster kept
PRECISIONS = ("int8", "fp16")
METHODS = ("minmax", "entropy", "percentile")
KEY = "quantization_"  # metadata keys of the provenance
# --target-cpu: the CPU kind the int8 model is made for (runtime/cpu.py). avx2 (x86 without VNNI): 7-bit weights
# (ONNX Runtime's reduce_range, NNCF's overflow fix on every layer), which its int8 kernels do not saturate with.
# auto: this CPU's kind, then (with --data, where that loses too much) 7-bit weights (quantize_choice.py).
TARGET_CPUS = (AUTO, "vnni", "avx2")


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
    backend: str = AUTO,
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
    target_cpu: str = AUTO,
    max_loss: float | None = None,
    accept_loss: bool = False,
    progress: Progress | None = None,
) -> CommandReport:
    """`vision-factory quantize`: ``model`` (FP32 ONNX of family ``model_type``) as ``precision`` for ``backend``
    (auto: int8 for ONNX Runtime and OpenVINO, the faster kept) into ``out`` (auto: NAME.onnx or NAME.xml by the
    backend kept), calibrated on ``frames`` frames of ``calibration``, for ``target_cpu`` (TARGET_CPUS; auto: this
    one's kind, then 7-bit weights); timed against ``model`` and compared with it over ``data`` (COCO data set;
    tracknet: truth CSV with ``source``). The first candidate (quantize_choice.py) whose accuracy loss (the family's
    accuracy_loss) is within ``max_loss`` (None: the family's default) is published; when none is, the least lossy is
    written as NAME.rejected.EXT and AccuracyLost raised, unless ``accept_loss``; a comparison that fails (bad
    --data) leaves no model at all."""
    if model_type in REFUSED_TYPES:
        raise UsageError(
            f"quantize does not take {model_type} models: {FAMILIES[model_type].not_quantized}", "--model-type"
        )
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
    if backend == AUTO and Path(out).suffix not in ("", *SUFFIXES.values()):
        raise UsageError(
            f"give --out as NAME.onnx (ONNX Runtime), NAME.xml (OpenVINO) or NAME without a suffix (got "
            f"{Path(out).name}): --backend auto then writes NAME.onnx or NAME.xml (with NAME.bin), whichever it keeps",
            "--out",
        )
    options = with_companions(model_type, model, options or {})  # the model checked to be of the family
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
    if keep_tail and spec.no_float_tail:
        keep_tail = False
        log(f"{model_type}: no float tail, the model quantized whole: {spec.no_float_tail}")
    out = Path(out)
    backends, note = backends_for(backend, precision, out)
    kinds = kinds_for(target_cpu, precision, this_cpu())
    inputs = [model, calibration, data, source, detector_model, options.get("--decoder")]
    written = [path for name in backends for path in model_files(published_name(out, name))]  # an IR: .xml and .bin
    written += [rejected_name(path) for path in written]  # where a model that lost too much goes instead
    try:
        check_outputs(written, inputs, "--out")
    except UnsafeWrite as exc:
        raise UsageError(str(exc), "--out") from None
    output_folder(out.parent, option="--out")

    feeds: list[dict[str, np.ndarray]] = []
    if calibration is not None:
        calibrated = (model_type, model, calibration, frames, options, detector_model, progress, data)
        feeds, frames = calibration_inputs(*calibrated)  # a text-prompted family's prompt: --prompt or data's names
        log(f"calibration: {len(feeds)} inputs from {frames} frames of {shown_path(calibration)}")
    if kinds[0]:
        log(f"int8 for {kinds[0]} CPUs ({'detected here' if target_cpu == AUTO else '--target-cpu'})")
    # the comparison's reports: NAME_quantize/ beside the model (a link planted there refused), or ``out_dir``
    out_dir = output_folder(out_dir, option="--out") if out_dir else output_folder(out.parent, f"{out.stem}_quantize")
    # Each candidate is written under a temporary name beside --out, timed and compared there, and the one chosen
    # published (as --out, or as NAME.rejected.EXT when every one lost too much) only then: a comparison that fails
    # leaves nothing under --out.
    recipe = {"precision": precision, "feeds": feeds, "method": method, "keep_tail": keep_tail}
    recipe |= {"calibration": calibration, "frames": frames}
    with contextlib.ExitStack() as staged:

        def make(name: str, kind: str) -> Attempt:
            path = staged_name(out, name, kind, kinds[0])
            staging = staged.enter_context(stage(path, inputs, "--out", [".bin"] if name == "openvino" else []))
            with tempfile.TemporaryDirectory(prefix="vf_quantize_") as work:  # lives until the model is saved
                made = _write_model(model, staging.fresh, name, kind, recipe, Path(work))
            return Attempt(name, kind, staging, made)

        def timed(attempts: Sequence[Attempt]) -> None:
            quantized = {one.backend: (RUNS_ON[one.backend], one.staging.fresh) for one in attempts}
            for one, speed in zip(attempts, timed_in_turn(model, quantized, feeds, speed_runs, threads).values()):
                one.speed = speed

        first = [make(name, kinds[0]) for name in backends]
        timed(first)  # one timing in turn: the FP32 model and each backend's
        attempts: list[Attempt] = []
        for name, kind in order({one.backend: one.speed["quantized_ms"] for one in first}, kinds):
            attempt = next((one for one in first if (one.backend, one.kind) == (name, kind)), None)
            if attempt is None:
                attempt = make(name, kind)
                timed([attempt])
            attempts.append(attempt)
            if data is None:
                break
            _compare(attempt, model_type, model, data, source, out_dir, options, detector_model, max_loss, progress)
            if attempt.within:
                break
            log(f"{attempt.name}: {attempt.lost()} > --max-loss {attempt.loss['limit']:g}")
        chosen = next((one for one in attempts if one.within), None)
        chosen = chosen or min(attempts, key=lambda one: one.loss["value"])
        rejected = not chosen.within and not accept_loss
        final = published_name(out, chosen.backend)
        final = chosen.staging.publish(rejected_name(final) if rejected else final)
    if chosen.record is not None:  # the comparison names the model where it now is
        chosen.record["b"]["model"] = str(final)
        write_text(chosen.compared, json.dumps(chosen.record, indent=2) + "\n", inputs)
    why = chosen_line(chosen, attempts, first, note)
    summary = {
        "model_type": model_type,
        "model": str(model),
        "out": str(final),
        "runs_on": {"source": REFERENCE, "quantized": RUNS_ON[chosen.backend]},
        "metadata": chosen.provenance.metadata(),
        "speed": chosen.speed | {"threads": threads},
        "comparison": chosen.record,
        "choice": {"why": why, "timed": {one.backend: one.speed for one in first}},
    }
    summary["choice"]["tried"] = [one.summary() for one in attempts]  # in the order tried
    if chosen.loss is not None:
        summary["loss"] = chosen.loss | {"accepted": not rejected}
    files = {"summary": out_dir / "quantize.json"}
    write_text(files["summary"], json.dumps(summary, indent=2) + "\n", inputs)
    text = describe(final, chosen, why) + "\n"
    report = CommandReport(text, files, warnings=chosen.comparison.warnings if chosen.comparison else [])
    if rejected:
        calibrated = f"{frames} frame{'s' * (frames != 1)} read, {method}" if precision == "int8" else ""
        ways = ways_on(attempts, this_cpu(), backends, keep_tail, calibrated)
        raise AccuracyLost(report, loss_text(attempts, chosen, final, ways))
    return report


def _compare(
    attempt: Attempt,
    model_type: str,
    model: Path,
    data: Path,
    source: Path | None,
    out_dir: Path,
    options: Mapping[str, Any] | None,
    detector_model: Path | None,
    max_loss: float | None,
    progress: Progress | None = None,
) -> None:
    """``attempt`` compared with ``model`` over ``data`` (compare_models, ``progress`` its bars): its report,
    record and accuracy loss."""
    target = RUNS_ON[attempt.backend]
    attempt.comparison = compare_models(
        model_type, model, attempt.staging.fresh, target, data, source, out_dir, options, detector_model, progress
    )
    ending = f"_vs_{configuration_name(attempt.staging.fresh, target)}.json"  # save_comparison's name for it
    saved = [path for path in out_dir.iterdir() if path.name.startswith("compare_") and path.name.endswith(ending)]
    attempt.compared = max(saved, key=lambda path: path.stat().st_mtime)
    attempt.record = json.loads(attempt.compared.read_text())
    attempt.loss = accuracy_loss(model_type, attempt.record, max_loss)


def _write_model(
    model: Path, fresh: Path, backend: str, kind: str, recipe: Mapping[str, Any], work: Path
) -> Provenance:
    """``model`` for ``backend`` written at ``fresh`` (``kind``: the int8 CPU kind; ``recipe``: precision, feeds,
    method, keep_tail, calibration and frames; ``work``: a scratch folder), with the source's metadata and its
    provenance, which it returns."""
    precision, feeds, method, keep_tail = (recipe[key] for key in ("precision", "feeds", "method", "keep_tail"))
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
        recipe["calibration"] if int8 else None,
        recipe["frames"] if int8 else 0,
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
    progress: Progress | None = None,
) -> CommandReport:
    """`compare`: the source model on ONNX Runtime CPU (A) against the quantized one on ``target`` (B), with
    compare's progress bars (``progress``)."""
    configurations = ((Path(model), REFERENCE), (Path(quantized), target))
    if family(model_type).runs_on:
        return compare_on_people(model_type, configurations, data, options or {}, detector_model, out_dir)
    spec = family(model_type)  # the family's result kind compares (tools/evaluation.py)
    given = {"source": source, "data": data, "median_warmup": None, "out_dir": out_dir, "options": options or {}}
    given["prompts"] = {flag: value for flag, value in (options or {}).items() if flag in PROMPTED and value}
    given["progress"] = progress
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


def describe(out: Path, chosen: Attempt, why: str) -> str:
    provenance, speed, comparison, loss = chosen.provenance, chosen.speed, chosen.comparison, chosen.loss
    lines = [f"wrote {shown_path(out)}: {provenance.precision} for {provenance.backend} ({provenance.method})"]
    if why:
        lines.append(why)
    if provenance.backend == "openvino":
        lines.append(
            "OpenVINO IR: it runs in a generated OpenVINO package (vision-factory generate --backend openvino) and "
            "on the tools' openvino:CPU target; --backend onnx makes a model for this package's nodes"
        )
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
