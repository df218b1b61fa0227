"""Florence-2's beam search: transformers' ``generate(num_beams=N, do_sample=False)`` (GenerationMixin._beam_search,
transformers 5) on the decoder of models/florence2.py, in float32 as transformers computes it.

Each step runs the decoder once on the N running beams (a batch of N, the key-value cache reordered by the beam each
continues), then as transformers:
- the last token's log-softmax, the generation config's rules on each beam's own sequence (no n-gram of
  ``no_repeat_ngram_size`` twice; ``<s>`` forced at the first step, ``</s>`` at the last ``max_new_tokens`` allows),
  plus the beam's running score;
- the best K = max(2, 1 + end tokens) x N continuations over all beams (token and beam);
- those that end (an end token, or the length limit) and are among the best N join the finished hypotheses with
  their score over their length ** ``length_penalty`` (the N best finished kept); the best N that do not end run on;
- the search stops when every kept hypothesis is finished and ``early_stopping`` is true, when no running beam can
  beat the worst finished one (transformers' heuristic: its score over its length now, or over the longest length
  where ``early_stopping`` is "never" and the penalty positive), or when every continuation ends.
The answer is the best finished hypothesis. At the start only the first beam runs (the others score -1e9), so the N
beams are the first step's N best continuations of the one start token.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

DEAD = np.float32(-1.0e9)  # transformers' score of a beam that must not be chosen


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Rows of log-probabilities, in float32 (torch.nn.functional.log_softmax's arithmetic)."""
    logits = logits.astype(np.float32)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True, dtype=np.float32))


def top(scores: np.ndarray, k: int) -> np.ndarray:
    """The indices of the ``k`` highest ``scores``, highest first (ties: the lower index first)."""
    return np.argsort(-scores, kind="stable")[:k]


class Beams:
    """The state of a search: the running beams (sequences, scores) and the N kept finished hypotheses."""

    def __init__(self, start: int, beams: int):
        self.running = [[start] for _ in range(beams)]
        self.scores = np.full(beams, DEAD, np.float32)
        self.scores[0] = 0.0
        self.finished: list[list[int]] = [[start] for _ in range(beams)]
        self.finished_scores = np.full(beams, DEAD, np.float32)
        self.done = np.zeros(beams, bool)  # is_sent_finished
        self.improvable = True  # is_early_stop_heuristic_unsatisfied


def beam_search(
    step: Callable[[list[int], dict, dict], tuple[np.ndarray, dict[str, np.ndarray]]],
    rules: Callable[[list[int], np.ndarray], np.ndarray],
    start: int,
    ends: frozenset[int],
    max_new_tokens: int,
    beams: int,
    length_penalty: float = 1.0,
    early_stopping: bool | str = False,
    reorder: Callable[[dict[str, np.ndarray], np.ndarray], tuple[dict, dict]] | None = None,
) -> tuple[list[int], bool]:
    """The best sequence from ``start`` (with it) and whether an end token ended it. ``step(last tokens, pasts,
    cross)``: the decoder on one token per beam -> (logits [beams, V], presents); ``rules(sequence, log_probs)``:
    the generation config's rules on one beam's log-probabilities (n-grams, forced tokens), in place, returning
    them; ``reorder(presents, rows)``: the next step's pasts and cross-attention pasts from a step's presents, the
    rows those beams continue (the caller's: its cache layout)."""
    max_length = 1 + max_new_tokens
    keep = max(2, 1 + len(ends)) * beams
    state = Beams(start, beams)
    pasts: tuple[dict, dict] = ({}, {})  # the decoder's self- and cross-attention pasts: none at the first step
    while True:
        length = len(state.running[0])
        logits, presents = step([sequence[-1] for sequence in state.running], *pasts)
        log_probs = log_softmax(logits)
        for row, sequence in enumerate(state.running):
            rules(sequence, log_probs[row])
        vocabulary = log_probs.shape[-1]
        accumulated = (log_probs + state.scores[:, None]).reshape(-1)
        chosen = top(accumulated, keep)
        chosen_scores = accumulated[chosen]
        rows, tokens = chosen // vocabulary, chosen % vocabulary
        candidates = [state.running[row] + [int(token)] for row, token in zip(rows, tokens)]
        ends_here = np.array([token in ends or length + 1 >= max_length for token in tokens.tolist()])
        # the best N that do not end run on
        running_scores = chosen_scores + ends_here.astype(np.float32) * DEAD
        going = top(running_scores, beams)
        state.running = [candidates[i] for i in going]
        state.scores = running_scores[going]
        # those of the best N that end join the finished, scored over their length
        just = ends_here & (np.arange(keep) < beams)
        scored = chosen_scores / np.float32(float(length) ** length_penalty)
        full = bool(state.done.all()) and early_stopping is True
        scored = scored + np.float32(full) * DEAD
        scored = scored + np.float32(not state.improvable) * DEAD
        scored = scored + (~just).astype(np.float32) * DEAD
        merged_scores = np.concatenate([state.finished_scores, scored])
        merged = [*state.finished, *candidates]
        merged_done = np.concatenate([state.done, just])
        kept = top(merged_scores, beams)
        state.finished = [merged[i] for i in kept]
        state.finished_scores, state.done = merged_scores[kept], merged_done[kept]
        if reorder is not None:
            pasts = reorder(presents, rows[going])
        # can a running beam still beat the worst finished one?
        length += 1
        hypothetical = max_length - 1 if early_stopping == "never" and length_penalty > 0.0 else length - 1
        best_running = state.scores[0] / np.float32(float(hypothetical) ** length_penalty)
        worst = np.where(state.done, state.finished_scores.min(), DEAD)
        state.improvable = state.improvable and bool(np.any(best_running > worst))
        open_beam = not (bool(state.done.all()) and early_stopping is True)
        if not (state.improvable and open_beam and not ends_here.all()):
            break
    best = state.finished[0]
    return best, best[-1] in ends
