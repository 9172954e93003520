"""What `archi compare` shows of a GPU plan beyond its timing: its tensor-parallel degree and
the resource bounding its decode steps: device memory bandwidth and the tensor peak (the
estimate's roofline efficiencies), the all-reduces, or issuing the kernels (the host's
per-op cost of an eager framework, the graph launch and the GPU's gaps between kernels)."""

import numpy as np

from archipelago.estimate.generation import Traits
from archipelago.estimate.workload import Generation
from archipelago.models.graph import Phase
from archipelago.strategies.gpu.estimate import COLLECTIVE, GPUEstimate, Kernel, kernels
from archipelago.strategies.gpu.plan import GPUPlan


def issue_s(plan: GPUPlan, step: list[Kernel]) -> float:
    """Seconds a step spends issuing its kernels: eager, the host's cost per kernel (a lower
    bound on the step: the GPU's gaps hide under it); captured, one graph launch and the
    GPU's gap after every kernel."""
    count = sum(k.issued for k in step)
    cfg = plan.config
    if cfg.graph:
        return cfg.host_op_s + cfg.kernel_gap_s * count
    return cfg.host_op_s * count


def traits(plan: GPUPlan, workload: Generation, est: GPUEstimate) -> Traits:
    step_s = est.decode_s_per_token
    if workload.output_tokens < 2 or step_s <= 0:
        return Traits(f"tp={plan.ranks}", {})
    context = workload.input_tokens + workload.output_tokens // 2  # the mean decode step
    step = kernels(plan, Phase(1, context), workload.batch)  # a scalar phase: one step
    network = sum(float(np.sum(k.seconds)) for k in step if k.part == COLLECTIVE)
    memory = next(iter(plan.device.memories)).upper()
    return Traits(f"tp={plan.ranks}", {
        f"{memory} bandwidth": est.bandwidth_efficiency, "compute": est.compute_efficiency,
        "network": network / step_s, "kernel launches": issue_s(plan, step) / step_s})
