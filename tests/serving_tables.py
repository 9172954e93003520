"""Iteration tables written by hand for the serving tests: linear in the batch and the
context between two grid points each, so the table's interpolation is exact and every
event time can be computed by hand."""

import numpy as np

from archipelago.estimate.iteration import IterationTable

TOP = 4096  # the contexts grid's far end (and the model's positions)


def linear_table(prefill_base: float, prefill_per_token: float, decode_base: float,
                 decode_per_sequence: float, decode_per_context: float,
                 max_batch: int = 8, kv_tokens: int = 10**7) -> IterationTable:
    """prefill(b, c) = b * (prefill_base + prefill_per_token * c);
    decode(b, c) = decode_base + decode_per_sequence * (b - 1) + decode_per_context * c."""
    batches, contexts = np.array([1, max_batch]), np.array([1, TOP - 2])
    prefill = np.array([[b * (prefill_base + prefill_per_token * c) for c in contexts]
                        for b in batches])
    decode = np.array([[decode_base + decode_per_sequence * (b - 1)
                        + decode_per_context * (c + 1) for c in contexts] for b in batches])
    return IterationTable(batches, contexts, prefill, decode, kv_tokens, TOP, 2.0)
