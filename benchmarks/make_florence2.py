#!/usr/bin/env python3
r"""An architecture-true Florence-2 test export, its tokenizer and configs, and what transformers' own processor,
``generate`` and ``post_process_generation`` return on it: test/data/florence2/ (read by test/test_florence2.py
without PyTorch).

- The model: transformers' ``Florence2ForConditionalGeneration`` from a small seeded config (benchmarks/
  florence2_export.py: a DaViT of 16-64 channels, one block a stage, at the real 768 x 768 input and its 577 image
  positions; a BART of width 64, one encoder and two decoder layers, 4 heads, 1,024 positions), made lively (its
  ``lively``: what it generates varies with the image and the task, and ends at </s> now and then).
- Its graphs in onnx-community's layout, the one transformers.js runs (``onnx/vision_encoder.onnx``: pixel_values
  [B, 3, 768, 768] -> image_features [B, 577, 64]; ``onnx/embed_tokens.onnx``: input_ids -> inputs_embeds;
  ``onnx/encoder_model.onnx``: inputs_embeds, attention_mask -> last_hidden_state;
  ``onnx/decoder_model_merged.onnx``: encoder_attention_mask, encoder_hidden_states, inputs_embeds,
  past_key_values.{i}.{decoder,encoder}.{key,value}, use_cache_branch -> logits, present.*), and optimum's pair
  that the merged one is made of (``onnx/decoder_model.onnx``, the first step; ``onnx/decoder_with_past_model.onnx``,
  the steps after); fp32, opset 17, simplified by onnxslim.
- At the folder's top, as onnx-community publishes them: ``tokenizer.json`` (a BART byte-level BPE built here with the
  ``tokenizers`` library: <s> 0, <pad> 1, </s> 2, <unk> 3, the byte symbols, merges that make the words of the
  task questions and a few more whole, <mask>, then Florence-2's 1,024 added tokens (<od> ... <loc_0> ... <loc_999>
  ... <and>) and transformers 5's <image>, all special), ``tokenizer_config.json``, ``config.json`` (the model's),
  ``generation_config.json`` (the published one: decoder_start_token_id 2, forced BOS 0 and EOS 2,
  no_repeat_ngram_size 3, num_beams 3), ``preprocessor_config.json`` (768 x 768, bicubic, ImageNet mean and std,
  and the task tables transformers.js reads) and ``processor_config.json`` (transformers 5's post-processor config:
  the banned grounding phrases).
- ``ocr.png``: coffee.png with lines of text drawn on it (cv2.putText), the picture the OCR tasks read.

References, per image x task: transformers' ``Florence2Processor`` (its PIL image processor, CLIPImageProcessorPil:
Pillow's bicubic stretch to 768 x 768, 1/255, ImageNet mean and std; the task expanded to its question, <image> x 577
<s> question </s>), ``generate(num_beams=1, do_sample=False, max_new_tokens=N)`` with the published generation config,
``batch_decode(skip_special_tokens=False)`` and ``post_process_generation``. Recorded: the prompt's tokens, the
generated ones, the text, the parsed answer, and the smallest gap between the best and the next token's score over
the steps greedy decoding chose. Where a step's gap is under MARGIN (a tie another CPU's rounding may turn) the case
is made with max_new_tokens ending before it (that step is then the forced </s>), so every recorded choice is clear.
The first decoding step of ONNX Runtime on the graphs is checked against the model (the logits' largest difference
is recorded), and the <loc_> bins' way back to pixels against transformers' own arithmetic (float32).

Images: scikit-image's astronaut (512x512), coffee (400x600) and chelsea (300x451), read from the project venv's
skimage/data folder (--skimage-data), and ocr.png. Run it in a scratch venv outside the repository, never in the
project's venv; as the committed files were made (Python 3.11, CPU only, nothing downloaded):

    python3.11 -m venv /work/export_venv   # torch 2.14.1, transformers 5.24.0, tokenizers, onnx, onnxruntime,
                                           # onnxslim, pillow, opencv-python-headless, scikit-image
    HF_HUB_OFFLINE=1 /work/export_venv/bin/python benchmarks/make_florence2.py

The versions used are written into reference.json.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
from pathlib import Path

import numpy as np
from florence2_export import (
    GENERATION_CONFIG,
    IMAGE_TOKENS,
    IMAGENET_MEAN,
    IMAGENET_STD,
    SIDE,
    export_florence2,
    florence2_model,
    layers_of,
    past_names,
    processor_config,
    write_configs,
    write_tokenizer,
)
from make_open_vocab import default_skimage_data, session, sha256

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ("astronaut.png", "coffee.png", "chelsea.png", "ocr.png")
MAX_NEW_TOKENS = 48  # per case, unless a near tie ends it sooner
MARGIN = 2e-3  # every token greedy decoding chose beat the next by at least this (in logits)
TASKS = [
    ("<CAPTION>", ""),
    ("<DETAILED_CAPTION>", ""),
    ("<MORE_DETAILED_CAPTION>", ""),
    ("<OCR>", ""),
    ("<OCR_WITH_REGION>", ""),
    ("<OD>", ""),
    ("<DENSE_REGION_CAPTION>", ""),
    ("<REGION_PROPOSAL>", ""),
    ("<CAPTION_TO_PHRASE_GROUNDING>", "a cat and an astronaut"),
    ("<OPEN_VOCABULARY_DETECTION>", "a red cup"),
    ("<REFERRING_EXPRESSION_SEGMENTATION>", "the tabby cat"),
    ("<REGION_TO_SEGMENTATION>", "<loc_100><loc_200><loc_600><loc_800>"),
    ("<REGION_TO_CATEGORY>", "<loc_52><loc_332><loc_932><loc_774>"),
    ("<REGION_TO_DESCRIPTION>", "<loc_10><loc_20><loc_500><loc_990>"),
    ("<REGION_TO_OCR>", "<loc_0><loc_0><loc_999><loc_999>"),
]
OCR_LINES = ("COFFEE SHOP", "OPEN 7 DAYS", "The cat is red")


def write_ocr_image(images: Path, target: Path) -> None:
    """coffee.png with three lines of text drawn on white bands (cv2.putText, Hershey simplex)."""
    import cv2

    image = cv2.imread(str(images / "coffee.png"))
    for row, line in enumerate(OCR_LINES):
        top = 30 + row * 110
        cv2.rectangle(image, (20, top), (580, top + 70), (255, 255, 255), -1)
        cv2.putText(image, line, (35, top + 52), cv2.FONT_HERSHEY_SIMPLEX, 1.6, (20, 20, 20), 4, cv2.LINE_AA)
    cv2.imwrite(str(target), image)


def processor(folder: Path):
    from transformers import AutoTokenizer, Florence2Processor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    config = json.loads((folder / "preprocessor_config.json").read_text())
    keys = ("size", "crop_size", "do_center_crop", "do_resize", "do_rescale", "do_normalize", "resample")
    image_processor = CLIPImageProcessorPil(
        **{key: config[key] for key in keys},
        image_mean=IMAGENET_MEAN,
        image_std=IMAGENET_STD,
        image_seq_length=config["image_seq_length"],
    )
    tokenizer = AutoTokenizer.from_pretrained(folder)
    post = processor_config()["post_processor_config"]
    return Florence2Processor(image_processor=image_processor, tokenizer=tokenizer, post_processor_config=post)


def generate(model, inputs, max_new_tokens: int):
    """transformers' greedy generation with the published generation config: the sequence and each step's gap
    between the best and the next score (after the logits processors)."""
    import torch
    from transformers import GenerationConfig

    config = GenerationConfig(
        **GENERATION_CONFIG | {"num_beams": 1, "do_sample": False, "max_new_tokens": max_new_tokens}
    )
    config.output_scores, config.return_dict_in_generate = True, True
    with torch.no_grad():
        out = model.generate(**inputs, generation_config=config)
    scores = torch.stack(out.scores)[:, 0]
    top = scores.topk(2, dim=-1).values
    gaps = (top[:, 0] - top[:, 1]).numpy()
    return out.sequences, gaps


def case(model, proc, image, image_name: str, task: str, text: str) -> dict:
    """One image x task: generated with MAX_NEW_TOKENS, or fewer where a step's choice is within MARGIN."""
    inputs = proc(text=task + text, images=image, return_tensors="pt")
    ids = inputs["input_ids"][0].tolist()
    assert ids[:IMAGE_TOKENS] == [proc.image_token_id] * IMAGE_TOKENS
    limit = MAX_NEW_TOKENS
    while True:
        sequences, gaps = generate(model, inputs, limit)
        # the forced steps (BOS first, </s> at the limit) have one finite score: their gap is infinite
        close = [step for step, gap in enumerate(gaps) if gap < MARGIN]
        if not close:
            break
        limit = close[0] + 1  # that step becomes the forced </s>
    generated = proc.batch_decode(sequences, skip_special_tokens=False)[0]
    answer = proc.post_process_generation(generated, task=task, image_size=(image.width, image.height))[task]
    chosen = [float(gap) for gap in gaps if np.isfinite(gap)]
    return {
        "image": image_name,
        "task": task,
        "text": text,
        "prompt_ids": ids[IMAGE_TOKENS:],
        "max_new_tokens": limit,
        "tokens": sequences[0].tolist(),
        "generated_text": generated,
        "answer": answer,
        "image_size": [image.width, image.height],
        "min_gap": round(min(chosen), 6) if chosen else None,
    }


def check_first_step(model, folder: Path, proc, image) -> dict:
    """ONNX Runtime's first decoding step on the graphs against the model's: the largest differences of the image
    features, the encoder's states and the logits."""
    import torch

    inputs = proc(text="<OD>", images=image, return_tensors="pt")
    onnx = folder / "onnx"
    features = session(onnx / "vision_encoder.onnx").run(None, {"pixel_values": inputs["pixel_values"].numpy()})[0]
    prompt = inputs["input_ids"][:, IMAGE_TOKENS:].numpy()
    embeds = session(onnx / "embed_tokens.onnx").run(None, {"input_ids": prompt})[0]
    joined = np.concatenate([features, embeds], axis=1)
    mask = np.ones(joined.shape[:2], np.int64)
    states = session(onnx / "encoder_model.onnx").run(None, {"inputs_embeds": joined, "attention_mask": mask})[0]
    start = session(onnx / "embed_tokens.onnx").run(None, {"input_ids": np.array([[2]])})[0]
    layers, heads, size = layers_of(model)
    feeds = {"encoder_attention_mask": mask, "encoder_hidden_states": states, "inputs_embeds": start}
    empty = {name: np.zeros((1, heads, 0, size), np.float32) for name in past_names(layers, "past_key_values")}
    logits = session(onnx / "decoder_model_merged.onnx").run(
        ["logits"], feeds | empty | {"use_cache_branch": np.array([False])}
    )[0]
    with torch.no_grad():
        out = model(**inputs, decoder_input_ids=torch.tensor([[2]]))
        reference_features = model.get_image_features(inputs["pixel_values"]).pooler_output.numpy()
    return {
        "image_features": float(np.abs(features - reference_features).max()),
        "encoder": float(np.abs(states - out.encoder_last_hidden_state.numpy()).max()),
        "logits": float(np.abs(logits - out.logits.numpy()).max()),
    }


def check_dequantize(sizes: list[int]) -> list[list[int]]:
    """transformers' <loc_> bin -> pixel (``(bin + 0.5) * (size / 1000)`` on a float32 tensor, then ``int``) against
    the same in float32 with numpy (as models/florence2_answer.py computes it), for every bin and each size; returns
    [size, bin, pixel] where float64 arithmetic would give another pixel (what the test checks)."""
    import torch

    bins = np.arange(1000)
    found = []
    for size in sizes:
        expected = ((torch.tensor(bins) + 0.5) * (size / 1000)).int().numpy()
        mine = ((bins.astype(np.float32) + np.float32(0.5)) * np.float32(size / 1000)).astype(np.int32)
        assert np.array_equal(expected, mine), size
        wide = ((bins + 0.5) * (size / 1000)).astype(np.int64)
        found += [[size, int(b), int(expected[b])] for b in np.flatnonzero(wide != expected)[:3]]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "test" / "data" / "florence2")
    parser.add_argument("--skimage-data", type=Path, default=default_skimage_data())
    args = parser.parse_args()
    from PIL import Image

    args.out.mkdir(parents=True, exist_ok=True)
    write_ocr_image(args.skimage_data, args.out / "ocr.png")
    vocab_size = write_tokenizer(args.out)
    write_configs(args.out)
    proc = processor(args.out)
    model = florence2_model(vocab_size, proc.image_token_id)
    model.config.to_json_file(str(args.out / "config.json"))
    export_florence2(model, args.out)
    folders = {name: args.out if name == "ocr.png" else args.skimage_data for name in IMAGES}
    images = {name: Image.open(folders[name] / name).convert("RGB") for name in IMAGES}
    first_step = check_first_step(model, args.out, proc, images["astronaut.png"])
    cases = [case(model, proc, images[name], name, task, text) for name in IMAGES for task, text in TASKS]
    sizes = sorted({size for image in images.values() for size in image.size} | set(range(1, 2049, 7)))
    files = sorted(p for p in args.out.rglob("*") if p.is_file() and p.name != "reference.json")
    versions = {
        name: importlib.metadata.version(name)
        for name in ("torch", "transformers", "tokenizers", "onnx", "onnxruntime", "onnxslim", "pillow")
    }
    versions["opencv-python-headless"] = importlib.metadata.version("opencv-python-headless")
    reference = {
        "made_by": "benchmarks/make_florence2.py",
        "versions": versions,
        "sha256": {str(p.relative_to(args.out)): sha256(p) for p in files},
        "side": SIDE,
        "margin": MARGIN,
        "first_step": first_step,
        "dequantize": check_dequantize(sizes),
        "cases": cases,
    }
    (args.out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    print("first step, ONNX Runtime against the model:", first_step)
    for entry in cases:
        answer = entry["answer"]
        shown = (
            len(answer.get("bboxes", answer.get("quad_boxes", answer.get("polygons", []))))
            if isinstance(answer, dict)
            else len(answer)
        )
        print(entry["image"], entry["task"], len(entry["tokens"]), entry["max_new_tokens"], entry["min_gap"], shown)


if __name__ == "__main__":
    main()
