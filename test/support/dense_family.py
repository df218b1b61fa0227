"""A tiny family whose result is a dense map: the docs' worked example of adding a family (docs/adding-a-family.md).
All of it is here (model, rule, adapter, Family); it joins the tools with one line, ``register(FAMILY)``
(families/registry.py).

Its model (built with onnx.helper) takes a [1, 3, H, W] RGB image in 0..1 and gives [1, 1, H, W] "depth" in metres:
1 + 2 x the pixel's mean of R, G and B. At TrackNet's 288x512 its interface is one 288x512 map out: its own rule
recognises it, TrackNet's does not (models/tracknet_interface.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnx
from onnx import TensorProto, helper

from vision_factory.families.family import Family, LoadRunner
from vision_factory.models.interface import Interface, Recognition, Rule, image_input
from vision_factory.parameters import Parameter
from vision_factory.results import DENSE_MAP
from vision_factory.results.dense import DenseMap
from vision_factory.results.frame import FrameResult
from vision_factory.runtime.runner import Runner

NAME = "tinydepth"
HEIGHT, WIDTH = 288, 512


def build_model(path: Path, height: int = HEIGHT, width: int = WIDTH) -> Path:
    """The model: depth = 1 + 2 x mean(R, G, B) per pixel, metadata task=depth."""
    nodes = [
        helper.make_node("ReduceMean", ["image", "axes"], ["mean"], keepdims=1),
        helper.make_node("Mul", ["mean", "two"], ["scaled"]),
        helper.make_node("Add", ["scaled", "one"], ["depth"]),
    ]
    constants = [
        helper.make_tensor("axes", TensorProto.INT64, [1], [1]),
        helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
        helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
    ]
    graph = helper.make_graph(
        nodes,
        NAME,
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, height, width])],
        [helper.make_tensor_value_info("depth", TensorProto.FLOAT, [1, 1, height, width])],
        constants,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="test")
    model.ir_version = 8
    helper.set_model_props(model, {"task": "depth"})
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


def _recognise(model: Interface) -> Recognition | None:
    image = image_input(model)
    if image is None or len(model.outputs) != 1 or model.metadata.get("task") != "depth":
        return None
    output = model.outputs[0].shape
    if len(output) != 4 or output[1] != 1 or output[2:] != image.shape[2:]:
        return None
    return Recognition(NAME, f"one image in, one {output[2]}x{output[3]} map out and metadata task=depth", {})


RULE = Rule(NAME, "a depth model ([1, 3, H, W] in, [1, 1, H, W] out, metadata task=depth)", _recognise)


class TinyDepth:
    """The adapter: the frame resized to the model's input, RGB in 0..1; the map resized back to the frame."""

    def __init__(self, runner: Runner):
        self.runner = runner
        self.input = runner.inputs[0]

    def __call__(self, image_bgr: np.ndarray) -> FrameResult:
        height, width = self.input.shape[2:]
        resized = cv2.resize(image_bgr, (width, height)) if image_bgr.shape[:2] != (height, width) else image_bgr
        tensor = np.ascontiguousarray(resized[..., ::-1].transpose(2, 0, 1)[None], np.float32) / np.float32(255)
        depth = self.runner.run({self.input.name: tensor})[0][0, 0]
        if depth.shape != image_bgr.shape[:2]:
            depth = cv2.resize(depth, (image_bgr.shape[1], image_bgr.shape[0]))
        return FrameResult.of(image_bgr, dense=DenseMap(depth.astype(np.float32), "m", "depth"))


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> TinyDepth:
    return TinyDepth(load_runner(values["model_path"]))


FAMILY = Family(
    name=NAME,
    summary="a tiny depth model (the docs' worked example of a dense family)",
    rule=RULE,
    parameters=(Parameter("model_path", "", "depth model file (.onnx)", launch_argument=True, required=True),),
    build=build,
    result=DENSE_MAP,
)
