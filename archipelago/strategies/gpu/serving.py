"""The GPU kind's serving hook: its plan's iteration times (the kind's own estimator on
estimate/iteration.py's grid) and the KV cache the GPUs' memory holds beside the weights
(each GPU its share of both, in the plan's format), for the serving simulator
(archipelago/serving/)."""

from dataclasses import replace
from functools import partial

from archipelago.estimate.iteration import IterationTable, tabulate
from archipelago.estimate.workload import Generation
from archipelago.strategies.gpu.estimate import estimate, held_bytes
from archipelago.strategies.gpu.plan import GPUPlan


def kv_tokens(plan: GPUPlan, workload: Generation) -> int:
    """Tokens of KV cache (over all sequences) that fit beside one GPU's weight share:
    held_bytes at one sequence of 2 and 3 tokens gives a token's bytes and the weights."""
    one = replace(workload, input_tokens=1, output_tokens=1, batch=1)
    two = replace(one, output_tokens=2)
    per_token = held_bytes(plan, two) - held_bytes(plan, one)
    weights = held_bytes(plan, one) - 2 * per_token
    if per_token <= 0:
        return 0
    return max(0, int((plan.capacity_bytes - weights) // per_token))


def serving(plan: GPUPlan, workload: Generation, max_batch: int) -> IterationTable:
    return tabulate(partial(estimate, plan), workload, max_batch, plan.spec.max_positions,
                    kv_tokens(plan, workload), plan.format.kv_bytes,
                    f"{plan.device.key} GPU plan")
