#!/usr/bin/env python3
"""The cost of Florence-2 on 2 CPU cores: the real Florence-2-base architecture (transformers' own
``Florence2ForConditionalGeneration`` from the base configuration, seeded weights: the cost is the architecture's,
whatever the weights), run by models/florence2.py as the node runs it, on ONNX Runtime and OpenVINO.

Two steps, the first in the scratch venv of benchmarks/make_florence2.py (torch, transformers), the second in the
project's venv; the files (about 1 GB) go under /tmp, never into the repository:

    HF_HUB_OFFLINE=1 /work/export_venv/bin/python benchmarks/bench_florence2.py export [--out /tmp/florence2_bench]
    python benchmarks/bench_florence2.py time [--out /tmp/florence2_bench] [--tokens 32] [--rounds 3] [--num-beams 1,3]

``export``: florence2_export.florence2_model(base=True) (DaViT 128-1024 wide, depths 1, 1, 9, 1; BART 768 wide, six
encoder and six decoder layers, 12 heads, 51,289 tokens and <image>) in onnx-community's layout, fp32, with the test
export's tokenizer and configs (the tokenizer does not matter to the cost: the task's question is a dozen tokens).

``time``: on each backend, a 1280x720 photo (scikit-image's coffee) with the task <OD>: the pre-processing (Pillow's
bicubic stretch to 768 x 768 and the normalisation), the vision encoder, the BART encoder over the image's 577
positions and the question's, the first decoding step (its cross-attention keys and values made), and the mean of
``--tokens`` further steps with the key-value cache (what each generated token costs), greedy and with the 3 beams of
the published config (``--num-beams``: a step runs each beam as a row of the decoder); the median of ``--rounds``
runs after a warm-up; and what an answer of N tokens takes, N = 16 and 64. Printed as a Markdown table with the
machine (its CPU, load). A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = Path("/tmp/florence2_bench")
BACKENDS = ("onnx:cpu", "openvino:CPU")


def export(out: Path) -> None:
    from florence2_export import export_florence2, florence2_model, write_configs, write_tokenizer

    out.mkdir(parents=True, exist_ok=True)
    write_tokenizer(out)
    write_configs(out)
    model = florence2_model(51289 + 1, 51289, base=True)
    model.config.to_json_file(str(out / "config.json"))
    started = time.perf_counter()
    export_florence2(model, out)
    print(f"exported Florence-2-base to {out} in {time.perf_counter() - started:.0f} s")


# The script's rows: bench_generation's stages (ms), by their names here.
ROWS = {
    "pre-processing": "preprocess_ms",
    "vision encoder": "vision_ms",
    "image and question encoded": "encode_ms",
    "first token": "first_token_ms",
    "a token after": "token_ms",
    **{f"answer of {count} tokens": f"answer_{count}_ms" for count in (16, 64)},
}


def time_backend(folder: Path, target: str, tokens: int, rounds: int, beams: int = 0) -> dict[str, float]:
    """The stages on ``target`` as `vision-factory bench --model-type florence2` measures them (one home:
    vision_factory/tools/bench_generation.py), on the coffee photo at 1280x720 with the task <OD>, ``beams`` a step
    (0: the export's num_beams, the node's default)."""
    import cv2
    import skimage.data

    from vision_factory.families.florence2 import FAMILY
    from vision_factory.parameters import with_defaults
    from vision_factory.runtime.backends import load_target
    from vision_factory.tools.bench_generation import generation_stages

    given = {"model_path": str(folder), "prompt": "<OD>", "num_beams": beams}
    values = with_defaults(FAMILY.parameters, given, FAMILY.name)
    model = FAMILY.build(values, lambda path: load_target(target, Path(path)))
    frame = cv2.resize(np.ascontiguousarray(skimage.data.coffee()[..., ::-1]), (1280, 720))
    stages = generation_stages(model, frame, rounds, tokens)
    return {row: stages[name] for row, name in ROWS.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("export", "time"))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--num-beams", default="1,3", help="beams a step, comma-separated (0: the export's)")
    args = parser.parse_args()
    if args.step == "export":
        export(args.out)
        return
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from report import environment, table

    results = {
        f"{target}, {beams} beam{'s' if beams != 1 else ''}": time_backend(
            args.out, target, args.tokens, args.rounds, beams
        )
        for target in args.backends.split(",")
        for beams in map(int, args.num_beams.split(","))
    }
    stages = list(next(iter(results.values())))
    rows = [[stage, *(f"{results[target][stage]:.1f}" for target in results)] for stage in stages]
    print(environment(0))
    print(table("Florence-2-base, ms (median)", ["stage", *results], rows))


if __name__ == "__main__":
    main()
