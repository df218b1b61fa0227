#!/usr/bin/env python3
"""INT8 where it helps, for open-vocabulary detection on 2 CPU cores: the architecture-true Grounding DINO-T and
OWLv2-B/16 exports of bench_open_vocab.py (transformers' own classes, seeded weights) in INT8 against the FP32 file,
in the same run.

The exports are bench_open_vocab.py's (``export`` step, in /work/export_venv; 1.3 GB under /tmp); then, in the
project's venv:

    python benchmarks/bench_open_vocab_int8.py [--out /tmp/open_vocab_bench] [--only grounding-dino-t] \\
        [--variants openvino-int8,onnx-dynamic] [--threads 2] [--runs 3] [--frames 2]

For each model: the calibration feeds are those quantize records (tools/quantize_calibration.py: the node's own
pre-processing and the prompt's tokens, ``PROMPT``) on the first ``--frames`` of ``CALIBRATION`` (skimage.data), then
each variant is written: ``onnx-int8`` and ``openvino-int8`` by quantize's own conversions (tools/quantize_backends.py:
ONNX Runtime static QDQ, NNCF; the float tail: the heads' last linear layers and what follows, masks' fills in float),
``onnx-int8-image`` the same with the text tower kept in float too (the nodes named after it), and ``onnx-dynamic``,
not quantize's, ONNX Runtime's dynamic INT8 of the MatMuls (no calibration). Each is timed on the same recorded feeds in
turn with the FP32 file on ONNX Runtime and on OpenVINO (``openvino-fp32``; quantize_choice.timed_in_turn: median of
``--runs`` after warm-ups; ratio = ONNX Runtime FP32 ms / its ms, > 1 is faster), then run through the family's adapter
on ``AGREEMENT`` (skimage.data, other images than the calibration's) with ``PROMPT`` at confidence ``--conf``: each
FP32 detection matched to the INT8 detection of the same phrase with the highest IoU (>= 0.5, each used once); the
matched count, their median and largest score difference and box IoU. The seeded weights find nothing real: AP on a
data set means nothing for them; the agreement of the two files does (how far INT8 moves the same computation). The
tokenizers are the committed test ones (test/data/open_vocab: built locally, their ids valid for the full
vocabularies). A benchmark, not a test; on a shared machine give ``uptime``'s load with its figures. Memory: the
static calibrations (onnx-int8, openvino-int8) of Grounding DINO-T at 800x1066 outgrew 15 to 19 GB here.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODELS = {  # file under --out -> its tokenizer, and the names of its text tower's nodes
    "grounding-dino-t": (ROOT / "test/data/open_vocab/grounding_dino/vocab.txt", ("text_backbone", "text_projection")),
    "owlv2-b16": (ROOT / "test/data/open_vocab/owl/tokenizer.json", ("text_model", "text_projection")),
}
PROMPT = "a person . a cat . a rocket . a cup"
CALIBRATION = ("astronaut", "coffee")
AGREEMENT = ("chelsea", "rocket", "camera")


def frames(names) -> list[np.ndarray]:
    import cv2
    import skimage.data

    images = [getattr(skimage.data, name)() for name in names]
    return [cv2.cvtColor(image, cv2.COLOR_GRAY2BGR if image.ndim == 2 else cv2.COLOR_RGB2BGR) for image in images]


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of each box of ``a`` [N, 4] with each of ``b`` [M, 4] (xyxy)."""
    low, high = np.maximum(a[:, None, :2], b[None, :, :2]), np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(high - low, 0, None), axis=2)
    area = lambda boxes: np.prod(boxes[:, 2:] - boxes[:, :2], axis=1)  # noqa: E731
    return inter / (area(a)[:, None] + area(b)[None, :] - inter + 1e-9)


def agreement(reference, quantized, images) -> dict[str, float]:
    """FP32 detections matched to INT8 ones (same phrase, IoU >= 0.5, greedy by IoU): counts and differences."""
    found = matched = 0
    extra = 0
    scores, ious = [], []
    for image in images:
        a, b = reference.detect(image).boxes, quantized.detect(image).boxes
        found += len(a)
        extra += len(b)
        if not len(a) or not len(b):
            continue
        overlap = iou(np.asarray(a.xyxy, float), np.asarray(b.xyxy, float))
        overlap[np.asarray(a.class_ids)[:, None] != np.asarray(b.class_ids)[None, :]] = 0
        used: set[int] = set()
        for row in np.argsort(-overlap.max(axis=1)):
            column = next((c for c in np.argsort(-overlap[row]) if c not in used and overlap[row, c] >= 0.5), None)
            if column is None:
                continue
            used.add(int(column))
            matched += 1
            scores.append(abs(float(a.scores[row]) - float(b.scores[column])))
            ious.append(float(overlap[row, column]))
    return {
        "fp32": found,
        "int8": extra,
        "matched": matched,
        "score_diff_median": float(np.median(scores)) if scores else float("nan"),
        "score_diff_max": float(max(scores)) if scores else float("nan"),
        "iou_median": float(np.median(ious)) if ious else float("nan"),
    }


def raw_agreement(model: Path, made: dict, feeds: list[dict[str, np.ndarray]]) -> dict[str, dict[str, float]]:
    """Per query (Grounding DINO's 900, OWLv2's 3600 patches), before any threshold: the difference of its score (the
    sigmoid of its highest logit) and of its box (pred_boxes in the model input's pixels: the largest of its four
    coordinates' differences) between the FP32 file and each of ``made``, over ``feeds``: median, 99th percentile
    and largest. The seeded weights' scores crowd together, so the thresholded detections' order (and which of them
    a cut keeps) moves with any rounding: this is the measure of how far INT8 moves the computation."""
    from vision_factory.runtime.backends import load_target

    def outputs(target: str, path: Path) -> list[tuple[np.ndarray, np.ndarray]]:
        runner = load_target(target, path)
        names = [info.name for info in runner.outputs]
        found = []
        for feed in feeds:
            values = dict(zip(names, runner.run(feed)))
            logits = next(values[key] for key in values if "logits" in key).astype(np.float64)
            boxes = next(values[key] for key in values if "boxes" in key).astype(np.float64)
            height, width = next(value for key, value in feed.items() if "pixel" in key or key == "inputs").shape[2:]
            found.append((1 / (1 + np.exp(-logits.max(axis=-1))), boxes * [width, height, width, height]))
        return found

    reference = outputs("onnx:cpu", model)
    rows = {}
    for variant, (target, path) in made.items():
        pairs = list(zip(reference, outputs(target, path)))
        scores = np.concatenate([np.abs(a[0] - b[0]).ravel() for a, b in pairs])
        boxes = np.concatenate([np.abs(a[1] - b[1]).max(axis=-1).ravel() for a, b in pairs])
        rows[variant] = {
            "score": tuple(float(np.percentile(scores, q)) for q in (50, 99, 100)),
            "box_px": tuple(float(np.percentile(boxes, q)) for q in (50, 99, 100)),
        }
    return rows


def run(name: str, out: Path, args) -> list[str]:
    import cv2
    import onnx

    from vision_factory.runtime.cpu import this_cpu
    from vision_factory.tools.predict import detector_from_options
    from vision_factory.tools.quantize_backends import (
        float_tail,
        named_nodes,
        onnx_int8,
        openvino_model,
        save_openvino,
    )
    from vision_factory.tools.quantize_calibration import calibration_inputs
    from vision_factory.tools.quantize_choice import timed_in_turn

    model = out / f"{name}.onnx"
    tokenizer, text_tower = MODELS[name]
    options = {"--prompt": PROMPT, "--tokenizer": str(tokenizer)}
    avx2 = this_cpu() == "avx2"
    rows = []
    with tempfile.TemporaryDirectory(prefix="vf_bench_int8_") as work:
        work = Path(work)
        folder = work / "calibration"
        folder.mkdir()
        for index, frame in enumerate(frames(CALIBRATION[: args.frames])):
            cv2.imwrite(str(folder / f"{index}.png"), frame)
        start = time.perf_counter()
        feeds, _ = calibration_inputs("open_vocab", model, folder, args.frames, options)
        print(f"{name}: {len(feeds)} calibration feeds in {time.perf_counter() - start:.0f} s", flush=True)
        made: dict[str, tuple[str, Path]] = {"openvino-fp32": ("openvino:CPU", model)}
        for variant in args.variants.split(","):
            start = time.perf_counter()
            path = work / f"{name}-{variant}.onnx"
            if variant == "onnx-int8":  # quantize --backend onnx: static QDQ (its calibration holds every tensor)
                how, kept = onnx_int8(model, path, feeds, "minmax", True, avx2)
            elif variant == "onnx-int8-image":  # the same, the text tower kept in float too
                how, kept = onnx_int8(model, path, feeds, "minmax", True, avx2, text_tower)
            elif variant == "onnx-dynamic":  # not quantize's: ONNX Runtime's dynamic INT8 of the MatMuls
                from onnxruntime.quantization import QuantType, quantize_dynamic

                quantize_dynamic(str(model), str(path), op_types_to_quantize=["MatMul"], weight_type=QuantType.QInt8)
                how, kept = "onnxruntime dynamic INT8 (MatMul weights, activations per run)", []
            elif variant == "openvino-int8":  # quantize --backend openvino: NNCF, the same float tail
                path = work / f"{name}-{variant}.xml"
                named = named_nodes(model, work / "named.onnx")
                kept = float_tail(onnx.load(named, load_external_data=False).graph)
                ov_model, how = openvino_model(named, "int8", feeds, kept, avx2)
                save_openvino(ov_model, path, "int8", {})
                del ov_model
            else:
                raise SystemExit(f"unknown variant {variant}")
            made[variant] = ("openvino:CPU" if variant.startswith("openvino") else "onnx:cpu", path)
            took = time.perf_counter() - start
            print(f"{name} {variant}: {len(kept)} nodes in float; {how} ({took:.0f} s)", flush=True)
        if args.raw_only:  # every query's agreement alone: the least memory (no runners held together)
            made.pop("openvino-fp32")
        speeds = {} if args.raw_only else timed_in_turn(model, made, feeds, args.runs, args.threads)
        images = frames(AGREEMENT)
        folder = work / "agreement"
        folder.mkdir()
        for index, frame in enumerate(images):
            cv2.imwrite(str(folder / f"{index}.png"), frame)
        checks, _ = calibration_inputs("open_vocab", model, folder, len(images), options)
        raw = raw_agreement(model, made, checks)
        if args.raw_only:
            rows += [f"| {name} | {variant} | {raw[variant]} |" for variant in made]
            print("\n".join(rows), flush=True)
            return rows
        given = options | {"--conf": args.conf}
        reference = detector_from_options("open_vocab", model, "onnx:cpu", given)
        for variant, (target, path) in made.items():
            detector = detector_from_options("open_vocab", path, target, given)
            agreed = agreement(reference, detector, images)
            speed = speeds[variant]
            rows.append(
                f"| {name} | {variant} | {speed['fp32_ms']:.0f} | {speed['quantized_ms']:.0f} | {speed['ratio']:.2f}x "
                f"| {agreed['matched']} of {agreed['fp32']} ({agreed['int8']}) | {agreed['score_diff_median']:.3f} / "
                f"{agreed['score_diff_max']:.3f} | {agreed['iou_median']:.3f} | "
                + " / ".join(f"{value:.3f}" for value in raw[variant]["score"])
                + " | "
                + " / ".join(f"{value:.1f}" for value in raw[variant]["box_px"])
                + " |"
            )
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/open_vocab_bench"))
    parser.add_argument(
        "--only", action="append", default=[], help="this model alone (repeatable): " + ", ".join(MODELS)
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--frames", type=int, default=2, help=f"calibration frames, of {', '.join(CALIBRATION)}")
    parser.add_argument("--conf", type=float, default=0.25, help="confidence of the compared detections")
    parser.add_argument(
        "--variants",
        default="openvino-int8,onnx-dynamic",
        help="of openvino-int8, onnx-int8, onnx-int8-image, onnx-dynamic (onnx-int8's calibration of Grounding DINO-T "
        "at 800x1066 took more than 19 GB)",
    )
    parser.add_argument("--raw-only", action="store_true", help="every query's agreement alone: no timing")
    args = parser.parse_args()
    rows = []
    for name in args.only or list(MODELS):
        rows += run(name, args.out, args)
    print(
        f"\n{os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}; {args.threads} threads; median of {args.runs} runs\n"
    )
    print(
        "| model | INT8 | FP32 ms | INT8 ms | ratio | FP32 boxes matched (INT8 boxes) | score diff median / max "
        "| IoU median | every query: score diff median / p99 / max | box diff px median / p99 / max |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
