"""The tensor-parallel kind's serving hook: its plan's iteration times (the kind's own
estimator on estimate/iteration.py's grid) and the KV cache its boards' free HBM holds,
for the serving simulator (archipelago/serving/).

Every stage caches the keys and values of its own layers; the plan holds as many tokens of
cache as its tightest board does (the HBM its weights leave, over the bytes one token's
keys and values take on it).

A plan of several stages also hands back each stage's table (`IterationTable.stages`), for
micro-batches in flight through them (serving/pipeline.py): a stage's seconds as the
estimator costs them (`Estimate.stages`), plus its hand-off to the next stage, the link's
seconds the estimator adds for it (`transfers.hop_seconds`; the last stage's is the sampled
token back to the first), once per turn of the batch."""

from functools import partial

from archipelago.estimate.iteration import IterationTable, tabulate
from archipelago.estimate.workload import Generation
from archipelago.strategies.tensor_parallel.costs import (
    Holdings,
    kv_cache_bytes,
    sequence_turns,
)
from archipelago.strategies.tensor_parallel.estimate import Estimate, estimate
from archipelago.strategies.tensor_parallel.split_choice import share
from archipelago.strategies.tensor_parallel.staged import StagedPlan
from archipelago.strategies.tensor_parallel.transfers import hop_seconds


def kv_tokens(plan: StagedPlan) -> int:
    """Tokens of KV cache (over all sequences) the plan's HBM holds beside its weights."""
    fewest = None
    for stage in plan.stages:
        program, part = stage.program, share(stage)
        held = Holdings(program)
        for dp in program.devices:
            hbm = dp.device.memory("hbm")
            per_token = kv_cache_bytes(program, dp.rank, 1, 1, part.layers)
            if hbm is None or per_token <= 0:
                return 0
            free = hbm.capacity_bytes - held.held_bytes(dp.rank, "hbm", part)
            tokens = max(0, int(free // per_token))
            fewest = tokens if fewest is None else min(fewest, tokens)
    return fewest or 0


def stage_parts(plan: StagedPlan, workload: Generation, est: Estimate
                ) -> list[tuple[float, float]]:
    """Each stage's (prefill, decode step) seconds in `est` of `workload` (two output
    tokens), its hand-off to the next stage included where the estimator adds them."""
    prompt, step = [0.0] * len(est.stages), [0.0] * len(est.stages)
    if plan.shows_split:
        _, turns = sequence_turns(plan.program, workload)
        prompt, step = hop_seconds(plan.program, workload, est.links)
        prompt, step = [turns * s for s in prompt], [turns * s for s in step]
    return [(st.prefill_s + p, st.decode_s_per_token + s)
            for st, p, s in zip(est.stages, prompt, step, strict=True)]


def serving(plan: StagedPlan, workload: Generation, max_batch: int) -> IterationTable:
    parts = None
    if len(plan.stages) > 1:
        parts = partial(stage_parts, plan)
    return tabulate(partial(estimate, plan), workload, max_batch, plan.spec.max_positions,
                    kv_tokens(plan), plan.program.kv_value_bytes, f"{plan.strategy} plan",
                    parts)
