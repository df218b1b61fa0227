"""A tiny family that takes a text prompt: the docs' worked example of adding a family (docs/adding-a-family.md).
All of it is here (model, rule, adapter, Family, node entry point); the tools take it with one line,
``registry.register(FAMILY)``, and its node runs from ``main`` (``python phrase_family.py --ros-args ...``).

Its model (built with onnx.helper) takes a [1, 3, 64, 64] RGB image in 0..1 and ``codes`` [1, 4], one number per
phrase of the prompt (the phrase's length in characters; 0: no phrase), and gives for each of the 4 slots a box
``boxes`` [1, 4, 4] = (4c, 2c, 4c + 8, 2c + 8) in its 64 x 64 input and a score ``scores`` [1, 4] = the image's mean
where c > 0, else 0. So the prompt decides where the boxes are and the image how sure they are: "cat" (c = 3) is a
box at (12, 6, 20, 14), "a horse" (c = 7) one at (28, 14, 36, 22), scaled to the frame.

What it derives from a prompt (its "tokens", the codes) is computed once, when its adapter is built, and counted in
DERIVED; its node builds the adapter again only when the prompt changes (ros/node_live.py), and logs each derivation
(DERIVED_LOG) so that a test of the running node can count them.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from vision_factory.families.detection import CONFIDENCE, MAX_DETECTIONS, MODEL, node
from vision_factory.families.family import Family, LoadRunner
from vision_factory.families.pipeline import DetectionPipeline
from vision_factory.families.prompts import TextPrompt
from vision_factory.models.interface import Interface, Recognition, Rule
from vision_factory.results import DETECTIONS
from vision_factory.results.boxes import Boxes
from vision_factory.results.frame import FrameResult
from vision_factory.runtime.runner import Runner

NAME = "phrases"
SIZE, SLOTS = 64, 4
PROMPT = TextPrompt("what to find", max_phrases=SLOTS)
DERIVED: Counter = Counter()  # prompt -> how many times its codes were derived (in this process)
DERIVED_LOG = "phrases: derived the codes of prompt "


def build_model(path: Path) -> Path:
    """The model: boxes from the codes, scores from the image's mean (module docstring); metadata task=phrases."""
    constants = [
        numpy_helper.from_array(np.array([1, 2, 3], np.int64), "image_axes"),
        numpy_helper.from_array(np.array([2], np.int64), "last"),
        numpy_helper.from_array(np.zeros((), np.float32), "zero"),
        numpy_helper.from_array(np.array([4, 2, 4, 2], np.float32), "scale"),
        numpy_helper.from_array(np.array([0, 0, 8, 8], np.float32), "size"),
    ]
    nodes = [
        helper.make_node("ReduceMean", ["image", "image_axes"], ["mean"], keepdims=0),  # [1]
        helper.make_node("Greater", ["codes", "zero"], ["present"]),
        helper.make_node("Cast", ["present"], ["present_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["present_f", "mean"], ["scores"]),  # [1, 4]
        helper.make_node("Unsqueeze", ["codes", "last"], ["column"]),  # [1, 4, 1]
        helper.make_node("Mul", ["column", "scale"], ["corner"]),  # [1, 4, 4]
        helper.make_node("Add", ["corner", "size"], ["boxes"]),
    ]
    graph = helper.make_graph(
        nodes,
        NAME,
        [
            helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, SIZE, SIZE]),
            helper.make_tensor_value_info("codes", TensorProto.FLOAT, [1, SLOTS]),
        ],
        [
            helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, SLOTS, 4]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, SLOTS]),
        ],
        constants,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="test")
    model.ir_version = 8
    helper.set_model_props(model, {"task": NAME})
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


def _recognise(model: Interface) -> Recognition | None:
    names = [tensor.name for tensor in model.inputs]
    if names != ["image", "codes"] or model.metadata.get("task") != NAME:
        return None
    return Recognition(NAME, "an image and a phrase code per slot in, boxes and scores out, metadata task=phrases", {})


RULE = Rule(NAME, "a phrase detector (image and codes in, boxes and scores out, metadata task=phrases)", _recognise)


def codes_of(prompt: str) -> np.ndarray:
    """What the model takes of a prompt: each phrase's length (at most 12), 0 for the slots left."""
    codes = np.zeros((1, SLOTS), np.float32)
    for index, phrase in enumerate(PROMPT.phrases(prompt)):
        codes[0, index] = min(len(phrase), 12)
    DERIVED[prompt] += 1
    print(f"{DERIVED_LOG}{prompt!r}", file=sys.stderr, flush=True)
    return codes


class PhraseDetector:
    """The adapter: the prompt's phrases are its classes (class id: the phrase's index), derived once here."""

    keypoint_names: list[str] = []

    def __init__(self, runner: Runner, prompt: str = "", confidence: float = 0.25, max_detections: int = 300):
        self.runner, self.confidence, self.max_detections = runner, confidence, max_detections
        self.names = PROMPT.phrases(prompt)  # a prompt it cannot take: a PromptError naming why
        self.codes = codes_of(prompt)

    def __call__(self, image_bgr: np.ndarray) -> FrameResult:
        return self.detect(image_bgr)

    def detect(self, image_bgr: np.ndarray) -> FrameResult:
        """The frame's result: a box for each phrase that scores over the confidence (results/boxes.py)."""
        height, width = image_bgr.shape[:2]
        resized = cv2.resize(image_bgr, (SIZE, SIZE), interpolation=cv2.INTER_AREA)
        tensor = np.ascontiguousarray(resized[..., ::-1].transpose(2, 0, 1)[None], np.float32) / np.float32(255)
        boxes, scores = self.runner.run({"image": tensor, "codes": self.codes})
        scale = np.array([width, height, width, height], np.float32) / SIZE
        kept = [k for k in range(len(self.names)) if scores[0, k] > self.confidence][: self.max_detections]
        found = Boxes.of(boxes[0, kept] * scale, scores[0, kept], kept, self.names)
        return FrameResult.of(image_bgr, boxes=found)


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> PhraseDetector:
    options = {"prompt": values["prompt"], "confidence": values["confidence_threshold"]}
    return FAMILY.detector(load_runner(values["model_path"]), **options, max_detections=values["max_detections"])


FAMILY = Family(
    name=NAME,
    summary="a tiny phrase detector (the docs' worked example of a family that takes a text prompt)",
    rule=RULE,
    parameters=(MODEL, CONFIDENCE, MAX_DETECTIONS),  # the prompt parameter comes with the prompt
    build=build,
    result=DETECTIONS,
    node=node("detections", keypoints=False, tracking=False),
    make=PhraseDetector,
    options=("prompt", "confidence", "max_detections"),  # PhraseDetector's
    make_pipeline=DetectionPipeline.build,
    prompts=(PROMPT,),
)


def main(args: list[str] | None = None) -> int:
    """Its node on ONNX Runtime, as a rendered entry point runs a family's (vision_factory/<name>_onnx_node.py)."""
    from vision_factory.ros.start import node_run
    from vision_factory.runtime.onnx_runner import OnnxRunner

    return node_run("vision_factory.ros.detection_node", f"{NAME}_node", "vision_factory")(OnnxRunner, args, FAMILY)


if __name__ == "__main__":
    sys.exit(main())
