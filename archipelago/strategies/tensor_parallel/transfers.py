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


def hop_seconds(plan: Plan, workload: Generation, links: list[Link]
                ) -> tuple[list[float], list[float]]:
    """Each link's seconds (`links`: stage k to k + 1, then the last back to the first) in
    the prompt, and in one decode step, once per turn: the hidden vector of every row
    forward at the activations' width (seeds/002 §III's all-gather width), the sampled
    token (an int32) back; the prompt sends nothing back. A batch moves its rows together,
    or in turn on an engine that runs its sequences so."""
    n_in = workload.input_tokens
    together, _ = sequence_turns(plan, workload)
    row = together * plan.spec.hidden * activation_bytes(plan)
    prompt = [n_in * link.transfer_s(row) if plan.engine.token_serial_prefill
              else link.transfer_s(n_in * row) for link in links[:-1]]
    step = [link.transfer_s(row) for link in links[:-1]]
    if links:
        prompt.append(0.0)
        step.append(links[-1].transfer_s(together * TOKEN_ID_BYTES))
    return prompt, step


def transfer_seconds(plan: Plan, workload: Generation, links: list[Link]
                     ) -> tuple[float, np.ndarray]:
    """Seconds between stages (none for one stage) of the prompt, and of each decode step:
    every link's (`hop_seconds`) over every turn of the batch."""
    _, turns = sequence_turns(plan, workload)
    prompt_hops, step_hops = hop_seconds(plan, workload, links)
    prompt = 0.0
    for seconds in prompt_hops[:-1]:
        prompt += seconds
    step = sum(step_hops[:-1])
    if links:
        step += step_hops[-1]
    return turns * prompt, np.full(max(workload.output_tokens - 1, 0), turns * step)


def stage_links(cluster: Cluster, tp: int, pp: int) -> list[Link]:
    """The links a token crosses between `pp` stages of `tp` boards: stage k's last board to
    stage k + 1's first, then the last stage's first board back to the first stage's."""
    if pp == 1:
        return []
    hops = [cluster.link(k * tp + tp - 1, (k + 1) * tp) for k in range(pp - 1)]
    return [*hops, cluster.link((pp - 1) * tp, 0)]
