#!/usr/bin/env python3
"""The cost of open-vocabulary detection on 2 CPU cores: the real Grounding DINO-T and OWLv2-B/16 architectures
(transformers' own classes from their full-size configurations, seeded weights: the cost is the architecture's,
whatever the weights), image side and text side timed apart, on ONNX Runtime and OpenVINO.

Two steps, the first in the scratch venv of benchmarks/make_open_vocab.py (torch, transformers), the second in the
project's venv (ONNX Runtime, OpenVINO); the files (2.5 GB) go under /tmp, never into the repository:

    HF_HUB_OFFLINE=1 /work/export_venv/bin/python benchmarks/bench_open_vocab.py export [--out /tmp/open_vocab_bench]
    python benchmarks/bench_open_vocab.py time [--out /tmp/open_vocab_bench] [--threads 2] [--rounds 5]

What is exported (``export``):
- ``grounding-dino-t.onnx``: ``GroundingDinoForObjectDetection(GroundingDinoConfig())`` (its defaults are
  grounding-dino-tiny's: Swin-T, bert-base-uncased's text encoder, 900 queries, 6 + 6 layers), the Hugging Face
  layout of test/data/open_vocab/ at 800x1066 (the processor's size for a 4:3 frame such as 640x480), the tokens
  dynamic: what models/grounding_dino.py runs each frame, its text encoder included (the graph fuses text and image).
- ``grounding-dino-t-text.onnx``: its text side alone (BERT and the projection to d_model; the phrase mask and
  position ids as inputs): what each frame spends on the prompt, and what a prompt change would cost in an export
  that took the text features as an input.
- ``owlv2-b16.onnx``: ``Owlv2ForObjectDetection`` (vision tower ViT-B/16 at 960x960, text tower of 12 layers), the
  optimum layout models/owl.py runs (both towers each frame).
- ``owlv2-b16-text.onnx`` and ``owlv2-b16-image.onnx``: its text tower alone (phrases -> query embeddings, once per
  prompt) and its image side alone (pixel values and query embeddings -> logits, boxes, each frame), the split an
  adapter with a text-embedding input would run; the export checks that the two give the full model's logits.

``time``: each file on ONNX Runtime (CPU, ``--threads`` intra-op threads, sequential) and OpenVINO (CPU,
INFERENCE_NUM_THREADS ``--threads``, latency hint), the median of ``--rounds`` runs after two warm-ups, with a
prompt of 2 phrases (Grounding DINO: 8 tokens; OWL: 2 rows of 16); and the adapters' pre-processing of a 1280x720
frame (numpy, Pillow and scipy: the same for both backends); printed as a Markdown table. On a shared
machine the figures are as loaded as the machine: give ``uptime``'s load with them. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

GD_SIZE = (800, 1066)  # (height, width)
OWL_SIDE = 960
GD_TOKENS = [101, 1037, 2711, 1012, 1037, 2482, 1012, 102]  # [CLS] a person . a car . [SEP] in bert-base-uncased
OWL_ROWS = 2


def export(out: Path, only: list[str] = ()) -> None:
    """The files above into ``out``; ``only``: those of these models alone (grounding-dino-t, owlv2-b16)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    out.mkdir(parents=True, exist_ok=True)
    if not only or "grounding-dino-t" in only:
        export_grounding_dino(out)
    if not only or "owlv2-b16" in only:
        export_owlv2(out)


def export_grounding_dino(out: Path) -> None:
    import torch
    from open_vocab_export import declare_size, export_grounding_dino_hf, idea_text_inputs
    from open_vocab_export import export as onnx_export
    from transformers import GroundingDinoConfig, GroundingDinoForObjectDetection

    torch.manual_seed(0)
    grounding = GroundingDinoForObjectDetection(GroundingDinoConfig()).eval()
    export_grounding_dino_hf(grounding, out / "grounding-dino-t.onnx", GD_SIZE)
    declare_size(out / "grounding-dino-t.onnx", GD_SIZE)

    class GroundingText(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model.model

        def forward(self, input_ids, attention_mask, position_ids, token_type_ids, text_token_mask):
            features = self.model.text_backbone(
                input_ids, text_token_mask[:, None], token_type_ids, position_ids, return_dict=True
            ).last_hidden_state
            return self.model.text_projection(features)

    ids = torch.tensor([GD_TOKENS])
    mask, positions = idea_text_inputs(ids)
    text = {0: "batch_size", 1: "sequence_length"}
    onnx_export(
        GroundingText(grounding),
        (ids, torch.ones_like(ids), positions, torch.zeros_like(ids), mask),
        out / "grounding-dino-t-text.onnx",
        input_names=["input_ids", "attention_mask", "position_ids", "token_type_ids", "text_token_mask"],
        output_names=["text_features"],
        dynamic_axes={name: text for name in ("input_ids", "attention_mask", "position_ids", "token_type_ids")}
        | {"text_token_mask": {0: "batch_size", 1: "sequence_length", 2: "sequence_length"}},
    )


def export_owlv2(out: Path) -> None:
    import torch
    from open_vocab_export import export as onnx_export
    from transformers import Owlv2Config, Owlv2ForObjectDetection

    torch.manual_seed(0)
    config = Owlv2Config(vision_config={"image_size": OWL_SIDE, "patch_size": 16})
    owl = Owlv2ForObjectDetection(config).eval()
    ids = torch.zeros(OWL_ROWS, 16, dtype=torch.int64)
    ids[:, :4] = torch.tensor([49406, 320, 2368, 49407])
    attention = (ids > 0).long()
    pixels = torch.rand(1, 3, OWL_SIDE, OWL_SIDE)

    class Full(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, pixel_values, attention_mask):
            result = self.model(input_ids=input_ids, pixel_values=pixel_values, attention_mask=attention_mask)
            return result.logits, result.pred_boxes

    class Text(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model.owlv2.get_text_features(input_ids=input_ids, attention_mask=attention_mask).pooler_output

    class Image(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, pixel_values, query_embeds):
            feature_map = self.model.image_embedder(pixel_values=pixel_values)[0]
            batch, height, width, hidden = feature_map.shape
            image_feats = feature_map.reshape(batch, height * width, hidden)
            logits = self.model.class_predictor(image_feats, query_embeds)[0]
            return logits, self.model.box_predictor(image_feats, feature_map)

    queries = {0: "text_batch_size"}
    onnx_export(
        Full(owl),
        (ids, pixels, attention),
        out / "owlv2-b16.onnx",
        input_names=["input_ids", "pixel_values", "attention_mask"],
        output_names=["logits", "pred_boxes"],
        dynamic_axes={"input_ids": queries, "attention_mask": queries, "logits": {2: "num_queries"}},
    )
    onnx_export(
        Text(owl),
        (ids, attention),
        out / "owlv2-b16-text.onnx",
        input_names=["input_ids", "attention_mask"],
        output_names=["query_embeds"],
        dynamic_axes={"input_ids": queries, "attention_mask": queries, "query_embeds": queries},
    )
    with torch.no_grad():
        embeds = Text(owl)(ids, attention)[None]
        full, split = Full(owl)(ids, pixels, attention)[0], Image(owl)(pixels, embeds)[0]
    assert torch.allclose(full, split, atol=1e-3), float((full - split).abs().max())
    onnx_export(
        Image(owl),
        (pixels, embeds),
        out / "owlv2-b16-image.onnx",
        input_names=["pixel_values", "query_embeds"],
        output_names=["logits", "pred_boxes"],
        dynamic_axes={"query_embeds": {1: "num_queries"}, "logits": {2: "num_queries"}},
    )


def feeds(name: str, inputs) -> dict[str, np.ndarray]:
    """Inputs for each file: a random image and the 2-phrase prompt (the cost depends on the shapes only)."""
    rng = np.random.default_rng(0)
    ids = np.array([GD_TOKENS], np.int64)
    owl_ids = np.zeros((OWL_ROWS, 16), np.int64)
    owl_ids[:, :4] = [49406, 320, 2368, 49407]
    values = {}
    known = {"pixel_values", "pixel_mask", "query_embeds", "input_ids", "attention_mask", "position_ids"}
    known |= {"token_type_ids", "text_token_mask"}
    for tensor in inputs:  # ONNX Runtime's input names, or OpenVINO's ports (whose "any" name may be an alias)
        names = [tensor] if isinstance(tensor, str) else sorted(tensor.get_names())
        key = next((name for name in names if name in known), names[0])
        if key in ("pixel_values",):
            side = GD_SIZE if name.startswith("grounding") else (OWL_SIDE, OWL_SIDE)
            values[key] = rng.random((1, 3, *side), np.float32)
        elif key == "pixel_mask":
            values[key] = np.ones((1, *GD_SIZE), np.int64)
        elif key == "query_embeds":
            values[key] = rng.standard_normal((1, OWL_ROWS, 512), np.float32)
        elif name.startswith("owl"):
            values[key] = owl_ids if key == "input_ids" else (owl_ids > 0).astype(np.int64)
        elif key == "text_token_mask":
            values[key] = np.ones((1, ids.shape[1], ids.shape[1]), bool)
        elif key in ("token_type_ids", "position_ids"):
            values[key] = np.zeros_like(ids)
        else:
            values[key] = ids if key == "input_ids" else np.ones_like(ids)
    return values


def median_ms(run, rounds: int) -> float:
    for _ in range(2):
        run()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def time_one(path: Path, name: str, backend: str, threads: int, rounds: int) -> str:
    """The median ms of one file on one backend, or why it does not run there."""
    try:
        if backend == "onnx":
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            values = feeds(name, [i.name for i in session.get_inputs()])
            return f"{median_ms(lambda: session.run(None, values), rounds):.0f}"
        import openvino as ov

        core = ov.Core()
        config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
        compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
        values = feeds(name, compiled.inputs)
        request = compiled.create_infer_request()
        return f"{median_ms(lambda: request.infer(values), rounds):.0f}"
    except Exception as error:  # a backend that cannot load or run the file: said in its cell
        return f"fails: {type(error).__name__}: {str(error).splitlines()[0][:120]}"


def preprocessing_rows(rounds: int, backends: list[str]) -> list[list[str]]:
    """The adapters' pre-processing of a 1280x720 frame (skimage's coffee, resized), the same on every backend:
    Grounding DINO's Pillow bilinear stretch to 800x1066 and normalisation, OWLv2's zero padding to a square,
    Gaussian smoothing and zoom to 960x960 (models/owl.square_resize, scipy), OWL-ViT's Pillow bicubic to 768."""
    import cv2
    import skimage.data
    from PIL import Image

    from vision_factory.models.detr import pil_resize
    from vision_factory.models.owl import square_resize

    frame = cv2.resize(skimage.data.coffee()[..., ::-1], (1280, 720))
    stages = {
        "pre-processing 1280x720, Grounding DINO (800x1066)": lambda: pil_resize(frame, GD_SIZE[1], GD_SIZE[0]),
        "pre-processing 1280x720, OWLv2 (960x960)": lambda: square_resize(frame, OWL_SIDE, OWL_SIDE),
        "pre-processing 1280x720, OWL-ViT (768x768)": lambda: pil_resize(frame, 768, 768, Image.Resampling.BICUBIC),
    }
    rows = []
    for name, stage in stages.items():
        cell = f"{median_ms(stage, rounds):.0f}"
        print(name, cell, flush=True)
        rows.append([name] + [cell] * len(backends))
    return rows


def time_files(out: Path, threads: int, rounds: int, backends: list[str], only: list[str]) -> None:
    import os

    rows = []
    names = ["grounding-dino-t", "grounding-dino-t-text", "owlv2-b16", "owlv2-b16-text", "owlv2-b16-image"]
    for name in [name for name in names if not only or name in only]:
        row = [name]
        for backend in backends:
            row.append(time_one(out / f"{name}.onnx", name, backend, threads, rounds))
            print(name, backend, row[-1], flush=True)
        rows.append(row)
    rows += preprocessing_rows(rounds, backends) if not only else []
    print(f"\n{os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}; {threads} threads; median of {rounds} runs (ms)\n")
    print("| file | " + " | ".join(backends) + " |")
    print("|---" * (len(backends) + 1) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("export", "time"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/open_vocab_bench"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backends", default="onnx,openvino")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="time only this file (by name, repeatable); export: this model's files alone (grounding-dino-t, "
        "owlv2-b16)",
    )
    args = parser.parse_args()
    if args.step == "export":
        export(args.out, args.only)
    else:
        time_files(args.out, args.threads, args.rounds, args.backends.split(","), args.only)


if __name__ == "__main__":
    main()
