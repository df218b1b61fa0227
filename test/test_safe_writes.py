"""No tool overwrites one of its inputs or writes through a link (vision_factory/files.py and the tools using it).

Real files, real symbolic and hard links in tmp_path, real CLI runs: each case checks the input's or the link
target's bytes are what they were, that nothing appeared where a dangling link points, and that the error names
the file and the fix (no traceback).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from vision_factory.cli import main
from vision_factory.files import UnsafeWrite, check_output, open_new, stage, staged, write_text
from vision_factory.results.frame import FrameResult

VICTIM = b"precious bytes that no tool may change\n"


def yolo_model(path: Path, size: int = 64) -> Path:
    """A YOLO-shaped model (input [1, 3, size, size], output [1, 6, 16]: two classes, no detection)."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["value"], ["output0"])],
        "constant",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 6, 16])],
        [numpy_helper.from_array(np.zeros((1, 6, 16), np.float32), "value")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    helper.set_model_props(model, {"names": "{0: 'circle', 1: 'square'}", "imgsz": f"[{size}, {size}]"})
    onnx.save(model, path)
    return path


def victim(folder: Path) -> Path:
    """A file outside every output folder that a planted link points at."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "victim.txt"
    path.write_bytes(VICTIM)
    return path


def invoke(*arguments: str):
    return CliRunner().invoke(main, [str(argument) for argument in arguments])


def assert_refused(result, *words: str) -> None:
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output and "SameFileError" not in result.output, result.output
    for word in words:
        assert word in result.output, result.output


# --- the helper ------------------------------------------------------------------------------------------


def _writers(inputs):
    """Each way files.py writes a file, as a function of the path."""

    def by_library(path):
        with staged(path, inputs) as fresh:
            Path(fresh).write_text("new")

    def streamed(path):
        with open_new(path, inputs) as stream:
            stream.write("new")

    return {
        "write_text": lambda path: write_text(path, "new", inputs),
        "staged": by_library,
        "open_new": streamed,
    }


WAYS = list(_writers(()))


@pytest.mark.parametrize("way", WAYS)
def test_a_link_at_the_output_is_refused_and_its_target_kept(tmp_path, way):
    (tmp_path / "out").mkdir()
    target = victim(tmp_path / "elsewhere")
    link = tmp_path / "out" / "report.json"
    link.symlink_to(target)
    with pytest.raises(UnsafeWrite, match="report.json is a symbolic link .*remove the link or choose another"):
        _writers(())[way](link)
    assert target.read_bytes() == VICTIM and link.is_symlink()
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["report.json"]  # no litter


@pytest.mark.parametrize("way", WAYS)
def test_a_dangling_link_at_the_output_creates_nothing_where_it_points(tmp_path, way):
    (tmp_path / "out").mkdir()
    target = tmp_path / "elsewhere" / "planted.json"
    target.parent.mkdir()
    link = tmp_path / "out" / "report.json"
    link.symlink_to(target)
    with pytest.raises(UnsafeWrite, match="is a symbolic link"):
        _writers(())[way](link)
    assert not target.exists() and not list(target.parent.iterdir())


@pytest.mark.parametrize("way", WAYS)
def test_an_input_is_never_written_whatever_its_name(tmp_path, way):
    """The same file by a hard link, or by another spelling of its path: compared by identity."""
    (tmp_path / "out").mkdir()
    model = victim(tmp_path / "models")
    hard = tmp_path / "out" / "model_copy.onnx"
    os.link(model, hard)
    respelt = tmp_path / "out" / ".." / "models" / "victim.txt"
    for output in (hard, respelt):
        with pytest.raises(UnsafeWrite, match="is an input of this command.*never overwritten"):
            _writers([model])[way](output)
    assert model.read_bytes() == VICTIM and hard.read_bytes() == VICTIM


@pytest.mark.parametrize("way", WAYS)
def test_a_file_is_replaced_whole_and_its_other_links_keep_the_old_bytes(tmp_path, way):
    """A rename replaces the name: a hard link elsewhere to the old file (not an input) still holds it."""
    (tmp_path / "out").mkdir()
    path = tmp_path / "out" / "report.json"
    path.write_bytes(VICTIM)
    kept = tmp_path / "kept.json"
    os.link(path, kept)
    _writers(())[way](path)
    assert path.read_text() == "new" and kept.read_bytes() == VICTIM
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.json"]


def test_an_openvino_model_is_its_xml_and_its_bin(tmp_path):
    xml, weights = tmp_path / "model.xml", tmp_path / "model.bin"
    xml.write_text("<net/>")
    weights.write_bytes(VICTIM)
    with pytest.raises(UnsafeWrite, match="model.bin is an input"):
        check_output(weights, [xml])
    with pytest.raises(UnsafeWrite, match=r"model.bin is an input .*choose another --out"):
        with staged(tmp_path / "model.xml", [weights], "--out", [".bin"]) as fresh:
            fresh.write_text("x")
    assert weights.read_bytes() == VICTIM and xml.read_text() == "<net/>"


def test_a_failed_write_leaves_the_old_file_and_no_litter(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(VICTIM)
    with pytest.raises(RuntimeError, match="half way"), staged(path) as fresh:
        fresh.write_bytes(b"half")
        raise RuntimeError("half way")
    assert path.read_bytes() == VICTIM and [p.name for p in tmp_path.iterdir()] == ["model.onnx"]


def test_a_stage_is_published_under_the_name_chosen_at_the_end_or_left_nowhere(tmp_path):
    """A result checked before it is published (quantize's model): published under its name or another, the
    companions with it; never published, nothing of it anywhere."""
    xml = tmp_path / "model.xml"
    with stage(xml, [], "--out", [".bin"]) as staging:
        staging.fresh.write_text("<net/>")
        staging.fresh.with_suffix(".bin").write_bytes(VICTIM)
        assert not xml.exists()  # not before it is published
        published = staging.publish(tmp_path / "model.rejected.xml")
    assert published == tmp_path / "model.rejected.xml"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.rejected.bin", "model.rejected.xml"]
    assert (tmp_path / "model.rejected.bin").read_bytes() == VICTIM
    with stage(tmp_path / "other.onnx") as staging:
        staging.fresh.write_bytes(b"unverified")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.rejected.bin", "model.rejected.xml"]


def test_quantize_whose_comparison_fails_leaves_no_model_at_out(tmp_path):
    """The model is compared under a temporary name and published only then: --data whose image is missing fails
    the comparison, and --out holds nothing (it held the unverified model)."""
    model = yolo_model(tmp_path / "m.onnx")
    (tmp_path / "data").mkdir()
    truth = {"images": [{"id": 1, "file_name": "gone.jpg", "width": 64, "height": 64}], "annotations": []}
    (tmp_path / "data" / "annotations.json").write_text(json.dumps(truth | {"categories": [{"id": 0, "name": "a"}]}))
    out = tmp_path / "out" / "q.onnx"
    result = _quantize(model, out, "--data", tmp_path / "data", "--speed-runs", "1")
    assert_refused(result, "image gone.jpg of", "not found or unreadable")
    assert sorted(p.name for p in out.parent.iterdir()) == ["q_quantize"]  # no model, no staging folder
    assert _quantize(model, out, "--speed-runs", "1").exit_code == 0 and out.is_file()  # the same, uncompared


def test_a_folder_at_the_output_is_refused(tmp_path):
    (tmp_path / "eval.json").mkdir()
    with pytest.raises(UnsafeWrite, match="eval.json exists and is not a file; remove it or choose another"):
        write_text(tmp_path / "eval.json", "{}")


# --- the tools -------------------------------------------------------------------------------------------


@pytest.fixture
def image_folder(tmp_path) -> Path:
    folder = tmp_path / "images"
    folder.mkdir()
    cv2.imwrite(str(folder / "a.png"), np.full((48, 64, 3), 90, np.uint8))
    return folder


def test_predict_never_saves_onto_its_input_image(tmp_path, image_folder):
    model = yolo_model(tmp_path / "m.onnx")
    image = image_folder / "a.png"
    before = image.read_bytes()
    result = invoke("predict", "--model-type", "yolo", "--model", model, image, "--save", image_folder)
    assert_refused(result, f"{image} is an input of this command", "choose another --save folder")
    assert image.read_bytes() == before
    # the same folder by another path, and the image by a hard link in the --save folder
    other = tmp_path / "other"
    other.mkdir()
    os.link(image, other / "a.png")
    result = invoke("predict", "--model-type", "yolo", "--model", model, image, "--save", other)
    assert_refused(result, "is an input of this command")
    assert image.read_bytes() == before and (other / "a.png").read_bytes() == before
    # a folder of its own works
    done = invoke("predict", "--model-type", "yolo", "--model", model, image, "--save", tmp_path / "drawn")
    assert done.exit_code == 0, done.output
    assert cv2.imread(str(tmp_path / "drawn" / "a.png")).shape == (48, 64, 3)


def test_predict_never_saves_through_a_link(tmp_path, image_folder):
    model = yolo_model(tmp_path / "m.onnx")
    target = victim(tmp_path / "elsewhere")
    save = tmp_path / "drawn"
    save.mkdir()
    (save / "a.png").symlink_to(target)
    result = invoke("predict", "--model-type", "yolo", "--model", model, image_folder / "a.png", "--save", save)
    assert_refused(result, "a.png is a symbolic link", "remove the link")
    assert target.read_bytes() == VICTIM


def _quantize(model: Path, out: Path, *extra: str):
    return invoke("quantize", "--model-type", "yolo", "--model", model, "--precision", "fp16", "--out", out, *extra)


def test_quantize_out_hard_linked_to_the_model_is_refused(tmp_path):
    model = yolo_model(tmp_path / "m.onnx")
    before = model.read_bytes()
    out = tmp_path / "q.onnx"
    os.link(model, out)
    assert_refused(_quantize(model, out), "--out", "is an input of this command (the same file as", "m.onnx")
    assert model.read_bytes() == before and out.read_bytes() == before


def test_quantize_openvino_out_whose_bin_is_the_model_is_refused(tmp_path):
    model = yolo_model(tmp_path / "net.bin")
    before = model.read_bytes()
    result = _quantize(model, tmp_path / "net.xml", "--backend", "openvino")
    assert_refused(result, "net.bin is an input of this command", "--out")
    assert model.read_bytes() == before and not (tmp_path / "net.xml").exists()


@pytest.mark.parametrize("dangling", [False, True])
def test_quantize_never_writes_through_a_link_at_out(tmp_path, dangling):
    model = yolo_model(tmp_path / "m.onnx")
    target = tmp_path / "elsewhere" / "planted.onnx"
    if dangling:
        target.parent.mkdir()
    else:
        target = victim(target.parent)
    out = tmp_path / "out" / "q.onnx"
    out.parent.mkdir()
    out.symlink_to(target)
    assert_refused(_quantize(model, out), "q.onnx is a symbolic link", "--out")
    assert (not target.exists()) if dangling else target.read_bytes() == VICTIM


def test_reid_tune_out_hard_linked_to_the_model_is_a_clear_refusal(tmp_path):
    from support.data import TUNING_SCENE, scene_files
    from support.real_models import REID_MODEL

    if not REID_MODEL.is_file():
        pytest.skip(f"no re-id model at {REID_MODEL}")
    model = tmp_path / "reid.onnx"
    model.write_bytes(REID_MODEL.read_bytes())
    before = model.read_bytes()
    out = tmp_path / "tuned.onnx"
    os.link(model, out)
    frames, truth = scene_files(tmp_path, TUNING_SCENE)
    result = invoke("reid-tune", "--model", model, "--frames", frames, "--truth", truth, "--out", out)
    assert_refused(result, "tuned.onnx is an input of this command", "choose another --out")
    assert model.read_bytes() == before


def _mot(path: Path) -> Path:
    path.write_text("1,1,10,10,50,100,1,-1,-1,-1\n2,1,12,10,50,100,1,-1,-1,-1\n")
    return path


@pytest.mark.parametrize("name", ["eval.json", "eval.md"])
@pytest.mark.parametrize("dangling", [False, True])
def test_eval_never_writes_through_a_link(tmp_path, name, dangling):
    truth = _mot(tmp_path / "gt.txt")
    tracks = _mot(tmp_path / "tracks.txt")
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "elsewhere" / "planted"
    if dangling:
        target.parent.mkdir()
    else:
        target = victim(target.parent)
    (out / name).symlink_to(target)
    result = invoke("eval", "--model-type", "track", "--data", truth, "--predictions", tracks, "--out", out)
    assert_refused(result, f"{name} is a symbolic link", "remove the link")
    assert (not target.exists()) if dangling else target.read_bytes() == VICTIM


def test_eval_replaces_an_earlier_report_but_not_its_input(tmp_path):
    truth = _mot(tmp_path / "gt.txt")
    tracks = _mot(tmp_path / "tracks.txt")
    out = tmp_path / "out"
    out.mkdir()
    os.link(tracks, out / "eval.md")  # the predictions, hard-linked where the report goes
    before = tracks.read_bytes()
    result = invoke("eval", "--model-type", "track", "--data", truth, "--predictions", tracks, "--out", out)
    assert_refused(result, "eval.md is an input of this command")
    assert tracks.read_bytes() == before
    (out / "eval.md").unlink()
    (out / "eval.json").write_text("earlier")
    done = invoke("eval", "--model-type", "track", "--data", truth, "--predictions", tracks, "--out", out)
    assert done.exit_code == 0, done.output
    assert (out / "eval.json").read_text().startswith("{")


def test_verify_refuses_a_dangling_link_among_its_reports_before_it_runs(tmp_path):
    from vision_factory.tools.verify_report import clear as _clear

    target = tmp_path / "elsewhere" / "verify.json"
    target.parent.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "verify.json").symlink_to(target)
    with pytest.raises(FileExistsError, match="verify.json"):
        _clear(out, force=False)
    _clear(out, force=True)  # removes the link, never what it points to
    assert not (out / "verify.json").is_symlink() and not target.exists()


@pytest.mark.parametrize("name", ["worst_frame.png", "side_by_side.png"])
def test_verify_never_draws_its_pictures_through_a_link(tmp_path, name):
    from vision_factory.tools.verify_pictures import write_pictures

    target = victim(tmp_path / "elsewhere")
    link = tmp_path / name
    link.symlink_to(target)
    with pytest.raises(UnsafeWrite, match=f"{name} is a symbolic link"):
        write_pictures(tmp_path, np.zeros((32, 32, 3), np.uint8), None, FrameResult(32, 32), 0, failed=True)
    assert target.read_bytes() == VICTIM


def test_bench_never_writes_through_a_link(tmp_path):
    model = yolo_model(tmp_path / "m.onnx")
    target = victim(tmp_path / "elsewhere")
    out = tmp_path / "out"
    out.mkdir()
    (out / "bench.json").symlink_to(target)
    result = invoke("bench", model, "--backends", "onnx:cpu", "--runs", "2", "--warmup", "0", "--out", out)
    assert_refused(result, "bench.json is a symbolic link")
    assert target.read_bytes() == VICTIM
