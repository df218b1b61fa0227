"""RTMPose adapter on real ONNX Runtime sessions of small SimCC models whose answers are known:

- constant SimCC outputs with peaks placed by hand: the decoded keypoints are checked to the
  float against centre/scale worked out by hand from MMPose's rules;
- a "spot finder" (per axis, the max over the red channel, each bin twice: split ratio 2): a
  one-pixel spot in the frame must come back exactly where it is, through a crop that shifts
  and one that also scales;
- the crop itself against MMPose's three-point construction of the affine (getAffineTransform).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import cv2
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SHARED
from onnx import TensorProto, helper, numpy_helper
from support.data import UNUSUAL_SHAPES
from support.models import H, K, W, _save, spot_finder

from vision_factory.cli import main
from vision_factory.families.registry import family
from vision_factory.models.rtmpose import IMAGENET_MEAN, IMAGENET_STD, RTMPoseEstimator, TopDownPose, box_center_scale
from vision_factory.models.yolo import YoloDetector
from vision_factory.results.boxes import Boxes
from vision_factory.results.frame import FrameResult
from vision_factory.results.keypoints import COCO_KEYPOINTS
from vision_factory.runtime.onnx_runner import OnnxRunner

SHAPES_MODEL = SHARED / "models" / "shapes-yolov8n.onnx"
SHAPES_IMAGE = SHARED / "data" / "shapes-val" / "images" / "0001.jpg"  # two triangles and a circle
LOG = logging.getLogger("test")
needs_shapes = pytest.mark.skipif(not SHAPES_MODEL.exists(), reason=f"shared model not found at {SHAPES_MODEL}")


def _runner(path: Path) -> OnnxRunner:
    return OnnxRunner.load(path, {}, LOG)


def constant_simcc(path: Path, simcc_x: np.ndarray, simcc_y: np.ndarray, names=("simcc_x", "simcc_y"), batch=1):
    """An RTMPose-shaped model that returns the given SimCC maps, whatever the crop."""
    outputs = dict(zip(names, (simcc_x, simcc_y)))
    graph = helper.make_graph(
        [helper.make_node("Identity", [f"{name}_value"], [name]) for name in outputs],
        "simcc",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, H, W])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape)) for n, v in outputs.items()],
        [numpy_helper.from_array(v.astype(np.float32), f"{n}_value") for n, v in outputs.items()],
    )
    return _save(graph, path)


def _peaks(bins_x, bins_y, values_x, values_y, batch=1):
    simcc_x, simcc_y = np.zeros((batch, K, 2 * W)), np.zeros((batch, K, 2 * H))
    for k in range(K):
        simcc_x[:, k, bins_x[k]] = values_x[k]
        simcc_y[:, k, bins_y[k]] = values_y[k]
    return simcc_x, simcc_y


def test_box_becomes_centre_and_size_with_padding_and_the_models_aspect():
    tall, wide = box_center_scale(np.array([[100, 50, 200, 450], [0, 0, 400, 100]]), W / H)
    # tall: 100 x 400 -> padded 125 x 500 -> width raised to 500 * 0.75 = 375
    assert tall.tolist() == [150, 250, 375, 500]
    # wide: 400 x 100 -> padded 500 x 125 -> height raised to 500 / 0.75
    assert np.allclose(wide, [200, 50, 500, 500 / 0.75])


def test_simcc_peaks_decode_to_frame_pixels(tmp_path):
    bins_x = [0, 192, 383] + [10 * k for k in range(14)]
    bins_y = [0, 256, 511] + [20 * k for k in range(14)]
    values_x = np.linspace(0.2, 0.9, K)
    values_y = np.linspace(0.9, 0.2, K)
    model = constant_simcc(tmp_path / "m.onnx", *_peaks(bins_x, bins_y, values_x, values_y))
    estimator = RTMPoseEstimator(_runner(model))
    assert estimator.size == (H, W) and estimator.keypoint_names == list(COCO_KEYPOINTS)
    (points,) = estimator.estimate(np.zeros((480, 640, 3), np.uint8), [(100, 50, 200, 450)])
    # centre (150, 250), size 375 x 500: x = bin / 2 / 192 * 375 + 150 - 187.5, y = bin / 2 / 256 * 500 + 0
    assert points[0][:2] == (-37.5, 0.0)
    assert points[1][:2] == (150.0, 250.0)  # the middle bins are the box centre
    assert points[2][:2] == pytest.approx((191.5 / 192 * 375 - 37.5, 255.5 / 256 * 500), abs=1e-9)
    for k in range(3, K):
        expected = (bins_x[k] / 2 / W * 375 - 37.5, bins_y[k] / 2 / H * 500)
        assert points[k][:2] == pytest.approx(expected, abs=1e-9)
    # MMPose's score: the smaller of the two maxima; rtmlib's: their mean.
    assert [p[2] for p in points] == pytest.approx(np.minimum(values_x, values_y).tolist(), abs=1e-6)
    mean = RTMPoseEstimator(_runner(model), score_mode="mean").estimate(
        np.zeros((480, 640, 3), np.uint8), [(0, 0, 1, 1)]
    )
    assert [p[2] for p in mean[0]] == pytest.approx(((values_x + values_y) / 2).tolist(), abs=1e-6)


def test_unnamed_simcc_outputs_are_told_apart_by_length(tmp_path):
    simcc_x, simcc_y = _peaks([100] * K, [300] * K, [1] * K, [1] * K)
    model = constant_simcc(tmp_path / "m.onnx", simcc_y, simcc_x, names=("out_a", "out_b"))  # y first
    estimator = RTMPoseEstimator(_runner(model))
    assert estimator.output_names == ("out_b", "out_a")
    (points,) = estimator.estimate(np.zeros((100, 100, 3), np.uint8), [(0, 0, 30, 40)])
    # centre (15, 20), size 37.5 x 50: u = 50, v = 150
    assert points[0][:2] == pytest.approx((50 / W * 37.5 + 15 - 18.75, 150 / H * 50 + 20 - 25))
    forced = RTMPoseEstimator(_runner(model), simcc_x_output="out_a", simcc_y_output="out_b")
    assert forced.output_names == ("out_a", "out_b")


def test_crop_is_mmposes_three_point_affine_normalised_in_rgb(tmp_path):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)
    estimator = RTMPoseEstimator(_runner(spot_finder(tmp_path / "m.onnx")))
    boxes = np.array([[50.0, 60.0, 130.0, 280.0], [10.5, 20.25, 390.0, 100.0]])
    crops, center_scale = estimator.preprocess(image, boxes)
    assert crops.shape == (2, 3, H, W) and crops.dtype == np.float32
    for crop, (cx, cy, w, _) in zip(crops, center_scale):
        # MMPose: the centre, a point half a width to its left, and a third at right angles from that one.
        source = np.float32([[cx, cy], [cx - w / 2, cy], [cx - w / 2, cy + w / 2]])
        target = np.float32([[W / 2, H / 2], [0, H / 2], [0, H / 2 + W / 2]])
        matrix = cv2.getAffineTransform(source, target)
        expected = cv2.warpAffine(image, matrix, (W, H), flags=cv2.INTER_LINEAR)[..., ::-1].astype(np.float32)
        expected = ((expected - np.float32(IMAGENET_MEAN)) / np.float32(IMAGENET_STD)).transpose(2, 0, 1)
        # float32 corner points against an exact matrix: identical up to a rare rounding in the 1/32 px grid
        assert np.mean(np.abs(crop - expected) < 1e-4) > 0.99


@pytest.mark.parametrize("batch", ["batch", 1])
def test_a_spot_comes_back_where_it_was(tmp_path, batch):
    estimator = RTMPoseEstimator(_runner(spot_finder(tmp_path / "m.onnx", batch)))
    assert estimator.batch == (None if batch == "batch" else 1)
    frame = np.zeros((400, 600, 3), np.uint8)
    frame[138, 212] = (0, 0, 255)  # red, so the channel order matters
    # Box 1: padded to exactly 192 x 256 around (200, 150): the crop is a pure shift by (104, 22).
    shift_box = (200 - 76.8, 150 - 102.4, 200 + 76.8, 150 + 102.4)
    # Box 2: twice as large: crop pixel (u, v) samples frame pixel (2u + 8, 2v - 106), so (102, 122) the spot.
    scaled_box = (200 - 153.6, 150 - 204.8, 200 + 153.6, 150 + 204.8)
    shifted, scaled = estimator.estimate(frame, [shift_box, scaled_box])
    for x, y, _ in shifted + scaled:
        assert (x, y) == pytest.approx((212, 138), abs=1e-9)
    red = (255 - IMAGENET_MEAN[0]) / IMAGENET_STD[0]
    assert shifted[0][2] == pytest.approx(red, abs=1e-4)


@needs_shapes
def test_top_down_pose_puts_keypoints_on_the_detectors_people(tmp_path):
    # Peaks in the middle bins: every keypoint lands on its box's centre.
    model = constant_simcc(tmp_path / "m.onnx", *_peaks([W] * K, [H] * K, [0.7] * K, [0.8] * K))
    detector = YoloDetector(_runner(SHAPES_MODEL))
    pose = TopDownPose(detector, RTMPoseEstimator(_runner(model)), person_class="circle")
    assert pose.names == ["circle", "square", "triangle"] and pose.keypoint_names == list(COCO_KEYPOINTS)
    image = cv2.imread(str(SHAPES_IMAGE))
    found = detector.detect(image)
    circles = found[[label == "circle" for label in found.boxes.labels]]
    people = pose.detect(image)
    assert len(circles) and len(people) == len(circles)
    assert np.array_equal(people.boxes.xyxy, circles.boxes.xyxy)
    assert np.array_equal(people.boxes.scores, circles.boxes.scores) and people.keypoints.points.shape[1] == K
    for (x1, y1, x2, y2), points in zip(people.boxes.xyxy, people.keypoints.points):
        for point in points:
            assert tuple(point) == pytest.approx(((x1 + x2) / 2, (y1 + y2) / 2, 0.7))
    # Boxes from elsewhere (a detections topic): no detector needed.
    given = TopDownPose(None, RTMPoseEstimator(_runner(model)))
    person = given.pose(image, FrameResult.of(image, boxes=Boxes([(10, 20, 30, 60)], [0.9], [0], ["person"])))
    assert tuple(person.keypoints.points[0, 0]) == (20.0, 40.0, pytest.approx(0.7))
    with pytest.raises(ValueError, match="no person detector"):
        given.detect(image)
    with pytest.raises(ValueError, match="person_class 'person' is not a class of the person detector: it has circle"):
        TopDownPose(detector, RTMPoseEstimator(_runner(model)), person_class="person")
    built = family("rtmpose").detector(_runner(model), person_detector=detector, person_class="1", padding=1.0)
    assert built.person_class == 1 and built.estimator.padding == 1.0


def _graph_with_outputs(path: Path, outputs: dict[str, list], input_shape=(1, 3, H, W)) -> Path:
    values = {name: np.zeros(shape, np.float32) for name, shape in outputs.items()}
    graph = helper.make_graph(
        [helper.make_node("Identity", [f"{name}_value"], [name]) for name in values],
        "bad",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(v.shape)) for name, v in values.items()],
        [numpy_helper.from_array(v, f"{name}_value") for name, v in values.items()],
    )
    return _save(graph, path)


@pytest.mark.parametrize(
    ("outputs", "input_shape", "options", "error"),
    [
        (
            {"heatmaps": [1, K, 64, 48]},
            (1, 3, H, W),
            {},
            r"two SimCC outputs, simcc_x \[B, K, W\*split\] and simcc_y .* this model has 1 output\(s\): heatmaps",
        ),
        (
            {"simcc_x": [1, K * 2 * W], "simcc_y": [1, K, 2 * H]},
            (1, 3, H, W),
            {},
            r"output simcc_x \[1, 6528\] is not \[B, K, L\]: .* name the SimCC outputs with simcc_x_output",
        ),
        (
            {"simcc_x": [1, K, 2 * W], "simcc_y": [1, 26, 2 * H]},
            (1, 3, H, W),
            {},
            r"simcc_x \[1, 17, 384\] and simcc_y \[1, 26, 512\] disagree on the keypoint count",
        ),
        (
            {"simcc_x": [1, K, 2 * W], "simcc_y": [1, K, 2 * H]},
            (1, 3, "h", "w"),
            {},
            r"input input \[1, 3, h, w\] has a dynamic size: set input_size \(height, width\)",
        ),
        (
            {"simcc_x": [1, K, 2 * W], "simcc_y": [1, K, 2 * H]},
            (1, H, W, 3),
            {},
            r"input input \[1, 256, 192, 3\] is not \[B, 3, H, W\]",
        ),
        (
            {"simcc_x": [1, K, 2 * W], "simcc_y": [1, K, 2 * H]},
            (1, 3, H, W),
            {"simcc_x_output": "x"},
            r"simcc_x_output 'x' is not an output of the model; its outputs are simcc_x \[1, 17, 384\]",
        ),
        (
            {"simcc_x": [1, K, 2 * W], "simcc_y": [1, K, 2 * H]},
            (1, 3, H, W),
            {"keypoint_names": ["a", "b"]},
            "2 keypoint names given for a model with 17 keypoints",
        ),
    ],
)
def test_layout_errors_name_the_problem_and_the_fix(tmp_path, outputs, input_shape, options, error):
    model = _graph_with_outputs(tmp_path / "m.onnx", outputs, input_shape)
    with pytest.raises(ValueError, match=error):
        RTMPoseEstimator(_runner(model), **options)


def test_dynamic_input_runs_at_the_given_size(tmp_path):
    model = _graph_with_outputs(
        tmp_path / "m.onnx", {"simcc_x": [1, K, 2 * W], "simcc_y": [1, K, 2 * H]}, (1, 3, "h", "w")
    )
    estimator = RTMPoseEstimator(_runner(model), input_size=(H, W))
    assert estimator.size == (H, W) and len(estimator.estimate(np.zeros((50, 50, 3), np.uint8), [(0, 0, 9, 9)])) == 1
    assert estimator.estimate(np.zeros((50, 50, 3), np.uint8), []) == []


@needs_shapes
def test_predict_runs_rtmpose_on_a_detectors_boxes(tmp_path):
    model = constant_simcc(tmp_path / "m.onnx", *_peaks([W] * K, [H] * K, [0.7] * K, [0.8] * K))
    arguments = ["predict", "--model-type", "rtmpose", "--model", str(model), str(SHAPES_IMAGE), "--format", "json"]
    result = CliRunner().invoke(main, [*arguments, "--detector", str(SHAPES_MODEL), "--person-class", "triangle"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert record["detections"] and {d["class_name"] for d in record["detections"]} == {"triangle"}
    for detection in record["detections"]:
        x1, y1, x2, y2 = detection["xyxy"]
        assert len(detection["keypoints"]) == K
        assert detection["keypoints"][0] == pytest.approx([(x1 + x2) / 2, (y1 + y2) / 2, 0.7])
    missing = CliRunner().invoke(main, arguments)
    assert missing.exit_code != 0 and "--detector" in missing.output


def test_unusual_frames_are_posed_on_their_boxes(tmp_path):
    """Boxes on frames of extreme aspect ratios, tiny and odd sizes: one pose each, keypoints near the box."""
    estimator = RTMPoseEstimator(_runner(spot_finder(tmp_path / "spot.onnx")))
    pose = TopDownPose(None, estimator)
    for height, width in UNUSUAL_SHAPES:
        frame = np.zeros((height, width, 3), np.uint8)
        frame[height // 2, width // 2, 2] = 255  # the spot
        boxes = Boxes([(0, 0, width, height), (0, 0, 1, 1)], [0.9, 0.8], [0, 0], ["person", "person"])
        posed = pose.pose(frame, FrameResult.of(frame, boxes=boxes))
        assert len(posed) == 2 and posed.keypoints.points.shape == (2, K, 3)
        x, y, _ = posed.keypoints.points[0, 0]
        assert abs(x - width // 2) <= 1 + width * 0.02 and abs(y - height // 2) <= 1 + height * 0.02, (height, width)
