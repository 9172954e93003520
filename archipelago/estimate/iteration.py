"""A text-generation plan's iteration times as a table, for the serving simulator
(archipelago/serving/): a prefill pass of B prompts of c tokens and a decode step of B
sequences at context c, read from the plan kind's own estimator on a grid of batches and
contexts once per plan, then interpolated, so a simulation of many thousand iterations
never calls an estimator.

Each grid point is one estimate of `Generation(c, 2, batch=B)`: its prefill is the pass of
B prompts of c tokens, its first (only) decode step the step at context c + 1
(`GenerationTiming.decode_s_first`). Between grid points the table is linear in the batch
and in the context: a step's reads and FLOPs grow linearly with both (one more sequence,
one more cached token), so the interpolation is exact where the estimator is affine and
close where a roofline's max() bends it. An engine whose prefill pads rows to its array
(LORA's systolic array: a step every 64 rows) makes the prefill a staircase that a grid
only brackets, so the grid also holds the workload's own prompt and full length: a fixed
prompt's prefill is the estimator's exactly.

A plan of pipeline stages also tabulates each stage's share from the same estimates
(`stages`: one table a stage, its seconds and its hand-off to the next), so the serving
simulator can keep micro-batches in flight through them (serving/pipeline.py).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from archipelago.errors import ArchipelagoError
from archipelago.estimate.generation import GenerationTiming
from archipelago.estimate.workload import Generation

# Grid sizes: dense where a step's cost bends (small batches, short contexts), geometric
# after; a lora-q estimate costs ~4 ms, so ~12 x 16 points tabulate a plan in under a second.
CONTEXT_POINTS = 16


def batch_grid(max_batch: int) -> np.ndarray:
    """1..4, then about x1.5 per point, and max_batch itself."""
    points = {1, 2, 3, 4, max_batch}
    b = 4.0
    while b < max_batch:
        b *= 1.5
        points.add(min(max_batch, round(b)))
    return np.array(sorted(p for p in points if p <= max_batch))


def context_grid(max_context: int, also: tuple[int, ...] = ()) -> np.ndarray:
    """Prompt lengths 1..max_context - 2 (an estimate needs two positions after the prompt),
    geometric, and those of `also` within that range."""
    top = max(1, max_context - 2)
    grid = np.round(np.geomspace(1, top, CONTEXT_POINTS)).astype(int)
    return np.unique(np.concatenate([grid, [c for c in also if 1 <= c <= top]]))


@dataclass
class IterationTable:
    """Seconds of a prefill pass (`prefill_s[b, c]`: batches[b] prompts of contexts[c]
    tokens) and of a decode step (`decode_s[b, c]`: batches[b] sequences at context
    contexts[c] + 1); `kv_tokens`: the tokens of KV cache the plan's free memory holds
    (every sequence's prompt and output together), `max_context` the model's positions,
    `kv_value_bytes` one cached key or value in the plan's format (what a KV cache moved
    between pools weighs, serving/disaggregated.py); `stages`: for a plan of several
    pipeline stages, each stage's table (its own seconds and its hand-off to the next),
    which add up to this one; empty for one stage."""

    batches: np.ndarray
    contexts: np.ndarray
    prefill_s: np.ndarray
    decode_s: np.ndarray
    kv_tokens: int
    max_context: int
    kv_value_bytes: float
    stages: tuple["IterationTable", ...] = ()
    _rows: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)

    @property
    def max_batch(self) -> int:
        return int(self.batches[-1])

    def row(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """The prefill and decode rows at `batch` (linear between grid batches), kept."""
        row = self._rows.get(batch)
        if row is None:
            if not 1 <= batch <= self.max_batch:
                raise ValueError(f"batch {batch} outside 1..{self.max_batch}")
            k = int(np.searchsorted(self.batches, batch))
            if self.batches[k] == batch:
                row = (self.prefill_s[k], self.decode_s[k])
            else:
                lo, hi = self.batches[k - 1], self.batches[k]
                w = (batch - lo) / (hi - lo)
                row = tuple((1 - w) * t[k - 1] + w * t[k]  # type: ignore[assignment]
                            for t in (self.prefill_s, self.decode_s))
            self._rows[batch] = row
        return row

    def prefill(self, batch: int, tokens: float | np.ndarray) -> Any:
        """Seconds of one prefill pass of `batch` prompts of `tokens` tokens each."""
        return np.interp(tokens, self.contexts, self.row(batch)[0])

    def decode(self, batch: int, context: float | np.ndarray) -> Any:
        """Seconds of one decode step of `batch` sequences at `context` (the position of the
        token fed; vectorized over contexts)."""
        return np.interp(context, self.contexts + 1, self.row(batch)[1])


# (workload, its estimate) -> each stage's (prefill seconds, decode-step seconds) in it.
StageParts = Callable[[Generation, Any], Sequence[tuple[float, float]]]


def tabulate(estimator: Callable[[Generation], GenerationTiming], base: Generation,
             max_batch: int, max_context: int, kv_tokens: int, kv_value_bytes: float,
             where: str, parts: StageParts | None = None) -> IterationTable:
    """The table of `estimator` (one plan's, curried) over the grid and `base`'s prompt,
    every workload `base` with its prompt, output and batch replaced (its number format
    kept); with `parts`, also each stage's table, read from the same estimates. A plan whose
    single sequence does not fit is refused with the estimate's first reason."""
    batches = batch_grid(max_batch)
    contexts = context_grid(max_context, (base.input_tokens, base.total_tokens - 1))
    prefill = np.zeros((len(batches), len(contexts)))
    decode = np.zeros_like(prefill)
    staged: list[np.ndarray] = []  # per stage: [prefill, decode] x batches x contexts
    for i, b in enumerate(batches):
        for j, c in enumerate(contexts):
            work = replace(base, input_tokens=int(c), output_tokens=2, batch=int(b))
            est = estimator(work)
            if i == 0 and j == 0 and not est.feasible:
                reasons = getattr(est, "reasons", None) or ["it does not fit"]
                raise ArchipelagoError(f"{where}: cannot serve: {reasons[0]}")
            prefill[i, j], decode[i, j] = est.prefill_s, est.decode_s_first
            for k, figures in enumerate(parts(work, est) if parts is not None else ()):
                if i == 0 and j == 0:
                    staged.append(np.zeros((2, *prefill.shape)))
                staged[k][:, i, j] = figures
    if kv_tokens < 2:
        raise ArchipelagoError(f"{where}: cannot serve: the weights leave no memory for a "
                               "KV cache")
    stages = tuple(IterationTable(batches, contexts, p, d, kv_tokens, max_context,
                                  kv_value_bytes) for p, d in staged)
    return IterationTable(batches, contexts, prefill, decode, kv_tokens, max_context,
                          kv_value_bytes, stages)
