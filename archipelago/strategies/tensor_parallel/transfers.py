"""Seconds between a staged plan's pipeline stages: the hidden vector of every row forward
and the sampled token back (the estimator's and the split choice's transfers; the
stages' own seconds are costs.py's)."""

import numpy as np

from archipelago.estimate.workload import Generation
from archipelago.hardware.cluster import Cluster
from archipelago.hardware.device import Link
from archipelago.strategies.tensor_parallel.costs import FP16_BYTES, sequence_turns
from archipelago.strategies.tensor_parallel.plan import CommStep, Plan

TOKEN_ID_BYTES = 4  # the sampled token travels between stages as an int32


def activation_bytes(plan: Plan) -> float:
    """Bytes of one activation value between boards: what the plan's all-gathers carry."""
    return next((s.value_bytes for s in plan.block_steps
                 if isinstance(s, CommStep) and s.kind == "all_gather"), FP16_BYTES)


def transfer_seconds(plan: Plan, workload: Generation, links: list[Link]
                     ) -> tuple[float, np.ndarray]:
    """Seconds between stages (`links`: stage k to k + 1, then the last back to the first;
    none for one stage) of the prompt, and of each decode step: the hidden vector of every
    row forward at the activations' width (seeds/002 §III's all-gather width), the sampled
    token (an int32) back. A batch moves its rows together, or in turn on an engine that
    runs its sequences so."""
    n_in, n_out = workload.input_tokens, workload.output_tokens
    together, turns = sequence_turns(plan, workload)
    row = together * plan.spec.hidden * activation_bytes(plan)
    prompt = 0.0
    for link in links[:-1]:
        prompt += (n_in * link.transfer_s(row) if plan.engine.token_serial_prefill
                   else link.transfer_s(n_in * row))
    step = sum(link.transfer_s(row) for link in links[:-1])
    if links:
        step += links[-1].transfer_s(together * TOKEN_ID_BYTES)
    return turns * prompt, np.full(max(n_out - 1, 0), turns * step)


def stage_links(cluster: Cluster, tp: int, pp: int) -> list[Link]:
    """The links a token crosses between `pp` stages of `tp` boards: stage k's last board to
    stage k + 1's first, then the last stage's first board back to the first stage's."""
    if pp == 1:
        return []
    hops = [cluster.link(k * tp + tp - 1, (k + 1) * tp) for k in range(pp - 1)]
    return [*hops, cluster.link((pp - 1) * tp, 0)]
