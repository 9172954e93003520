"""What `archi compare` shows of a GPU plan beyond its timing: its tensor-parallel degree and
the resource bounding its decode steps: device memory bandwidth and the tensor peak (the
estimate's roofline efficiencies), the all-reduces, or issuing the kernels (the host's
per-kernel and per-token cost of an eager framework, the graph launch and the GPU's floor
per kernel).

Neither the collectives nor the launches depend on the context, so no op is costed again
here: the step's layout says which collectives it issues and how many launches."""

import numpy as np

from archipelago.estimate.generation import Traits
from archipelago.estimate.workload import Generation
from archipelago.strategies.gpu.estimate import GPUEstimate
from archipelago.strategies.gpu.plan import GPUPlan
from archipelago.strategies.gpu.steps import collectives_s, plan_layout


def issue_s(plan: GPUPlan, launches: int) -> float:
    """Seconds a step of `launches` kernels spends issuing them: eager, the host's cost per
    kernel and its loop's per token (a lower bound on the step: the GPU's floors hide under
    it); captured, one graph launch and the GPU's floor of every kernel."""
    cfg = plan.config
    if cfg.graph:
        return cfg.host_op_s + cfg.kernel_floor_s * launches
    return cfg.host_op_s * launches + cfg.token_s


def network_s(plan: GPUPlan, batch: int) -> float:
    """A decode step's collectives, added one after another in issue order."""
    lay = plan_layout(plan)
    which = lay.rows[lay.rows >= lay.all_reduce] - lay.all_reduce  # 0 all-reduce, 1 gather
    return sum(np.array(collectives_s(plan, 1, batch))[which].tolist())


def traits(plan: GPUPlan, workload: Generation, est: GPUEstimate) -> Traits:
    step_s = est.decode_s_per_token
    if workload.output_tokens < 2 or step_s <= 0:
        return Traits(f"tp={plan.ranks}", {})
    launches = int(plan_layout(plan).issued.sum())
    memory = next(iter(plan.device.memories)).upper()
    return Traits(f"tp={plan.ranks}", {
        f"{memory} bandwidth": est.bandwidth_efficiency, "compute": est.compute_efficiency,
        "network": network_s(plan, workload.batch) / step_s,
        "kernel launches": issue_s(plan, launches) / step_s})
