"""vision-factory quantize: an INT8 (or FP16) copy of a model, calibrated on the family's own input tensors.

Calibration tensors are the ones the node would feed the model: the family is built from its parameters'
defaults as a node builds it (families/<name>.py), on a runner that keeps a copy of each feed it runs,
and the calibration frames go through it (letterbox for YOLO, TrackNet windows with the background median
for TrackNet, crops of the person detector's boxes for RTMPose and for re-identification embedders). One
reader serves every family; no pre-processing is written twice.

ONNX Runtime: static QDQ quantization, per-channel weights, after ``quant_pre_process``. The tail of the
graph - the last Conv on every path to an output, and everything after it (for Ultralytics YOLO the
detection head's final convs, the concat and the box decode) - stays in float: quantizing it costs the
most accuracy for the least time. OpenVINO: NNCF post-training quantization, written as IR (.xml/.bin)
that the OpenVINO runner reads, with the same nodes ignored. FP16: ONNX with float16 weights and float32
inputs/outputs (ONNX Runtime CUDA/TensorRT), or IR compressed to FP16 (OpenVINO GPU).

Every quantized model keeps the source model's metadata (names, imgsz, kpt_shape, seq_len ...) and adds
its provenance under ``quantization_*`` keys, which ``inspect`` shows. The command ends by comparing the
quantized model with the source (``compare``'s report; for rtmpose and reid, which no data set scores, their
outputs on the people the detector finds in frames) and timing both on the same inputs, interleaved.
"""

from __future__ import annotations

import hashlib
import json
import logging
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from ..families.registry import FAMILIES, family
from ..files import UnsafeWrite, check_outputs, model_files, staged, write_text
from ..runtime.backends import load_target
from ..runtime.cpu import this_cpu
from ..runtime.runner import Runner
from .commands import CommandReport, UsageError
from .sources import read_image, source_frames

# The families a quantized model serves: those whose accuracy loss (Family.accuracy_loss) quantize knows. Those that
# run on people's boxes (Family.runs_on) calibrate and compare on the crops of the people a --detector finds.
QUANTIZE_TYPES = tuple(name for name, spec in FAMILIES.items() if spec.accuracy_loss is not None)
PERSON_DETECTOR = "yolo"  # the family of the --detector model finding people
BACKENDS = ("onnx", "openvino")
PRECISIONS = ("int8", "fp16")
METHODS = ("minmax", "entropy", "percentile")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
# Where each backend's quantized model runs for the comparison; the source model runs on REFERENCE.
RUNS_ON = {"onnx": "onnx:cpu", "openvino": "openvino:CPU"}
REFERENCE = "onnx:cpu"
TAIL_OPS = ("Conv", "ConvTranspose")  # the walk back from the outputs stops at (and keeps) these layers
# ... unless fed by one of these: then the conv is a decode step (Ultralytics' DFL), and the walk goes on.
DECODE_FEEDS = ("Reshape", "Transpose", "Softmax", "Flatten", "Squeeze", "Unsqueeze")
THREADS = {"onnx": "intra_op_threads", "openvino": "inference_threads"}  # each backend's CPU threads setting
KEY = "quantization_"  # metadata keys of the provenance
# --target-cpu: the CPU kind the int8 model is made for (runtime/cpu.py). avx2 (x86 without VNNI): 7-bit weights
# (ONNX Runtime's reduce_range, NNCF's overflow fix on every layer), which its int8 kernels do not saturate with.
TARGET_CPUS = ("auto", "vnni", "avx2")


# --- calibration: the family's own input tensors -------------------------------------------------------


class RecordingRunner:
    """A runner that runs as ``runner`` does and keeps a copy of each feed (at most ``keep``)."""

    def __init__(self, runner: Runner, keep: int):
        self.runner, self.keep, self.feeds = runner, keep, []
        self.backend = runner.backend
        self.inputs, self.outputs, self.metadata = runner.inputs, runner.outputs, runner.metadata

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        if len(self.feeds) < self.keep:
            self.feeds.append({name: np.array(value, copy=True) for name, value in feeds.items()})
        return self.runner.run(feeds)

    def describe(self) -> str:
        return self.runner.describe()


def calibration_frames(source: Path, count: int | None, option: str = "--calibration") -> Iterator[np.ndarray]:
    """At most ``count`` (None: all) BGR frames of ``source``: a folder of images (in name order), a video or a
    rosbag2; ``option`` names it in errors."""
    source = Path(source)
    if not source.exists():
        what = option.lstrip("-")
        raise UsageError(f"{what} source not found: {source}; give a folder of images, a video or a rosbag2", option)
    if source.is_dir() and not _is_bag(source):
        images = sorted(path for path in source.iterdir() if path.suffix.lower() in IMAGE_SUFFIXES)
        if not images:
            raise UsageError(
                f"{source} holds no images ({', '.join(IMAGE_SUFFIXES)}) and is no rosbag2 (no metadata.yaml)", option
            )
        frames = (read_image(path) for path in images)
        frames = (frame for frame in frames if frame is not None)
    elif source.is_file() and source.suffix.lower() in IMAGE_SUFFIXES:
        frames = iter([read_image(source)])
    else:
        frames = source_frames(source)
    return islice(frames, count)


def _is_bag(folder: Path) -> bool:
    return (folder / "metadata.yaml").is_file() or any(folder.glob("*.mcap")) or any(folder.glob("*.db3"))


def calibration_inputs(
    model_type: str,
    model: Path,
    source: Path,
    frames: int,
    options: Mapping[str, Any] | None = None,
    detector_model: Path | None = None,
) -> tuple[list[dict[str, np.ndarray]], int]:
    """The feeds the ``model_type`` node gives ``model`` for the first ``frames`` frames of ``source``, and the
    frames read: the family is built as the node builds it (detectors as `predict` builds them, with
    ``options``; reid as the tracker builds its embedder, on the boxes ``detector_model`` finds), on ONNX
    Runtime, with ``model`` on a RecordingRunner; each frame goes through it."""
    if frames < 1:
        raise UsageError(f"--frames must be at least 1, got {frames}", "--frames")
    calibration = calibration_frames(source, frames)  # checks the source before the models load
    recorders: list[RecordingRunner] = []

    def load(path) -> Runner:
        runner = load_target(REFERENCE, Path(path))
        if Path(path).resolve() != Path(model).resolve():
            return runner  # another model of the pipeline (rtmpose's person detector, InpaintNet)
        recorders.append(RecordingRunner(runner, keep=frames * 64))
        return recorders[-1]

    from .predict import detector_from_options

    spec = family(model_type)
    if spec.result is None:  # no result of its own: an embedder of people's crops, as the tracker builds it (reid)
        people = detector_from_options(PERSON_DETECTOR, detector_model, REFERENCE, options or {})
        embedder = spec.build(spec.values_from_model(model, "quantize"), load)
        read = sum(
            1 for frame in calibration if embedder.embed(frame, [d.xyxy for d in people.detect(frame)]) is not None
        )
    elif spec.result.streamed:  # a stream (tracknet): the node's pipeline, of the values its model file records
        stream = spec.pipeline(spec.values_from_model(model, "quantize"), load)
        read = sum(1 for index, frame in enumerate(calibration) if stream.push(frame, index) is not None)
        stream.flush()
    else:  # a detector, as `predict` builds it from ``options``
        detector = detector_from_options(model_type, model, REFERENCE, options or {}, detector_model, load=load)
        read = sum(1 for frame in calibration if detector.detect(frame) is not None)
    feeds = [feed for recorder in recorders for feed in recorder.feeds]
    if not feeds:
        raise ValueError(
            f"no calibration input: {read} frames of {source} gave the {model_type} model nothing to run "
            "(tracknet: more frames than the median warm-up and seq_len; rtmpose, reid: frames with people); give more "
            "--frames or another --calibration source"
        )
    return feeds, read


class FeedReader:
    """ONNX Runtime's CalibrationDataReader over recorded feeds (each at most once). Feeds of different shapes
    (a batch of one crop per person: rtmpose, reid) are read one sample at a time: the histogram calibrators
    (entropy, percentile) stack each tensor's values over the feeds, which takes one shape."""

    def __init__(self, feeds: Sequence[dict[str, np.ndarray]]):
        if len({tuple((name, value.shape) for name, value in sorted(feed.items())) for feed in feeds}) > 1:
            feeds = [
                {name: value[row : row + 1] for name, value in feed.items()}
                for feed in feeds
                for row in range(min(len(value) for value in feed.values()))
            ]
        self._feeds = iter(feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)


# --- which nodes stay in float --------------------------------------------------------------------------


def float_tail(graph) -> list[str]:
    """Names of the nodes of ``graph`` (onnx GraphProto) kept in float: walking back from each output, every
    node met up to and including the first Conv layer on that path (a Conv fed by a reshape or softmax is
    a decode step, not a layer: the walk goes on through it). For Ultralytics YOLO that is the detection
    head's final convs (cv2/cv3, and cv4 for pose) with the concats, DFL and box decode after them; for
    TrackNet the last conv and what follows it."""
    producer = {output: node for node in graph.node for output in node.output}
    kept: dict[str, None] = {}
    pending = [output.name for output in graph.output]
    seen: set[str] = set()
    while pending:
        tensor = pending.pop()
        node = producer.get(tensor)
        if node is None or tensor in seen:
            continue
        seen.add(tensor)
        kept[node.name] = None
        feeder = producer.get(node.input[0]) if node.input else None
        if node.op_type not in TAIL_OPS or (feeder is not None and feeder.op_type in DECODE_FEEDS):
            pending += [name for name in node.input if name]
    return list(kept)


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


def _set_metadata(model, entries: Mapping[str, str]) -> None:
    """``entries`` into an onnx ModelProto's metadata_props, replacing keys of the same name."""
    kept = [(prop.key, prop.value) for prop in model.metadata_props if prop.key not in entries]
    del model.metadata_props[:]
    for key, value in [*kept, *entries.items()]:
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value


# --- the conversions --------------------------------------------------------------------------------


def named_nodes(model: Path, out: Path) -> Path:
    """``model`` itself when every node has a unique name, else a copy at ``out`` that names each unnamed (or
    repeated) one after its op and position: nodes are kept in float by name."""
    import onnx

    loaded = onnx.load(model)
    names = [node.name for node in loaded.graph.node]
    if all(names) and len(set(names)) == len(names):
        return Path(model)
    seen: set[str] = set()
    for index, node in enumerate(loaded.graph.node):
        if not node.name or node.name in seen:
            node.name = f"{node.op_type}_{index}"
        seen.add(node.name)
    onnx.save(loaded, out)
    return out


def onnx_int8(
    model: Path,
    out: Path,
    feeds: Sequence[dict[str, np.ndarray]],
    method: str,
    keep_tail: bool = True,
    reduce_range: bool = False,
) -> tuple[str, list[str]]:
    """``model`` quantized by ONNX Runtime (QDQ, per-channel int8 weights, uint8 activations) into ``out``;
    what did it, and the nodes kept in float. ``reduce_range``: 7-bit weights ([-64, 64]), for CPUs without
    VNNI (runtime/cpu.py)."""
    import onnx
    import onnxruntime
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    methods = {
        "minmax": CalibrationMethod.MinMax,
        "entropy": CalibrationMethod.Entropy,
        "percentile": CalibrationMethod.Percentile,
    }
    with tempfile.TemporaryDirectory(prefix="vf_quantize_") as work:
        prepared = Path(work) / "prepared.onnx"
        named = named_nodes(model, Path(work) / "named.onnx")
        quant_pre_process(str(named), str(prepared), skip_symbolic_shape=True)  # ONNX shape inference: no sympy
        excluded = float_tail(onnx.load(prepared, load_external_data=False).graph) if keep_tail else []
        quantize_static(
            str(prepared),
            str(out),
            FeedReader(feeds),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            reduce_range=reduce_range,
            calibrate_method=methods[method],
            nodes_to_exclude=excluded,
            extra_options={"CalibMaxIntermediateOutputs": 64} if method != "minmax" else {},
        )
    if not any(node.op_type == "DequantizeLinear" for node in onnx.load(out, load_external_data=False).graph.node):
        Path(out).unlink()
        raise ValueError(
            f"nothing of {Path(model).name} was quantized: it has no Conv, MatMul or Gemm layer outside the float "
            f"tail ({len(excluded)} nodes kept in float); give --no-float-tail to quantize the tail too, or keep "
            "the FP32 model"
        )
    weights = "7-bit (reduce_range)" if reduce_range else "int8"
    return (
        f"onnxruntime {onnxruntime.__version__} static QDQ, per-channel {weights} weights, {method} calibration",
        excluded,
    )


def onnx_fp16(model: Path, out: Path, keep_tail: bool = True, work: Path | None = None) -> tuple[str, list[str]]:
    """``model`` with float16 weights and compute, float32 inputs and outputs, into ``out``; with ``keep_tail`` its
    float tail (``float_tail``) computes in float32 from the first tail node to the outputs, as int8 keeps it.

    Why, found on a lent GPU: TrackNet's ball is its heatmap's first row-major peak, and a sigmoid rounded to
    float16 (steps of 0.0005 below 1) turns the plateau round the peak into ties, so the peak moves to the
    plateau's top-left corner: on CUDA the fp16 file put the ball 9.6 px off on average (F1 0.93 -> 0.23). The
    converter alone keeps blocked nodes in float32 but rounds each one's output to float16 again before the next
    (and before the graph output); ``_drop_round_trips`` removes those round trips inside the tail.
    Returns what did it and the nodes kept in float32."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    loaded = onnx.load(named_nodes(model, (work or out.parent) / "named_fp16.onnx") if keep_tail else model)
    kept = float_tail(loaded.graph) if keep_tail else []
    converted = convert_float_to_float16(loaded, keep_io_types=True, node_block_list=kept or None)
    _drop_round_trips(converted.graph, set(kept))
    onnx.save(converted, out)
    tail = f", its tail of {len(kept)} nodes float32" if kept else ""
    return f"onnxruntime.transformers float16 (inputs and outputs float32{tail})", kept


def _drop_round_trips(graph, kept: set[str]) -> None:
    """Rewires each float32 -> float16 -> float32 pair of Casts after a node in ``kept`` (names) so that what
    read the float32 copy reads the node's own float32 output; a graph output takes the node's output directly."""
    from onnx import TensorProto

    def cast_to(node) -> int | None:
        return next((a.i for a in node.attribute if a.name == "to"), None) if node.op_type == "Cast" else None

    changed = True
    while changed:
        changed = False
        producer = {name: node for node in graph.node for name in node.output}
        readers: dict[str, list] = {}
        for node in graph.node:
            for name in node.input:
                readers.setdefault(name, []).append(node)
        outputs = {value.name for value in graph.output}
        for down in graph.node:
            source = down.input[0] if cast_to(down) == TensorProto.FLOAT16 else ""
            if not source or source in outputs or getattr(producer.get(source), "name", None) not in kept:
                continue
            ups = readers.get(down.output[0], [])
            if down.output[0] in outputs or not ups or any(cast_to(up) != TensorProto.FLOAT for up in ups):
                continue
            for up in ups:
                target = up.output[0]
                if target in outputs:  # the kept node writes the graph output itself
                    node = producer[source]
                    node.output[list(node.output).index(source)] = target
                    for reader in readers.get(source, []):
                        reader.input[:] = [target if name == source else name for name in reader.input]
                    source = target
                else:
                    for reader in readers.get(target, []):
                        reader.input[:] = [source if name == target else name for name in reader.input]
                graph.node.remove(up)
            graph.node.remove(down)
            changed = True
            break


def openvino_model(
    model: Path,
    precision: str,
    feeds: Sequence[dict[str, np.ndarray]],
    float_nodes: Sequence[str],
    reduce_range: bool = False,
):
    """``model`` as an OpenVINO model: int8 by NNCF post-training quantization (``float_nodes`` ignored;
    ``reduce_range``: 7-bit weights in every layer, NNCF's overflow fix, for CPUs without VNNI), or as it is
    (fp16: its weights are compressed as it is saved, ``save_openvino``); the model, and what did it."""
    import openvino as ov

    ov_model = ov.Core().read_model(str(model))
    if precision != "int8":
        return ov_model, f"OpenVINO {ov.__version__} IR with FP16 weights"
    try:
        import nncf
        from nncf.common.logging.logger import set_log_level
    except ImportError:
        raise RuntimeError("OpenVINO INT8 needs NNCF: pip install nncf (or the openvino extra)") from None

    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, OverflowFix

    set_log_level(logging.WARNING)  # its per-node notes and progress bars are not this command's output
    # NNCF's default fixes the overflow in the first layer only
    overflow = OverflowFix.ENABLE if reduce_range else OverflowFix.FIRST_LAYER
    ov_model = nncf.quantize(
        ov_model,
        nncf.Dataset(list(feeds)),
        preset=nncf.QuantizationPreset.MIXED,
        subset_size=len(feeds),
        ignored_scope=_ignored_scope(ov_model, float_nodes),
        advanced_parameters=AdvancedQuantizationParameters(overflow_fix=overflow),
    )
    weights = ", 7-bit weights (overflow fix on every layer)" if reduce_range else ""
    return (
        ov_model,
        f"NNCF {nncf.__version__} post-training quantization (mixed preset{weights}), OpenVINO {ov.__version__}",
    )


def save_openvino(ov_model, out: Path, precision: str, metadata: Mapping[str, str]) -> None:
    """``ov_model`` as IR at ``out`` (.xml, weights beside it as .bin), with ``metadata`` in its runtime info
    under "framework", where the OpenVINO runner reads ONNX metadata."""
    import openvino as ov

    for key, value in metadata.items():
        ov_model.set_rt_info(value, ["framework", key])
    ov.save_model(ov_model, str(out), compress_to_fp16=precision == "fp16")


# Element-wise ops NNCF leaves unquantized: OpenVINO's CPU plugin runs an activation such as SiLU (Sigmoid and
# Multiply) inside the INT8 convolution before it, but only if no FakeQuantize sits between them. Quantizing their
# inputs (NNCF's default) made each one a separate kernel. Side by side, the speed of FP32 ONNX Runtime: shapes
# YOLOv8n 1.74x -> 2.22x, yolo11n-pose 2.08x -> 2.45x, fall detector 2.87x -> 3.39x (benchmarks/README.md).
NNCF_FLOAT_TYPES = ("Sigmoid", "Multiply")


def _ignored_scope(ov_model, float_nodes: Sequence[str]):
    """NNCF's IgnoredScope: the element-wise types of NNCF_FLOAT_TYPES, and the OpenVINO ops of the ONNX nodes in
    ``float_nodes``: the op of the node's name, and the ops OpenVINO's ONNX reader splits the node into, named
    NAME/PART (a Conv with a bias becomes the Convolution NAME/WithoutBiases and the Add NAME: the Convolution is
    the layer to keep in float)."""
    import nncf

    kept = set(float_nodes)
    names = [op.get_friendly_name() for op in ov_model.get_ops()]
    return nncf.IgnoredScope(
        names=[name for name in names if name in kept or name.rpartition("/")[0] in kept],
        types=list(NNCF_FLOAT_TYPES),
        validate=False,
    )


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
    default) the model is renamed NAME.rejected.EXT and AccuracyLost raised, unless ``accept_loss``."""
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
    out.parent.mkdir(parents=True, exist_ok=True)

    feeds: list[dict[str, np.ndarray]] = []
    if calibration is not None:
        feeds, frames = calibration_inputs(model_type, model, calibration, frames, options, detector_model)
        log(f"calibration: {len(feeds)} inputs from {frames} frames of {calibration}")
    float_nodes: list[str] = []
    kind = (this_cpu() if target_cpu == "auto" else target_cpu) if precision == "int8" else ""
    if kind:
        log(f"int8 for {kind} CPUs ({'detected here' if target_cpu == 'auto' else '--target-cpu'})")
    companions = [".bin"] if backend == "openvino" else []
    with (
        tempfile.TemporaryDirectory(prefix="vf_quantize_") as work,  # lives until the model is saved
        staged(out, inputs, "--out", companions) as fresh,  # moved onto --out once written whole
    ):
        if backend == "onnx" and precision == "int8":
            how, float_nodes = onnx_int8(model, fresh, feeds, method, keep_tail, kind == "avx2")
        elif backend == "onnx":
            how, float_nodes = onnx_fp16(model, fresh, keep_tail, Path(work))
        else:
            import onnx

            named = named_nodes(model, Path(work) / "named.onnx")
            if precision == "int8" and keep_tail:
                float_nodes = float_tail(onnx.load(named, load_external_data=False).graph)
            ov_model, how = openvino_model(named, precision, feeds, float_nodes, kind == "avx2")
        provenance = Provenance(
            Path(model),
            calibration if precision == "int8" else None,
            frames if precision == "int8" else 0,
            len(feeds),
            precision,
            backend,
            how,
            float_nodes,
            kind,
        )
        recorded = provenance.metadata()
        metadata = source_metadata(model) | recorded
        if backend == "openvino":
            save_openvino(ov_model, fresh, precision, metadata)
        else:
            write_onnx_metadata(fresh, metadata)

    target = RUNS_ON[backend]
    speed = speed_ratio(model, out, target, feeds or None, speed_runs, threads)
    out_dir = Path(out_dir) if out_dir is not None else out.parent / f"{out.stem}_quantize"
    out_dir.mkdir(parents=True, exist_ok=True)
    comparison, compared = None, None
    if data is not None:
        comparison = compare_models(model_type, model, out, target, data, source, out_dir, options, detector_model)
        compared = max(out_dir.glob("compare_*.json"), key=lambda path: path.stat().st_mtime)
    summary = {
        "model_type": model_type,
        "model": str(model),
        "out": str(out),
        "runs_on": {"source": REFERENCE, "quantized": target},
        "metadata": recorded,
        "speed": speed | {"threads": threads},
        "comparison": json.loads(compared.read_text()) if compared else None,
    }
    loss = accuracy_loss(model_type, summary["comparison"], max_loss) if compared else None
    rejected = loss is not None and loss["value"] > loss["limit"] and not accept_loss
    if rejected:
        out = reject(out)
        summary["out"] = str(out)
    if loss is not None:
        summary["loss"] = loss | {"accepted": not rejected}
    files = {"summary": out_dir / "quantize.json"}
    write_text(files["summary"], json.dumps(summary, indent=2) + "\n", inputs)
    text = describe(out, provenance, speed, comparison, loss) + "\n"
    report = CommandReport(text, files, warnings=comparison.warnings if comparison else [])
    if rejected:
        raise AccuracyLost(report, loss_text(loss, out, provenance))
    return report


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
        f"{loss['limit']:g}; written as {out} (not under the --out name){cpu}; try more --frames or another "
        "--method, or give --accept-loss (or a larger --max-loss) to keep it"
    )


def rejected_name(out: Path) -> Path:
    """Where a quantized model that lost more than allowed is written instead of ``out``: NAME.rejected.EXT."""
    return out.with_name(f"{out.stem}.rejected{out.suffix}")


def reject(out: Path) -> Path:
    """The quantized model at ``out`` renamed rejected_name(out) (an IR's .bin with it; both names were checked
    before the work: no link, no input); the new path."""
    renamed = rejected_name(out)
    if out.suffix == ".xml":
        out.with_suffix(".bin").replace(rejected_name(out.with_suffix(".bin")))
    out.replace(renamed)
    return renamed


def source_metadata(model: Path) -> dict[str, str]:
    """The ONNX model's metadata_props (names, imgsz, kpt_shape, seq_len ...), which the quantized model keeps."""
    import onnx

    return {prop.key: prop.value for prop in onnx.load(model, load_external_data=False).metadata_props}


def write_onnx_metadata(out: Path, metadata: Mapping[str, str]) -> None:
    """``metadata`` as the metadata_props of the ONNX model at ``out``."""
    import onnx

    written = onnx.load(out)
    _set_metadata(written, metadata)
    onnx.save(written, out)


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
    spec = family(model_type)  # the family's result kind compares (results/<kind>.py's compare_runs)
    given = {"source": source, "data": data, "median_warmup": None, "out_dir": out_dir}
    given["heatmap_threshold"] = next((p.default for p in spec.parameters if p.name == "heatmap_threshold"), None)
    return spec.result.module().compare_runs(model_type, configurations, given)


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
    from ..results.detections import differences as detection_differences
    from .coco_eval import coco_result
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
            results.append(
                [
                    coco_result(index, found.class_id, found, keypoints=True)
                    for index, frame in enumerate(frames)
                    for found in detector.detect(frame)
                ]
            )
        outputs = detection_differences(*results)
    else:
        people = detector_from_options(PERSON_DETECTOR, detector_model, REFERENCE, options)
        boxes = [[found.xyxy for found in people.detect(frame)] for frame in frames]
        if not any(boxes):
            raise ValueError(
                f"{Path(detector_model).name} finds no people in {data}: give --data with people to compare"
            )
        embeddings = []
        for model, target in configurations:
            embedder = spec.build(spec.values_from_model(model), loader(model, target))
            embeddings.append(np.vstack([embedder.embed(frame, found) for frame, found in zip(frames, boxes) if found]))
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
    lines = [f"wrote {out}: {provenance.precision} for {provenance.backend} ({provenance.method})"]
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
