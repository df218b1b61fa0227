"""bench of a family whose answers are generated token by token (Family.generates: Florence-2, models/florence2.py):
what a frame costs, stage by stage, as the node answers it. The one home of this measure: `vision-factory bench
--model-type florence2` reports it per backend, benchmarks/bench_florence2.py prints it for Florence-2-base.

The stages: the pre-processing (the processor's Pillow stretch and normalisation), the vision encoder, the image and
the task's question encoded (the vision encoder, then the encoder over the image features and the question's
embeddings: once a frame), the first decoding step (its cross-attention keys and values made) and each step after
with the key-value cache (the mean over ``tokens`` steps: what each further token costs); each the median of
``rounds`` runs after a warm-up. A step runs the model's beams (its num_beams: one row of the decoder each, the
cache's rows gathered for the next step as the search reorders them; 1: greedy). An answer of N tokens is then the
encoding, the first step and N - 1 steps after (ANSWER_TOKENS). The token fed is fixed (the start token, then 0): a
step's cost does not depend on which token it is.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..text import untrusted

ANSWER_TOKENS = (16, 64)  # the answer lengths whose time is reported
BENCH_TOKENS = 32  # decoding steps after the first, timed together: a token's cost is their mean


def median_ms(run: Callable[[], Any], rounds: int) -> float:
    """The median of ``rounds`` runs of ``run``, in ms, after one untimed run (the warm-up)."""
    run()
    times = []
    for _ in range(max(1, rounds)):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def generation_stages(model: Any, frame: np.ndarray, rounds: int, tokens: int = BENCH_TOKENS) -> dict[str, Any]:
    """A generating model's stages on ``frame`` with its task set (ms, medians of ``rounds``): preprocess_ms,
    vision_ms, encode_ms (image and question, the pre-processing and vision encoder included), inference_ms (encode_ms
    less the pre-processing), first_token_ms, token_ms (each step after, the mean of ``tokens``), answer_N_ms for each
    N of ANSWER_TOKENS; with the frame's size, the task, the beams and ``tokens``."""
    from ..models.florence2 import as_pasts

    task = model.task
    pixels = model.preprocess(frame)
    vision = model.runner
    stages = {"preprocess_ms": median_ms(lambda: model.preprocess(frame), rounds)}
    stages["vision_ms"] = median_ms(lambda: vision.run({vision.inputs[0].name: pixels}), rounds)
    stages["encode_ms"] = median_ms(lambda: model.encode(frame, task), rounds)
    stages["inference_ms"] = stages["encode_ms"] - stages["preprocess_ms"]
    beams = model.num_beams
    states, mask = (np.repeat(part, beams, axis=0) for part in model.encode(frame, task))
    start, rows = [model.facts.decoder_start] * beams, np.arange(beams)
    stages["first_token_ms"] = median_ms(lambda: model.step(start, states, mask, {}, {}), rounds)

    def decode() -> None:
        _, presents = model.step(start, states, mask, {}, {})
        pasts, cross = as_pasts(presents, "decoder"), as_pasts(presents, "encoder")
        for _ in range(tokens):
            _, presents = model.step([0] * beams, states, mask, pasts, cross)
            pasts = {name: value[rows] for name, value in as_pasts(presents, "decoder").items()}

    stages["token_ms"] = (median_ms(decode, max(1, rounds // 2 + 1)) - stages["first_token_ms"]) / tokens
    for count in ANSWER_TOKENS:
        stages[f"answer_{count}_ms"] = stages["encode_ms"] + stages["first_token_ms"] + (count - 1) * stages["token_ms"]
    height, width = frame.shape[:2]
    described = {"frame_size": f"{width}x{height}", "task": task.task + task.text, "beams": beams, "tokens": tokens}
    return described | stages


def lines(target: str, stages: Mapping[str, Any]) -> list[str]:
    """bench's lines on a generating model's stages (``generation_stages``'s), [] for any other pipeline."""
    if "first_token_ms" not in stages:
        return []
    answers = ", ".join(f"{count} tokens {stages[f'answer_{count}_ms'] / 1000:.2f} s" for count in ANSWER_TOKENS)
    return [
        f"{target} per {stages['frame_size']} frame, task {untrusted(stages['task'], 200)}: "
        f"pre {stages['preprocess_ms']:.1f} ms, "
        f"vision encoder {stages['vision_ms']:.1f} ms, image and question encoded {stages['encode_ms']:.1f} ms "
        f"(once a frame), first token {stages['first_token_ms']:.2f} ms, each token after "
        f"{stages['token_ms']:.2f} ms (key-value cache, {stages['beams']} beam{'s' if stages['beams'] > 1 else ''}); "
        f"an answer of {answers}"
    ]
