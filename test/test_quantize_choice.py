"""quantize's choices left to it (--backend auto, --target-cpu auto): the candidates and their order, the model kept,
what it says about the choice, and the options a rejection names (tools/quantize_choice.py).

The decisions are tested on real quantized shapes YOLOv8n models and real comparisons, in cases whose outcome does
not hang on this CPU's int8 kernels: calibrated on one blank frame every candidate loses nearly all its AP; without
the float tail ONNX Runtime's int8 model quantizes the output itself (box pixels and class scores in one uint8 range)
and loses nearly all its AP, while NNCF leaves OpenVINO's output in float."""

from __future__ import annotations

import json
import re
from pathlib import Path

import cv2
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SHARED
from support.data import coco_split

from vision_factory.cli import main
from vision_factory.runtime.cpu import this_cpu
from vision_factory.tools.quantize_choice import (
    OPENVINO_MARGIN,
    Attempt,
    backends_for,
    chosen_line,
    kinds_for,
    openvino_missing,
    order,
    ways_on,
)

SHAPES_MODEL = SHARED / "models" / "shapes-yolov8n.onnx"
SHAPES = SHARED / "data" / "shapes-val"


def _attempt(backend: str, kind: str, lost: float | None = None, ratio: float = 1.5) -> Attempt:
    """A candidate as the command records it (nothing staged), with its AP loss against the 0.03 limit."""
    attempt = Attempt(backend, kind, staging=None, provenance=None, speed={"ratio": ratio})
    attempt.loss = None if lost is None else {"loss": "AP lost", "value": lost, "limit": 0.03}
    return attempt


def test_auto_makes_this_cpus_weights_first_then_7_bit_and_both_backends():
    """The weight ranges tried: this CPU's kind, then 7-bit (avx2) weights, which hold on every CPU; an x86 without
    VNNI tries nothing else (full-range weights saturate there); a kind given is the only one; fp16 has none. The
    backends: both for int8 where OpenVINO and NNCF are installed (the test extra installs them), ONNX Runtime for
    fp16 (a GPU precision, not measured here), the one given otherwise."""
    assert kinds_for("auto", "int8", "vnni") == ["vnni", "avx2"]
    assert kinds_for("auto", "int8", "other") == ["other", "avx2"]
    assert kinds_for("auto", "int8", "avx2") == ["avx2"]
    assert kinds_for("vnni", "int8", "avx2") == ["vnni"] and kinds_for("avx2", "int8", "vnni") == ["avx2"]
    assert kinds_for("auto", "fp16", "vnni") == [""]
    assert openvino_missing() == ""
    assert backends_for("auto", "int8") == (["onnx", "openvino"], "")
    assert backends_for("auto", "int8", Path("q")) == (["onnx", "openvino"], "")
    onnx, why = backends_for("auto", "int8", Path("q.onnx"))
    assert onnx == ["onnx"] and "--out names a .onnx file" in why
    assert backends_for("auto", "int8", Path("q.xml"))[0] == ["openvino"]
    assert backends_for("onnx", "int8") == (["onnx"], "") and backends_for("openvino", "fp16") == (["openvino"], "")
    fp16, why = backends_for("auto", "fp16")
    assert fp16 == ["onnx"] and "fp16 is for GPUs" in why


@pytest.mark.parametrize(
    ("onnx_ms", "openvino_ms", "first"),
    [(10.0, 9.2, "onnx"), (10.0, 10.0 / OPENVINO_MARGIN + 0.01, "onnx"), (10.0, 8.9, "openvino"), (5.0, 9.0, "onnx")],
)
def test_the_faster_backend_is_tried_first_and_onnx_runtime_unless_openvino_is_10_percent_faster(
    onnx_ms, openvino_ms, first
):
    """Each backend's weight ranges in turn, the faster backend's first; OpenVINO counts as faster only when its
    int8 model runs in under 1/1.10 of ONNX Runtime's time (its IR needs a generated OpenVINO package)."""
    other = "openvino" if first == "onnx" else "onnx"
    tried = order({"onnx": onnx_ms, "openvino": openvino_ms}, ["vnni", "avx2"])
    assert tried == [(first, "vnni"), (first, "avx2"), (other, "vnni"), (other, "avx2")]


def test_a_rejection_names_the_options_not_tried_and_the_limit_that_keeps_the_least_lossy():
    """ways_on: the float tail where it was off, the weight range and backend not tried (with why 7-bit weights
    help), more frames or another method, the --max-loss that keeps the least lossy (rounded up), --accept-loss."""
    full = _attempt("onnx", "vnni", 0.0309)
    ways = ways_on([full], "vnni", ["onnx"], True, "32 frames read, minmax")
    assert ways == [
        "--target-cpu avx2 (7-bit weights: they hold on any CPU)",
        "--backend openvino",
        "more --frames or another --method (32 frames read, minmax)",
        "--max-loss 0.031 (keeps onnx full-range (vnni))",
        "--accept-loss",
    ]
    made_for_vnni = ways_on([full], "avx2", ["onnx"], False, "6 frames read, entropy")
    assert made_for_vnni[:2] == [
        "--float-tail (the head's last convs and decode in float)",
        "--target-cpu avx2 (7-bit weights: this CPU has no VNNI: full-range weights saturate here)",
    ]
    seven_bit = ways_on([_attempt("openvino", "avx2", 0.05)], "vnni", ["openvino"], True, "")
    assert seven_bit == [
        "--target-cpu vnni (full-range weights, this CPU's)",
        "--backend onnx",
        "--max-loss 0.05 (keeps openvino 7-bit (avx2))",
        "--accept-loss",
    ]
    everything = [_attempt(b, k, lost) for b, k, lost in (("onnx", "vnni", 0.2), ("onnx", "avx2", 0.1))]
    everything += [_attempt(b, k, lost) for b, k, lost in (("openvino", "vnni", 0.15), ("openvino", "avx2", 0.12))]
    assert ways_on(everything, "vnni", ["onnx", "openvino"], True, "1 frame read, minmax") == [
        "more --frames or another --method (1 frame read, minmax)",
        "--max-loss 0.1 (keeps onnx 7-bit (avx2))",
        "--accept-loss",
    ]


def test_the_line_on_the_choice_says_what_was_timed_and_what_lost_too_much():
    """One line: the kept candidate, both backends' speed against FP32 when both were timed, and each candidate
    that lost more than --max-loss; nothing when nothing was chosen."""
    onnx, openvino = _attempt("onnx", "vnni", 0.0309, 2.05), _attempt("openvino", "vnni", None, 1.95)
    seven_bit = _attempt("onnx", "avx2", -0.0085, 2.1)
    assert chosen_line(seven_bit, [onnx, seven_bit], [onnx, openvino]) == (
        "kept onnx 7-bit (avx2): timed in turn against FP32, onnx 2.05x, openvino 1.95x (OpenVINO kept only when 10% "
        "faster); over --max-loss 0.03: onnx full-range (vnni) AP lost 0.0309"
    )
    assert chosen_line(onnx, [onnx], [onnx]).startswith("kept the least lossy, onnx full-range (vnni): over")
    alone = _attempt("onnx", "vnni", 0.01)
    assert chosen_line(alone, [alone], [alone]) == ""
    assert chosen_line(alone, [alone], [alone], "onnx: OpenVINO's int8 not measured") == (
        "kept onnx full-range (vnni): onnx: OpenVINO's int8 not measured"
    )


def test_auto_takes_out_as_onnx_xml_or_a_bare_name_and_refuses_a_name_that_is_an_input(tmp_path):
    """--backend auto publishes the file --out names (NAME.onnx, NAME.xml) or, given NAME alone, whichever it keeps:
    another suffix is refused, and no name it may write may be an input."""
    command = ["quantize", "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--calibration", str(tmp_path)]
    result = CliRunner().invoke(main, [*command, "--out", str(tmp_path / "q.pt")])
    assert (
        result.exit_code == 2
        and "give --out as NAME.onnx (ONNX Runtime), NAME.xml (OpenVINO) or NAME without a suffix (got q.pt)"
        in result.output
    )
    copy = tmp_path / "copy.onnx"
    copy.write_bytes(SHAPES_MODEL.read_bytes())
    command[4] = str(copy)
    result = CliRunner().invoke(main, [*command, "--out", str(tmp_path / "copy")])  # auto may write copy.onnx
    assert result.exit_code == 2 and "is an input of this command" in result.output and "Traceback" not in result.output


@pytest.fixture
def split(tmp_path):
    if not (SHAPES_MODEL.is_file() and (SHAPES / "annotations.json").is_file()):
        pytest.skip(f"shared model or data not found under {SHARED}")
    return coco_split(SHAPES, tmp_path / "split", 6, slice(20, 26))


def _quantize(out: Path, calibration: Path, data: Path, *given: str):
    command = ["quantize", "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--calibration", str(calibration)]
    result = CliRunner().invoke(main, [*command, "--out", str(out), "--data", str(data), "--speed-runs", "1", *given])
    summary = json.loads((out.parent / f"{out.stem}_quantize" / "quantize.json").read_text())
    return result, summary


def _first_backend(timed: dict) -> str:
    """The backend the timing put first (OpenVINO when its int8 model ran OPENVINO_MARGIN faster)."""
    faster = timed["openvino"]["quantized_ms"] * OPENVINO_MARGIN < timed["onnx"]["quantized_ms"]
    return "openvino" if faster else "onnx"


def _assert_losses_as_compared(tried: list[dict]) -> None:
    """Each candidate's loss is the AP its saved comparison lost."""
    for one in tried:
        metrics = json.loads(Path(one["comparison"]).read_text())["metrics"]["AP"]
        assert one["loss"]["value"] == pytest.approx(metrics["a"] - metrics["b"]), one


def _left(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_auto_tries_every_choice_before_it_gives_up_and_the_limit_it_names_keeps_a_model(split, tmp_path):
    """Calibrated on one blank frame, every candidate loses nearly all AP: both backends are made and timed in turn,
    then each backend's weight ranges compared in turn, the faster backend first, this CPU's kind before 7-bit. The
    command fails naming the options that would help and leaves the least lossy as NAME.rejected.EXT, nothing else
    (no staging); given the --max-loss it named, the same command keeps a model under --out: each candidate tried
    before it lost more, it lost no more (before: one model, made for this CPU's kind, rejected with no choice)."""
    blank = tmp_path / "blank"
    blank.mkdir()
    cv2.imwrite(str(blank / "grey.png"), np.full((256, 256, 3), 114, np.uint8))
    out = tmp_path / "out" / "q"  # no suffix: auto makes and times both backends
    result, summary = _quantize(out, blank, split / "eval")
    assert result.exit_code == 1, result.output
    tried, timed = summary["choice"]["tried"], summary["choice"]["timed"]
    first = _first_backend(timed)
    kinds = kinds_for("auto", "int8", this_cpu())
    backends = [first, "openvino" if first == "onnx" else "onnx"]
    assert [(one["backend"], one["target_cpu"]) for one in tried] == [(b, k) for b in backends for k in kinds]
    _assert_losses_as_compared(tried)
    assert all(one["loss"]["value"] > 0.3 for one in tried), tried  # FP32 AP 0.43 here
    least = min(tried, key=lambda one: one["loss"]["value"])
    kept = out.with_name(f"q.rejected{'.xml' if least['backend'] == 'openvino' else '.onnx'}")
    left = ["q_quantize", kept.name] + ([kept.with_suffix(".bin").name] if least["backend"] == "openvino" else [])
    assert _left(out.parent) == sorted(left)
    assert summary["out"] == str(kept) and not summary["loss"]["accepted"]
    (error,) = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert "Traceback" not in result.output
    assert f"written as {kept} (not under the --out name)" in error
    assert "more --frames or another --method (1 frame read, minmax)" in error and error.endswith("--accept-loss")
    named = re.search(r"--max-loss ([0-9.]+) \(keeps", error)
    limit = float(named.group(1))
    assert least["loss"]["value"] <= limit < least["loss"]["value"] + 0.001

    again = tmp_path / "again" / "q"
    result, summary = _quantize(again, blank, split / "eval", "--max-loss", named.group(1))
    assert result.exit_code == 0, result.output
    tried = summary["choice"]["tried"]
    _assert_losses_as_compared(tried)
    *before, chosen = tried
    assert chosen["loss"]["value"] <= limit and all(one["loss"]["value"] > limit for one in before), tried
    published = again.with_suffix(".xml" if chosen["backend"] == "openvino" else ".onnx")
    assert summary["out"] == str(published) and summary["loss"]["accepted"] and published.is_file()
    assert "rejected" not in " ".join(_left(again.parent))


def test_auto_keeps_openvino_where_onnx_runtime_cannot_hold_the_accuracy(split, tmp_path):
    """Without the float tail ONNX Runtime's model loses nearly all AP and OpenVINO's holds: --backend auto keeps
    OpenVINO's IR whichever backend timed faster. Where ONNX Runtime did, its weight ranges were tried first and
    each rejected, and the line on the choice names them; the IR is published as NAME.xml with NAME.bin, nothing
    under NAME.onnx, and the report says where an IR runs (before: ONNX Runtime only, rejected). --out q without a
    suffix leaves the backend to auto."""
    out = tmp_path / "out" / "q"
    result, summary = _quantize(out, split / "calibration", split / "eval", "--no-float-tail", "--max-loss", "0.2")
    assert result.exit_code == 0, result.output
    tried, timed = summary["choice"]["tried"], summary["choice"]["timed"]
    _assert_losses_as_compared(tried)
    assert set(timed) == {"onnx", "openvino"} and all(one["ratio"] > 0 for one in timed.values())
    assert tried[-1]["backend"] == "openvino" and tried[-1]["target_cpu"] == this_cpu()
    assert tried[-1]["loss"]["value"] <= 0.2
    rejected = tried[:-1]
    assert [one["target_cpu"] for one in rejected] == (kinds_for("auto", "int8", this_cpu()) if rejected else [])
    assert bool(rejected) == (_first_backend(timed) == "onnx")
    assert all(one["backend"] == "onnx" and one["loss"]["value"] > 0.2 for one in rejected), rejected
    assert summary["out"] == str(out.with_suffix(".xml")) and summary["runs_on"]["quantized"] == "openvino:CPU"
    assert _left(out.parent) == ["q.bin", "q.xml", "q_quantize"]
    (line,) = [line for line in result.output.splitlines() if line.startswith("kept openvino")]
    assert "timed in turn against FP32, onnx " in line and "(OpenVINO kept only when 10% faster)" in line
    assert ("over --max-loss 0.2: onnx " in line) == bool(rejected)
    assert "it runs in a generated OpenVINO package" in result.output
