"""Models the tests build (tiny ONNX graphs with chosen outputs) or derive from real ones, and their checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from conftest import SHARED
from onnx import TensorProto, helper, numpy_helper
from support.data import TUNING_SCENE, scene_files
from support.real_models import REID_MODEL

from vision_factory.tools.reid_tune import tune

TUNED_KEYS = {
    "track_appearance_threshold": "reid_appearance_threshold",
    "track_appearance_veto": "reid_appearance_veto",
    "track_reentry_threshold": "reid_reentry_threshold",
}


def tuned_model(folder: Path) -> tuple[Path, str]:
    """`reid-tune` of the shipped MobileNetV2 embedder on TUNING_SCENE: the tuned copy in folder/out and the text
    the tool printed."""
    frames, truth = scene_files(folder / "data", TUNING_SCENE)
    out = folder / "out" / "mobilenetv2-reid-tuned.onnx"
    report = tune(REID_MODEL, frames, truth, out)
    return out, report.text


def metadata(path: Path) -> dict[str, str]:
    return {prop.key: prop.value for prop in onnx.load(path, load_external_data=False).metadata_props}


def _constant_model(
    path: Path,
    output: np.ndarray,
    size: int = 256,
    names: str = "{0: 'circle', 1: 'square'}",
    dynamic: bool = False,
    metadata: dict[str, str] | None = None,
) -> Path:
    """An image model that returns ``output`` whatever the input (its shape is what counts).

    ``dynamic``: its input is [1, 3, h, w] and ``size`` is the imgsz recorded in its metadata, as
    Ultralytics records the size it exported for; ``metadata``: more of it (e.g. end2end, kpt_shape)."""
    shape = [1, 3, "h", "w"] if dynamic else [1, 3, size, size]
    graph = helper.make_graph(
        [helper.make_node("Identity", ["value"], ["output0"])],
        "constant",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, list(output.shape))],
        [numpy_helper.from_array(output.astype(np.float32), "value")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    props = {"names": names, **({"imgsz": f"[{size}, {size}]"} if dynamic else {}), **(metadata or {})}
    helper.set_model_props(model, props)
    onnx.save(model, path)
    return path


def onnx_model(path, inputs: dict[str, list], outputs: dict[str, list], metadata: dict[str, str]):
    """A runnable model with these inputs and outputs (each output zeros of its shape, dynamic axes 1, plus the mean
    of the first input) and this metadata."""
    nodes = [helper.make_node("ReduceMean", [next(iter(inputs))], ["mean"], keepdims=0)]
    for name, shape in outputs.items():
        fixed = [dim if isinstance(dim, int) else 1 for dim in shape]
        dims = helper.make_tensor(f"{name}_shape", TensorProto.INT64, [len(fixed)], fixed)
        nodes += [
            helper.make_node("Constant", [], [f"{name}_dims"], value=dims),
            helper.make_node("ConstantOfShape", [f"{name}_dims"], [f"{name}_zeros"]),
            helper.make_node("Add", [f"{name}_zeros", "mean"], [name]),
        ]
    graph = helper.make_graph(
        nodes,
        "hostile",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in inputs.items()],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in outputs.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    helper.set_model_props(model, metadata)
    onnx.save(model, path)
    return path


def build_model(
    path: Path,
    inputs: dict[str, list],
    outputs: dict[str, list],
    metadata: dict[str, str] | None = None,
    int_outputs: tuple[str, ...] = (),
) -> Path:
    """A valid model with the declared interface: each output is zeros of its shape plus the first input's mean."""
    nodes = [helper.make_node("ReduceMean", [next(iter(inputs))], ["mean"], keepdims=0)]
    for name, shape in outputs.items():
        fixed = [dim if isinstance(dim, int) else 1 for dim in shape]  # dynamic dims get size 1 at run time
        shape_tensor = helper.make_tensor(f"{name}_shape", TensorProto.INT64, [len(fixed)], fixed)
        nodes += [
            helper.make_node("Constant", [], [f"{name}_dims"], value=shape_tensor),
            helper.make_node("ConstantOfShape", [f"{name}_dims"], [f"{name}_zeros"]),
        ]
        if name in int_outputs:
            nodes += [
                helper.make_node("Add", [f"{name}_zeros", "mean"], [f"{name}_float"]),
                helper.make_node("Cast", [f"{name}_float"], [name], to=TensorProto.INT64),
            ]
        else:
            nodes.append(helper.make_node("Add", [f"{name}_zeros", "mean"], [name]))
    graph = helper.make_graph(
        nodes,
        "test_model",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in inputs.items()],
        [
            helper.make_tensor_value_info(name, TensorProto.INT64 if name in int_outputs else TensorProto.FLOAT, shape)
            for name, shape in outputs.items()
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="test")
    model.ir_version = 8
    helper.set_model_props(model, metadata or {})
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


SHAPES_MODEL = SHARED / "models" / "shapes-yolov8n.onnx"


def _const(name: str, value, dtype=np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def wrap_yolo(path: Path, style: str = "tflite", confidence: float = 0.25, iou: float = 0.7) -> Path:
    """shapes-yolov8n with its decoding and NMS inside, in one of two detection-API layouts.

    ``tflite``: input ``images`` [1, 3, 256, 256]; outputs ``location`` [1, n, 4] normalised x1, y1,
    x2, y2, ``score`` [1, n], ``category`` [1, n] int64 counting classes from 1.
    ``torchvision``: input ``image`` [3, 256, 256]; outputs ``boxes`` [n, 4] in input pixels,
    ``labels`` [n] int64 from 1, ``scores`` [n], in torchvision's order.
    """
    model = onnx.load(SHAPES_MODEL)
    graph = model.graph
    size = graph.input[0].type.tensor_type.shape.dim[2].dim_value
    classes = graph.output[0].type.tensor_type.shape.dim[1].dim_value - 4
    graph.initializer.extend(
        [
            _const("c_two", 2.0),
            _const("c_size", float(size)),
            _const("c_depth", [classes], np.int64),
            _const("c_onehot", [0.0, 1.0]),
            _const("c_axis2", [2], np.int64),
            _const("c_last", [-1], np.int64),
            _const("c_one", 1, np.int64),
            _const("c_col2", [2], np.int64),
            _const("c_max_out", [300], np.int64),
            _const("c_iou", [iou]),
            _const("c_score", [confidence]),
            _const("s0", [0], np.int64),
            _const("s2", [2], np.int64),
            _const("s4", [4], np.int64),
            _const("s_end", [1 << 30], np.int64),
        ]
    )
    nodes = [
        helper.make_node("Transpose", ["output0"], ["preds"], perm=[0, 2, 1]),  # [1, N, 4 + classes]
        helper.make_node("Slice", ["preds", "s0", "s2", "c_axis2"], ["cxcy"]),
        helper.make_node("Slice", ["preds", "s2", "s4", "c_axis2"], ["wh"]),
        helper.make_node("Slice", ["preds", "s4", "s_end", "c_axis2"], ["cls"]),
        helper.make_node("Div", ["wh", "c_two"], ["half"]),
        helper.make_node("Sub", ["cxcy", "half"], ["top_left"]),
        helper.make_node("Add", ["cxcy", "half"], ["bottom_right"]),
        helper.make_node("Concat", ["top_left", "bottom_right"], ["corners"], axis=-1),
        helper.make_node("Div", ["corners", "c_size"], ["normalised"]),  # [1, N, 4]
        helper.make_node("ReduceMax", ["cls", "c_axis2"], ["best"], keepdims=0),  # [1, N]
        helper.make_node("ArgMax", ["cls"], ["label0"], axis=2, keepdims=0),  # [1, N] int64
        # NMS scores per class, zero but for each anchor's best class: YOLO's class-aware NMS.
        helper.make_node("OneHot", ["label0", "c_depth", "c_onehot"], ["onehot"], axis=-1),
        helper.make_node("Unsqueeze", ["best", "c_last"], ["best_1"]),
        helper.make_node("Mul", ["onehot", "best_1"], ["masked"]),
        helper.make_node("Transpose", ["masked"], ["nms_scores"], perm=[0, 2, 1]),  # [1, classes, N]
        helper.make_node(
            "NonMaxSuppression", ["normalised", "nms_scores", "c_max_out", "c_iou", "c_score"], ["selected"]
        ),
        helper.make_node("Gather", ["selected", "c_col2"], ["picked_2d"], axis=1),  # [K, 1]
        helper.make_node("Squeeze", ["picked_2d", "c_last"], ["picked"]),  # [K]
    ]
    if style == "tflite":
        nodes += [
            helper.make_node("Gather", ["normalised", "picked"], ["location"], axis=1),
            helper.make_node("Gather", ["best", "picked"], ["score"], axis=1),
            helper.make_node("Gather", ["label0", "picked"], ["label_k"], axis=1),
            helper.make_node("Add", ["label_k", "c_one"], ["category"]),
        ]
        outputs = [
            helper.make_tensor_value_info("location", TensorProto.FLOAT, [1, "n", 4]),
            helper.make_tensor_value_info("score", TensorProto.FLOAT, [1, "n"]),
            helper.make_tensor_value_info("category", TensorProto.INT64, [1, "n"]),
        ]
    else:
        nodes += [
            helper.make_node("Squeeze", ["corners", "s0"], ["corners_0"]),
            helper.make_node("Squeeze", ["best", "s0"], ["best_0"]),
            helper.make_node("Squeeze", ["label0", "s0"], ["label0_0"]),
            helper.make_node("Gather", ["corners_0", "picked"], ["boxes"], axis=0),
            helper.make_node("Gather", ["best_0", "picked"], ["scores"], axis=0),
            helper.make_node("Gather", ["label0_0", "picked"], ["label_k"], axis=0),
            helper.make_node("Add", ["label_k", "c_one"], ["labels"]),
        ]
        outputs = [
            helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["n", 4]),
            helper.make_tensor_value_info("labels", TensorProto.INT64, ["n"]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n"]),
        ]
        # An unbatched [3, H, W] input, as torchvision's exports take.
        original = graph.input[0].name
        for node in graph.node:
            node.input[:] = ["batched_image" if name == original else name for name in node.input]
        graph.node.insert(0, helper.make_node("Unsqueeze", ["image", "s0"], ["batched_image"]))
        del graph.input[:]
        graph.input.append(helper.make_tensor_value_info("image", TensorProto.FLOAT, [3, size, size]))
    graph.node.extend(nodes)
    del graph.output[:]
    graph.output.extend(outputs)
    del model.metadata_props[:]
    helper.set_model_props(model, {"names": "{0: 'circle', 1: 'square', 2: 'triangle'}"})
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


H, W, K = 256, 192, 17  # RTMPose-m body: input 192x256, SimCC lengths 384 and 512


def _save(graph: onnx.GraphProto, path: Path) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


def spot_finder(path: Path, batch: int | str = "batch") -> Path:
    """simcc_x[b, k, 2u + i] = max over rows of the red channel at column u (i = 0, 1); simcc_y alike."""
    constants = [
        numpy_helper.from_array(np.array(v, np.int64), n)
        for n, v in (("zero", [0]), ("one", [1]), ("axis1", [1]), ("h", [2]), ("w", [3]), ("last", [-1]))
    ]
    constants.append(numpy_helper.from_array(np.array([1, K, 1], np.int64), "tiles"))
    constants.append(numpy_helper.from_array(np.array([0, 1, -1], np.int64), "flat"))
    nodes = [helper.make_node("Slice", ["input", "zero", "one", "axis1"], ["red"])]  # [B, 1, H, W]: R of RGB
    for axis, reduced, out in (("x", "h", "simcc_x"), ("y", "w", "simcc_y")):
        nodes += [
            helper.make_node("ReduceMax", ["red", reduced], [f"{axis}_line"], keepdims=0),  # [B, 1, L]
            helper.make_node("Unsqueeze", [f"{axis}_line", "last"], [f"{axis}_col"]),  # [B, 1, L, 1]
            helper.make_node("Concat", [f"{axis}_col", f"{axis}_col"], [f"{axis}_pair"], axis=-1),  # [B, 1, L, 2]
            helper.make_node("Reshape", [f"{axis}_pair", "flat"], [f"{axis}_split"]),  # [B, 1, 2L]
            helper.make_node("Tile", [f"{axis}_split", "tiles"], [out]),  # [B, K, 2L]
        ]
    graph = helper.make_graph(
        nodes,
        "spot",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, H, W])],
        [
            helper.make_tensor_value_info("simcc_x", TensorProto.FLOAT, [batch, K, 2 * W]),
            helper.make_tensor_value_info("simcc_y", TensorProto.FLOAT, [batch, K, 2 * H]),
        ],
        constants,
    )
    return _save(graph, path)


def tracknet_windows(model: Path, frames: int = 40) -> list[np.ndarray]:
    """The inputs the tracknet node's pipeline gives its model over a ball clip (Family.pipeline, recorded)."""
    feeds: list[np.ndarray] = []

    class Recording:
        def __init__(self, runner):
            self.runner = runner

        def __getattr__(self, name):
            return getattr(self.runner, name)

        def run(self, feed):
            feeds.append(np.array(next(iter(feed.values())), copy=True))
            return self.runner.run(feed)

    from vision_factory.families.registry import family
    from vision_factory.runtime.backends import load_target
    from vision_factory.tools.synthetic import BallClip

    values = family("tracknet").values_from_model(model)
    stream = family("tracknet").pipeline(values, lambda path: Recording(load_target("onnx:cpu", path)))
    for index, frame in enumerate(BallClip(num_frames=frames).frames()):
        stream.push(frame, index)
    return feeds
