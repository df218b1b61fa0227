#!/usr/bin/env python3
"""What Segment Anything costs on 2 CPU cores: the image encoder once a frame against the decoder per batch of box
prompts, with full-size architecture-true models (weights seeded, not trained: the cost is the architecture's).

Two steps, in two venvs (the export needs PyTorch, which the project's venv never has):

    # 1. export, in the scratch venv of benchmarks/make_sam_models.py (large files, under /tmp, never committed)
    HF_HUB_OFFLINE=1 /work/export_venv/bin/python benchmarks/bench_sam.py export --out /tmp/sam_bench
    # 2. time, in the project's venv (ONNX Runtime, and OpenVINO where it loads them)
    PYTHONPATH=. python benchmarks/bench_sam.py time --models /tmp/sam_bench [--rounds 5] [--threads 2]

Models (the Hugging Face split, as optimum exports it: vision_encoder.onnx, prompt_encoder_mask_decoder.onnx taking
input_boxes [1, B, 4]), made by transformers' SamModel:

- ``vit_b``: SAM ViT-B (SamConfig's defaults: a ViT of width 768, 12 layers, global attention at 2, 5, 8, 11; the
  256-channel prompt encoder and mask decoder), 89.7 M parameters in its encoder;
- ``small``: a MobileSAM-sized SAM (6.7 M parameters in its encoder, TinyViT-5M's 5.7 M: a ViT of width 256, 6
  layers, global attention at 1, 3, 5; the same decoder). Not MobileSAM's TinyViT, which transformers does not have:
  a stand-in of its size.

Timed through models/sam.py's SamSegmenter (pre-processing of a 640x480 frame, the runs, masks back to the frame):
the encoder (a new frame each round), and the decoder for 1, 5 and 20 boxes on the cached frame (one run, the
boxes batched); the fastest of --rounds (the least disturbed on a shared machine). Then, per frame with 20 boxes:
this package (encode once + one decoder run) against a fused graph run per prompt message as Isaac ROS's is (the
encoder and a 1-box decoder per box). The decoder's own run is timed apart from the masks' way back to the frame.
``intra_op_threads`` / ``inference_threads`` --threads. It is a benchmark: nothing is asserted. Results:
benchmarks/README.md, "Segment Anything: encoder once a frame".
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path

import numpy as np

SIZES = {
    "vit_b": {},  # SamConfig's defaults are SAM ViT-B's
    "small": {
        "hidden_size": 256,
        "num_hidden_layers": 6,
        "num_attention_heads": 8,
        "global_attn_indexes": [1, 3, 5],
        "mlp_dim": 1024,
    },
}
BOXES = (1, 5, 20)
FRAME = (480, 640)


def export(out: Path, sizes: list[str]) -> None:
    """The sizes exported as make_sam_models.py exports its Hugging Face split (the boxes decoder)."""
    import torch
    from sam_exports import export_hf_boxes_decoder, export_hf_encoder
    from transformers import SamConfig, SamModel, SamVisionConfig

    for name in sizes:
        vision = SIZES[name]
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(0)
        model = SamModel(SamConfig(vision_config=SamVisionConfig(**vision))).eval()
        parameters = sum(p.numel() for p in model.vision_encoder.parameters())
        embeddings = export_hf_encoder(model, folder / "vision_encoder.onnx")
        export_hf_boxes_decoder(model, embeddings, folder / "prompt_encoder_mask_decoder.onnx")
        (folder / "made.json").write_text(json.dumps({"encoder_parameters": parameters}) + "\n")
        print(f"{name}: encoder {parameters / 1e6:.1f} M parameters -> {folder}")


def fastest(call, rounds: int) -> float:
    """The fastest of ``rounds`` calls, in ms."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def runners(folder: Path, backend: str, threads: int):
    logger = logging.getLogger("bench_sam")
    if backend == "onnx":
        from vision_factory.runtime.onnx_runner import OnnxRunner
        from vision_factory.runtime.providers import ProviderConfig

        config = ProviderConfig(intra_op_threads=threads, inter_op_threads=1)
        return (
            OnnxRunner(folder / f, config, logger) for f in ("vision_encoder.onnx", "prompt_encoder_mask_decoder.onnx")
        )
    from vision_factory.runtime.openvino_runner import OpenVinoRunner

    return (
        OpenVinoRunner(folder / f, cache_dir=str(folder / "openvino_cache"), inference_threads=threads)
        for f in ("vision_encoder.onnx", "prompt_encoder_mask_decoder.onnx")
    )


def time_models(models: Path, rounds: int, threads: int) -> None:
    import skimage.data

    from vision_factory.models.sam import Prompt, SamSegmenter

    frame = np.ascontiguousarray(skimage.data.coffee()[:, :, ::-1])
    import cv2

    frame = cv2.resize(frame, FRAME[::-1], interpolation=cv2.INTER_AREA)
    rng = np.random.default_rng(0)
    corners = rng.uniform(0, 1, (max(BOXES), 2, 2)) * np.array(FRAME[::-1])
    boxes = [Prompt(box=(*c.min(axis=0), *c.max(axis=0)), id=str(i)) for i, c in enumerate(corners)]
    print(
        f"{os.cpu_count()} CPUs seen, {threads} threads a session; load {os.getloadavg()[0]:.1f}; fastest of {rounds}"
    )
    for name in SIZES:
        folder = models / name
        for backend in ("onnx", "openvino"):
            try:
                encoder, decoder = runners(folder, backend, threads)
                sam = SamSegmenter(encoder, decoder, str(folder / "vision_encoder.onnx"), "decoder", max_prompts=20)
            except Exception as error:  # a backend that cannot load them: said, the others timed
                print(f"{name} {backend}: not loaded ({type(error).__name__}: {str(error)[:200]})")
                continue
            frames = iter(range(10**6))
            sam.segment(-1, frame, boxes[:1])  # warm-up
            encode = fastest(lambda sam=sam, frames=frames: sam.encode(next(frames), frame), rounds)
            decode, runs = {}, {}
            for count in BOXES:
                sam.segment("cached", frame, boxes[:1])
                timed = Timed(sam.decoder)
                sam.decoder = timed
                decode[count] = fastest(lambda sam=sam, n=count: sam.segment("cached", frame, boxes[:n]), rounds)
                runs[count] = min(timed.times)
                sam.decoder = timed.runner
            ours = encode + decode[20]
            fused = 20 * (encode + decode[1])
            print(
                f"{name} {backend}: encoder {encode:.0f} ms; decoder {decode[1]:.1f} ms for 1 box, {decode[5]:.1f} "
                f"for 5, {decode[20]:.1f} for 20 ({decode[20] / 20:.1f} a box; the decoder's run {runs[1]:.1f}, "
                f"{runs[5]:.1f}, {runs[20]:.1f} of them, the rest the masks back to the frame); a frame of 20 boxes "
                f"{ours:.0f} ms encoded once, {fused:.0f} ms as a fused graph per prompt ({fused / ours:.1f}x)"
            )


class Timed:
    """A runner whose runs are timed (ms each)."""

    def __init__(self, runner):
        self.runner, self.times = runner, []

    def run(self, feeds):
        start = time.perf_counter()
        outputs = self.runner.run(feeds)
        self.times.append((time.perf_counter() - start) * 1000)
        return outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    made = steps.add_parser("export", help="make the models (needs PyTorch and transformers)")
    made.add_argument("--out", type=Path, default=Path("/tmp/sam_bench"))
    made.add_argument("--size", action="append", choices=sorted(SIZES), help="only these (repeatable); default all")
    timed = steps.add_parser("time", help="time them (the project's venv)")
    timed.add_argument("--models", type=Path, default=Path("/tmp/sam_bench"))
    timed.add_argument("--rounds", type=int, default=5)
    timed.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.step == "export":
        export(args.out, args.size or list(SIZES))
    else:
        time_models(args.models, args.rounds, args.threads)


if __name__ == "__main__":
    main()
