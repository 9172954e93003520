"""The tensor-parallel page's sweeps, asked of the estimator at the plan's own batch: decode
time against context, tokens/s against device count, and tokens/s, time to first token and
time per output token against batch size."""

from dataclasses import replace

import numpy as np

from archipelago.estimate.workload import Generation
from archipelago.report.charts import sweep_lines
from archipelago.report.page import Chart
from archipelago.report.sweep import device_count_sweep
from archipelago.strategies.tensor_parallel.costs import phase_seconds, sequence_turns
from archipelago.strategies.tensor_parallel.estimate import Estimate, estimate
from archipelago.strategies.tensor_parallel.page_roofline import mean_decode_context
from archipelago.strategies.tensor_parallel.split_choice import share
from archipelago.strategies.tensor_parallel.staged import StagedPlan
from archipelago.strategies.tensor_parallel.transfers import transfer_seconds

MS = 1e3
# The batch sweep doubles from 1 while the KV caches fit, up to this many sequences.
MAX_SWEPT_BATCH = 256
CONTEXT_POINTS = 48


def decode_step_seconds(plan: StagedPlan, work: Generation, est: Estimate,
                        contexts: np.ndarray) -> np.ndarray:
    """One decode step of the workload's batch at each context, as the estimate costs it:
    every stage's share with the sequences that run together (in turns where the engine
    runs one at a time), and the hops between stages where the plan shows its split."""
    together, turns = sequence_turns(plan.program, work)
    seconds = sum(turns * sum(phase_seconds(s.program, 1, contexts, share(s),
                                            sequences=together).values())
                  for s in plan.stages)
    if not plan.shows_split:
        return seconds
    _, hops = transfer_seconds(plan.program, replace(work, output_tokens=2), est.links)
    return seconds + float(hops[0])


def sweep_contexts(plan: StagedPlan, work: Generation) -> np.ndarray:
    """Contexts from 1 to the model's positions, the page's mean decode context among them
    (so the curve passes through the plan's own step)."""
    spread = np.geomspace(1, plan.spec.max_positions, CONTEXT_POINTS).astype(int)
    return np.unique(np.append(spread, mean_decode_context(work)))


def sweeps(plan: StagedPlan, work: Generation, est: Estimate
           ) -> tuple[list[Chart], list[str]]:
    contexts = sweep_contexts(plan, work)
    per_token = decode_step_seconds(plan, work, est, contexts) * MS
    context_chart = Chart(
        "decode time per token against context length",
        f"How one decode step of the batch's {work.batch} sequence(s) grows as the KV cache "
        "grows (attention reads more keys); the star is this plan's mean decode step.",
        sweep_lines(contexts, {plan.strategy: per_token}, "context length (tokens)",
                    "decode time per step (ms)", log_x=True,
                    mark=(mean_decode_context(work), est.decode_s_per_token * MS)))
    counts, rates, refused = device_count_sweep(plan, work, lambda e: e.tokens_per_s)
    scale_chart = Chart(
        "tokens/s against device count",
        f"The same strategy and engine re-planned on 1, 2, 4 and 8 "
        f"{plan.program.devices[0].device.key} at {work.input_tokens}:{work.output_tokens} tokens: "
        "how far tensor parallelism scales before the collectives dominate.",
        sweep_lines(counts, {plan.strategy: rates}, "devices", "output tokens per second",
                    mark=(plan.ranks, est.tokens_per_s)))
    return [context_chart, scale_chart], refused


def batch_sweep(plan: StagedPlan, work: Generation) -> list[tuple[int, Estimate]]:
    """(batch, estimate) at 1, 2, 4, ... sequences while the plan fits (the KV caches grow
    with the batch), at most MAX_SWEPT_BATCH; batch 1 always."""
    points = []
    batch = 1
    while batch <= MAX_SWEPT_BATCH:
        est = estimate(plan, replace(work, batch=batch))
        if points and not est.feasible:
            break
        points.append((batch, est))
        batch *= 2
    return points


def batch_charts(plan: StagedPlan, work: Generation, est: Estimate) -> list[Chart]:
    points = batch_sweep(plan, work)
    batches = [b for b, _ in points]
    note = f" {points[-1][1].batch_note}." if points[-1][1].batch_note else ""
    rates = Chart(
        "tokens/s against batch size",
        f"{work.input_tokens}:{work.output_tokens} tokens for each of B concurrent sequences, "
        f"B doubling while the KV caches fit (at most {MAX_SWEPT_BATCH}): output tokens per "
        f"second of the whole ring and of one device, to set beside GPU serving.{note}",
        sweep_lines(batches, {"all devices": [e.tokens_per_s for _, e in points],
                              "per device": [e.tokens_per_s_per_device for _, e in points]},
                    "batch (sequences)", "output tokens per second", log_x=True,
                    mark=(est.batch, est.tokens_per_s)))
    latency = Chart(
        "time to first token and per output token against batch size",
        "The prompt phase of all B sequences (time to first token) and one decode step of "
        "all B (time per output token), on a log scale since the two are decades apart: "
        "what a batch costs each user in latency; the star is this plan's time per token.",
        sweep_lines(batches, {"time to first token": [e.prefill_s * MS for _, e in points],
                              "time per output token": [e.decode_s_per_token * MS
                                                        for _, e in points]},
                    "batch (sequences)", "ms (log scale)", log_x=True,
                    mark=(est.batch, est.decode_s_per_token * MS), log_y=True))
    return [rates, latency]
