"""NaN and infinite values, from a damaged model (or an FP16 export that overflows) or from another node's message:
the bad part left out (or mended) and reported once per kind, the good part kept. Every detection passes one check
on its way to a message or a file (results/finite.py's finite, in families/pipeline.py's
DetectionPipeline); NMS, masks, top-down pose and 3D lifting never let one bad box cost the frame's others; a
depth model's map and a camera_info that cannot place a pixel are reported, never published as inf or NaN points.
Models with NaN outputs are built here (constant outputs); the rest runs as it does for users."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper
from support.models import _constant_model
from support.ros_harness import KEEP_EVERY_FRAME

from vision_factory.camera_infos import CameraInfoError, Intrinsics
from vision_factory.cli import main
from vision_factory.families.registry import family
from vision_factory.models.lift3d import lift
from vision_factory.models.masks import instance_masks
from vision_factory.parameters import with_defaults
from vision_factory.results.boxes import Boxes, nms
from vision_factory.results.finite import finite
from vision_factory.results.frame import FrameResult
from vision_factory.results.keypoints import Keypoints
from vision_factory.results.masks import box_span, labelled
from vision_factory.runtime.backends import load_target
from vision_factory.tools.bags import write_image_bag
from vision_factory.tools.replay import replay

NAN, INF = float("nan"), float("inf")
SIZE = 256  # the constant models' input: a frame of this size maps onto it one to one


def _load(path) -> object:
    return load_target("onnx:cpu", Path(path))


def _pipeline(name: str, model: Path, **given):
    values = with_defaults(family(name).parameters, {"model_path": str(model), **given}, name)
    return family(name).pipeline(values, _load)


def _push(pipeline, frame: np.ndarray, **given) -> FrameResult:
    """The frame's result from ``pipeline`` (one frame pushed, answered at once)."""
    ((_, found),) = pipeline.push(frame, **given)
    return found


def _boxes(rows: list[tuple]) -> Boxes:
    """Boxes of ``rows`` (xyxy, score, label), all of class 0."""
    return Boxes([xyxy for xyxy, _, _ in rows], [score for _, score, _ in rows], [0] * len(rows), [r[2] for r in rows])


def _yolo_output(rows: list[tuple]) -> np.ndarray:
    """A YOLOv8 head's [1, 6, 100] output (cx, cy, w, h, two class scores) with ``rows`` as its first anchors."""
    output = np.zeros((1, 6, 100), np.float32)
    for anchor, row in enumerate(rows):
        output[0, :, anchor] = row
    return output


GOOD = [(60, 60, 40, 40, 0.9, 0.0), (180, 150, 50, 30, 0.0, 0.8)]  # a circle and a square
OVERLAPPING = (62, 61, 40, 40, 0.7, 0.0)  # the first circle again, lower: suppressed by NMS
BAD = [(NAN, 60, 40, 40, 0.95, 0.0), (120, 120, INF, 40, 0.85, 0.0)]  # scoring best: NMS takes them first
EXPECTED = [((40, 40, 80, 80), 0.9, "circle"), ((155, 135, 205, 165), 0.8, "square")]


def _found(found: FrameResult) -> list[tuple]:
    boxes = found.boxes
    return [
        (tuple(round(v, 3) for v in xyxy), round(score, 3), label)
        for xyxy, score, label in zip(boxes.xyxy.tolist(), boxes.scores.tolist(), boxes.labels)
    ]


def test_finite_leaves_out_nan_boxes_and_scores_and_mends_keypoints():
    points = np.zeros((5, 3, 3))
    points[3] = [[10, 20, 0.9], [NAN, 5, 0.8], [3, 4, INF]]
    boxes = _boxes([((0, 0, 10, 10), 0.9, "a"), ((0, NAN, 10, 10), 0.9, "a"), ((0, 0, 10, 10), INF, "a"),
                    ((1, 1, 5, 5), 0.6, "person"), ((-INF, 0, 10, 10), 0.5, "a")])  # fmt: skip
    detections = FrameResult(64, 64, boxes, Keypoints(points, ("a", "b", "c")))
    screened = finite(detections)
    assert screened.kept == [0, 3] and screened.result.boxes == boxes[[0, 3]]
    assert np.array_equal(screened.result.keypoints.points[1], [[10, 20, 0.9], [0, 0, 0], [0, 0, 0]])
    assert np.isnan(points[3, 1, 0])  # the detections given are not changed
    assert set(screened.problems) == {"non-finite box", "non-finite score", "non-finite keypoint"}
    assert screened.problems == screened.result.problems
    assert screened.problems["non-finite box"].startswith("2 of 5 detections in the model's output with a NaN or")
    assert screened.problems["non-finite keypoint"].startswith("2 keypoints in the model's output")
    assert "an FP16 export that overflows (export in FP32)" in screened.problems["non-finite score"]
    clean = screened.result.with_parts(problems={})
    assert finite(clean, "person detections") == (clean, {}, [0, 1])
    vast = FrameResult(64, 64, _boxes([((0, 0, 1e308, 1e308), 0.5, "a")] * 3))  # a sum that overflows: each looked
    assert finite(vast) == (vast, {}, [0, 1, 2])  # at, all finite


def test_a_nan_box_takes_no_part_in_nms():
    """One NaN box scoring best made every finite box vanish from OpenCV's NMS (the class offset became NaN)."""
    boxes = np.array([[10, 10, 50, 50], [12, 12, 52, 52], [NAN, 0, 5, 5], [100, 100, 140, 140], [0, 0, INF, 9]])
    scores = np.array([0.9, 0.8, 0.95, 0.7, 0.99])
    kept = nms(boxes, scores, np.zeros(5, np.int64), 0.5, limit=300)
    assert kept.tolist() == [0, 3, 2, 4]  # the finite boxes' NMS, then the bad ones for finite to count


def test_one_nan_box_in_a_yolo_models_output_costs_no_other_detection(tmp_path):
    model = _constant_model(tmp_path / "bad.onnx", _yolo_output([*GOOD, OVERLAPPING, *BAD]), size=SIZE)
    found = _push(_pipeline("yolo", model), np.zeros((SIZE, SIZE, 3), np.uint8))
    assert _found(found) == EXPECTED
    assert list(found.problems) == ["non-finite box"]
    assert found.problems["non-finite box"].startswith("2 of 4 detections in the model's output with a NaN")
    tracked = _pipeline("yolo", model, tracking=True)  # the tracker never sees them either
    for _ in range(3):
        found = _push(tracked, np.zeros((SIZE, SIZE, 3), np.uint8))
    assert _found(found) == EXPECTED and found.boxes.track_ids.tolist() == [1, 2]


def test_predict_prints_no_nan_and_says_once_what_it_left_out(tmp_path):
    model = _constant_model(tmp_path / "bad.onnx", _yolo_output([*GOOD, *BAD]), size=SIZE)
    image = tmp_path / "frame.png"
    import cv2

    cv2.imwrite(str(image), np.zeros((SIZE, SIZE, 3), np.uint8))
    done = CliRunner().invoke(
        main, ["predict", "--model-type", "yolo", "--model", str(model), str(image), str(image), "--format", "json"]
    )
    assert done.exit_code == 0, done.output
    records = [json.loads(line, parse_constant=pytest.fail) for line in done.stdout.splitlines()]
    assert [[(tuple(d["xyxy"]), d["class_name"]) for d in r["detections"]] for r in records] == [
        [(xyxy, name) for xyxy, _, name in EXPECTED]
    ] * 2
    assert done.stderr.count("(non-finite box): 2 of 4 detections in the model's output with a NaN") == 1
    assert "frames with problems in all, by kind: non-finite box: 2" in done.stderr


def _detr(path: Path, boxes: np.ndarray) -> Path:
    """A Hugging Face RT-DETR-style model (logits [1, 4, 2], pred_boxes [1, 4, 4]) of constant outputs: queries 0
    and 3 confident, 1 and 2 confident too but with the ``boxes`` given."""
    logits = np.full((1, 4, 2), -9.0, np.float32)
    logits[0, :, 0] = [3.0, 4.0, 5.0, 2.0]
    values = {"logits": logits, "pred_boxes": boxes.astype(np.float32)}
    graph = helper.make_graph(
        [helper.make_node("Identity", [f"{name}_value"], [name]) for name in values],
        "constant",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(value.shape)) for name, value in values.items()],
        [numpy_helper.from_array(value, f"{name}_value") for name, value in values.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    helper.set_model_props(model, {"model_type": "rt_detr", "names": "{0: 'thing', 1: 'other'}"})
    onnx.save(model, path)
    return path


DETR_BOXES = np.array([[[0.25, 0.25, 0.1, 0.1], [NAN, NAN, NAN, NAN], [0.5, INF, 0.1, 0.1], [0.75, 0.5, 0.2, 0.2]]])


def test_a_detr_whose_pred_boxes_are_nan_keeps_its_other_queries(tmp_path):
    found = _push(_pipeline("detr", _detr(tmp_path / "detr.onnx", DETR_BOXES)), np.zeros((100, 200, 3), np.uint8))
    assert [(xyxy, label) for xyxy, _, label in _found(found)] == [
        ((40.0, 20.0, 60.0, 30.0), "thing"),
        ((130.0, 40.0, 170.0, 60.0), "thing"),
    ]
    assert list(found.problems) == ["non-finite box"]


def test_the_detr_node_publishes_no_nan_box_and_says_so_once(tmp_path):
    """Over DDS (replay of a bag of three frames through the detr node): the queries of NaN and infinite boxes
    (published as they came on 9b439f9) never reach a Detection2DArray; the others do, every frame; the node says it
    once, and counts the frames at stop."""
    frames = [np.full((100, 200, 3), 40 * index, np.uint8) for index in range(3)]
    bag = write_image_bag(tmp_path / "bag", frames)
    params = {"model_path": str(_detr(tmp_path / "detr.onnx", DETR_BOXES)), **KEEP_EVERY_FRAME}
    result = replay(bag, tmp_path / "out", node="detr", params=params)
    log = Path(result.node_log).read_text()
    assert result.missing_frames == [], log
    records = json.loads(Path(result.answers).read_text(), parse_constant=pytest.fail)
    published = [[d["xyxy"] for d in record["detections"]] for record in records]
    assert np.allclose(published, [[[40, 20, 60, 30], [130, 40, 170, 60]]] * 3, atol=1e-4), published
    assert log.count("(non-finite box): 2 of 4 detections in the model's output with a NaN or infinite box") == 1
    assert "frames with problems in all, by kind: non-finite box: 3" in log and "Traceback" not in log


def _constant_outputs(path: Path, image: list, outputs: dict[str, np.ndarray], metadata: dict | None = None) -> Path:
    """A model of one image input of shape ``image`` whose outputs are these arrays, whatever the image."""
    graph = helper.make_graph(
        [helper.make_node("Identity", [f"{name}_value"], [name]) for name in outputs],
        "constant",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, image)],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(value.shape)) for name, value in outputs.items()],
        [numpy_helper.from_array(value.astype(np.float32), f"{name}_value") for name, value in outputs.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    helper.set_model_props(model, metadata or {})
    onnx.save(model, path)
    return path


def test_a_mask_of_nan_values_leaves_its_detection_without_a_mask_and_the_others_whole(tmp_path):
    """A segmentation model whose prototypes are NaN under one detection: that one is kept without a mask (its box
    and score are fine), reported; the other keeps its mask; a NaN box among them costs neither."""
    head = np.zeros((1, 4 + 2 + 32, 100), np.float32)
    head[0, :6, 0] = [60, 60, 40, 40, 0.9, 0.0]
    head[0, :6, 1] = [180, 150, 50, 30, 0.0, 0.8]
    head[0, :6, 2] = [NAN, 60, 40, 40, 0.95, 0.0]
    head[0, 6, :3] = 1.0  # each detection's mask: prototype 0
    prototypes = np.ones((1, 32, 64, 64), np.float32)
    prototypes[0, 0, 30:45, 38:55] = NAN  # under the square (rows 135..165, columns 155..205 / 4)
    model = _constant_outputs(tmp_path / "seg.onnx", [1, 3, SIZE, SIZE], {"output0": head, "output1": prototypes},
                              {"names": "{0: 'circle', 1: 'square'}"})  # fmt: skip
    found = _push(_pipeline("yolo", model), np.zeros((SIZE, SIZE, 3), np.uint8))
    assert _found(found) == EXPECTED
    circle, square = found.masks.masks
    assert circle is not None and circle.area == 40 * 40 and square is None
    assert list(found.problems) == ["non-finite box", "non-finite mask"]
    assert found.problems["non-finite mask"].startswith("1 of 3 detections in the model's output with a mask of NaN")


def test_masks_and_mask_labels_of_a_nan_or_infinite_box_are_empty_not_an_error():
    assert box_span(NAN, 5.0, 10) == (0, 0) and box_span(2.5, INF, 10) == (3, 10) and box_span(-INF, 2.0, 10) == (0, 2)
    labels = np.ones((10, 10), np.uint16)
    assert labelled(labels, 1, (NAN, 0, 5, 5)).area == 0 and labelled(labels, 1, (0, 0, INF, 5)).area == 50
    masks = instance_masks(np.ones((1, 4, 4)), np.ones((2, 1)), np.array([[0, 0, 8, 8], [NAN, 0, 8, 8]]), (16, 16))
    assert masks[0].area == 64 and masks[1].area == 0


def test_a_pose_models_nan_keypoints_are_not_seen_and_its_person_kept(tmp_path):
    output = np.zeros((1, 4 + 1 + 17 * 3, 100), np.float32)
    points = np.stack([np.arange(17) * 10.0 + 20, np.arange(17) * 5.0 + 40, np.full(17, 0.9)], axis=1)
    points[3, 0], points[9, 2] = NAN, INF
    output[0, :5, 0] = [120, 100, 80, 160, 0.9]
    output[0, 5:, 0] = points.ravel()
    model = _constant_model(tmp_path / "pose.onnx", output, size=SIZE, names="{0: 'person'}",
                            metadata={"kpt_shape": "[17, 3]"})  # fmt: skip
    person = _push(_pipeline("yolo_pose", model), np.zeros((SIZE, SIZE, 3), np.uint8))
    expected = points.copy()
    expected[[3, 9]] = 0.0
    assert len(person) == 1 and np.allclose(person.keypoints.points[0], expected)
    assert person.boxes.xyxy[0].tolist() == [80, 20, 160, 180]
    found = _push(_pipeline("yolo_pose", model), np.zeros((SIZE, SIZE, 3), np.uint8))
    assert found.problems["non-finite keypoint"].startswith("2 keypoints in the model's output with a NaN or")


def _simcc(path: Path) -> Path:
    """An RTMPose-shaped model (input 192x256, SimCC split 2) whose every keypoint peaks at the crop's centre."""
    simcc_x, simcc_y = np.zeros((1, 17, 384)), np.zeros((1, 17, 512))
    simcc_x[..., 192], simcc_y[..., 256] = 0.7, 0.8
    return _constant_outputs(path, [1, 3, 256, 192], {"simcc_x": simcc_x, "simcc_y": simcc_y})


def test_top_down_pose_poses_the_finite_people_and_counts_the_rest(tmp_path):
    """People with a NaN or infinite box, from another node's message or from the person detector: no crop is made
    of them, they are left out and counted; the others are posed."""
    from vision_factory.families.pipeline import DetectionPipeline
    from vision_factory.families.rtmpose import FAMILY as RTMPOSE
    from vision_factory.models.rtmpose import RTMPoseEstimator, TopDownPose
    from vision_factory.models.yolo import YoloDetector

    estimator = RTMPoseEstimator(_load(_simcc(tmp_path / "pose.onnx")))
    frame = np.zeros((SIZE, SIZE, 3), np.uint8)
    people = FrameResult.of(frame, boxes=_boxes([((NAN, 0, 9, 9), 0.9, "person"), ((10, 20, 30, 60), 0.9, "person")]))
    pipeline = DetectionPipeline(TopDownPose(None, estimator), None, 0.25, RTMPOSE.boxes_prompt)
    given = _push(pipeline, frame, boxes=people)
    assert len(given) == 1 and given.boxes.xyxy[0].tolist() == [10, 20, 30, 60]
    assert np.allclose(given.keypoints.points[0], [(20, 40, 0.7)] * 17)
    assert list(given.problems) == ["non-finite box in person detections"]
    assert "its publisher sends NaN or infinite values" in given.problems["non-finite box in person detections"]
    detector = YoloDetector(_load(_constant_model(tmp_path / "people.onnx", _yolo_output([*GOOD, *BAD]), size=SIZE)))
    found = _push(DetectionPipeline(TopDownPose(detector, estimator, person_class="circle"), None, 0.25), frame)
    assert len(found) == 1 and found.boxes.xyxy[0].tolist() == [40, 40, 80, 80]
    assert np.allclose(found.keypoints.points[0], [(60, 60, 0.7)] * 17)
    assert list(found.problems) == ["non-finite box"]


def test_a_nan_box_gets_no_3d_box_and_the_others_theirs():
    """lift read math.ceil(nan) and raised: the frame's good boxes were lost with it."""
    camera = Intrinsics(500.0, 500.0, 319.5, 239.5, 640, 480)
    depth = np.full((480, 640), 2.0, np.float32)
    detections = _boxes([
        ((100, 100, 200, 200), 0.9, "a"),
        ((NAN, 100, 200, 200), 0.9, "a"),
        ((300, -INF, 400, 200), 0.9, "a"),
        ((-1e308, 0, 1e308, 100), 0.9, "a"),  # finite, but its width in metres is not
        ((400, 300, 500, 400), 0.9, "a"),
    ])  # fmt: skip
    boxes = lift(FrameResult(640, 480, detections), depth, camera, camera)
    assert [box is None for box in boxes] == [False, True, True, True, False]
    for box, (x1, y1, x2, y2) in zip((boxes[0], boxes[4]), ((100, 100, 200, 200), (400, 300, 500, 400))):
        assert box.centre == pytest.approx((((x1 + x2) / 2 - 320) / 250, ((y1 + y2) / 2 - 240) / 250, 2.0))
        assert box.size == pytest.approx((0.4, 0.4, 0.0))


@pytest.mark.parametrize(
    "k,kind",
    [
        ([500, 0, 320, 0, INF, 240, 0, 0, 1], "camera_info without focal length"),
        ([500, 0, NAN, 0, 500, 240, 0, 0, 1], "camera_info without principal point"),
        ([500, 0, 320, 0, 500, -INF, 0, 0, 1], "camera_info without principal point"),
        ([500, 0, 320, 0, 500, 240, 0, 0, NAN], "bad camera_info"),
    ],
)
def test_a_camera_info_that_cannot_place_a_pixel_is_refused_by_kind(k, kind):
    """Beside test_detect3d.py's focal lengths of 0 and NaN: an infinite one, a principal point or another value of K
    that is not finite (the depth node's cloud was NaN or inf from them)."""
    with pytest.raises(CameraInfoError) as refused:
        Intrinsics.from_camera_info(k, 640, 480)
    assert refused.value.kind == kind


@pytest.mark.parametrize("kind", ["metric", "relative"])
def test_a_depth_maps_infinite_or_negative_values_are_nan_and_reported(tmp_path, kind):
    raw = np.full((56, 56), 3.0, np.float32)
    raw[:4, :4] = INF
    raw[50:, 50:] = -2.0
    raw[20:24, 20:24] = NAN
    metadata = {"depth_kind": kind, "model_type": "depth_anything", "image_size": "56x56"}
    model = _constant_outputs(tmp_path / "depth.onnx", [1, 3, 56, 56], {"predicted_depth": raw[None]}, metadata)
    found = _pipeline("depth", model).model.infer(np.zeros((112, 112, 3), np.uint8))
    values = found.dense.values
    assert values.shape == (112, 112) and not np.isinf(values).any()
    assert np.isnan(values[:8, :8]).all() and np.isnan(values[40:48, 40:48]).all()
    assert np.allclose(values[60:90, 10:40], 3.0)  # far from every bad value: the map as the model gave it
    if kind == "metric":  # negative metres are no depth; a NaN is the model's "no depth", no problem
        assert np.isnan(values[104:, 104:]).all()
        assert list(found.problems) == ["infinite or negative depth from the model"]
        assert found.problems["infinite or negative depth from the model"].startswith("52 of 3136 values")
    else:  # relative inverse depth: negative is a value like another
        assert np.allclose(values[106:, 106:], -2.0)
        assert list(found.problems) == ["NaN or infinite depth from the model"]
        assert found.problems["NaN or infinite depth from the model"].startswith("32 of 3136 values")
    clean = _constant_outputs(tmp_path / "clean.onnx", [1, 3, 56, 56], {"predicted_depth": np.full((1, 56, 56), 3.0)},
                              metadata)  # fmt: skip
    assert _pipeline("depth", clean).model.infer(np.zeros((112, 112, 3), np.uint8)).problems == {}
