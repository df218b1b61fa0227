"""The docs' worked example of adding a family (docs/adding-a-family.md): a family whose result is a dense map
(test/support/dense_family.py), added with one ``register`` line and nothing else, runs through recognition, predict,
compare and eval: the tools ask its result kind (results/dense.py), never its name. Real ONNX Runtime and OpenVINO
sessions, real files."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from support import dense_family
from support.plugins import registered

from vision_factory.families import registry
from vision_factory.models.model_file import recognise, summarize
from vision_factory.results import DENSE_MAP
from vision_factory.results.drawing import LEGEND_WIDTH
from vision_factory.tools.evaluation import evaluation
from vision_factory.tools.predict import detector_from_options, predict


@pytest.fixture
def tinydepth(tmp_path):
    """The family registered for the test (and forgotten after), and its model."""
    with registered(dense_family.FAMILY):
        yield dense_family.build_model(tmp_path / "tinydepth.onnx")


@pytest.fixture
def frames(tmp_path):
    """Two images of the model's size: random pixels, written losslessly."""
    rng = np.random.default_rng(5)
    paths = []
    for index in range(2):
        path = tmp_path / "images" / f"frame{index}.png"
        path.parent.mkdir(exist_ok=True)
        cv2.imwrite(str(path), rng.integers(0, 256, (dense_family.HEIGHT, dense_family.WIDTH, 3), np.uint8))
        paths.append(path)
    return paths


def expected_depth(path) -> np.ndarray:
    """What the model computes, written out here: 1 + 2 x the mean of the pixel's channels in 0..1."""
    return 1 + 2 * cv2.imread(str(path)).astype(np.float64).mean(axis=2) / 255


def test_its_own_rule_recognises_it_not_tracknets(tinydepth):
    found = recognise(summarize(tinydepth))
    assert found.family == dense_family.NAME, found.reason
    registry.unregister(dense_family.NAME)
    assert recognise(summarize(tinydepth)).family == "unknown"  # without it: no family, and not tracknet
    registry.register(dense_family.FAMILY)


def test_predict_writes_each_map_with_its_unit(tinydepth, frames, tmp_path):
    adapter = detector_from_options(dense_family.NAME, tinydepth, "onnx:cpu", {})
    found = list(predict(adapter, frames, save=tmp_path / "maps"))
    assert [prediction.record["image"] for prediction in found] == [str(path) for path in frames]
    for prediction, path in zip(found, frames):
        truth = expected_depth(path)
        record = json.loads(json.dumps(prediction.record))  # what --format json prints
        assert record["unit"] == "m" and record["kind"] == "depth" and record["valid"] == truth.size
        assert record["min"] == pytest.approx(truth.min(), abs=1e-5)
        assert record["max"] == pytest.approx(truth.max(), abs=1e-5)
        saved = np.load(tmp_path / "maps" / f"{path.stem}.npy")
        assert saved.dtype == np.float32 and np.allclose(saved, truth, atol=1e-5)
        drawn = cv2.imread(str(tmp_path / "maps" / f"{path.stem}.png"))  # the map, its colour bar beside it
        assert drawn.shape == (truth.shape[0], truth.shape[1] + LEGEND_WIDTH, 3)
        assert prediction.line() == f"{path}: depth {record['min']:.4g}..{record['max']:.4g} m"


def test_compare_gives_the_two_backends_maps_difference(tinydepth, frames, tmp_path):
    options = {"source": frames[0].parent, "data": None, "out_dir": tmp_path / "compare"}
    configurations = ((tinydepth, "onnx:cpu"), (tinydepth, "openvino:CPU"))
    evaluation(DENSE_MAP).compare(dense_family.NAME, configurations, options)
    (report_path,) = (tmp_path / "compare").glob("compare_*.json")
    outputs = json.loads(report_path.read_text())["outputs"]
    assert outputs["valid_in_one"] == 0 and 0 <= outputs["max_difference"] < 1e-3


def test_eval_scores_the_saved_maps_by_absrel_and_delta1(tinydepth, frames, tmp_path):
    adapter = detector_from_options(dense_family.NAME, tinydepth, "onnx:cpu", {})
    list(predict(adapter, frames, save=tmp_path / "maps"))
    truth = tmp_path / "truth"
    truth.mkdir()
    for path in frames:  # left half 1.1 x the model's depth (ratio 1.1, AbsRel 0.1/1.1), right half 2 x (0.5)
        depth = expected_depth(path)
        depth[:, : dense_family.WIDTH // 2] *= 1.1
        depth[:, dense_family.WIDTH // 2 :] *= 2
        np.save(truth / f"{path.stem}.npy", depth.astype(np.float32))
    options = {"predictions": tmp_path / "maps", "data": truth, "out_dir": tmp_path / "eval"}
    report = evaluation(registry.family(dense_family.NAME).result).evaluate(dense_family.NAME, options)
    scored = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert scored["AbsRel"] == pytest.approx((0.1 / 1.1 + 0.5) / 2, abs=1e-5)
    assert scored["delta1"] == pytest.approx(0.5)
    assert report.files == {"eval": tmp_path / "eval" / "eval.json"}
