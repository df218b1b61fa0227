"""A model of another family, given to a node, is named as such at start-up, by the rules `inspect` uses.

Synthetic models of every family (real ONNX files, loaded by real ONNX Runtime and OpenVINO runners)
go to every family's model parameter: the core (each family's ``build``,
families/<name>.py) and the real nodes refuse them, naming the family the model looks like,
its outputs and what the node needs.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.models import build_model
from support.ros_harness import NodeProcess

from vision_factory.cli import main
from vision_factory.families.registry import family as family_spec
from vision_factory.models.model_file import recognise as inspect_recognise
from vision_factory.models.model_file import summarize
from vision_factory.models.recognition import WrongFamily, recognise
from vision_factory.parameters import with_defaults
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.runtime.openvino_runner import OpenVinoRunner
from vision_factory.tools.synthetic import build_inpaint_model, build_tracknet_model

LOG = logging.getLogger("test")
NODE_FAMILY_NAMES = ("tracknet", "yolo", "yolo_pose", "fasterrcnn", "detr", "rtmpose")
MODEL_FAMILY_NAMES = (*NODE_FAMILY_NAMES, "inpaintnet", "reid")
# What each node says it needs, written out here (not read from the code under test).
NEEDS = {
    "tracknet": "tracknet_node needs a TrackNet model ([1, C, 288, 512] in, [1, L, 288, 512] out)",
    "yolo": "yolo_node needs a YOLO detector ([1, 3, H, W] in, [1, 4 + classes, N] out)",
    "yolo_pose": "yolo_pose_node needs a YOLO pose model ([1, 3, H, W] in, [1, 4 + classes + keypoints x 3, N] out",
    "fasterrcnn": "fasterrcnn_node needs a detector with post-processing inside (boxes [N, 4], scores [N]",
    "detr": "detr_node needs a DETR-family detector: Ultralytics RT-DETR ([1, 300, 4 + classes] or [1, 300, 6] out)",
    "rtmpose": "rtmpose_node needs an RTMPose SimCC model ([1, 3, H, W] in, simcc_x [1, K, 2W]",
}
# How each synthetic model is named in those errors: its family, and its outputs.
SEEN = {
    "tracknet": "looks like a tracknet model (output heatmap [1, 8, 288, 512])",
    "inpaintnet": "looks like an inpaintnet model (output output [1, 16, 2])",
    "yolo": "looks like a yolo model (output output0 [1, 7, 84])",
    "yolo_pose": "looks like a yolo_pose model (output output0 [1, 56, 84])",
    "fasterrcnn": "looks like a fasterrcnn model (outputs boxes [10, 4], scores [10], labels [10])",
    "detr": "looks like a detr model (outputs logits [1, 10, 3], pred_boxes [1, 10, 4])",
    "rtmpose": "looks like an rtmpose model (outputs simcc_x [1, 17, 384], simcc_y [1, 17, 512])",
    "reid": "looks like a reid model (output features [16, 512])",
}
REID_NEEDS = (
    "the tracker's re-identification needs a re-identification embedding model ([B, 3, H, W] crops in, one [B, D] "
    "feature per crop out)"
)


@pytest.fixture(scope="module")
def family_models(tmp_path_factory) -> dict[str, Path]:
    """One synthetic model of every family, each runnable by ONNX Runtime."""
    folder = tmp_path_factory.mktemp("families")
    pose_metadata = {"task": "pose", "kpt_shape": "[17, 3]", "names": "{0: 'person'}"}
    return {
        "tracknet": build_tracknet_model(folder / "tracknet.onnx", 8, ""),
        "inpaintnet": build_inpaint_model(folder / "inpaint.onnx", 16),
        "yolo": build_model(
            folder / "yolo.onnx",
            {"images": [1, 3, 64, 64]},
            {"output0": [1, 7, 84]},
            {"task": "detect", "names": "{0: 'a', 1: 'b', 2: 'c'}"},
        ),
        "yolo_pose": build_model(
            folder / "pose.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 56, 84]}, pose_metadata
        ),
        "fasterrcnn": build_model(
            folder / "fasterrcnn.onnx",
            {"image": [3, "height", "width"]},
            {"boxes": [10, 4], "scores": [10], "labels": [10]},
            int_outputs=("labels",),
        ),
        "detr": build_model(
            folder / "detr.onnx", {"pixel_values": [1, 3, 64, 64]}, {"logits": [1, 10, 3], "pred_boxes": [1, 10, 4]}
        ),
        "rtmpose": build_model(
            folder / "rtmpose.onnx", {"input": [1, 3, 256, 192]}, {"simcc_x": [1, 17, 384], "simcc_y": [1, 17, 512]}
        ),
        "reid": build_model(folder / "reid.onnx", {"images": [16, 3, 256, 128]}, {"features": [16, 512]}),
    }


def load(path: str):
    return OnnxRunner.load(path, {}, LOG)


def build(family: str, parameters: dict[str, object]):
    """What the family's node builds from these parameters (the rest at their defaults)."""
    spec = family_spec(family)
    return spec.build(with_defaults(spec.parameters, parameters, family), load)


def node_parameters(family: str, models: dict[str, Path], model: Path) -> dict[str, object]:
    parameters: dict[str, object] = {"model_path": str(model)}
    if family == "rtmpose":
        parameters["person_detector_path"] = str(models["yolo"])
    return parameters


@pytest.mark.parametrize(
    "family,wrong", [(family, wrong) for family in NODE_FAMILY_NAMES for wrong in MODEL_FAMILY_NAMES if wrong != family]
)
def test_every_node_family_names_a_model_of_every_other_family(family_models, family, wrong):
    model = family_models[wrong]
    with pytest.raises(WrongFamily) as raised:
        build(family, node_parameters(family, family_models, model))
    message = str(raised.value)
    assert message.startswith(f"model_path {model} {SEEN[wrong]}; {NEEDS[family]}"), message
    assert "What decided it: " in message


@pytest.mark.parametrize("wrong", [family for family in MODEL_FAMILY_NAMES if family != "reid"])
def test_the_reid_model_names_a_model_of_every_other_family(family_models, wrong):
    """reid has no node, but its model parameter is checked by the same rules."""
    model = family_models[wrong]
    with pytest.raises(WrongFamily) as raised:
        build("reid", {"reid_model_path": str(model)})
    assert str(raised.value).startswith(f"reid_model_path {model} {SEEN[wrong]}; {REID_NEEDS}"), str(raised.value)


@pytest.mark.parametrize("family", NODE_FAMILY_NAMES)
def test_every_node_family_takes_its_own_synthetic_model(family_models, family):
    built = build(family, node_parameters(family, family_models, family_models[family]))
    assert built is not None


def test_the_inpainting_model_and_the_person_detector_are_checked_too(family_models):
    tracknet = {"model_path": str(family_models["tracknet"])}
    with pytest.raises(WrongFamily) as raised:
        build("tracknet", {**tracknet, "inpaint_model_path": str(family_models["tracknet"])})
    assert str(raised.value).startswith(
        f"inpaint_model_path {family_models['tracknet']} {SEEN['tracknet']}; tracknet_node's inpainting needs "
        "an InpaintNet model (coords [1, L, 2] and mask [1, L, 1] in, [1, L, 2] out)"
    )
    build("tracknet", {**tracknet, "inpaint_model_path": str(family_models["inpaintnet"])})
    with pytest.raises(WrongFamily) as raised:
        build(
            "rtmpose",
            {"model_path": str(family_models["rtmpose"]), "person_detector_path": str(family_models["yolo_pose"])},
        )
    assert str(raised.value).startswith(
        f"person_detector_path {family_models['yolo_pose']} {SEEN['yolo_pose']}; rtmpose_node's person detector "
        "needs a YOLO detector"
    )


def test_a_model_no_rule_recognises_keeps_the_adapters_own_error(tmp_path):
    model = build_model(tmp_path / "flat.onnx", {"x": [1, 10]}, {"y": [1, 10]})
    with pytest.raises(ValueError, match=r"has a 2-D input; TrackNet takes \[1, C, 288, 512\]") as raised:
        build("tracknet", {"model_path": str(model)})
    assert not isinstance(raised.value, WrongFamily)


def test_a_56_channel_model_without_metadata_may_be_a_52_class_detector(tmp_path):
    # Recognised as yolo_pose by shape, but inspect says a 52-class detector looks the same: both nodes take it.
    model = build_model(tmp_path / "56.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 56, 84]})
    assert len(build("yolo", {"model_path": str(model)}).names) == 52
    assert build("yolo_pose", {"model_path": str(model)}) is not None


def test_model_text_in_the_error_is_escaped(tmp_path):
    forged = "output0\n[FATAL] [tracknet]: forged \x1b[31m"
    model = build_model(tmp_path / "forged.onnx", {"images": [1, 3, 64, 64]}, {forged: [1, 7, 84]})
    with pytest.raises(WrongFamily) as raised:
        build("tracknet", {"model_path": str(model)})
    message = str(raised.value)
    assert "\n" not in message and "\x1b" not in message
    assert "output0\\n[FATAL] [tracknet]: forged \\x1b[31m [1, 7, 84]" in message


@pytest.mark.parametrize("wrong", MODEL_FAMILY_NAMES)
def test_inspect_and_every_backend_agree(family_models, wrong):
    """The file as inspect reads it and the model as ONNX Runtime and OpenVINO load it are recognised alike."""
    path = family_models[wrong]
    from_file = inspect_recognise(summarize(path))
    assert from_file.family == wrong
    assert recognise(load(str(path))) == from_file
    openvino = recognise(OpenVinoRunner.load(path, {}, LOG))
    assert (openvino.family, openvino.also) == (from_file.family, from_file.also)
    if wrong != "fasterrcnn":  # OpenVINO leaves dynamic dimensions unnamed, so its reason shows them as ?
        assert openvino == from_file


# The real nodes: (node, parameter given the wrong model, family of that model, other parameters).
NODE_CASES = [
    ("tracknet", "model_path", "yolo_pose", {}),
    ("tracknet", "inpaint_model_path", "tracknet", {"model_path": "tracknet"}),
    ("yolo", "model_path", "fasterrcnn", {}),
    ("yolo_pose", "model_path", "rtmpose", {}),
    ("fasterrcnn", "model_path", "tracknet", {}),
    ("yolo", "model_path", "reid", {}),
    ("detr", "model_path", "yolo", {}),
    ("rtmpose", "model_path", "yolo", {"person_detector_path": "yolo"}),
    ("rtmpose", "person_detector_path", "yolo_pose", {"model_path": "rtmpose"}),
]


@pytest.mark.parametrize("node,parameter,wrong,others", NODE_CASES)
def test_a_node_given_a_model_of_another_family_says_so_and_exits(
    tmp_path, family_models, node, parameter, wrong, others
):
    model = family_models[wrong]
    params = {name: str(family_models[value]) for name, value in others.items()} | {parameter: str(model)}
    process = NodeProcess(tmp_path, params, module=f"vision_factory.{node}_onnx_node")
    assert process.wait(30) == 2
    process.stop()
    log = process.log()
    assert "cannot start" in log and "Traceback" not in log, log
    assert f"{parameter} {model} {SEEN[wrong]}" in log, log
    user = {
        "inpaint_model_path": "tracknet_node's inpainting",
        "person_detector_path": "rtmpose_node's person detector",
    }
    if parameter == "model_path":
        assert NEEDS[node] in log, log
    else:
        assert f"{user[parameter]} needs an" in log or f"{user[parameter]} needs a" in log, log
    # `vision-factory inspect` says the same family.
    inspected = CliRunner().invoke(main, ["inspect", "--format", "json", str(model)])
    assert json.loads(inspected.output)["recognition"]["family"] == wrong
