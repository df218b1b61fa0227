#!/usr/bin/env python3
r"""What transformers' beam search answers on the Florence-2 test export: test/data/florence2/beams.json (read by
test/test_florence2.py without PyTorch), beside the greedy references of make_florence2.py.

The model is made again as make_florence2.py made it (florence2_export.florence2_model: the seeded small config,
made lively) and checked to be the committed export's: ONNX Runtime's first decoding step on the committed graphs
against the model's (make_florence2.check_first_step; its logits within FIRST_STEP_LIMIT) and transformers' greedy
tokens of the committed reference.json's first GREEDY_CHECKED cases given again. Nothing of the export is written:
the processor is read from the committed folder.

Per image x task of TASKS: ``generate(num_beams=3, do_sample=False, max_new_tokens=N)`` with the export's
generation config (the published one: early_stopping true, length_penalty 1, no_repeat_ngram_size 3, forced BOS and
EOS), ``batch_decode(skip_special_tokens=False)`` and ``post_process_generation``. Recorded with the tokens: the
smallest gap between neighbours among the best 2 x beams + 1 continuations' scores over the steps (what the search
ranks: a running score plus the token's log-probability), and between the best finished hypothesis and the next.
Where a step's gap is under MARGIN (a near tie another CPU's rounding may turn), the case is made again with
max_new_tokens ending before it; a case whose finished hypotheses stay within MARGIN is left out. So every recorded
choice is clear.

    HF_HUB_OFFLINE=1 /work/export_venv/bin/python benchmarks/make_florence2_beams.py
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
from pathlib import Path

import numpy as np
from florence2_export import GENERATION_CONFIG, florence2_model
from make_florence2 import IMAGES, check_first_step, processor
from make_open_vocab import default_skimage_data, sha256

ROOT = Path(__file__).resolve().parent.parent
BEAMS = 3  # the published config's num_beams
MAX_NEW_TOKENS = 32
MARGIN = 2e-3  # in log-probability: every ranking the search made is clear by this
FIRST_STEP_LIMIT = 1e-4  # ONNX Runtime's first-step logits against the rebuilt model's
GREEDY_CHECKED = 12  # the committed greedy cases given again by the rebuilt model
TASKS = [
    ("<CAPTION>", ""),
    ("<OCR>", ""),
    ("<OD>", ""),
    ("<CAPTION_TO_PHRASE_GROUNDING>", "a cat and an astronaut"),
    ("<OCR_WITH_REGION>", ""),
    ("<DENSE_REGION_CAPTION>", ""),
]


def recorded_gaps(model, keep: int) -> list[float]:
    """Wrap the model's beam search step that ranks the continuations: the smallest gap between neighbours among
    the best ``keep`` + 1 of each step's scores (finite, and not those of the beams that must not run: -1e9), in the
    returned list."""
    import torch

    gaps: list[float] = []
    ranked = model._get_top_k_continuations

    def ranking(accumulated_log_probs, *arguments, **options):
        values = torch.topk(accumulated_log_probs[0], keep + 1).values.numpy()
        live = values[np.isfinite(values) & (values > -1e8)]
        gaps.append(float(np.min(live[:-1] - live[1:])) if len(live) > 1 else float("inf"))
        return ranked(accumulated_log_probs, *arguments, **options)

    model._get_top_k_continuations = ranking
    return gaps


def generate(model, inputs, max_new_tokens: int, returned: int = 1):
    import torch
    from transformers import GenerationConfig

    settings = {"num_beams": BEAMS, "do_sample": False, "max_new_tokens": max_new_tokens}
    config = GenerationConfig(**GENERATION_CONFIG | settings | {"num_return_sequences": returned})
    config.output_scores, config.return_dict_in_generate = True, True
    with torch.no_grad():
        return model.generate(**inputs, generation_config=config)


def case(model, proc, gaps: list[float], image, image_name: str, task: str, text: str) -> dict | None:
    """One image x task by beam search, with MAX_NEW_TOKENS or fewer where a step's ranking is within MARGIN; None
    where the best finished hypothesis is within MARGIN of the next."""
    inputs = proc(text=task + text, images=image, return_tensors="pt")
    limit = MAX_NEW_TOKENS
    while True:
        gaps.clear()
        out = generate(model, inputs, limit)
        close = [step for step, gap in enumerate(gaps) if gap < MARGIN]
        if not close:
            break
        limit = close[0] + 1 if close[0] + 1 < limit else limit - 1
        if limit < 1:
            return None
    step_gap = min(gaps)
    finished = generate(model, inputs, limit, BEAMS).sequences_scores.numpy()
    finished_gap = float(finished[0] - finished[1])
    if finished_gap < MARGIN:
        return None
    generated = proc.batch_decode(out.sequences, skip_special_tokens=False)[0]
    answer = proc.post_process_generation(generated, task=task, image_size=(image.width, image.height))[task]
    return {
        "image": image_name,
        "task": task,
        "text": text,
        "num_beams": BEAMS,
        "max_new_tokens": limit,
        "tokens": out.sequences[0].tolist(),
        "score": float(out.sequences_scores[0]),
        "generated_text": generated,
        "answer": answer,
        "image_size": [image.width, image.height],
        "min_gap": round(min(step_gap, finished_gap), 6),
    }


def check_rebuilt(model, proc, folder: Path, images: dict) -> dict:
    """The rebuilt model is the committed export's: ONNX Runtime's first step within FIRST_STEP_LIMIT, and the
    committed greedy tokens given again."""
    import torch
    from transformers import GenerationConfig

    first_step = check_first_step(model, folder, proc, images["astronaut.png"])
    assert first_step["logits"] < FIRST_STEP_LIMIT, first_step
    reference = json.loads((folder / "reference.json").read_text())
    for entry in reference["cases"][:GREEDY_CHECKED]:
        inputs = proc(text=entry["task"] + entry["text"], images=images[entry["image"]], return_tensors="pt")
        settings = {"num_beams": 1, "do_sample": False, "max_new_tokens": entry["max_new_tokens"]}
        with torch.no_grad():
            tokens = model.generate(**inputs, generation_config=GenerationConfig(**GENERATION_CONFIG | settings))
        assert tokens[0].tolist() == entry["tokens"], (entry["image"], entry["task"])
    return {"first_step": first_step, "greedy_cases_given_again": GREEDY_CHECKED}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, default=ROOT / "test" / "data" / "florence2")
    parser.add_argument("--skimage-data", type=Path, default=default_skimage_data())
    args = parser.parse_args()
    from PIL import Image
    from tokenizers import Tokenizer

    proc = processor(args.folder)
    vocab_size = Tokenizer.from_file(str(args.folder / "tokenizer.json")).get_vocab_size()
    model = florence2_model(vocab_size, proc.image_token_id)
    folders = {name: args.folder if name == "ocr.png" else args.skimage_data for name in IMAGES}
    images = {name: Image.open(folders[name] / name).convert("RGB") for name in IMAGES}
    rebuilt = check_rebuilt(model, proc, args.folder, images)
    gaps = recorded_gaps(model, 2 * BEAMS)
    cases = [case(model, proc, gaps, images[name], name, task, text) for name in IMAGES for task, text in TASKS]
    names = ("torch", "transformers", "tokenizers", "onnxruntime")
    versions = {name: importlib.metadata.version(name) for name in names}
    reference = {
        "made_by": "benchmarks/make_florence2_beams.py",
        "versions": versions,
        "sha256": {name: sha256(args.folder / name) for name in ("reference.json", "generation_config.json")},
        "rebuilt": rebuilt,
        "margin": MARGIN,
        "left_out": sum(entry is None for entry in cases),
        "cases": [entry for entry in cases if entry is not None],
    }
    (args.folder / "beams.json").write_text(json.dumps(reference, indent=1) + "\n")
    print("rebuilt:", rebuilt)
    for entry in reference["cases"]:
        print(entry["image"], entry["task"], len(entry["tokens"]), entry["max_new_tokens"], entry["min_gap"])
    print("left out:", reference["left_out"])


if __name__ == "__main__":
    main()
