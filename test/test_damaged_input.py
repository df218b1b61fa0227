"""Damaged input is reported, clearly, never a traceback and never scored as if it were whole: malformed COCO
files (the entry and the field named), non-finite boxes, non-UTF-8 model metadata, a kpt_shape that is no shape,
bags whose topic type lies, and an mcap that yields fewer messages than its index lists. Each case is a real file
made here, given to the real command."""

from __future__ import annotations

import json
import shutil
import struct

import cv2
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SHARED
from support.cli import assert_refused, run_cli
from support.data import _truth
from support.models import onnx_model

from vision_factory.cli import main
from vision_factory.tools.bags import (
    RawMessage,
    _typestore,
    read_frames,
    write_ball_csv,
    write_image_bag,
    write_messages,
)

DETECTOR = SHARED / "models" / "shapes-yolov8n.onnx"
START_NS = 1_700_000_000_000_000_000  # write_image_bag's first stamp
FPS = 30.0


def _results(truth: dict) -> list[dict]:
    """The truth itself as results (AP 1.0)."""
    return [
        {"image_id": a["image_id"], "category_id": a["category_id"], "bbox": list(a["bbox"]), "score": 0.9}
        for a in truth["annotations"]
    ]


def _set(path: tuple, value):
    def change(document):
        *parents, last = path
        for key in parents:
            document = document[key]
        if value is _DELETE:
            del document[last]
        else:
            document[last] = value

    return change


_DELETE = object()

# (which file, the change, what the error names): the shapes found to give tracebacks or wrong scores.
COCO_DAMAGE = {
    "image id a list (unhashable)": ("truth", _set(("images", 0, "id"), [1]), "images[0] 'id' is [1]"),
    "annotation without id": ("truth", _set(("annotations", 2, "id"), _DELETE), "annotations[2] has no 'id' field"),
    "annotation without iscrowd": (
        "truth",
        _set(("annotations", 0, "iscrowd"), _DELETE),
        "annotations[0] has no 'iscrowd' field",
    ),
    "annotation without bbox": ("truth", _set(("annotations", 1, "bbox"), _DELETE), "annotations[1] has no 'bbox'"),
    "annotation without area": ("truth", _set(("annotations", 4, "area"), _DELETE), "annotations[4] has no 'area'"),
    "annotation bbox of three numbers": (
        "truth",
        _set(("annotations", 3, "bbox"), [1, 2, 3]),
        "annotations[3] 'bbox' is [1, 2, 3], not a list of 4 numbers",
    ),
    "annotation image_id a list": ("truth", _set(("annotations", 1, "image_id"), [2]), "annotations[1] 'image_id'"),
    "annotation a list": ("truth", _set(("annotations", 0), [1, 2]), "annotations[0] is list, not an object"),
    "annotations an object": ("truth", _set(("annotations",), {}), "'annotations' is dict, not a list"),
    "category without id": ("truth", _set(("categories", 1, "id"), _DELETE), "categories[1] has no 'id' field"),
    "NaN truth box": (
        "truth",
        _set(("annotations", 3, "bbox"), [150, float("nan"), 100, 100]),
        "annotations[3] 'bbox' [150, nan, 100, 100] is not finite",
    ),
    "truth box of a negative width": (
        "truth",
        _set(("annotations", 2, "bbox"), [10, 10, -5, 20]),
        "annotations[2] 'bbox' [10, 10, -5, 20] has a negative width or height",
    ),
    "result box of a negative height": (
        "results",
        _set((2, "bbox"), [10, 10, 5, -20]),
        "[2] (detection 3) 'bbox' [10, 10, 5, -20] has a negative width or height",
    ),
    "result image_id a list (unhashable)": ("results", _set((0, "image_id"), [1]), "[0] (detection 1) 'image_id'"),
    "result without score": ("results", _set((2, "score"), _DELETE), "[2] (detection 3) has no 'score' field"),
    "result without category_id": ("results", _set((1, "category_id"), _DELETE), "has no 'category_id' field"),
    "result a number": ("results", _set((3,), 7), "[3] (detection 4) is int, not an object"),
    "NaN result box": (
        "results",
        _set((4, "bbox"), [float("nan")] * 4),
        "[4] (detection 5) 'bbox' [nan, nan, nan, nan] is not finite",
    ),
    "infinite result box": ("results", _set((0, "bbox"), [10, 10, float("inf"), 100]), "'bbox' [10, 10, inf, 100]"),
    "NaN score": ("results", _set((1, "score"), float("nan")), "[1] (detection 2) 'score' is nan"),
}


@pytest.mark.parametrize("case", list(COCO_DAMAGE))
def test_eval_names_the_file_entry_and_field_of_a_damaged_coco_file(tmp_path, case):
    damaged, change, named = COCO_DAMAGE[case]
    truth = _truth()
    results = _results(truth)
    change(truth if damaged == "truth" else results)
    files = {"truth": tmp_path / "truth.json", "results": tmp_path / "results.json"}
    files["truth"].write_text(json.dumps(truth))
    files["results"].write_text(json.dumps(results))
    arguments = ["--data", str(files["truth"]), "--predictions", str(files["results"]), "--out", str(tmp_path / "o")]
    done = CliRunner().invoke(main, ["eval", "--model-type", "yolo", *arguments])
    assert done.exit_code == 1 and isinstance(done.exception, SystemExit), (done.output, done.exception)
    assert done.output.startswith(f"Error: {files[damaged]}: "), done.output
    assert named in done.output, done.output
    assert not (tmp_path / "o" / "eval.json").exists()


def test_the_undamaged_coco_files_score_ap_one(tmp_path):
    """The files the damage above is made to, whole: they score, so each error is the damage's."""
    truth = _truth()
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    (tmp_path / "results.json").write_text(json.dumps(_results(truth)))
    done = CliRunner().invoke(
        main,
        ["eval", "--model-type", "yolo", "--data", str(tmp_path / "truth.json"),
         "--predictions", str(tmp_path / "results.json"), "--out", str(tmp_path / "o")],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert json.loads((tmp_path / "o" / "eval.json").read_text())["metrics"]["AP"] == pytest.approx(1.0)


def _mask_eval(folder, segmentation=None, result=None, image=None) -> tuple[list[str], dict]:
    """eval's arguments for one 64x48 image's COCO truth, a square's polygon (or ``segmentation``, and the image's
    fields changed by ``image``), and results holding that square's mask as pycocotools encodes it (or ``result``):
    mask_AP 1 when nothing is changed; and the files (truth, results)."""
    from pycocotools import mask as coco_mask

    square = [[10, 10, 40, 10, 40, 30, 10, 30]]
    counts = coco_mask.merge(coco_mask.frPyObjects(square, 48, 64))["counts"].decode("ascii")
    annotation = {"id": 7, "image_id": 3, "category_id": 1, "bbox": [10, 10, 30, 20], "area": 600, "iscrowd": 0}
    annotation["segmentation"] = square if segmentation is None else segmentation
    picture = {"id": 3, "width": 64, "height": 48, "file_name": "3.png"} | (image or {})
    truth = {"images": [picture], "annotations": [annotation], "categories": [{"id": 1, "name": "square"}]}
    detection = {"image_id": 3, "category_id": 1, "score": 0.9, "bbox": [10, 10, 30, 20]}
    detection["segmentation"] = {"size": [48, 64], "counts": counts} if result is None else result
    files = {"truth": folder / "truth.json", "results": folder / "results.json"}
    files["truth"].write_text(json.dumps(truth))
    files["results"].write_text(json.dumps([detection]))
    arguments = ["eval", "--model-type", "yolo", "--data", str(files["truth"])]
    return [*arguments, "--predictions", str(files["results"]), "--out", str(folder / "o")], files


def _truth_refusal(files: dict) -> tuple[str, str]:
    return (
        f"Error: {files['truth']}: annotations[0] (id 7, image 3) 'segmentation' ",
        "fix the mask or drop the annotation",
    )


def _results_refusal(files: dict) -> tuple[str, str]:
    fix = "write each mask as pycocotools' mask.encode gives it, at its image's size"
    return f"Error: {files['results']}: [0] (detection 1) 'segmentation' ", fix


# Segmentations that gave tracebacks or were scored as if whole (on 9b439f9): (truth's, or the image's fields) and
# what the refusal says.
TRUTH_MASK_DAMAGE = {
    "[[1, 2]]": ([[1, 2]], "polygon 0 has 2 numbers: a polygon is x, y pairs, at least 3 points (6 numbers)"),
    "nested lists": ([[[1, 2], [3, 4], [5, 6]]], "polygon 0 is [[1, 2], [3, 4], [5, 6]], not a list of numbers"),
    "negative": ([[-1e6, 10, 40, 10, 40, 30]], "polygon 0 has x -1000000.0 (number 0), outside the image's 0..64"),
    "below the image": ([[10, 10, 40, 10, 40, 60]], "polygon 0 has y 60 (number 5), outside the image's 0..48"),
    "[]": ([], "is an empty list: no polygon"),
    "[[]]": ([[]], "polygon 0 has 0 numbers"),
    "polygon as text": (["10 10 40 10 40 30"], "polygon 0 is 10 10 40 10 40 30, not a list of numbers"),
    "zigzag": ([[0, 0, 64, 48] * 500], "polygons run 64000 pixels around, more than 64 times the image's perimeter"),
    "RLE text not of the encoding": ({"size": [48, 64], "counts": "garbage!!"}, "character 2 'r' is not one of"),
    "RLE negative run": ({"size": [48, 64], "counts": [-5, 3077]}, "'counts' [-5, 3077] is not a list of runs"),
    "RLE past the image": ({"size": [48, 64], "counts": [3000, 3000]}, "runs add up to 6000 pixels, not the image's"),
    "RLE short of the image": ({"size": [48, 64], "counts": "02"}, "runs add up to 2 pixels, not the image's 48x64"),
    "RLE of another size": ({"size": [10**5, 10**5], "counts": [10]}, "'size' is [100000, 100000], not its image's"),
}
RESULT_MASK_DAMAGE = {
    "runs as a list": ({"size": [48, 64], "counts": [10, 3062]}, "'counts' is [10, 3062], not the compressed text"),
    "text not of the encoding": ({"size": [48, 64], "counts": "!!!"}, "character 0 '!' is not one of the encoding's"),
    "another size": ({"size": [4800, 6400], "counts": "0"}, "'size' is [4800, 6400], not its image's [height, width]"),
    "short of the image": ({"size": [48, 64], "counts": "02"}, "runs add up to 2 pixels, not the image's 48x64"),
    "no runs": ({"size": [48, 64], "counts": ""}, "runs add up to 0 pixels"),
}


MASK_DAMAGE = {("truth", k): v for k, v in TRUTH_MASK_DAMAGE.items()}
MASK_DAMAGE |= {("results", k): v for k, v in RESULT_MASK_DAMAGE.items()}


@pytest.mark.parametrize("damaged, case", list(MASK_DAMAGE), ids=[f"{d}: {c}" for d, c in MASK_DAMAGE])
def test_eval_refuses_a_mask_that_is_no_mask_of_its_image_naming_the_annotation_or_detection(tmp_path, damaged, case):
    segmentation, named = MASK_DAMAGE[(damaged, case)]
    given = {"segmentation": segmentation} if damaged == "truth" else {"result": segmentation}
    arguments, files = _mask_eval(tmp_path, **given)
    done = CliRunner().invoke(main, arguments)
    assert done.exit_code == 1 and isinstance(done.exception, SystemExit), (done.output, done.exception)
    where, fix = (_truth_refusal if damaged == "truth" else _results_refusal)(files)
    assert done.output.startswith(where) and named in done.output and fix in done.output, done.output
    assert len(done.output.strip().splitlines()) == 1 and not (tmp_path / "o" / "eval.json").exists()


@pytest.mark.parametrize(
    "width, named",
    [
        (64.5, "'width' is 64.5: masks need the image's size in whole pixels >= 1"),
        (10**6, "is 1000000x48 = 48000000 pixels, more than the 33177600 (7680x4320) the tools read"),
    ],
)
def test_eval_of_masks_refuses_an_image_size_no_mask_can_have(tmp_path, width, named):
    arguments, files = _mask_eval(tmp_path, image={"width": width})
    done = CliRunner().invoke(main, arguments)
    assert done.exit_code == 1 and isinstance(done.exception, SystemExit), (done.output, done.exception)
    assert done.output.startswith(f"Error: {files['truth']}: images[0] (id 3) "), done.output
    assert named in done.output, done.output


def test_the_undamaged_mask_files_score_mask_ap_one(tmp_path):
    """The files the damage above is made to, whole (an image width of 64.0 is 64): they score, so each error is
    the damage's."""
    arguments, _ = _mask_eval(tmp_path, image={"width": 64.0})
    done = CliRunner().invoke(main, arguments)
    assert done.exit_code == 0, done.output
    metrics = json.loads((tmp_path / "o" / "eval.json").read_text())["metrics"]
    assert metrics["mask_AP"] == pytest.approx(1.0) and metrics["AP"] == pytest.approx(1.0)


MEMORY_LIMIT = 4 << 30  # a child's address space: what pycocotools' rasteriser is asked for fails at once
# Segmentations that crashed (SIGSEGV: the rasteriser's allocation failed) or hung pycocotools' C code (a run cut off
# at the end of its text is read past it): run in a child process, as a user runs eval.
NATIVE_MASK_DAMAGE = {
    "x of 1e15": ("truth", [[1e15, 10, 40, 10, 40, 30]], "polygon 0 has x 1000000000000000.0 (number 0), outside"),
    "x of 1e10": ("truth", [[1e10, 10, 40, 10, 40, 30]], "polygon 0 has x 10000000000.0 (number 0), outside"),
    "y NaN": ("truth", [[10, float("nan"), 40, 10, 40, 30]], "polygon 0 has y nan (number 1), outside"),
    "truth run cut off": ("truth", {"size": [48, 64], "counts": "0o"}, "run 1 is cut off at the end of the text"),
    "result run cut off": ("results", {"size": [48, 64], "counts": "0o"}, "run 1 is cut off at the end of the text"),
}


@pytest.mark.parametrize("case", list(NATIVE_MASK_DAMAGE))
def test_eval_refuses_masks_that_crashed_or_hung_pycocotools_in_the_command(tmp_path, case):
    damaged, segmentation, named = NATIVE_MASK_DAMAGE[case]
    given = {"segmentation": segmentation} if damaged == "truth" else {"result": segmentation}
    arguments, files = _mask_eval(tmp_path, **given)
    done = run_cli(*arguments, timeout=120, memory_limit=MEMORY_LIMIT)
    where, fix = (_truth_refusal if damaged == "truth" else _results_refusal)(files)
    assert_refused(done, where, named, fix)
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "o" / "eval.json").exists()


SEG_MODEL = SHARED / "models" / "shapes-yolov8n-seg.onnx"
SEG_DATA = SHARED / "data" / "shapes-seg-val"


@pytest.mark.skipif(not (SEG_MODEL.is_file() and SEG_DATA.is_dir()), reason=f"{SEG_MODEL} or {SEG_DATA} not found")
def test_quantize_refuses_a_damaged_mask_and_leaves_no_unverified_model(tmp_path):
    """quantize --data of a segmentation model over truth with a polygon x of 1e15: pycocotools' rasteriser crashed
    the command after the model was written under --out; now the comparison refuses the file, and the model, never
    verified, is nowhere (it was written under a temporary name, published only once compared)."""
    truth = json.loads((SEG_DATA / "annotations.json").read_text())
    images = sorted(truth["images"], key=lambda image: image["file_name"])
    for folder, kept in (("calibration", images[:2]), ("eval/images", images[100:103])):
        (tmp_path / folder).mkdir(parents=True)
        for image in kept:
            shutil.copy(SEG_DATA / "images" / image["file_name"], tmp_path / folder)
    ids = {image["id"] for image in images[100:103]}
    annotations = [annotation for annotation in truth["annotations"] if annotation["image_id"] in ids]
    annotations[1]["segmentation"][0][0] = 1e15
    (tmp_path / "eval" / "annotations.json").write_text(
        json.dumps(truth | {"images": images[100:103], "annotations": annotations})
    )
    out = tmp_path / "out" / "seg_int8.onnx"
    done = run_cli(
        "quantize", "--model-type", "yolo", "--model", str(SEG_MODEL), "--calibration", str(tmp_path / "calibration"),
        "--out", str(out), "--data", str(tmp_path / "eval"), "--frames", "2", "--speed-runs", "1", "--backend", "onnx",
        timeout=600, memory_limit=8 << 30,
    )  # fmt: skip
    where = f"{tmp_path / 'eval' / 'annotations.json'}: annotations[1] (id {annotations[1]['id']}, image "
    assert_refused(done, where, "polygon 0 has x 1000000000000000.0 (number 0), outside the image's 0..256")
    assert sorted(path.name for path in out.parent.iterdir()) == ["seg_int8_quantize"]  # no model, no staging


@pytest.fixture
def image_file(tmp_path):
    path = tmp_path / "frame.png"
    cv2.imwrite(str(path), np.zeros((48, 64, 3), np.uint8))
    return path


def _with_metadata(tmp_path, key: bytes, value: bytes):
    """A YOLO model file whose metadata has this key and value, bytes as they are (protobuf keeps what is not
    UTF-8 in a proto2 string)."""
    model = onnx_model(
        tmp_path / "model.onnx",
        {"images": [1, 3, 64, 64]},
        {"output0": [1, 6, 84]},
        {"KEYKEYKEY": "VALUEVALUEVALUE", "task": "detect"},
    )
    data = model.read_bytes()
    assert len(key) == len(b"KEYKEYKEY") and len(value) == len(b"VALUEVALUEVALUE")
    model.write_bytes(data.replace(b"KEYKEYKEY", key).replace(b"VALUEVALUEVALUE", value))
    return model


def test_inspect_reports_metadata_that_is_not_utf8_in_text_and_json(tmp_path):
    model = _with_metadata(tmp_path, b"key\xff\xfeabcd", b"caf\xe9 \xc3( bytes!!")
    text = run_cli("inspect", str(model))
    assert text.returncode == 0 and "Traceback" not in text.stderr, text.stderr
    assert "not UTF-8" in text.stdout and "xff" in text.stdout and "caf" in text.stdout, text.stdout
    assert "looks like: yolo" in text.stdout
    shown = run_cli("inspect", "--format", "json", str(model))
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    metadata = json.loads(shown.stdout)["metadata"]
    damaged = [key for key in metadata if key.startswith("key")]
    assert len(damaged) == 1 and "not UTF-8" in damaged[0] and metadata[damaged[0]].startswith("caf\\xe9 \\xc3(")
    assert json.loads(shown.stdout)["recognition"]["family"] == "yolo"


def test_a_model_whose_metadata_is_not_utf8_is_refused_at_load_naming_the_problem(tmp_path, image_file):
    # ONNX Runtime raises UnicodeDecodeError for the whole metadata map: predict (and a node) say what it is.
    model = _with_metadata(tmp_path, b"key\xff\xfeabcd", b"caf\xe9 \xc3( bytes!!")
    done = run_cli("predict", "--model-type", "yolo", "--model", str(model), str(image_file))
    assert_refused(done, "its metadata is not UTF-8", "export the model again")


@pytest.mark.parametrize("kpt_shape", ["5", "{'a': 1}", "[17]", "[17, 'x']", "[17, 4]", "not a literal"])
def test_predict_refuses_a_kpt_shape_that_is_no_shape(tmp_path, kpt_shape):
    model = onnx_model(
        tmp_path / "pose.onnx",
        {"images": [1, 3, 64, 64]},
        {"output0": [1, 56, 84]},
        {"task": "pose", "kpt_shape": kpt_shape, "names": "{0: 'person'}"},
    )
    image = tmp_path / "frame.png"
    cv2.imwrite(str(image), np.zeros((48, 64, 3), np.uint8))
    done = run_cli("predict", "--model-type", "yolo_pose", "--model", str(model), str(image))
    assert_refused(done, f"metadata kpt_shape {kpt_shape}")


@pytest.fixture(scope="module")
def lying_bag(tmp_path_factory):
    """A bag whose image topic says sensor_msgs/msg/Image and holds std_msgs/msg/String."""
    store = _typestore()
    data = store.serialize_cdr(store.types["std_msgs/msg/String"](data="not an image"), "std_msgs/msg/String")
    messages = [RawMessage("/camera/image_raw", "sensor_msgs/msg/Image", START_NS + i, bytes(data)) for i in range(3)]
    return write_messages(tmp_path_factory.mktemp("lying") / "bag", messages)


LYING = ("message 1 on /camera/image_raw is not the sensor_msgs/msg/Image the topic declares", "--topic")


@pytest.mark.parametrize(
    "command",
    [
        ("track", "--model-type", "yolo", "--model", str(DETECTOR), "{bag}", "--out", "{out}"),
        ("verify", "{bag}", "--model-type", "yolo", "--model", str(DETECTOR), "--out", "{out}"),
        ("quantize", "--model-type", "yolo", "--model", str(DETECTOR), "--calibration", "{bag}", "--out", "{out}.onnx"),
        ("replay", "{bag}", "--node", "yolo", "--out", "{out}", "-p", f"model_path:={DETECTOR}"),
    ],
    ids=lambda command: command[0],
)
def test_a_bag_whose_topic_type_lies_is_named_with_its_topic_type_and_fix(tmp_path, lying_bag, command):
    done = run_cli(*(part.format(bag=lying_bag, out=tmp_path / "out") for part in command))
    assert_refused(done, f"bag {lying_bag}", *LYING)


def _damaged_mcap(folder, frames: int = 12, damaged: int = 6):
    """A bag written by tools/bags.py whose message ``damaged`` (from 0) has its record length one byte longer:
    rosbags reads that message (it decodes) and then nothing more of the chunk, and says nothing."""
    bag = write_image_bag(folder, [np.full((16, 16, 3), 10 * i, np.uint8) for i in range(frames)], fps=FPS)
    (mcap,) = bag.glob("*.mcap")
    data = bytearray(mcap.read_bytes())
    # An MCAP message record: opcode 0x05, length (u64), channel id (u16), sequence (u32), log time (u64), ...
    log_time = struct.pack("<Q", START_NS + round(damaged * 1e9 / FPS))
    header = 1 + 8 + 2 + 4  # opcode, length, channel id, sequence: then the log time
    (record,) = [p - header for p in range(len(data)) if data.startswith(log_time, p) and data[p - header] == 0x05]
    length = struct.unpack_from("<Q", data, record + 1)[0]
    struct.pack_into("<Q", data, record + 1, length + 1)
    mcap.write_bytes(bytes(data))
    return bag


def test_an_mcap_that_yields_fewer_messages_than_its_index_lists_is_reported(tmp_path):
    bag = _damaged_mcap(tmp_path / "damaged")
    whole = write_image_bag(tmp_path / "whole", [np.zeros((16, 16, 3), np.uint8)] * 12, fps=FPS)
    for command in (
        ("track", "--model-type", "yolo", "--model", str(DETECTOR), "{bag}", "--out", "{out}"),
        ("replay", "{bag}", "--node", "yolo", "--out", "{out}", "-p", f"model_path:={DETECTOR}"),
    ):
        done = run_cli(*(part.format(bag=bag, out=tmp_path / command[0]) for part in command))
        assert_refused(done, f"bag {bag} is damaged: it gave 7 of the 12 messages its index lists on /camera/image_raw")
    # The same bag undamaged: track reads all 12 frames.
    done = run_cli("track", "--model-type", "yolo", "--model", str(DETECTOR), str(whole), "--out", str(tmp_path / "t"))
    assert done.returncode == 0, done.stderr
    shutil.rmtree(tmp_path / "t")


@pytest.mark.parametrize("damaged", ["truth", "predictions"])
def test_eval_refuses_a_ball_csv_with_a_non_finite_position_naming_the_line(tmp_path, damaged):
    rows = {name: [(frame, 1, 100.0 + frame, 50.0) for frame in range(5)] for name in ("truth", "predictions")}
    rows[damaged][3] = (3, 1, float("nan"), 50.0)
    files = {name: write_ball_csv(tmp_path / f"{name}.csv", found) for name, found in rows.items()}
    done = run_cli(
        "eval", "--model-type", "tracknet", "--data", str(files["truth"]), "--predictions", str(files["predictions"]),
        "--frame-size", "512x288", "--out", str(tmp_path / "eval"),
    )  # fmt: skip
    assert_refused(done, f"{files[damaged]} line 5", "nan, 50.0 is not a finite position")


def test_bag_of_a_truncated_video_says_how_many_frames_it_read_of_those_declared(tmp_path):
    """A 30-frame MJPEG AVI cut in a frame past its middle: bag wrote the frames before the cut without a word, and
    FFmpeg's own "[mjpeg @ 0x...] overread 8" reached the terminal. Now it says how many of the declared frames it
    read, in its report and in a warning, and nothing of FFmpeg's reaches the terminal."""
    rng = np.random.default_rng(7)
    whole = tmp_path / "whole.avi"
    writer = cv2.VideoWriter(str(whole), cv2.VideoWriter_fourcc(*"MJPG"), FPS, (64, 48))
    for _ in range(30):
        writer.write(rng.integers(0, 255, (48, 64, 3), np.uint8))
    writer.release()
    cut = tmp_path / "cut.avi"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size * 55 // 100])
    done = run_cli("bag", str(cut), "--out", str(tmp_path / "cut"))
    assert done.returncode == 0, done.stderr
    written = len(list(read_frames(tmp_path / "cut")))
    assert 5 < written < 25, written
    assert f"{written} video frames (of the 30 the video declares) on /camera/image_raw" in done.stdout
    assert done.stderr.splitlines() == [
        f"warning: {cut} declares 30 frames and {written} could be read: it is truncated or damaged (or its "
        f"container counts frames it does not show); only the first {written} are used"
    ]
    done = run_cli("bag", str(whole), "--out", str(tmp_path / "whole"))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "30 video frames on /camera/image_raw" in done.stdout
