"""quantize's back ends: the conversions of an FP32 ONNX model into int8 or fp16, for ONNX Runtime (static QDQ after
``quant_pre_process``; float16) and OpenVINO (NNCF post-training quantization, IR), with the nodes kept in float
(``float_tail``), and the ONNX metadata they keep. tools/quantize.py is the command around them: calibration,
provenance, comparison and timing."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

TAIL_OPS = ("Conv", "ConvTranspose")  # the walk back from the outputs stops at (and keeps) these layers
# A transformer's (Grounding DINO, OWL: its only convs are patch embeddings, so the walk kept it whole): its last linear
# layers on each path, the class and box heads and what follows (logit masks, box refinement), stop it instead.
LINEAR_OPS = ("MatMul", "Gemm")
QUANTIZED_OPS = (*TAIL_OPS, *LINEAR_OPS)  # the layers int8 speeds up: a tail of them all leaves nothing quantized
# ... unless fed by one of these: then the conv is a decode step (Ultralytics' DFL), and the walk goes on.
DECODE_FEEDS = ("Reshape", "Transpose", "Softmax", "Flatten", "Squeeze", "Unsqueeze")
# A tensor whose calibrated range reaches this far is a mask's fill (-inf, float32's lowest, -1e4: a transformer's
# attention and logit masks), not a value: 8 bits over it leave the values 0 or NaN, so it stays in float.
UNBOUNDED = 1e4


# --- calibration data, as ONNX Runtime reads it ------------------------------------------------------


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
    """``conv_tail``, or where it holds every Conv, MatMul and Gemm layer of ``graph`` (a transformer's), the same walk
    stopping at the last MatMul or Gemm on each path too: its heads' last linear layers and what follows them."""
    kept = conv_tail(graph)
    layers = {node.name for node in graph.node if node.op_type in QUANTIZED_OPS}
    return kept if layers - set(kept) else conv_tail(graph, TAIL_OPS + LINEAR_OPS)


def conv_tail(graph, stops: tuple[str, ...] = TAIL_OPS) -> list[str]:
    """Names of the nodes of ``graph`` (onnx GraphProto) kept in float: walking back from each output, every
    node met up to and including the first Conv layer on that path (a Conv fed by a reshape or softmax is
    a decode step, not a layer: the walk goes on through it). For Ultralytics YOLO that is the detection
    head's final convs (cv2/cv3, and cv4 for pose and segmentation) with the concats, DFL and box decode after
    them; for TrackNet the last conv and what follows it. A segmentation model's mask prototype branch
    (``prototype_branch``) stays in float whole."""
    producer = {output: node for node in graph.node for output in node.output}
    kept: dict[str, None] = dict.fromkeys(prototype_branch(graph))
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
        decode = node.op_type in TAIL_OPS and feeder is not None and feeder.op_type in DECODE_FEEDS
        if node.op_type not in stops or decode:
            pending += [name for name in node.input if name]
    return list(kept)


def prototype_branch(graph) -> list[str]:
    """Names of the nodes of a segmentation model's mask prototype branch: where ``graph`` has a 4-D output after
    its first (YOLO's prototypes [1, M, H/4, W/4]), every node whose results reach that output and no other (for
    Ultralytics' Proto: its convs and upsampling; Proto26 also its per-scale convs). Its values are the masks' own
    resolution: rounded to 8 bits they move each mask's edge. Empty for any other model."""
    outputs = list(graph.output)
    prototypes = [value.name for value in outputs[1:] if len(value.type.tensor_type.shape.dim) == 4]
    if len(outputs) < 2 or not prototypes:
        return []
    producer = {output: node for node in graph.node for output in node.output}

    def reaching(names) -> set[str]:  # the nodes whose results reach these tensors
        found: set[str] = set()
        pending = list(names)
        while pending:
            node = producer.get(pending.pop())
            if node is not None and node.name not in found:
                found.add(node.name)
                pending += [name for name in node.input if name]
        return found

    others = reaching(value.name for value in outputs if value.name not in prototypes)
    return [node.name for node in graph.node if node.name in reaching(prototypes) and node.name not in others]


# --- the metadata a quantized model keeps (the source's, and its provenance) ------------------------------


def _set_metadata(model, entries: Mapping[str, str]) -> None:
    """``entries`` into an onnx ModelProto's metadata_props, replacing keys of the same name."""
    kept = [(prop.key, prop.value) for prop in model.metadata_props if prop.key not in entries]
    del model.metadata_props[:]
    for key, value in [*kept, *entries.items()]:
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value


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
    float_parts: Sequence[str] = (),
) -> tuple[str, list[str]]:
    """``model`` quantized by ONNX Runtime (QDQ, per-channel int8 weights, uint8 activations) into ``out``;
    what did it, and the nodes kept in float. ``reduce_range``: 7-bit weights ([-64, 64]), for CPUs without
    VNNI (runtime/cpu.py). ``float_parts``: the nodes whose names hold one of these are kept in float too (a
    module's, as the exporter names them: benchmarks/bench_open_vocab_int8.py's text towers)."""
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
        graph = onnx.load(prepared, load_external_data=False).graph
        excluded = float_tail(graph) if keep_tail else []
        excluded += [node.name for node in graph.node if any(part in node.name for part in float_parts)]
        excluded = list(dict.fromkeys(excluded))
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
    unbounded = keep_unbounded(out)
    if not any(node.op_type == "DequantizeLinear" for node in onnx.load(out, load_external_data=False).graph.node):
        Path(out).unlink()
        raise ValueError(
            f"nothing of {Path(model).name} was quantized: it has no Conv, MatMul or Gemm layer outside the float "
            f"tail ({len(excluded)} nodes kept in float); give --no-float-tail to quantize the tail too, or keep "
            "the FP32 model"
        )
    weights = "7-bit (reduce_range)" if reduce_range else "int8"
    how = f"onnxruntime {onnxruntime.__version__} static QDQ, per-channel {weights} weights, {method} calibration"
    if unbounded:
        how += f"; {unbounded} mask tensors (range beyond {UNBOUNDED:g}) kept in float"
    return how, excluded


def keep_unbounded(path: Path) -> int:
    """Takes out of the QDQ model at ``path`` each activation's QuantizeLinear -> DequantizeLinear pair whose
    calibrated scale spans more than UNBOUNDED (or is not finite: a mask filled with -inf), so that the tensor
    reaches its consumers in float; returns how many. Found on Grounding DINO and OWL, whose attention and logit
    masks made every logit NaN."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    graph = model.graph
    scales = {init.name: init for init in graph.initializer}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    outputs = {value.name for value in graph.output}
    dropped: list = []
    for node in graph.node:
        scale = scales.get(node.input[1]) if node.op_type == "QuantizeLinear" else None
        if scale is None or node.input[0] in scales:  # a weight's, or a scale computed in the graph
            continue
        values = numpy_helper.to_array(scale).astype(np.float64) * 255
        if np.all(np.isfinite(values)) and np.all(values < UNBOUNDED):
            continue
        source = node.input[0]
        pairs = [after for after in consumers.get(node.output[0], []) if after.op_type == "DequantizeLinear"]
        for after in pairs:
            name = after.output[0]
            if name in outputs:  # a graph output: its producer's tensor takes the output's name
                for other in graph.node:
                    other.input[:] = [name if entry == source else entry for entry in other.input]
                    other.output[:] = [name if entry == source else entry for entry in other.output]
                source = name
            else:
                for user in consumers.get(name, []):
                    user.input[:] = [source if entry == name else entry for entry in user.input]
        dropped += [node, *pairs]
    if dropped:
        ids = {id(node) for node in dropped}
        kept = [node for node in graph.node if id(node) not in ids]
        del graph.node[:]
        graph.node.extend(kept)
        onnx.save(model, path)
    return sum(1 for node in dropped if node.op_type == "QuantizeLinear")


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
