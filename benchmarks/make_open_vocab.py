#!/usr/bin/env python3
r"""Architecture-true test models for open-vocabulary detection, their tokenizers, and what transformers' own
processors and post-processing return on them: test/data/open_vocab/ (read by test/test_open_vocab.py without
PyTorch).

- ``grounding_dino/grounding-dino-hf.onnx``: transformers' ``GroundingDinoForObjectDetection`` from a small seeded
  config (a Swin backbone of 8-64 channels, one block a stage; a BERT text encoder of one layer, width 32; d_model 32,
  one encoder and two decoder layers, 50 queries, max_text_len 256), exported with ``torch.onnx.export`` in the
  Hugging Face / transformers.js layout: ``pixel_values`` [1, 3, 320, 320], ``input_ids``, ``token_type_ids``,
  ``attention_mask`` [1, T] (T dynamic), ``pixel_mask`` [1, 320, 320] -> ``logits`` [1, 50, 256] (before the
  sigmoid), ``pred_boxes`` [1, 50, 4] (cx, cy, w, h normalised). transformers 5 builds the phrase mask and position
  ids inside the graph from ``input_ids`` with tensor operations (``generate_masks_with_special_tokens_and_transfer_
  map``), so the file serves every prompt; the TorchScript exporter has no ONNX form of three of them (isin, cummax,
  cummin), which are traced as equal comparisons and triangular max / min (``TraceableMaskOps``, checked equal on
  random ids). Traced with height and width dynamic, as transformers.js exports it, then declared fixed: at another
  size the traced Swin gives other boxes than the model (``check_runs_elsewhere``, recorded in reference.json).
- ``grounding_dino/grounding-dino-idea.onnx``: the same model (the same weights) in the IDEA / NVIDIA TAO layout that
  Isaac ROS runs: ``inputs`` [1, 3, 256, 384], ``input_ids``, ``attention_mask`` (bool), ``position_ids``,
  ``token_type_ids`` [1, 256] and ``text_token_mask`` [1, 256, 256] (bool) -> ``pred_logits`` [1, 50, 256],
  ``pred_boxes`` [1, 50, 4]: the host pads the tokens to 256 and builds the phrase mask and position ids. Made by
  wrapping the model so that, while it is traced, transformers' own mask function returns the graph's inputs.
- ``owl/owlv2.onnx``: ``Owlv2ForObjectDetection`` from a small seeded config (ViT of width 32, one layer, patch 16
  at 160x160: 100 patches; text width 32, one layer, 16 positions), the optimum / Hugging Face layout:
  ``input_ids``, ``attention_mask`` [N, 16] (one row a phrase), ``pixel_values`` [1, 3, 160, 160] -> ``logits``
  [1, 100, N], ``pred_boxes`` [1, 100, 4]; metadata ``model_type: owlv2`` (the config's).
- ``owl/owlvit.onnx``: ``OwlViTForObjectDetection`` likewise at 192x192 (144 patches); metadata ``model_type:
  owlvit``.
- Tokenizers, built here with the ``tokenizers`` library from a vocabulary written here: ``grounding_dino/``
  ``tokenizer.json`` and ``vocab.txt`` (BERT WordPiece, uncased, 1,173 entries laid out as bert-base-uncased's
  first ones: [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103, '.' 1012, '?' 1029, which Grounding DINO's graph
  reads as the phrase delimiters), ``owl/tokenizer.json`` (CLIP's byte-level BPE: the 512 byte symbols, merges for
  the words of the prompts, <|startoftext|> and <|endoftext|> last, as CLIP's, the latter the highest id, which OWL's
  text tower pools at); ``tokenizer_config.json`` beside each (what transformers' tokenizer classes read: OWL's
  model_max_length 16 and pad token '!').

Every file is simplified by onnxslim and compacted (``compact``: node names dropped, the inner values renamed short).
The weights are seeded (torch.manual_seed(0)) and made lively: Grounding DINO's box heads are drawn wider (every
query's box would be its encoder proposal otherwise) and its decoder's output norm narrower (every token scored
near 1 otherwise); OWL's class heads and box heads likewise (``lively_*``).

References, per model x image x prompt: transformers' processor with its PIL image processors
(``GroundingDinoImageProcessorPil`` at the model's size: a Pillow bilinear stretch, 1/255, ImageNet mean and std,
``pixel_mask`` ones; ``Owlv2ImageProcessorPil``: 1/255, zero padding to a square bottom and right, scipy's Gaussian
anti-aliasing and linear zoom, CLIP mean and std; ``OwlViTImageProcessorPil``: a Pillow bicubic stretch, 1/255, CLIP
mean and std) and its tokenizer, ONNX Runtime on the file, then ``post_process_grounded_object_detection``
(``threshold``, ``text_threshold``) or OWL's ``post_process_grounded_object_detection`` (``threshold``; boxes x
the padded square's side for OWLv2). For the IDEA layout the mask and position ids are transformers' own function's.
Recorded for each detection: box, score, transformers' label, and for Grounding DINO the phrase holding the most
probable word piece among the phrases' tokens (from the tokenizer's character offsets, here), None where no phrase
token passes the text threshold (transformers keeps such a detection with an empty or delimiter-only label).
Thresholds are chosen clear of every score they decide by ``MARGIN``.

Images: scikit-image's astronaut (512x512), coffee (400x600) and chelsea (300x451), read from the project venv's
skimage/data folder (--skimage-data). Run it in a scratch venv outside the repository, never in the project's venv;
as the committed files were made (Python 3.11, CPU only, nothing downloaded):

    python3.11 -m venv /work/export_venv   # torch 2.14.1, torchvision 0.29.1, transformers 5.24.0, tokenizers,
                                           # onnx, onnxruntime, pillow, scipy, scikit-image
    HF_HUB_OFFLINE=1 /work/export_venv/bin/python benchmarks/make_open_vocab.py

The versions used are written into reference.json.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import importlib.metadata
import json
from pathlib import Path

import numpy as np
from open_vocab_export import (
    GD_SIZE,
    IDEA_SIZE,
    IDEA_TEXT,
    OWLV2_SIZE,
    OWLVIT_SIZE,
    SEED,
    check_mask_ops,
    compact,
    declare_size,
    export_grounding_dino_hf,
    export_grounding_dino_idea,
    export_owl,
    grounding_dino_model,
    idea_text_inputs,
    owl_model,
    write_bert_tokenizer,
    write_clip_tokenizer,
)

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ("astronaut.png", "coffee.png", "chelsea.png")
MARGIN = 1e-3  # every score a threshold decides is at least this far from it
APART = 2e-4  # phrases whose best tokens are closer than this are recorded as a tie (``near``)
GD_PROMPTS = [
    "a cat. a remote control. astronaut.",
    "a person. a flag. a helmet.",
    "coffee cup. spoon. a red saucer. tabby cat.",
]
OWL_PROMPTS = [
    ["a photo of a cat", "a photo of a dog"],
    ["an astronaut", "a flag", "a rocket"],
    ["a cup of coffee", "a spoon", "a plate", "a remote control"],
]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def default_skimage_data() -> Path:
    found = sorted(glob.glob("/work/main/.venv/lib/python3*/site-packages/skimage/data"))
    return Path(found[0]) if found else Path("skimage/data")


# --- references ---------------------------------------------------------------------------------------------------


def clear(threshold: float, values: np.ndarray, step: float = 1e-4) -> float:
    """The threshold nearest ``threshold`` (in steps of ``step``) that every value is at least MARGIN from."""
    values = np.asarray(values, np.float64).ravel()
    for move in range(100_000):
        candidate = round(threshold + (move + 1) // 2 * step * (1 if move % 2 else -1), 6)
        if not values.size or np.abs(values - candidate).min() >= MARGIN:
            return candidate
    raise SystemExit(f"no threshold near {threshold} clear of every value by {MARGIN}")


def session(path: Path):
    import onnxruntime

    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def grounding_dino_processor(folder: Path, size: tuple[int, int]):
    from transformers import BertTokenizer, GroundingDinoProcessor
    from transformers.models.grounding_dino.image_processing_pil_grounding_dino import GroundingDinoImageProcessorPil

    height, width = size
    image_processor = GroundingDinoImageProcessorPil(size={"height": height, "width": width})
    return GroundingDinoProcessor(image_processor=image_processor, tokenizer=BertTokenizer.from_pretrained(folder))


def phrase_spans(text: str) -> list[tuple[int, int, str]]:
    """The phrases of a prompt text as Grounding DINO's processor joins them ("a cat. a dog."): (start, end,
    phrase) in characters."""
    spans, start = [], 0
    for part in text.split("."):
        stripped = part.strip()
        if stripped:
            first = text.index(stripped, start)
            spans.append((first, first + len(stripped), stripped))
        start += len(part) + 1
    return spans


def phrase_owners(encoding, text: str) -> np.ndarray:
    """The phrase of each of the logits' IDEA_TEXT token positions (by the tokenizer's character offsets), -1 for
    the delimiters ([CLS], [SEP], '.', '?': ids 101, 102, 1012, 1029, which belong to no phrase) and past the text."""
    spans = phrase_spans(text)
    owner = np.full(IDEA_TEXT, -1)
    for token, token_id in enumerate(encoding["input_ids"]):
        chars = encoding.token_to_chars(token)
        if chars is None or token_id in (101, 102, 1012, 1029):
            continue
        owner[token] = next(i for i, (start, end, _) in enumerate(spans) if start <= chars.start < end)
    return owner


def best_phrase(owner: np.ndarray, probs: np.ndarray, text_threshold: float) -> tuple[int | None, list]:
    """The phrase holding the most probable word piece among the phrases' tokens, None when it does not pass
    ``text_threshold``; and the other phrases whose best token is within APART of it (a tie that another CPU's
    rounding may turn)."""
    tokens = np.flatnonzero(owner >= 0)
    best = tokens[np.argmax(probs[tokens])]
    if probs[best] <= text_threshold:
        return None, []
    near = {int(owner[t]) for t in tokens if owner[t] != owner[best] and probs[best] - probs[t] < APART}
    return int(owner[best]), sorted(near)


class Outputs:
    def __init__(self, logits, boxes):
        import torch

        self.logits, self.pred_boxes = torch.from_numpy(logits), torch.from_numpy(boxes)


def grounding_dino_cases(folder: Path, name: str, images: Path, layout: str) -> dict:
    import torch
    from PIL import Image

    size = GD_SIZE if layout == "hf" else IDEA_SIZE
    processor = grounding_dino_processor(folder, size)
    runner = session(folder / name)
    raw = []
    for image_name in IMAGES:
        image = Image.open(images / image_name).convert("RGB")
        for prompt in GD_PROMPTS:
            inputs = processor(images=image, text=prompt, return_tensors="pt")
            ids = inputs["input_ids"]
            if layout == "hf":
                feeds = {
                    key: inputs[key].numpy()
                    for key in ("pixel_values", "input_ids", "token_type_ids", "attention_mask", "pixel_mask")
                }
                names = ("logits", "pred_boxes")
            else:
                padded = torch.zeros(1, IDEA_TEXT, dtype=torch.int64)
                padded[:, : ids.shape[1]] = ids
                mask, positions = idea_text_inputs(padded)
                feeds = {
                    "inputs": inputs["pixel_values"].numpy(),
                    "input_ids": padded.numpy(),
                    "attention_mask": (padded > 0).numpy(),
                    "position_ids": positions.numpy(),
                    "token_type_ids": np.zeros_like(padded.numpy()),
                    "text_token_mask": mask.numpy(),
                }
                ids, names = padded, ("pred_logits", "pred_boxes")
            logits, boxes = runner.run(list(names), feeds)
            raw.append((image_name, image, prompt, inputs, ids, logits, boxes))
    scores = np.concatenate([1 / (1 + np.exp(-r[5][0].astype(np.float64))) for r in raw]).max(axis=-1)
    threshold = clear(float(np.percentile(scores, 50)), scores)
    owners = {prompt: phrase_owners(processor.tokenizer(prompt), prompt) for prompt in GD_PROMPTS}
    bests = []  # the best phrase token of each kept detection: the text threshold decides these
    for _, _, prompt, _, _, logits, _ in raw:
        probs = 1 / (1 + np.exp(-logits[0].astype(np.float64)))
        kept = probs[probs.max(axis=-1) > threshold]
        bests += list(kept[:, owners[prompt] >= 0].max(axis=-1)) if len(kept) else []
    text_threshold = clear(float(np.percentile(bests, 20)), np.array(bests))
    cases = []
    for image_name, image, prompt, inputs, ids, logits, boxes in raw:
        result = processor.post_process_grounded_object_detection(
            Outputs(logits, boxes),
            ids,
            threshold=threshold,
            text_threshold=text_threshold,
            target_sizes=[(image.height, image.width)],
        )[0]
        probs = 1 / (1 + np.exp(-logits[0].astype(np.float64)))
        kept = np.flatnonzero(probs.max(axis=-1) > threshold)
        phrases = [phrase for _, _, phrase in phrase_spans(prompt)]
        assert processor.tokenizer(prompt)["input_ids"] == inputs["input_ids"][0].tolist()
        detections = []
        for query, box, score, label in zip(kept, result["boxes"], result["scores"], result["text_labels"]):
            phrase, near = best_phrase(owners[prompt], probs[query], text_threshold)
            detections.append(
                {
                    "xyxy": [round(float(v), 3) for v in box],
                    "score": round(float(score), 6),
                    "label": label,
                    "class_id": phrase,
                    "class_name": None if phrase is None else phrases[phrase],
                    **({"near": near} if near else {}),
                }
            )
        cases.append(
            {
                "image": image_name,
                "prompt": prompt,
                "input_ids": inputs["input_ids"][0].tolist(),
                "detections": detections,
            }
        )
    return {
        "file": f"grounding_dino/{name}",
        "layout": layout,
        "threshold": threshold,
        "text_threshold": text_threshold,
        "cases": cases,
    }


def owl_processor(folder: Path, kind: str):
    from transformers import CLIPTokenizer, Owlv2Processor, OwlViTProcessor
    from transformers.models.owlv2.image_processing_pil_owlv2 import Owlv2ImageProcessorPil
    from transformers.models.owlvit.image_processing_pil_owlvit import OwlViTImageProcessorPil

    tokenizer = CLIPTokenizer.from_pretrained(folder)
    if kind == "owlv2":
        image_processor = Owlv2ImageProcessorPil(size={"height": OWLV2_SIZE, "width": OWLV2_SIZE})
        return Owlv2Processor(image_processor=image_processor, tokenizer=tokenizer)
    side = {"height": OWLVIT_SIZE, "width": OWLVIT_SIZE}
    image_processor = OwlViTImageProcessorPil(size=side, crop_size=side)
    return OwlViTProcessor(image_processor=image_processor, tokenizer=tokenizer)


def owl_cases(folder: Path, name: str, images: Path, kind: str) -> dict:
    from PIL import Image

    processor = owl_processor(folder, kind)
    runner = session(folder / name)
    raw = []
    for image_name in IMAGES:
        image = Image.open(images / image_name).convert("RGB")
        for phrases in OWL_PROMPTS:
            inputs = processor(images=image, text=[phrases], return_tensors="np")
            feeds = {key: inputs[key] for key in ("input_ids", "pixel_values", "attention_mask")}
            logits, boxes = runner.run(["logits", "pred_boxes"], feeds)
            raw.append((image_name, image, phrases, inputs, logits, boxes))
    scores = np.concatenate([1 / (1 + np.exp(-r[4][0].astype(np.float64).max(axis=-1))) for r in raw])
    threshold = clear(float(np.percentile(scores, 92)), scores)
    cases = []
    for image_name, image, phrases, inputs, logits, boxes in raw:
        result = processor.post_process_grounded_object_detection(
            Outputs(logits, boxes),
            threshold=threshold,
            target_sizes=[(image.height, image.width)],
            text_labels=[phrases],
        )[0]
        detections = [
            {
                "xyxy": [round(float(v), 3) for v in box],
                "score": round(float(score), 6),
                "class_id": int(label),
                "class_name": text,
            }
            for box, score, label, text in zip(
                result["boxes"], result["scores"], result["labels"], result["text_labels"]
            )
        ]
        cases.append(
            {
                "image": image_name,
                "prompt": phrases,
                "input_ids": inputs["input_ids"].tolist(),
                "detections": detections,
            }
        )
    return {"file": f"owl/{name}", "layout": kind, "threshold": threshold, "cases": cases}


def check_runs_elsewhere(model, path: Path) -> str:
    """What the dynamic-size Grounding DINO export gives at another size than it was made at, against the model."""
    import torch

    runner = session(path)
    ids = np.array([[101, 1063, 1136, 1012, 1063, 1151, 1152, 1012, 102]])  # a cat. a remote control.
    height, width = 256, 384
    pixels = np.random.default_rng(SEED).random((1, 3, height, width), np.float32)
    feeds = {
        "pixel_values": pixels,
        "input_ids": ids,
        "token_type_ids": np.zeros_like(ids),
        "attention_mask": np.ones_like(ids),
        "pixel_mask": np.ones((1, height, width), np.int64),
    }
    try:
        logits, boxes = runner.run(["logits", "pred_boxes"], feeds)
    except Exception as error:  # onnxruntime's own errors
        return f"at {height}x{width}: {type(error).__name__}: {str(error)[:300]}"
    with torch.no_grad():
        out = model(**{key: torch.from_numpy(value) for key, value in feeds.items()})
    box_gap = float(np.abs(boxes - out.pred_boxes.numpy()).max())
    finite = np.isfinite(logits) & np.isfinite(out.logits.numpy())
    logit_gap = float(np.abs(logits[finite] - out.logits.numpy()[finite]).max())
    return (
        f"made at {GD_SIZE[0]}x{GD_SIZE[1]}, run at {height}x{width}: boxes differ from the model's by up to "
        f"{box_gap:.3g} (of 1), logits by {logit_gap:.3g}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "test" / "data" / "open_vocab")
    parser.add_argument("--skimage-data", type=Path, default=default_skimage_data())
    args = parser.parse_args()
    gd, owl = args.out / "grounding_dino", args.out / "owl"
    check_mask_ops()
    vocab = write_bert_tokenizer(gd)
    model = grounding_dino_model(len(vocab))
    export_grounding_dino_hf(model, gd / "grounding-dino-hf.onnx")
    elsewhere = check_runs_elsewhere(model, gd / "grounding-dino-hf.onnx")
    declare_size(gd / "grounding-dino-hf.onnx", GD_SIZE)
    export_grounding_dino_idea(model, gd / "grounding-dino-idea.onnx")
    clip = write_clip_tokenizer(owl)
    export_owl(owl_model("owlv2", clip), owl / "owlv2.onnx", OWLV2_SIZE, "owlv2")
    export_owl(owl_model("owlvit", clip), owl / "owlvit.onnx", OWLVIT_SIZE, "owlvit")
    for path in (
        gd / "grounding-dino-hf.onnx",
        gd / "grounding-dino-idea.onnx",
        owl / "owlv2.onnx",
        owl / "owlvit.onnx",
    ):
        compact(path)
    models = [
        grounding_dino_cases(gd, "grounding-dino-hf.onnx", args.skimage_data, "hf"),
        grounding_dino_cases(gd, "grounding-dino-idea.onnx", args.skimage_data, "idea"),
        owl_cases(owl, "owlv2.onnx", args.skimage_data, "owlv2"),
        owl_cases(owl, "owlvit.onnx", args.skimage_data, "owlvit"),
    ]
    files = sorted(p for p in args.out.rglob("*") if p.is_file() and p.name != "reference.json")
    versions = {
        name: importlib.metadata.version(name)
        for name in ("torch", "transformers", "tokenizers", "onnx", "onnxruntime", "onnxslim", "pillow", "scipy")
    }
    reference = {
        "made_by": "benchmarks/make_open_vocab.py",
        "versions": versions,
        "sha256": {str(p.relative_to(args.out)): sha256(p) for p in files},
        "elsewhere": elsewhere,
        "models": models,
    }
    (args.out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    for entry in models:
        counts = [len(case["detections"]) for case in entry["cases"]]
        print(entry["file"], entry["threshold"], entry.get("text_threshold"), counts)
    print("dynamic-size export elsewhere:", reference["elsewhere"])


if __name__ == "__main__":
    main()
