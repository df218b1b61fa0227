"""The Segment Anything family (families/sam.py) through the tools: `predict --model-type sam` on the architecture-true
test exports (test/data/sam/, benchmarks/make_sam_models.py) gives, as JSON lines, each prompt's mask as COCO RLE at
the image's size with IoU >= 0.95 against transformers' (reference.json: SamProcessor, the model and
post_process_masks on the same files, images and prompts) and its predicted IoU within 0.01; each mask a detection
whose box is the mask's own and whose class is its prompt's; the decoder found beside the encoder; bad prompts and
files refused in one line naming the fix. Real ONNX Runtime sessions, the real CLI in process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
from click.testing import CliRunner
from support.models import SHAPES_MODEL
from test_sam import DATA, REFERENCE, SKIMAGE, decoded, iou

from vision_factory.cli import main
from vision_factory.families.registry import family
from vision_factory.models.sam_detector import parse_prompts
from vision_factory.models.sam_interface import decoder_beside
from vision_factory.parameters import with_defaults
from vision_factory.results.masks import from_rle
from vision_factory.runtime.backends import load_target

IOU_MIN, SCORE_TOLERANCE = 0.95, 0.01
# One case of each model and prompt kind (the first image of each: each runs the encoder at 1024 once).
CASES = {}
for _model in REFERENCE["models"]:
    for _case in _model["cases"]:
        CASES.setdefault((_model["encoder"], _model["decoder"], _case["kind"]), (_model, _case))


def _prompt_options(case: dict) -> list[str]:
    if case["kind"] == "boxes":
        return ["--boxes", ";".join(",".join(f"{v:g}" for v in box) for box in case["prompts"])]
    return ["--points", ";".join(f"{x:g},{y:g},1" for x, y in case["prompts"])]


def _predict(*arguments: str) -> tuple[int, str]:
    done = CliRunner().invoke(main, ["predict", "--model-type", "sam", *arguments])
    return done.exit_code, done.output


@pytest.mark.parametrize("key", sorted(CASES), ids=["-".join((e[:4], d[:-5], k)) for e, d, k in sorted(CASES)])
def test_predict_gives_transformers_masks_as_coco_rle(key):
    model, case = CASES[key]
    image = SKIMAGE / case["image"]
    code, output = _predict(
        "--model", str(DATA / model["encoder"]), "--decoder", str(DATA / model["decoder"]),
        *_prompt_options(case), "--format", "json", str(image),
    )  # fmt: skip
    assert code == 0, output
    (record,) = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    height, width = cv2.imread(str(image)).shape[:2]
    assert (record["width"], record["height"]) == (width, height)
    rows = record["detections"]
    assert [row["class_id"] for row in rows] == list(range(len(case["prompts"])))  # each prompt's mask, in order
    kind = "box" if case["kind"] == "boxes" else "points"
    assert [row["class_name"] for row in rows] == [f"{kind} {i}" for i in range(len(rows))]
    for row, expected in zip(rows, case["masks"]):
        assert row["mask"]["size"] == [height, width]
        mask = from_rle(row["mask"])
        truth = decoded(expected["bits"], (height, width))
        assert iou(mask.full(), truth) >= IOU_MIN, row["class_name"]
        assert row["score"] == pytest.approx(expected["iou_score"], abs=SCORE_TOLERANCE)
        # the box is the mask's own: its pixels' extent, edges exclusive
        ys, xs = np.nonzero(mask.full())
        assert row["xyxy"] == [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]


def test_the_decoder_is_found_beside_the_encoder(tmp_path):
    """vision_encoder.onnx's decoder is prompt_encoder_mask_decoder.onnx beside it; X-encoder.onnx's X-decoder.onnx;
    none beside: refused naming the path looked at and decoder_path."""
    for encoder, decoder in (
        ("vision_encoder.onnx", "prompt_encoder_mask_decoder.onnx"),
        ("mobile_sam.encoder.onnx", "mobile_sam.decoder.onnx"),
        ("sam-encoder-b.onnx", "sam-decoder-b.onnx"),
    ):
        (tmp_path / decoder).write_bytes(b"")
        assert decoder_beside(str(tmp_path / encoder)) == str(tmp_path / decoder)
    assert decoder_beside(str(tmp_path / "a.onnx"), "given.onnx") == "given.onnx"
    with pytest.raises(ValueError, match=r"no .*other-decoder.onnx.*the decoder_path parameter, --decoder\)"):
        decoder_beside(str(tmp_path / "other-encoder.onnx"))
    with pytest.raises(ValueError, match="its name says no 'encoder'"):
        decoder_beside(str(tmp_path / "sam.onnx"))


def test_the_node_takes_the_decoder_beside_the_encoder(tmp_path):
    """The family's build with decoder_path empty: the Meta pair copied as sam-encoder.onnx / sam-decoder.onnx."""
    for part in ("encoder", "decoder"):
        shutil.copy(DATA / f"meta-{part}.onnx", tmp_path / f"sam-{part}.onnx")
    spec = family("sam")
    values = with_defaults(spec.parameters, {"model_path": str(tmp_path / "sam-encoder.onnx")}, "sam")
    loaded = []
    detector = spec.build(values, lambda path: loaded.append(path) or load_target("onnx:cpu", Path(path)))
    assert loaded == [str(tmp_path / "sam-encoder.onnx"), str(tmp_path / "sam-decoder.onnx")]
    assert detector.sam.layout.layout == "meta"


def test_a_rebuild_on_the_same_runners_keeps_the_segmenter_and_a_dropped_detector_frees_its_sessions(tmp_path):
    """A live change builds the adapter again on the loaded runners: the same segmenter (its cached embeddings); once
    no detector holds it, the encoder and decoder sessions go (a map keyed by the encoder once kept every load's
    sessions for ever: 480 MB each time predict ran in one process)."""
    import gc
    import weakref

    spec = family("sam")
    values = with_defaults(spec.parameters, {"model_path": str(DATA / "meta-encoder.onnx")}, "sam")
    values["decoder_path"] = str(DATA / "meta-decoder.onnx")
    runners = {}

    def load(path: str):
        return runners.setdefault(path, load_target("onnx:cpu", Path(path)))  # loaded once, as a node's live change

    first = spec.build(values, load)
    again = spec.build({**values, "max_prompts": 7}, load)
    assert again.sam is first.sam and again.sam.max_prompts == 7
    sessions = [weakref.ref(runner) for runner in runners.values()]
    del first, again, load
    runners.clear()
    gc.collect()
    assert [ref() for ref in sessions] == [None, None]


@pytest.mark.parametrize(
    "arguments,named",
    [
        ([], "give --boxes or --points"),
        (["--boxes", "10,20,5,40"], "x1 < x2"),
        (["--boxes", "1,2,3"], "x1,y1,x2,y2"),
        (["--points", "10,20,7"], "label 1"),
        (["--points", "10,nan,1"], "finite"),
        (["--points", "a,b"], "numbers separated by commas"),
    ],
)
def test_bad_prompts_are_refused_in_one_line(arguments, named):
    image = SKIMAGE / "coffee.png"
    model = ["--model", str(DATA / "meta-encoder.onnx"), "--decoder", str(DATA / "meta-decoder.onnx")]
    code, output = _predict(*model, *arguments, str(image))
    assert code != 0 and named in output and "Traceback" not in output, output


def test_a_missing_decoder_and_prompts_for_a_detector_are_refused(tmp_path):
    encoder = tmp_path / "sam-encoder.onnx"
    shutil.copy(DATA / "meta-encoder.onnx", encoder)
    code, output = _predict("--model", str(encoder), "--boxes", "1,2,30,40", str(SKIMAGE / "coffee.png"))
    assert code != 0 and "sam-decoder.onnx" in output and "decoder_path" in output and "Traceback" not in output
    yolo = ["predict", "--model-type", "yolo", "--model", str(SHAPES_MODEL), "--boxes", "1,2,3,4"]
    done = CliRunner().invoke(main, [*yolo, str(SKIMAGE / "coffee.png")])
    assert done.exit_code != 0 and "yolo models take no boxes prompts" in done.output, done.output
    assert "Traceback" not in done.output


def test_prompts_parse_as_documented():
    box, clicks, single = parse_prompts("10,20,30,40", "5,6,1+7,8,0;9,10")
    assert box.box == (10.0, 20.0, 30.0, 40.0) and (box.class_id, box.class_name) == (0, "box 0")
    assert clicks.points == ((5.0, 6.0, 1), (7.0, 8.0, 0)) and clicks.class_name == "points 1"
    assert single.points == ((9.0, 10.0, 1),) and single.class_id == 2


def test_eval_gives_the_mean_iou_of_each_truth_mask_with_the_mask_its_box_prompted(tmp_path):
    """eval's mask_mIoU: truth built from predict's own masks for three boxes (as written, COCO RLE), one kept whole,
    one with its lower half cleared, one a rectangle polygon: each instance's IoU with the mask its box prompts is
    pycocotools' maskUtils.iou of the two, computed here apart; a box whose prompt gives no mask counts 0."""
    from pycocotools import mask as mask_utils

    model, case = CASES[("meta-encoder.onnx", "meta-decoder.onnx", "boxes")]
    encoder, decoder = str(DATA / model["encoder"]), str(DATA / model["decoder"])
    image = SKIMAGE / case["image"]
    height, width = cv2.imread(str(image)).shape[:2]
    code, output = _predict("--model", encoder, "--decoder", decoder, *_prompt_options(case), "--format", "json",
                            str(image))  # fmt: skip
    assert code == 0, output
    (record,) = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    written = [row["mask"] for row in record["detections"]]
    assert [row["class_name"] for row in record["detections"]] == ["box 0", "box 1", "box 2"]  # none empty
    halved = mask_utils.decode(written[1]).copy()
    halved[height // 2 :] = 0
    halved_rle = mask_utils.encode(np.asfortranarray(halved))
    x1, y1, x2, y2 = case["prompts"][2]
    rectangle = [[x1, y1, x2, y1, x2, y2, x1, y2]]
    segmentations = [written[0], {**halved_rle, "counts": halved_rle["counts"].decode()}, rectangle]
    truth_rles = [written[0], halved_rle, mask_utils.frPyObjects(rectangle, height, width)[0]]
    boxes = [*case["prompts"], [0.0, 0.0, 1.0, 1.0]]  # a fourth box: a pixel wide, beside no object
    corner = [[0, 0, 1, 0, 1, 1, 0, 1]]
    corner_rle = mask_utils.frPyObjects(corner, height, width)[0]
    annotations = [
        {"id": index + 1, "image_id": 1, "category_id": 1, "bbox": [x1, y1, x2 - x1, y2 - y1], "iscrowd": 0,
         "area": float(mask_utils.area(rle)), "segmentation": segmentation}
        for index, ((x1, y1, x2, y2), segmentation, rle) in enumerate(
            zip(boxes, [*segmentations, corner], [*truth_rles, corner_rle], strict=True)
        )
    ]  # fmt: skip
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(image, data / image.name)
    truth = {"images": [{"id": 1, "file_name": image.name, "width": width, "height": height}],
             "categories": [{"id": 1, "name": "thing"}], "annotations": annotations}  # fmt: skip
    (data / "annotations.json").write_text(json.dumps(truth))
    done = CliRunner().invoke(main, ["eval", "--model-type", "sam", "--model", encoder, "--decoder", decoder,
                                     "--data", str(data), "--out", str(tmp_path / "out")])  # fmt: skip
    assert done.exit_code == 0, done.output
    metrics = json.loads((tmp_path / "out" / "eval.json").read_text())["metrics"]
    found = json.loads((tmp_path / "out" / "predictions.json").read_text())
    expected = [float(mask_utils.iou([mine], [truth], [0])[0][0]) for mine, truth in zip(written, truth_rles)]
    assert expected[0] == pytest.approx(1.0) and 0.0 < expected[1] < 1.0 and 0.0 < expected[2] < 1.0
    assert len(found) in (3, 4)  # the pixel box's mask, where it is not empty, is the fourth
    fourth = float(mask_utils.iou([found[3]["segmentation"]], [corner_rle], [0])[0][0]) if len(found) == 4 else 0.0
    assert metrics["mask_mIoU"] == pytest.approx((sum(expected) + fourth) / 4, abs=1e-6), metrics
    assert {"mask_AP", "mask_AP50", "AP"} <= set(metrics)
