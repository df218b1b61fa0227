#!/usr/bin/env python3
"""The cost of YOLO-World's two kinds of export on 2 CPU cores: the real YOLOv8s-worldv2 architecture (Ultralytics'
own yolov8-worldv2.yaml at scale s, seeded weights: the cost is the architecture's) at 640, its classes baked in
against taken as text embeddings, and the CLIP ViT-B/32 text tower (transformers' CLIPTextModelWithProjection with
openai/clip-vit-base-patch32's configuration, seeded) that the text-embedding export needs once per prompt.

Two steps, the first in the scratch venv of benchmarks/make_yolo_world.py (torch, ultralytics, transformers), the
second in the project's venv (ONNX Runtime); the files (about 300 MB) go under /tmp, never into the repository:

    YOLO_OFFLINE=1 /work/export_venv/bin/python benchmarks/bench_yolo_world.py export [--out /tmp/yolo_world_bench]
    python benchmarks/bench_yolo_world.py time [--out /tmp/yolo_world_bench] [--threads 2] [--rounds 10]

Exported: ``baked-80.onnx`` (Ultralytics' export after 80 classes were set: the baseline), ``text-80.onnx`` and
``text-8.onnx`` (txt_feats [1, K, 512] an input, K 80 and 8: make_yolo_world.py's ``with_text``), ``clip-b32-text
.onnx`` (input_ids, attention_mask -> text_embeds). ``time``: each on ONNX Runtime (CPU, ``--threads`` intra-op
threads, sequential), the median of ``--rounds`` runs after two warm-ups; the image side as a ratio to the baked
export measured in the same run, the text side per prompt of 8 and of 80 phrases (8 tokens each). On a shared
machine the figures are as loaded as the machine: give ``uptime``'s load with them. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SIZE = 640
TOKENS = 8  # a phrase's tokens, <|startoftext|> and <|endoftext|> included


def export(out: Path) -> None:
    import copy

    import torch
    import yaml
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection
    from ultralytics import YOLO
    from ultralytics.utils import ROOT as UL_ROOT

    sys.path.insert(0, str(Path(__file__).parent))
    from make_yolo_cls_obb import export as export_ultralytics
    from make_yolo_world import export_traced, with_text_module

    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp())
    cfg = yaml.safe_load((UL_ROOT / "cfg" / "models" / "v8" / "yolov8-worldv2.yaml").read_text())
    (work / "yolov8s-worldv2.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    torch.manual_seed(0)
    model = YOLO(str(work / "yolov8s-worldv2.yaml"))
    model.model.txt_feats = torch.nn.functional.normalize(torch.randn(1, 80, 512), dim=-1)
    model.model.model[-1].nc = 80
    export_ultralytics(copy.deepcopy(model), work, out / "baked-80.onnx", imgsz=SIZE, simplify=False)
    for k in (80, 8):
        module, name = with_text_module(model, "world", k)
        dummy = (torch.zeros(1, 3, SIZE, SIZE), torch.nn.functional.normalize(torch.randn(1, k, 512), dim=-1))
        export_traced(module, dummy, out / f"text-{k}.onnx", ["images", name], ["output0"])
    config = CLIPTextConfig(hidden_size=512, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=8,
                            max_position_embeddings=77, projection_dim=512, vocab_size=49408)  # fmt: skip
    tower = CLIPTextModelWithProjection(config).eval()

    class Tower(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tower = tower

        def forward(self, input_ids, attention_mask):
            return self.tower(input_ids=input_ids, attention_mask=attention_mask).text_embeds

    ids = torch.full((2, TOKENS), 320)
    axes = {"input_ids": {0: "phrases", 1: "tokens"}, "attention_mask": {0: "phrases", 1: "tokens"}}
    export_traced(
        Tower().eval(),
        (ids, torch.ones_like(ids)),
        out / "clip-b32-text.onnx",
        ["input_ids", "attention_mask"],
        ["text_embeds"],
        axes | {"text_embeds": {0: "phrases"}},
    )


def median_ms(session, feeds: dict, rounds: int) -> float:
    for _ in range(2):
        session.run(None, feeds)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def time_files(out: Path, threads: int, rounds: int) -> None:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1

    def session(name: str):
        return onnxruntime.InferenceSession(str(out / name), options, providers=["CPUExecutionProvider"])

    image = np.random.default_rng(0).random((1, 3, SIZE, SIZE), np.float32)
    baked = median_ms(session("baked-80.onnx"), {"images": image}, rounds)
    rows = [("YOLOv8s-worldv2, 80 classes baked in (Ultralytics' export)", baked, 1.0)]
    for k in (80, 8):
        feats = np.random.default_rng(k).standard_normal((1, k, 512)).astype(np.float32)
        feats /= np.linalg.norm(feats, axis=-1, keepdims=True)
        ms = median_ms(session(f"text-{k}.onnx"), {"images": image, "txt_feats": feats}, rounds)
        rows.append((f"YOLOv8s-worldv2, txt_feats [1, {k}, 512] an input", ms, ms / baked))
    text = session("clip-b32-text.onnx")
    for phrases in (8, 80):
        ids = np.full((phrases, TOKENS), 320, np.int64)
        ids[:, 0], ids[:, -1] = 49406, 49407
        ms = median_ms(text, {"input_ids": ids, "attention_mask": np.ones_like(ids)}, rounds)
        rows.append((f"CLIP ViT-B/32 text tower, a prompt of {phrases} phrases (once per prompt)", ms, ms / baked))
    print(f"| at {SIZE}, ONNX Runtime, {threads} threads | ms | x the baked export |\n|---|---|---|")
    for name, ms, ratio in rows:
        print(f"| {name} | {ms:.1f} | {ratio:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("export", "time"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/yolo_world_bench"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if args.step == "export":
        export(args.out)
    else:
        time_files(args.out, args.threads, args.rounds)


if __name__ == "__main__":
    main()
