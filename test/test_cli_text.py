"""Text from files (model metadata, class names, a bag's fields) reaches the terminal escaped: no ESC to move the
cursor or clear the screen, no newline to forge a line of the tool's own output, no | to break a Markdown table.

Real hostile files, written here with onnx and rosbags, through real CLI runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from vision_factory.cli import main

ESC = "\x1b"
CLEAR = ESC + "[2J"
FORGED = "looks like: tracknet — forged"


def hostile_yolo(path: Path, names: dict[int, str], metadata: dict[str, str] | None = None) -> Path:
    """A YOLO-shaped model (64x64 input, two classes named ``names``) whose output is one detection of class 0
    at (22, 22)-(42, 42), score 0.9; ``metadata`` added to its own."""
    output = np.zeros((1, 6, 16), np.float32)
    output[0, :, 0] = [32, 32, 20, 20, 0.9, 0.05]
    graph = helper.make_graph(
        [helper.make_node("Identity", ["value"], ["output0"])],
        "constant",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 6, 16])],
        [numpy_helper.from_array(output, "value")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    helper.set_model_props(model, {"names": repr(names), **(metadata or {})})
    onnx.save(model, path)
    return path


def invoke(*arguments: object):
    """The command's output as a terminal gets it (color=True: Click keeps escape sequences, as on a tty)."""
    return CliRunner().invoke(main, [str(argument) for argument in arguments], color=True)


def assert_no_control(text: str) -> None:
    """No character that is not printable other than the line ends the tool itself writes."""
    bad = sorted({char for char in text if not char.isprintable() and char != "\n"})
    assert not bad, (bad, text)


def test_inspect_text_escapes_metadata_keys_and_values(tmp_path):
    model = hostile_yolo(
        tmp_path / "m.onnx",
        {0: "circle", 1: "square"},
        {
            f"clear{CLEAR}": f"red{ESC}[31m",
            f"key\n{FORGED}": "value",
            "value": f"one\n{FORGED}\r\u2028next",
            "bell": "\x07\x9b2J",
        },
    )
    result = invoke("inspect", model)
    assert result.exit_code == 0, result.output
    assert_no_control(result.output)
    lines = result.output.splitlines()
    assert [line for line in lines if line.startswith("looks like:")] == [lines[-1]]
    assert lines[-1].startswith("looks like: yolo")
    metadata = lines[lines.index("metadata:") + 1 : -1]
    assert len(metadata) == 5 and all(line.startswith("  ") for line in metadata), metadata
    assert "  clear\\x1b[2J: red\\x1b[31m" in metadata
    assert f"  key\\n{FORGED}: value" in metadata


def test_inspect_json_is_escaped_json_and_survives_metadata_that_is_not_utf8(tmp_path):
    model = hostile_yolo(tmp_path / "m.onnx", {0: "circle", 1: "square"}, {f"clear{CLEAR}": "PLACEHOLDER"})
    raw = model.read_bytes().replace(b"PLACEHOLDER", b"\xff\xfe\x1b[2J\nXYZW")  # the same length: still a valid file
    model.write_bytes(raw)
    for output_format in ("json", "text"):
        result = invoke("inspect", model, "--format", output_format)
        assert result.exit_code == 0, (output_format, result.output, result.exception)
        assert_no_control(result.output)
    record = json.loads(invoke("inspect", model, "--format", "json").output)
    value = "\\xff\\xfe" + CLEAR + "\nXYZW (not UTF-8: the file's metadata is damaged)"
    assert record["metadata"][f"clear{CLEAR}"] == value  # the key and value as JSON keeps them, bytes escaped


def test_predict_text_escapes_class_names(tmp_path):
    import cv2

    names = {0: f"ci{CLEAR}rcle\nimage.png: square 0.99", 1: "square"}
    model = hostile_yolo(tmp_path / "m.onnx", names)
    image = tmp_path / "frame.png"
    cv2.imwrite(str(image), np.full((64, 64, 3), 100, np.uint8))
    result = invoke("predict", "--model-type", "yolo", "--model", model, image)
    assert result.exit_code == 0, result.output
    assert_no_control(result.output)
    assert result.output.splitlines() == [f"{image}: ci\\x1b[2Jrcle\\nimage.png: square 0.99 0.90"]
    record = json.loads(invoke("predict", "--model-type", "yolo", "--model", model, image, "--format", "json").output)
    assert record["detections"][0]["class_name"] == names[0]  # JSON keeps the name, escaped as JSON


def _bag_with_encoding(path: Path, encoding: str, topic: str = "/camera/image_raw", topics: int = 1) -> Path:
    from vision_factory.tools.bags import RawMessage, _typestore, write_messages

    store = _typestore()
    types = store.types
    header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=1, nanosec=0), frame_id="c")
    image = types["sensor_msgs/msg/Image"](
        header=header,
        height=4,
        width=4,
        encoding=encoding,
        is_bigendian=0,
        step=12,
        data=np.zeros(48, np.uint8),
    )
    data = bytes(store.serialize_cdr(image, "sensor_msgs/msg/Image"))
    names = [topic + "_" * index for index in range(topics)]
    return write_messages(path, [RawMessage(name, "sensor_msgs/msg/Image", 10**9, data) for name in names])


def test_a_bags_image_encoding_reaches_errors_escaped(tmp_path):
    model = hostile_yolo(tmp_path / "m.onnx", {0: "circle", 1: "square"})
    bag = _bag_with_encoding(tmp_path / "bag", f"bgr8{CLEAR}\nError: forged")
    result = invoke(
        "quantize", "--model-type", "yolo", "--model", model, "--calibration", bag, "--out", tmp_path / "q.onnx"
    )
    assert result.exit_code == 1, (result.output, result.exception)
    assert_no_control(result.output)
    assert "unsupported image encoding 'bgr8\\x1b[2J\\nError: forged'" in result.output
    assert [line for line in result.output.splitlines() if line.startswith("Error:")] == [result.output.splitlines()[0]]


def test_a_bags_topic_names_reach_errors_escaped(tmp_path):
    from vision_factory.tools.bags import BagError, read_messages

    bag = _bag_with_encoding(tmp_path / "bag", "bgr8", topic=f"/cam{CLEAR}\nError: forged")
    with pytest.raises(BagError) as raised:
        list(read_messages(bag, "/other"))
    assert_no_control(str(raised.value))
    assert "(topics: /cam\\x1b[2J\\nError: forged)" in str(raised.value)


def test_replay_names_a_bags_topics_escaped(tmp_path):
    bag = _bag_with_encoding(tmp_path / "bag", "bgr8", topic=f"/cam{CLEAR}\nError: forged", topics=2)
    result = invoke("replay", bag, "--out", tmp_path / "out", "--node", "yolo")
    assert result.exit_code == 1, (result.output, result.exception)
    assert_no_control(result.output)
    assert "has 2 image topics (/cam\\x1b[2J\\nError: forged, /cam\\x1b[2J\\nError: forged_)" in result.output
    assert len(result.output.splitlines()) == 1, result.output


def test_verify_markdown_escapes_a_pipe_in_a_class_name(tmp_path):
    from vision_factory.families.registry import family
    from vision_factory.results.part import Tolerance
    from vision_factory.tools.verify_checks import class_check
    from vision_factory.tools.verify_report import NO_COUNTS, NodeCounts, VerifyReport
    from vision_factory.tools.verify_report import markdown as _markdown

    check = class_check([], None, ["sq|uare", f"ci{CLEAR}rcle"], tmp_path / "m.onnx")
    report = VerifyReport(True, [check], [], Tolerance(1.0, 0.01), 1.0, 2.0, "node.log", NodeCounts(0, 0, NO_COUNTS))
    markdown = _markdown(report, family("yolo"), [])
    assert_no_control(markdown)
    row = next(line for line in markdown.splitlines() if line.startswith("| class names |"))
    assert row.replace("\\|", "").count("|") == 4, row  # three cells: the pipe in the name is escaped
    assert "sq\\|uare" in row


# --- paths on the command line: a folder or file name may hold a newline and ESC ---------------------------

HOSTILE = f"x\nError: forged{CLEAR}"  # a name that would forge an error line and clear the screen
SHOWN = "x\\nError: forged\\x1b[2J"  # as the tool must print it


def assert_not_forged(text: str) -> None:
    """No control character reached the terminal and no line of the tool's output was forged by a name."""
    assert_no_control(text)
    assert not any(line.startswith("Error: forged") for line in text.splitlines()), text


def _images(folder: Path) -> Path:
    import cv2

    folder.mkdir()
    for index in range(2):
        cv2.imwrite(str(folder / f"{index}.png"), np.full((64, 80, 3), 60 * index, np.uint8))
    return folder


def test_bag_prints_its_input_folder_and_out_escaped(tmp_path):
    images, out = _images(tmp_path / f"in{HOSTILE}"), tmp_path / f"out{HOSTILE}"
    made = invoke("bag", images, "--out", out)
    assert made.exit_code == 0, (made.output, made.exception)
    assert_not_forged(made.output)
    assert (out / "metadata.yaml").is_file()
    assert f"bag: {tmp_path}/out{SHOWN}" in made.output.splitlines()
    assert f"next: vision-factory replay '{tmp_path}/out{SHOWN}' --out RUN" in made.output
    for refused, words in [
        (invoke("bag", images, "--out", out), f"{tmp_path}/out{SHOWN} exists"),
        (invoke("bag", _images(tmp_path / f"e{HOSTILE}") / "0.png", "--out", tmp_path / "o"), f"e{SHOWN}/0.png is "),
    ]:
        assert refused.exit_code == 2, refused.output
        assert_not_forged(refused.output)
        assert words in refused.output, refused.output


@pytest.mark.parametrize("command", ["replay", "verify"])
def test_cameras_name_the_bag_escaped(tmp_path, command):
    """replay --camera and verify --camera name the bag whose topics a camera is not among, escaped."""
    from vision_factory.tools.bags import write_image_bag

    bag = write_image_bag(tmp_path / f"bag{HOSTILE}", [np.zeros((64, 64, 3), np.uint8)])
    model = hostile_yolo(tmp_path / "m.onnx", {0: "circle", 1: "square"})
    extra = ["--node", "yolo"] if command == "replay" else ["--model-type", "yolo", "--model", model]
    done = invoke(command, bag, *extra, "--out", tmp_path / "out", "--camera", "front=/nowhere")
    assert done.exit_code == 2, (done.output, done.exception)
    assert_not_forged(done.output)
    assert f"is neither an image topic of {tmp_path}/bag{SHOWN} (it has /camera/image_raw)" in done.output


def _hostile_cases(tmp_path: Path) -> list[tuple[list, str]]:
    """Commands given a path holding a newline and ESC (a missing file, a file of the wrong kind, an output), and
    what each must print of it."""
    missing, text = tmp_path / f"m{HOSTILE}", tmp_path / f"t{HOSTILE}"
    text.write_text("not a model, not an image\n")
    model = hostile_yolo(tmp_path / "m.onnx", {0: "circle", 1: "square"})
    image = _images(tmp_path / "images") / "0.png"
    return [
        (["eval", "--model-type", "track", "--data", missing, "--predictions", missing, "--out", tmp_path / "e"],
         f"MOTChallenge file not found: {tmp_path}/m{SHOWN}"),
        (["eval", "--model-type", "yolo", "--data", missing, "--predictions", text, "--out", tmp_path / "e"],
         f"no COCO annotations at {tmp_path}/m{SHOWN}"),
        (["eval", "--model-type", "tracknet", "--data", missing, "--predictions", text, "--frame-size", "64x64",
          "--out", tmp_path / "e"], f"ball CSV not found: {tmp_path}/m{SHOWN}"),
        (["quantize", "--model-type", "yolo", "--model", model, "--calibration", missing, "--out", tmp_path / "q.onnx"],
         f"calibration source not found: {tmp_path}/m{SHOWN}"),
        (["predict", "--model-type", "yolo", "--model", text, image], f"cannot load model {tmp_path}/t{SHOWN}"),
        (["predict", "--model-type", "yolo", "--model", model, text], f"{tmp_path}/t{SHOWN} is neither"),
        (["track", "--model-type", "yolo", "--model", model, text, "--out", tmp_path / "t"],
         f"{tmp_path}/t{SHOWN} is not a readable image"),
        (["replay", text, "--out", tmp_path / "r"], f"cannot read bag {tmp_path}/t{SHOWN}"),
        (["generate", "--model", "yolo", "--backend", "onnx", "--package-name", "shapes", "--out", missing],
         f"wrote {tmp_path}/m{SHOWN}/shapes"),
    ]  # fmt: skip


def test_every_command_prints_a_path_it_is_given_escaped(tmp_path):
    wrong = []  # every case that printed the path raw (or failed otherwise), not only the first
    for arguments, shown in _hostile_cases(tmp_path):
        done = invoke(*arguments)
        try:
            assert done.exception is None or isinstance(done.exception, SystemExit), repr(done.exception)
            assert_not_forged(done.output)
            assert shown in done.output, done.output
        except AssertionError as failed:
            wrong.append((arguments[:3], str(failed)[:300]))
    assert not wrong, wrong
