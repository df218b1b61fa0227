"""Memory the input sets (issue 31, class 3): every image a tool decodes has its declared size read from its header
and checked against max_image_pixels' default before anything is allocated for it, in every format OpenCV decodes
and in videos; every size a parameter sets has an upper bound, refused when set.

Each file here is small and declares a huge image (a 30000x30000 PNG is 0.9 MB and 2.7 GB decoded). The commands
run as a user runs them, in a child process that cannot map more than MEMORY_LIMIT: before the checks, the decoders
tried the allocation (a traceback: OpenCV's "Insufficient memory", or a MemoryError)."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from support.cli import assert_refused, run_cli
from support.data import declaring, declaring_avi, huge_png
from support.models import onnx_model

from vision_factory.images import TOO_LARGE, ImageFormatError, read_image_file
from vision_factory.tools.sources import image_header

MEMORY_LIMIT = 3 << 30  # bytes of address space a command may map: the 2.7 GB decode fails in it
TOO_MANY = "pixels is larger than max_image_pixels 33177600; the tools read images of at most 7680x4320 pixels"
DEPTH_MODEL = Path(__file__).resolve().parent / "data" / "depth" / "depth-anything-relative.onnx"


@pytest.fixture
def model(tmp_path):
    """A YOLO-shaped model (64x64 in, two classes out, no detection)."""
    metadata = {"names": "{0: 'circle', 1: 'square'}", "imgsz": "[64, 64]", "task": "detect"}
    return onnx_model(tmp_path / "model.onnx", {"images": [1, 3, 64, 64]}, {"output0": [1, 6, 84]}, metadata)


@pytest.fixture
def images(tmp_path):
    """A folder of a small image and, after it by name, a 0.9 MB PNG declaring 30000x30000."""
    folder = tmp_path / "images"
    folder.mkdir()
    cv2.imwrite(str(folder / "a.png"), np.full((48, 64, 3), 90, np.uint8))
    (folder / "b.png").write_bytes(huge_png())
    return folder


def _coco(folder, images) -> None:
    """``folder`` as a COCO data set of ``images``' two images (no annotations)."""
    (folder / "images").mkdir(parents=True)
    entries = []
    for index, path in enumerate(sorted(images.iterdir()), start=1):
        (folder / "images" / path.name).write_bytes(path.read_bytes())
        entries.append({"id": index, "file_name": path.name, "width": 64, "height": 48})
    truth = {"images": entries, "annotations": [], "categories": [{"id": 0, "name": "circle"}]}
    (folder / "annotations.json").write_text(json.dumps(truth))


@pytest.mark.parametrize("command", ["bag", "predict", "track", "quantize --calibration", "eval", "quantize --data"])
def test_every_tool_refuses_an_image_declaring_more_pixels_than_it_reads(tmp_path, model, images, command):
    huge = images / "b.png"
    coco = tmp_path / "coco"
    _coco(coco, images)
    given = {
        "bag": ["bag", str(images), "--out", str(tmp_path / "bag")],
        "predict": ["predict", "--model-type", "yolo", "--model", str(model), str(huge)],
        "track": ["track", "--model-type", "yolo", "--model", str(model), str(huge), "--out", str(tmp_path / "t")],
        "quantize --calibration": [
            "quantize", "--model-type", "yolo", "--model", str(model), "--calibration", str(images),
            "--out", str(tmp_path / "q.onnx"),
        ],
        "eval": ["eval", "--model-type", "yolo", "--model", str(model), "--data", str(coco), "--out", str(tmp_path)],
        "quantize --data": [
            "quantize", "--model-type", "yolo", "--model", str(model), "--precision", "fp16", "--data", str(coco),
            "--out", str(tmp_path / "q.onnx"), "--speed-runs", "1",
        ],
    }[command]  # fmt: skip
    done = run_cli(*given, timeout=300, memory_limit=MEMORY_LIMIT)
    where = coco / "images" / "b.png" if command.startswith(("eval", "quantize --data")) else huge
    assert_refused(done, f"Error: {where}: png image of 30000x30000 = 900000000 {TOO_MANY}: resize it")
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "bag").exists() and not (tmp_path / "q.onnx").exists()


# A small file of each other format OpenCV decodes, declaring a size its decoder would allocate for (WebP's lossless
# header holds 14 bits a side), and what the refusal says of it.
FORMATS = {
    "webp": ((16384, 16384), "webp image of 16384x16384 = 268435456 " + TOO_MANY),
    "webp-vp8x": ((30000, 30000), "webp image of 30000x30000 = 900000000 " + TOO_MANY),
    "bmp": ((30000, 30000), "image declares more than 178956970 pixels (Pillow's own bound, above max_image_pixels"),
    "tiff": ((30000, 30000), "image declares more than 178956970 pixels"),
    "ppm": ((30000, 30000), "image declares more than 178956970 pixels"),
    "gif": ((30000, 30000), "image declares more than 178956970 pixels"),
    "bmp of 8K and more": ((7681, 4321), "bmp image of 7681x4321 = 33189601 " + TOO_MANY),
}


@pytest.mark.parametrize("kind", list(FORMATS))
def test_predict_refuses_an_image_of_any_format_declaring_too_many_pixels(tmp_path, model, kind):
    (width, height), named = FORMATS[kind]
    path = tmp_path / f"frame.{kind.split('-')[0].split()[0]}"
    path.write_bytes(declaring(kind.split()[0], width, height))
    done = run_cli("predict", "--model-type", "yolo", "--model", str(model), str(path), memory_limit=MEMORY_LIMIT)
    assert_refused(done, f"Error: {path}: {named}", "resize it")


def test_bag_refuses_a_video_declaring_more_pixels_than_the_tools_read(tmp_path):
    video = declaring_avi(tmp_path / "clip.avi", 8000, 5000)
    done = run_cli("bag", str(video), "--out", str(tmp_path / "bag"), memory_limit=MEMORY_LIMIT)
    named = "video frames of 8000x5000 = 40000000 pixels is larger than max_image_pixels 33177600"
    assert_refused(done, f"Error: {video}: {named}", "resize it")
    assert not (tmp_path / "bag").exists()
    # The same video declaring its own 64x48: its three frames are the bag's.
    whole = declaring_avi(tmp_path / "whole.avi", 64, 48)
    done = run_cli("bag", str(whole), "--out", str(tmp_path / "bag"))
    assert done.returncode == 0 and "3 video frames" in done.stdout, done.stderr


@pytest.mark.parametrize("kind", ["webp", "webp-vp8x", "bmp", "tiff", "ppm", "gif"])
def test_each_format_is_read_at_its_declared_size_and_decoded_as_opencv_decodes_it(tmp_path, kind):
    """The header readers agree with the file (the size Pillow wrote) and the image read is OpenCV's own decode."""
    data = declaring(kind, 64, 48)
    assert image_header(data)[1:] == (64, 48)
    path = tmp_path / "frame"
    path.write_bytes(data)
    expected = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    np.testing.assert_array_equal(read_image_file(path, header=image_header), expected)
    with pytest.raises(ImageFormatError) as error:
        read_image_file(path, max_pixels=64 * 47, header=image_header)
    assert error.value.kind == TOO_LARGE and "64x48 = 3072 pixels is larger than max_image_pixels 3008" in str(
        error.value
    )


def test_a_file_larger_than_any_image_the_tools_read_is_refused_before_it_is_read(tmp_path):
    """No image of max_pixels pixels takes more than 8 bytes a pixel and 16 MiB beside them."""
    path = tmp_path / "frame.bmp"
    path.write_bytes(declaring("bmp", 64, 48) + bytes(17 << 20))
    size = path.stat().st_size
    with pytest.raises(
        ImageFormatError, match=f"the file is {size} bytes, more than any image of max_image_pixels 4096"
    ):
        read_image_file(path, max_pixels=4096, header=image_header)
    assert read_image_file(path, max_pixels=(2 << 20) // 8, header=image_header).shape == (
        48,
        64,
        3,
    )  # 18 MiB: the file is within


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            ["--model-type", "depth", "--model", str(DEPTH_MODEL), "--processor-size", "100000x100000"],
            "processor_size must be WIDTHxHEIGHT of at most 33177600 pixels, or empty, not '100000x100000'",
        ),
        (
            ["--model-type", "yolo", "--model", "{model}", "--imgsz", "100000"],
            "image_size must be an integer in 0..5760, not 100000",
        ),
        (
            ["--model-type", "yolo", "--model", "{model}", "--max-det", "1000000"],
            "max_detections must be an integer in 1..10000, not 1000000",
        ),
    ],
)
def test_predict_refuses_a_size_beyond_its_bound_before_anything_runs(tmp_path, model, images, arguments, message):
    """predict --processor-size 100000x100000 died of a MemoryError making the depth model's input (Pillow's resize,
    which allocates in blocks, filled the machine's memory before it did)."""
    given = [part.format(model=model) for part in arguments]
    done = run_cli("predict", *given, str(images / "a.png"), memory_limit=MEMORY_LIMIT)
    assert_refused(done, message)
