"""quantize's conversion of transformer graphs (tools/quantize_backends.py): a mask filled with -inf or float32's
lowest (Grounding DINO's and OWL's attention and logit masks) stays in float, where 8 bits over its range made every
value NaN; the float tail of a graph whose only convs are its patch embedding is its heads' last linear layers and
what follows them, not the whole graph. Graphs built here, of the shape those exports have."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from vision_factory.tools.quantize_backends import float_tail, onnx_int8

RNG = np.random.default_rng(0)


def _masked_attention(path, fill: float) -> None:
    """x [1, 4, 8] -> patch conv -> MatMul -> Where(mask, ., fill): "logits" (an output), and Softmax of it ->
    MatMul -> "probs"; the mask hides the last 3 of 8 columns, as a prompt's padding."""
    mask = np.ones((1, 4, 8), bool)
    mask[..., 5:] = False
    weights = {
        "patch": RNG.standard_normal((4, 1, 1, 1)).astype(np.float32),
        "w1": RNG.standard_normal((8, 8)).astype(np.float32),
        "w2": RNG.standard_normal((8, 8)).astype(np.float32),
        "mask": mask,
        "fill": np.array(fill, np.float32),
        "shape": np.array([1, 4, 8], np.int64),
    }
    nodes = [
        helper.make_node("Conv", ["x", "patch"], ["patches"], name="patch_embed", group=4),
        helper.make_node("Reshape", ["patches", "shape"], ["tokens"], name="flatten"),
        helper.make_node("MatMul", ["tokens", "w1"], ["scores"], name="query"),
        helper.make_node("Where", ["mask", "scores", "fill"], ["logits"], name="masked"),
        helper.make_node("Softmax", ["logits"], ["weights"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["weights", "w2"], ["probs"], name="head"),
    ]
    graph = helper.make_graph(
        nodes,
        "masked",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 1, 8])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 4, 8]) for name in ("logits", "probs")],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.mark.parametrize("fill", [-np.inf, float(np.finfo(np.float32).min)], ids=["-inf", "float32-lowest"])
def test_a_masks_fill_stays_in_float_and_the_int8_model_gives_finite_values(tmp_path, fill):
    source, out = tmp_path / "masked.onnx", tmp_path / "int8.onnx"
    _masked_attention(source, fill)
    feeds = [{"x": RNG.standard_normal((1, 4, 1, 8)).astype(np.float32)} for _ in range(8)]
    how, kept = onnx_int8(source, out, feeds, "minmax", keep_tail=False)
    made = onnx.load(out)
    assert {node.op_type for node in made.graph.node} >= {"QuantizeLinear", "DequantizeLinear"}
    assert [value.name for value in made.graph.output] == ["logits", "probs"]
    runs = [onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]) for path in (source, out)]
    for feed in feeds:
        (logits, probs), (logits8, probs8) = (session.run(None, feed) for session in runs)
        assert np.array_equal(logits8[..., 5:], logits[..., 5:])  # the fill as it is, not NaN
        assert np.all(np.isfinite(logits8[..., :5])) and np.all(np.isfinite(probs8))
        scale = np.abs(probs).max()
        assert np.abs(probs8 - probs).max() < 0.1 * scale  # 8 bits' error, not a collapse
    assert kept == [] and "1 mask tensors (range beyond 10000) kept in float" in how, how


def test_the_float_tail_of_a_graph_whose_only_conv_is_its_patch_embedding_is_its_heads(tmp_path):
    """The walk back from the outputs to the first Conv would keep all of it (nothing left to quantize): it stops
    at the last MatMul on each path instead, keeping that layer and what follows it."""
    path = tmp_path / "masked.onnx"
    _masked_attention(path, -np.inf)
    assert float_tail(onnx.load(path).graph) == ["head", "masked", "query"]
