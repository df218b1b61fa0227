"""The reid family: re-identification embeddings of detection crops (models/reid.py, families/reid.py).

The real MobileNetV2 embedder (../shared/models, a dynamic-batch and a fixed batch-16 export of the same weights)
on real photos; a synthetic "flatten" model (its feature is its input, flattened) checks the pre-processing
against a plain computation written here.
"""

from __future__ import annotations

import logging
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
import skimage.data
from conftest import SHARED
from onnx import TensorProto, helper
from support.models import build_model
from support.real_models import PHOTOS

from vision_factory.families.registry import family
from vision_factory.models.model_file import recognise, summarize
from vision_factory.models.recognition import WrongFamily
from vision_factory.models.reid import ReidEmbedder, crop_boxes
from vision_factory.parameters import with_defaults
from vision_factory.runtime.onnx_runner import OnnxRunner

LOG = logging.getLogger("test")
DYNAMIC = SHARED / "models" / "mobilenetv2-reid-embedder.onnx"
FIXED16 = SHARED / "models" / "mobilenetv2-reid-embedder-b16.onnx"
needs_real = pytest.mark.skipif(
    not (DYNAMIC.is_file() and FIXED16.is_file()), reason=f"the re-id models are not under {SHARED / 'models'}"
)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class CountingRunner:
    """A real ONNX Runtime runner that records the batch of every run."""

    def __init__(self, path: Path):
        self.inner = OnnxRunner.load(path, {}, LOG)
        self.inputs, self.outputs, self.metadata = self.inner.inputs, self.inner.outputs, self.inner.metadata
        self.batches: list[int] = []

    def run(self, feeds):
        self.batches.append(len(next(iter(feeds.values()))))
        return self.inner.run(feeds)


def flatten_model(path: Path, batch: int | str = "batch", size=(8, 4), metadata=None) -> Path:
    """[B, 3, H, W] -> [B, 3 x H x W]: the feature is the pre-processed crop itself."""
    height, width = size
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["images"], ["features"], axis=1)],
        "flatten",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [batch, 3, height, width])],
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [batch, 3 * height * width])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    helper.set_model_props(model, metadata or {})
    onnx.save(model, path)
    return path


def reference(image_bgr, box, size, mean, std) -> np.ndarray:
    """The crop as the embedder should feed it, written out plainly, flattened and L2-normalised."""
    x1, y1, x2, y2 = box
    crop = image_bgr[y1:y2, x1:x2]
    resized = cv2.resize(crop, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)
    rgb = resized[:, :, ::-1].astype(np.float64) / 255.0
    normalised = (rgb - np.array(mean)) / np.array(std)
    flat = normalised.transpose(2, 0, 1).reshape(-1)
    return flat / np.linalg.norm(flat)


def photo(name: str) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    image, person, _ = PHOTOS[name]
    return image, person


@needs_real
@pytest.mark.parametrize("count", [0, 1, 16, 17, 40])
def test_fixed_batch_and_dynamic_batch_models_give_the_same_embeddings(count):
    """The b16 file pads to 16 and slices; more than 16 crops take several runs; the dynamic file takes them all."""
    image, person, face = PHOTOS["astronaut"]
    rng = np.random.default_rng(count)
    boxes = [person, face] + [(x, y, x + w, y + h) for x, y, w, h in rng.integers(0, 300, (38, 4)) + [0, 0, 20, 40]]
    boxes = boxes[:count]
    dynamic_runner, fixed_runner = CountingRunner(DYNAMIC), CountingRunner(FIXED16)
    dynamic, fixed = ReidEmbedder(dynamic_runner), ReidEmbedder(fixed_runner)
    a, b = dynamic.embed(image, boxes), fixed.embed(image, boxes)
    assert a.shape == b.shape == (count, 1280)
    assert np.abs(a - b).max(initial=0) < 1e-5
    assert np.allclose(np.linalg.norm(a, axis=1), 1, atol=1e-5)
    assert dynamic_runner.batches == ([count] if count else [])
    assert fixed_runner.batches == [16] * -(-count // 16)  # ceil(count / 16) runs, each padded to 16


@needs_real
def test_dynamic_model_with_a_batch_limit_runs_in_chunks_of_it():
    image, person = photo("astronaut")
    runner = CountingRunner(DYNAMIC)
    boxes = [person] * 10
    limited = ReidEmbedder(runner, batch=4).embed(image, boxes)
    assert runner.batches == [4, 4, 2]
    assert np.abs(limited - ReidEmbedder(CountingRunner(DYNAMIC)).embed(image, boxes)).max() < 1e-5


@needs_real
def test_the_same_person_is_closer_than_different_people_on_real_photos():
    """Each person in two views (the photo, and the photo mirrored, scaled to 60% and re-cropped, or with changed
    contrast and a tighter box) is closer to themselves than to anyone else, including the cameraman."""
    embedder = ReidEmbedder(OnnxRunner.load(DYNAMIC, {}, LOG))
    views = {}
    for name in ("astronaut", "grace_hopper"):
        image, (x1, y1, x2, y2) = photo(name)
        width = image.shape[1]
        mirrored = cv2.resize(cv2.flip(image, 1), None, fx=0.6, fy=0.6, interpolation=cv2.INTER_AREA)
        mirrored_box = ((width - x2) * 0.6 + 5, y1 * 0.6, (width - x1) * 0.6 - 5, y2 * 0.6)
        contrast = cv2.convertScaleAbs(image, alpha=0.8, beta=20)
        views[name] = [
            embedder.embed(image, [(x1, y1, x2, y2)])[0],
            embedder.embed(mirrored, [mirrored_box])[0],
            embedder.embed(contrast, [(x1 + 15, y1 + 20, x2 - 15, y2 - 10)])[0],
        ]
    cameraman = cv2.cvtColor(skimage.data.camera(), cv2.COLOR_GRAY2BGR)
    views["cameraman"] = [embedder.embed(cameraman, [(150, 20, 420, 512)])[0]]
    for name, own in views.items():
        for i, first in enumerate(own):
            same = [float(first @ second) for second in own[i + 1 :]]
            other = [float(first @ view) for other in views if other != name for view in views[other]]
            assert all(s > 0.85 for s in same), (name, same)
            assert max(other, default=0) < 0.75 and max(other) < min(same, default=1), (name, other)


def test_preprocessing_crops_resizes_and_normalises_as_documented(tmp_path):
    """Whole-pixel crop (floor, ceil) clipped to the frame, INTER_LINEAR stretch, RGB, /255, ImageNet mean/std."""
    image = np.random.default_rng(0).integers(0, 256, (60, 80, 3), dtype=np.uint8)
    embedder = ReidEmbedder(OnnxRunner.load(flatten_model(tmp_path / "f.onnx"), {}, LOG))
    assert embedder.size == (8, 4) and embedder.batch is None
    boxes = [(10.4, 5.6, 30.2, 40.0), (-20, -5, 15.5, 70)]  # the second is clipped to (0, 0, 16, 60)
    features = embedder.embed(image, boxes)
    expected = [(10, 5, 31, 40), (0, 0, 16, 60)]
    for feature, box in zip(features, expected):
        np.testing.assert_allclose(feature, reference(image, box, (8, 4), IMAGENET_MEAN, IMAGENET_STD), atol=1e-6)


def test_mean_and_std_come_from_parameters_else_metadata_else_imagenet(tmp_path):
    image = np.random.default_rng(1).integers(0, 256, (40, 40, 3), dtype=np.uint8)
    box = (3, 4, 30, 35)
    plain = flatten_model(tmp_path / "plain.onnx")
    tagged = flatten_model(tmp_path / "tagged.onnx", metadata={"mean": "127.5, 127.5, 127.5", "std": "[0.5,0.5,0.5]"})
    cases = [
        (plain, {}, IMAGENET_MEAN, IMAGENET_STD),
        (tagged, {}, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),  # metadata in 0..255 is read as such
        (tagged, {"mean": (0, 0, 0), "std": (1, 1, 1)}, (0, 0, 0), (1, 1, 1)),  # parameters win: only / 255
    ]
    for path, options, mean, std in cases:
        feature = ReidEmbedder(OnnxRunner.load(path, {}, LOG), **options).embed(image, [box])[0]
        np.testing.assert_allclose(feature, reference(image, box, (8, 4), mean, std), atol=1e-6)
    bad = flatten_model(tmp_path / "bad.onnx", metadata={"mean": "red, green"})
    with pytest.raises(ValueError, match=r"the model's metadata mean 'red, green' is not three numbers"):
        ReidEmbedder(OnnxRunner.load(bad, {}, LOG))


def test_boxes_with_nothing_in_the_frame_give_zero_rows_without_running(tmp_path):
    """Outside the frame, zero width or height, or not finite: a row of zeros (no direction, 'no appearance');
    the other boxes' rows are what they are alone; when no box has anything, the model is not run."""
    image = np.random.default_rng(2).integers(0, 256, (50, 60, 3), dtype=np.uint8)
    runner = CountingRunner(flatten_model(tmp_path / "f.onnx"))
    embedder = ReidEmbedder(runner)
    degenerate = [(70, 10, 90, 30), (-30, -30, -1, -1), (10, 10, 10, 30), (10, 20, 30, 20), (np.nan, 0, 10, 10)]
    assert embedder.embed(image, degenerate).tolist() == np.zeros((5, 96)).tolist()
    assert runner.batches == []
    good = (5, 5, 25, 45)
    mixed = embedder.embed(image, [degenerate[0], good, degenerate[2]])
    assert runner.batches == [1]
    assert not mixed[0].any() and not mixed[2].any()
    np.testing.assert_allclose(mixed[1], embedder.embed(image, [good])[0], atol=0)
    assert crop_boxes([(59.2, 49.5, 61, 52)], 60, 50).tolist() == [[59, 49, 60, 50]]  # a sliver inside is kept


def test_sizes_and_batches_are_checked(tmp_path):
    dynamic_size = build_model(tmp_path / "d.onnx", {"images": ["b", 3, "h", "w"]}, {"features": ["b", 512]})
    with pytest.raises(ValueError, match=r"has a dynamic size: set the input size \(WIDTHxHEIGHT\), e.g. 128x256"):
        ReidEmbedder(OnnxRunner.load(dynamic_size, {}, LOG))
    assert ReidEmbedder(OnnxRunner.load(dynamic_size, {}, LOG), input_size=(256, 128)).size == (256, 128)
    fixed = flatten_model(tmp_path / "f16.onnx", batch=16)
    with pytest.raises(ValueError, match="batch 8 differs from the model's fixed batch 16"):
        ReidEmbedder(OnnxRunner.load(fixed, {}, LOG), batch=8)
    with pytest.raises(ValueError, match=r"input_size 128x256 \(width x height\) differs from the model's fixed"):
        ReidEmbedder(OnnxRunner.load(fixed, {}, LOG), input_size=(256, 128))
    assert ReidEmbedder(OnnxRunner.load(fixed, {}, LOG), batch=16).batch == 16


def build(parameters: dict[str, object]) -> ReidEmbedder:
    spec = family("reid")
    return spec.build(with_defaults(spec.parameters, parameters, "reid"), lambda path: OnnxRunner.load(path, {}, LOG))


def test_the_family_builds_from_parameters(tmp_path):
    model = flatten_model(tmp_path / "f.onnx", size=(16, 8))
    embedder = build({"reid_model_path": str(model), "reid_mean": "0,0,0", "reid_std": "1, 1, 1", "reid_batch": 3})
    assert (embedder.size, embedder.mean, embedder.std, embedder.batch) == ((16, 8), (0, 0, 0), (1, 1, 1), 3)
    dynamic = build_model(tmp_path / "d.onnx", {"images": ["b", 3, "h", "w"]}, {"features": ["b", 512]})
    assert build({"reid_model_path": str(dynamic), "reid_input_size": "128x256"}).size == (256, 128)
    with pytest.raises(ValueError, match=r"reid_std 'x' is not three numbers"):
        build({"reid_model_path": str(model), "reid_std": "x"})


def test_a_missing_unreadable_or_wrong_model_is_a_start_up_error_naming_it(tmp_path):
    missing = tmp_path / "missing.onnx"
    with pytest.raises(ValueError, match=f"^reid_model_path: model file not found: {missing}$"):
        build({"reid_model_path": str(missing)})
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model at all")
    with pytest.raises(ValueError, match=f"^reid_model_path: ONNX Runtime cannot load model {garbage}"):
        build({"reid_model_path": str(garbage)})
    with pytest.raises(ValueError, match="^reid_model_path is empty"):
        build({"reid_model_path": ""})
    detector = build_model(tmp_path / "yolo.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 7, 84]})
    with pytest.raises(WrongFamily, match=f"^reid_model_path {detector} looks like a yolo model"):
        build({"reid_model_path": str(detector)})


@pytest.mark.parametrize(
    ("inputs", "outputs", "metadata", "family_name"),
    [
        ({"images": ["batch", 3, 256, 128]}, {"features": ["batch", 512]}, {}, "reid"),  # OSNet
        ({"images": [16, 3, 256, 128]}, {"features": [16, 512]}, {}, "reid"),  # OSNet, fixed batch
        ({"input": [1, 3, 128, 64]}, {"output": [1, 128]}, {}, "reid"),  # DeepSORT's original
        ({"images": [16, 3, 256, 128]}, {"features": [8, 512]}, {}, "unknown"),  # batches disagree
        ({"images": [1, 3, 224, 224]}, {"features": [1, 8]}, {}, "unknown"),  # too short for a feature
        ({"images": [1, 3, 224, 224]}, {"features": [1, 10000]}, {}, "unknown"),  # too long
        ({"images": [1, 1, 224, 224]}, {"features": [1, 512]}, {}, "unknown"),  # not an image
        (
            {"images": [1, 3, 224, 224]},
            {"output0": [1, 1000]},
            {"task": "classify"},
            "yolo_cls",
        ),  # YOLO classifier, not re-id
        ({"images": [1, 3, 224, 224]}, {"a": [1, 512], "b": [1, 512]}, {}, "unknown"),  # two outputs
    ],
)
def test_the_recognition_rule(tmp_path, inputs, outputs, metadata, family_name):
    found = recognise(summarize(build_model(tmp_path / "m.onnx", inputs, outputs, metadata)))
    assert found.family == family_name, found.reason


@needs_real
def test_the_real_embedders_are_reid_and_the_other_real_models_are_not():
    for path, batch in ((DYNAMIC, None), (FIXED16, 16)):
        found = recognise(summarize(path))
        assert found.family == "reid", found.reason
        assert found.details == {"embedding_dim": 1280, "input_size": (224, 224), "batch": batch}
    for name, family_name in (("shapes-yolov8n.onnx", "yolo"), ("yolo11n-pose.onnx", "yolo_pose")):
        path = SHARED / "models" / name
        if path.is_file():
            assert recognise(summarize(path)).family == family_name
