#!/usr/bin/env python3
"""Instance mask decoding: models/masks.py's ``instance_masks`` against Ultralytics' own mask processing, same run.

    YOLO_OFFLINE=1 YOLO_CONFIG_DIR=/tmp/ul_config PYTHONPATH=. /tmp/ul_venv/bin/python benchmarks/bench_masks.py

N detections (default 30) on a 1280x720 frame from a 640x640 YOLOv8-seg (prototypes [32, 160, 160]), prototypes
and coefficients seeded random, boxes 40-250 px. Timed, p50 and p90 over --rounds after a warm-up, one thread each
(torch.set_num_threads(1); NumPy's BLAS as it is): ours (masks at the frame's size, each kept as its box's pixels)
and our instance label image; Ultralytics' ``process_mask_native`` (masks at the frame's size, what
``retina_masks=True`` gives: the same masks) and ``process_mask(upsample=True)`` (its default predict path: masks at
the 640x640 input size, not the frame's). Run it in the scratch venv of benchmarks/ultralytics_seg_reference.py
(Ultralytics and PyTorch, which the project does not depend on); without them only ours is timed. It is a
benchmark, not a test: nothing is asserted. Results: benchmarks/README.md, "Instance masks".

``--heads`` (after the masks above) times a whole segmentation post-processing, ``YoloDetector.decode`` on a
640x640 model's outputs for a 1280x720 frame (boxes mapped back, masks, and the ``~/masks`` label image), for both
heads: the raw YOLOv8-seg head ([1, 4 + 80 + 32, 8400]: 30 objects, each found by 10 overlapping anchors, so that
NMS has 300 candidates to thin) and the end-to-end YOLO26-seg head ([1, 300, 6 + 32]: 30 rows above the
threshold); Ultralytics' own for each (``non_max_suppression``, end2end for the rows, ``scale_boxes``,
``process_mask_native`` and its empty-mask filter: its ``retina_masks`` predict path) in the same run. Then the
post-processing alone (``decode``) of the two trained shapes detectors (../shared/models: the raw
shapes-yolov8n.onnx and the end-to-end shapes-yolo26n.onnx) on the outputs of shapes-seg-val images, at the nodes'
confidence 0.25 and at 0.001 (COCO evaluation's): the end-to-end rows need no NMS.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import numpy as np

from vision_factory.models.masks import instance_masks
from vision_factory.results.masks import label_image

FRAME = (720, 1280)
PROTOTYPES = (32, 160, 160)


def timed(function, rounds: int) -> tuple[float, float]:
    for _ in range(3):
        function()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.percentile(times, 50)), float(np.percentile(times, 90))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detections", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--heads", action="store_true", help="also whole post-processing of both heads (above)")
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    prototypes = rng.standard_normal(PROTOTYPES).astype(np.float32)
    coefficients = rng.standard_normal((args.detections, PROTOTYPES[0])).astype(np.float32)
    corner = rng.uniform((0, 0), (FRAME[1] - 40, FRAME[0] - 40), (args.detections, 2))
    size = rng.uniform(40, 250, (args.detections, 2))
    boxes = np.concatenate([corner, np.minimum(corner + size, (FRAME[1], FRAME[0]))], axis=1).astype(np.float32)

    rows = {}
    rows["ours: instance_masks (frame size)"] = timed(
        lambda: instance_masks(prototypes, coefficients, boxes, FRAME), args.rounds
    )
    masks = instance_masks(prototypes, coefficients, boxes, FRAME)
    rows["ours: label image (mono16)"] = timed(lambda: label_image(masks, FRAME), args.rounds)
    try:
        import torch
        from ultralytics.utils import ops
    except ImportError:
        print("Ultralytics or PyTorch not installed: only ours is timed")
    else:
        torch.set_num_threads(1)
        protos_t, coefficients_t, boxes_t = map(torch.from_numpy, (prototypes, coefficients, boxes))
        # Its boxes for process_mask are in the 640x640 input: the frame's scaled by 0.5 and shifted down by 140.
        input_boxes = boxes_t * 0.5 + torch.tensor([0, 140, 0, 140])
        rows["Ultralytics: process_mask_native (frame size)"] = timed(
            lambda: ops.process_mask_native(protos_t, coefficients_t, boxes_t, FRAME), args.rounds
        )
        rows["Ultralytics: process_mask upsample (640x640 input)"] = timed(
            lambda: ops.process_mask(protos_t, coefficients_t, input_boxes, (640, 640), upsample=True), args.rounds
        )
        theirs = ops.process_mask_native(protos_t, coefficients_t, boxes_t, FRAME).numpy() > 0
        ious = [(mask.full() & their).sum() / max((mask.full() | their).sum(), 1) for mask, their in zip(masks, theirs)]
        print(f"mask IoU ours vs process_mask_native: min {min(ious):.4f}, mean {np.mean(ious):.4f}")
    print(f"{args.detections} detections, frame {FRAME[1]}x{FRAME[0]}, prototypes {PROTOTYPES}")
    for name, (p50, p90) in rows.items():
        print(f"  {name}: p50 {p50:.2f} ms, p90 {p90:.2f} ms")
    ours = rows["ours: instance_masks (frame size)"][0]
    for name, (p50, _) in rows.items():
        if name.startswith("Ultralytics"):
            print(f"  ratio {name} / ours: {p50 / ours:.1f}x")
    if args.heads:
        heads(args.detections, args.rounds)
        shapes_detectors(args.shared, args.rounds)


CLASSES, ANCHORS, ROWS, INPUT = 80, 8400, 300, 640


def constant_model(path: Path, outputs: dict[str, np.ndarray], metadata: dict[str, str]) -> Path:
    """An ONNX model of a 640x640 image input whose outputs are these constants, with this metadata."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name + "_value"))
        for name, value in outputs.items()
    ]
    graph = helper.make_graph(
        nodes,
        "constant",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, INPUT, INPUT])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(value.shape)) for name, value in outputs.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    for key, value in metadata.items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, path)
    return path


def seg_outputs(count: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 640x640 segmentation model's outputs for ``count`` objects on a 1280x720 frame (letterboxed: y 140..500):
    the raw head [1, 4 + 80 + 32, 8400] (10 overlapping anchors an object), the end-to-end rows [1, 300, 38], and
    the prototypes [1, 32, 160, 160]."""
    prototypes = rng.standard_normal((1, *PROTOTYPES)).astype(np.float32)
    centre = rng.uniform((40, 180), (600, 460), (count, 2))
    size = rng.uniform(20, 125, (count, 2))
    classes = rng.integers(0, CLASSES, count)
    coefficients = rng.standard_normal((count, PROTOTYPES[0])).astype(np.float32)
    raw = np.zeros((4 + CLASSES + PROTOTYPES[0], ANCHORS), np.float32)
    raw[4 : 4 + CLASSES] = rng.uniform(0, 0.05, (CLASSES, ANCHORS))
    for index in range(count):
        anchors = slice(index * 10, index * 10 + 10)
        raw[0:2, anchors] = (centre[index] + rng.normal(0, 0.5, (10, 2))).T
        raw[2:4, anchors] = (size[index] * rng.uniform(0.97, 1.03, (10, 2))).T
        raw[4 + classes[index], anchors] = rng.uniform(0.5, 0.95, 10)
        raw[4 + CLASSES :, anchors] = coefficients[index][:, None]
    rows = np.zeros((ROWS, 6 + PROTOTYPES[0]), np.float32)
    rows[:count, 0:2], rows[:count, 2:4] = centre - size / 2, centre + size / 2
    rows[:count, 4], rows[:count, 5] = np.sort(rng.uniform(0.5, 0.95, count))[::-1], classes
    rows[:count, 6:] = coefficients
    rows[count:, 4] = rng.uniform(0, 0.05, ROWS - count)
    return raw[None], rows[None], prototypes


def heads(count: int, rounds: int) -> None:
    """Segmentation post-processing per 1280x720 frame, both heads, ours and Ultralytics'."""
    from vision_factory.models.yolo import YoloDetector
    from vision_factory.results.masks import label_image
    from vision_factory.runtime.onnx_runner import OnnxRunner

    rng = np.random.default_rng(1)
    raw, rows, prototypes = seg_outputs(count, rng)
    names = str({index: f"class_{index}" for index in range(CLASSES)})
    frame = np.zeros((*FRAME, 3), np.uint8)
    results = {}
    with tempfile.TemporaryDirectory() as work:
        models = {
            "raw (YOLOv8-seg)": constant_model(
                Path(work) / "raw.onnx", {"output0": raw, "output1": prototypes}, {"task": "segment", "names": names}
            ),
            "end-to-end (YOLO26-seg)": constant_model(
                Path(work) / "e2e.onnx",
                {"output0": rows, "output1": prototypes},
                {"task": "segment", "names": names, "end2end": "True"},
            ),
        }
        for head, path in models.items():
            detector = YoloDetector(OnnxRunner.load(path, {}, logging.getLogger("bench")))
            tensor, fit = detector.preprocess(frame)
            output = detector.infer(tensor)
            found = detector.decode(output, fit)

            def post(detector=detector, output=output, fit=fit):
                label_image(detector.decode(output, fit).masks.masks, FRAME)

            results[f"ours, {head}: decode, masks, label image ({len(found)} detections)"] = timed(post, rounds)
    try:
        import torch
        from ultralytics.utils import nms, ops
    except ImportError:
        print("Ultralytics or PyTorch not installed: only ours is timed")
    else:
        torch.set_num_threads(1)
        protos_t = torch.from_numpy(prototypes[0])

        def theirs(prediction, end2end):
            (pred,) = nms.non_max_suppression(prediction, 0.25, 0.7, max_det=300, nc=CLASSES, end2end=end2end)
            pred[:, :4] = ops.scale_boxes((INPUT, INPUT), pred[:, :4], FRAME)
            masks = ops.process_mask_native(protos_t, pred[:, 6:], pred[:, :4], FRAME)
            keep = masks.amax((-2, -1)) > 0
            return pred[keep], masks[keep]

        raw_t, rows_t = torch.from_numpy(raw), torch.from_numpy(rows)
        results["Ultralytics, raw (YOLOv8-seg): NMS, scale_boxes, process_mask_native"] = timed(
            lambda: theirs(raw_t, False), rounds
        )
        results["Ultralytics, end-to-end (YOLO26-seg): rows, scale_boxes, process_mask_native"] = timed(
            lambda: theirs(rows_t, True), rounds
        )
    print(f"segmentation post-processing, {count} objects, 640x640 model, frame {FRAME[1]}x{FRAME[0]}")
    for name, (p50, p90) in results.items():
        print(f"  {name}: p50 {p50:.2f} ms, p90 {p90:.2f} ms")


def shapes_detectors(shared: Path, rounds: int) -> None:
    """decode alone of the raw and the end-to-end trained shapes detectors, on their outputs for real images."""
    import cv2

    from vision_factory.models.yolo import YoloDetector
    from vision_factory.runtime.onnx_runner import OnnxRunner

    models = {"raw (shapes-yolov8n)": "shapes-yolov8n.onnx", "end-to-end (shapes-yolo26n)": "shapes-yolo26n.onnx"}
    images = sorted((shared / "data" / "shapes-seg-val" / "images").glob("*.jpg"))[:10]
    if not images or not all((shared / "models" / name).is_file() for name in models.values()):
        print(f"the shapes models or shapes-seg-val are not under {shared}: skipped")
        return
    frames = [cv2.imread(str(path)) for path in images]
    print(f"decode alone per frame, {len(frames)} shapes-seg-val images (p50 of the per-image p50s)")
    for confidence in (0.25, 0.001):
        for head, name in models.items():
            runner = OnnxRunner.load(shared / "models" / name, {}, logging.getLogger("bench"))
            detector = YoloDetector(runner, confidence=confidence)
            medians, counts = [], []
            for frame in frames:
                tensor, fit = detector.preprocess(frame)
                output = detector.infer(tensor)
                counts.append(len(detector.decode(output, fit)))
                medians.append(timed(lambda d=detector, o=output, f=fit: d.decode(o, f), rounds)[0])
            print(
                f"  conf {confidence}, {head}: p50 {np.median(medians):.3f} ms "
                f"({np.mean(counts):.1f} detections a frame)"
            )


if __name__ == "__main__":
    main()
