"""Segment Anything's adapter (models/sam.py) on architecture-true exports of transformers' SamModel and Sam2Model in
the three layouts users have (test/data/sam/, made by benchmarks/make_sam_models.py), against what transformers'
SamProcessor / Sam2Processor and post_process_masks returned on ONNX Runtime's outputs of the same files, recorded
when they were made: the same masks (IoU >= 0.98 each, against the recorded masks), the same mask output chosen and
its predicted IoU within 0.01; the encoder run once a frame and the decoder once per batch of prompts (counted);
each layout recognised from its files; a decoder that does not belong to its encoder refused at load, naming both
files; prompts past the cap or of a kind the decoder cannot take dropped, counted and said once."""

from __future__ import annotations

import base64
import json
import logging
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest
import skimage
from onnx import TensorProto, helper

from vision_factory.models.interface import Interface
from vision_factory.models.model_file import summarize
from vision_factory.models.sam import Prompt, SamSegmenter
from vision_factory.models.sam_interface import SAM, pair
from vision_factory.results.masks import InstanceMask
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.runtime.providers import ProviderConfig

DATA = Path(__file__).parent / "data" / "sam"
SKIMAGE = Path(skimage.__file__).parent / "data"
REFERENCE = json.loads((DATA / "reference.json").read_text())
PAIRS = {(model["encoder"], model["decoder"]): model for model in REFERENCE["models"]}
CASES = [(model, case) for model in REFERENCE["models"] for case in model["cases"]]
IOU_MIN, SCORE_TOLERANCE = 0.98, 0.01


@pytest.fixture(scope="module")
def runners():
    """One ONNX Runtime session per file, shared by the module's tests."""
    made = {}

    def runner(file: str) -> OnnxRunner:
        if file not in made:
            made[file] = OnnxRunner(DATA / file, ProviderConfig(), logging.getLogger("test"))
        return made[file]

    return runner


def segmenter(runners, encoder: str, decoder: str, **options) -> SamSegmenter:
    return SamSegmenter(runners(encoder), runners(decoder), encoder, decoder, **options)


def prompts_of(case: dict) -> list[Prompt]:
    if case["kind"] == "boxes":
        return [Prompt(box=tuple(box), class_id=i, id=f"box{i}") for i, box in enumerate(case["prompts"])]
    return [Prompt(points=((x, y, 1),), class_id=i, id=f"point{i}") for i, (x, y) in enumerate(case["prompts"])]


def decoded(key: str, shape: tuple[int, int]) -> np.ndarray:
    """A recorded mask: its row-major bits, packed, zlib-compressed, base64 (stored once by its digest)."""
    bits = np.unpackbits(np.frombuffer(zlib.decompress(base64.b64decode(REFERENCE["bits"][key])), np.uint8))
    return bits[: shape[0] * shape[1]].reshape(shape).astype(bool)


def iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.count_nonzero(a | b)
    return float(np.count_nonzero(a & b) / union) if union else 1.0


def image(name: str) -> np.ndarray:
    return cv2.imread(str(SKIMAGE / name), cv2.IMREAD_COLOR)


def test_reference_files_are_the_recorded_ones():
    import hashlib

    for model in REFERENCE["models"]:
        for file, digest in model["sha256"].items():
            assert hashlib.sha256((DATA / file).read_bytes()).hexdigest() == digest, file


def test_the_recorded_masks_depend_on_the_prompt():
    """The test models are lively: on one image, two prompts' reference masks are not the same mask (else a mask
    given to the wrong prompt would pass)."""
    for _, case in CASES:
        frame = image(case["image"])
        masks = [decoded(mask["bits"], frame.shape[:2]) for mask in case["masks"]]
        overlaps = [iou(a, b) for i, a in enumerate(masks) for b in masks[i + 1 :]]
        assert max(overlaps) < 0.9, (case["image"], case["kind"], overlaps)
        assert all(0.01 < mask.mean() < 0.99 for mask in masks)


@pytest.mark.parametrize(
    "model,case", CASES, ids=[f"{m['layout']}-{m['decoder'][:-5]}-{c['image'][:-4]}-{c['kind']}" for m, c in CASES]
)
def test_masks_equal_transformers(runners, model, case):
    sam = segmenter(runners, model["encoder"], model["decoder"])
    frame = image(case["image"])
    prompts = prompts_of(case)
    result = sam.segment(case["image"], frame, prompts)
    assert result.dropped == 0 and not result.problems
    assert [found.prompt for found in result.masks] == prompts  # in the prompts' order, each carrying its class and id
    for found, expected in zip(result.masks, case["masks"]):
        assert isinstance(found.mask, InstanceMask)
        assert (found.mask.height, found.mask.width) == frame.shape[:2]
        truth = decoded(expected["bits"], frame.shape[:2])
        assert iou(found.mask.full(), truth) >= IOU_MIN, found.prompt
        assert found.mask.area == pytest.approx(expected["area"], rel=0.02)
        assert found.mask_index == expected["mask_index"]
        assert found.iou_score == pytest.approx(expected["iou_score"], abs=SCORE_TOLERANCE)


@pytest.mark.parametrize("encoder,decoder", sorted(PAIRS))
def test_the_encoder_runs_once_a_frame_and_the_decoder_once_per_batch(runners, encoder, decoder):
    sam = segmenter(runners, encoder, decoder)
    model = PAIRS[(encoder, decoder)]
    case = model["cases"][0]
    frame, prompts = image(case["image"]), prompts_of(case)
    per_batch = 1 if model["layout"] in ("hf", "sam2") else len(prompts)  # Meta's export: one prompt a run
    for batch in range(3):  # three prompt batches on one frame (a point clicked again on the last frame)
        result = sam.segment(("camera", 7), frame, prompts)
        assert result.encoded == (batch == 0)
        assert len(result.masks) == len(prompts)
    assert (sam.encoder_runs, sam.decoder_runs) == (1, 3 * per_batch)
    again = sam.segment(("camera", 8), frame, prompts[:1])  # a new frame
    assert again.encoded and sam.encoder_runs == 2
    first = sam.segment(("camera", 8), frame, prompts[1:])
    assert not first.encoded and sam.encoder_runs == 2


def test_the_last_frames_of_several_cameras_stay_encoded(runners):
    """cache_frames 2 (two cameras): prompts on either camera's last frame reuse its embedding; a third frame
    pushes out the least recently used one."""
    sam = segmenter(runners, "hf-vision_encoder.onnx", "hf-prompt_encoder_mask_decoder_boxes.onnx", cache_frames=2)
    left, right, box = image("astronaut.png"), image("coffee.png"), [Prompt(box=(20.0, 30.0, 200.0, 250.0))]
    for key, frame in ((("left", 1), left), (("right", 1), right), (("left", 1), left), (("right", 1), right)):
        sam.segment(key, frame, box)
    assert sam.encoder_runs == 2
    sam.segment(("left", 2), left, box)  # the left camera's next frame: the right camera's stays, the left's goes
    assert sam.segment(("right", 1), right, box).encoded is False
    assert sam.segment(("left", 1), left, box).encoded is True
    assert sam.encoder_runs == 4
    sam.forget()
    assert sam.segment(("left", 1), left, box).encoded is True


@pytest.mark.parametrize(
    "encoder,decoder",
    [("hf-vision_encoder.onnx", "hf-prompt_encoder_mask_decoder.onnx"), ("sam2-encoder.onnx", "sam2-decoder.onnx")],
)
def test_a_prompts_mask_does_not_depend_on_the_others_of_its_frame(runners, encoder, decoder):
    """Prompts of one and of two points are decoded in separate runs (none padded): the one-point prompt's mask is
    the same alone and beside a two-point one."""
    sam = segmenter(runners, encoder, decoder)
    frame = image("chelsea.png")
    one = Prompt(points=((220.0, 150.0, 1),), id="one")
    two = Prompt(points=((40.0, 40.0, 1), (400.0, 250.0, 0)), id="two")
    (alone,) = sam.segment(0, frame, [one]).masks
    runs = sam.decoder_runs
    beside = sam.segment(0, frame, [two, one]).masks
    assert [found.prompt.id for found in beside] == ["two", "one"]
    assert sam.decoder_runs == runs + 2
    assert np.array_equal(beside[1].mask.full(), alone.mask.full()) and beside[1].iou_score == alone.iou_score
    assert iou(beside[0].mask.full(), alone.mask.full()) < 0.9


LAYOUTS = {
    "hf-vision_encoder.onnx": ("encoder", "hf"),
    "hf-prompt_encoder_mask_decoder.onnx": ("decoder", "hf"),
    "hf-prompt_encoder_mask_decoder_boxes.onnx": ("decoder", "hf"),
    "meta-decoder.onnx": ("decoder", "meta"),
    "sam2-encoder.onnx": ("encoder", "sam2"),
    "sam2-decoder.onnx": ("decoder", "sam2"),
}


@pytest.mark.parametrize("file", sorted(LAYOUTS))
def test_each_file_is_recognised_from_itself(file):
    found = SAM.recognise(Interface.of(summarize(DATA / file)))
    assert found is not None and found.family == "sam"
    assert (found.details["part"], found.details["layout"]) == LAYOUTS[file]


def test_meta_encoder_alone_is_not_claimed_but_its_pair_is():
    """Meta's encoder (one image in, one map out) says nothing of itself; with its decoder it is a Meta pair."""
    encoder, decoder = (Interface.of(summarize(DATA / f)) for f in ("meta-encoder.onnx", "meta-decoder.onnx"))
    assert SAM.recognise(encoder) is None
    layout = pair(encoder, decoder, "meta-encoder.onnx", "meta-decoder.onnx")
    assert (layout.layout, layout.side, layout.masks, layout.batched) == ("meta", 1024, 4, False)
    assert set(layout.prompts) == {"points", "boxes"}


@pytest.mark.parametrize(
    "encoder,decoder,layout,prompts,batched",
    [
        ("hf-vision_encoder.onnx", "hf-prompt_encoder_mask_decoder.onnx", "hf", ("points",), True),
        ("hf-vision_encoder.onnx", "hf-prompt_encoder_mask_decoder_boxes.onnx", "hf", ("boxes",), True),
        ("sam2-encoder.onnx", "sam2-decoder.onnx", "sam2", ("points", "boxes"), True),
    ],
)
def test_pairs_are_recognised(encoder, decoder, layout, prompts, batched):
    found = pair(*(Interface.of(summarize(DATA / f)) for f in (encoder, decoder)), encoder, decoder)
    assert (found.layout, found.prompts, found.batched, found.side) == (layout, prompts, batched, 1024)


@pytest.mark.parametrize(
    "encoder,decoder",
    [
        ("sam2-encoder.onnx", "hf-prompt_encoder_mask_decoder.onnx"),
        ("hf-vision_encoder.onnx", "sam2-decoder.onnx"),
        ("hf-vision_encoder.onnx", "meta-decoder.onnx"),  # two outputs where Meta's decoder takes one map
        ("meta-encoder.onnx", "hf-prompt_encoder_mask_decoder_boxes.onnx"),
    ],
)
def test_a_decoder_of_another_encoder_is_refused_at_load_naming_both(runners, encoder, decoder):
    with pytest.raises(ValueError) as refused:
        segmenter(runners, encoder, decoder)
    message = str(refused.value)
    assert encoder in message and decoder in message and "\n" not in message


def test_a_decoder_of_other_embeddings_is_refused_naming_both(runners, tmp_path):
    """Meta's decoder signature for 256-channel embeddings (SAM ViT-B's) beside this 32-channel encoder."""
    wide = tmp_path / "vit_b_decoder.onnx"
    _meta_like_decoder(wide, channels=256)
    with pytest.raises(ValueError) as refused:
        SamSegmenter(runners("meta-encoder.onnx"), _runner(wide), "meta-encoder.onnx", str(wide))
    message = str(refused.value)
    assert "meta-encoder.onnx" in message and "vit_b_decoder.onnx" in message
    assert "[1, 256, 64, 64]" in message and "[1, 32, 64, 64]" in message


def test_the_files_given_the_other_way_round_are_said_so(runners):
    with pytest.raises(ValueError, match="other way round"):
        segmenter(runners, "meta-decoder.onnx", "meta-encoder.onnx")


def test_prompts_past_the_cap_are_dropped_counted_and_said_once(runners):
    sam = segmenter(runners, "hf-vision_encoder.onnx", "hf-prompt_encoder_mask_decoder_boxes.onnx", max_prompts=20)
    frame = image("astronaut.png")
    boxes = [Prompt(box=(10.0 + i * 10, 10.0, 200.0 + i * 10, 300.0), id=str(i)) for i in range(25)]
    result = sam.segment(0, frame, boxes)
    assert [found.prompt.id for found in result.masks] == [str(i) for i in range(20)]
    assert result.dropped == 5 and len(result.problems) == 1 and "max_prompts 20" in result.problems[0]
    assert sam.decoder_runs == 1  # twenty boxes, one decoder run


def test_a_prompt_the_decoder_cannot_take_is_dropped_with_the_reason(runners):
    frame = image("coffee.png")
    points_only = segmenter(runners, "hf-vision_encoder.onnx", "hf-prompt_encoder_mask_decoder.onnx")
    result = points_only.segment(0, frame, [Prompt(box=(1.0, 2.0, 30.0, 40.0)), Prompt(points=((50.0, 60.0, 1),))])
    assert len(result.masks) == 1 and result.dropped == 1
    assert "input_boxes" in result.problems[0]
    broken = points_only.segment(0, frame, [Prompt(points=((float("nan"), 1.0, 1),)), Prompt(), Prompt()])
    assert broken.dropped == 3 and len(broken.problems) == 2 and not broken.masks


def test_a_box_with_points_goes_through_meta_and_sam2(runners):
    """A box and a point in one prompt (Meta: the point, then the corners, no padding point; SAM2 likewise, its
    padding inside): a mask unlike the box alone's."""
    frame = image("astronaut.png")
    box = (140.0, 20.0, 340.0, 240.0)
    for encoder, decoder in (("meta-encoder.onnx", "meta-decoder.onnx"), ("sam2-encoder.onnx", "sam2-decoder.onnx")):
        sam = segmenter(runners, encoder, decoder)
        alone, both = sam.segment(0, frame, [Prompt(box=box), Prompt(box=box, points=((300.0, 200.0, 0),))]).masks
        assert iou(alone.mask.full(), both.mask.full()) < 0.99


def _runner(path: Path) -> OnnxRunner:
    return OnnxRunner(path, ProviderConfig(), logging.getLogger("test"))


def _meta_like_decoder(path: Path, channels: int) -> None:
    """A graph with Meta's decoder inputs and outputs (no real decoding: it is refused before it runs)."""
    inputs = [
        helper.make_tensor_value_info("image_embeddings", TensorProto.FLOAT, [1, channels, 64, 64]),
        helper.make_tensor_value_info("point_coords", TensorProto.FLOAT, [1, "num_points", 2]),
        helper.make_tensor_value_info("point_labels", TensorProto.FLOAT, [1, "num_points"]),
        helper.make_tensor_value_info("mask_input", TensorProto.FLOAT, [1, 1, 256, 256]),
        helper.make_tensor_value_info("has_mask_input", TensorProto.FLOAT, [1]),
        helper.make_tensor_value_info("orig_im_size", TensorProto.FLOAT, [2]),
    ]
    outputs = [
        helper.make_tensor_value_info("masks", TensorProto.FLOAT, [1, 1, 256, 256]),
        helper.make_tensor_value_info("iou_predictions", TensorProto.FLOAT, [1]),
        helper.make_tensor_value_info("low_res_masks", TensorProto.FLOAT, [1, 1, 256, 256]),
    ]
    nodes = [
        helper.make_node("Identity", ["mask_input"], ["masks"]),
        helper.make_node("Identity", ["has_mask_input"], ["iou_predictions"]),
        helper.make_node("Identity", ["mask_input"], ["low_res_masks"]),
    ]
    graph = helper.make_graph(nodes, "meta_like", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
