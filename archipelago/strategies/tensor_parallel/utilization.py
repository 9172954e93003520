"""How much of each device limit a tensor-parallel plan uses: what a design-space search
(seeds/002 §V-D, Eq. 13) constrains and minimizes."""

from collections.abc import Mapping, Sequence

import numpy as np

from archipelago.estimate.workload import Generation
from archipelago.strategies.tensor_parallel.efficiency import decode_stream_share
from archipelago.strategies.tensor_parallel.estimate import Estimate
from archipelago.strategies.tensor_parallel.plan import Plan
from archipelago.strategies.tensor_parallel.planning.rings import one_ring
from archipelago.strategies.tensor_parallel.staged import StagedPlan

# The fabric resources the search limits (an engine here uses no AI Engines).
LIMITED = ("dsp", "bram", "uram")
Number = int | float | np.ndarray


def utilization(staged: StagedPlan, workload: Generation, est: Estimate) -> dict[str, float]:
    """Worst-device fraction used of each limited resource, of memory capacity, and the
    share of the HBM bandwidth decode streams at (the one `archi plan` reports)."""
    plan = one_ring(staged, "the design search")
    uses = [(vars(use.total), use.hbm_bytes) for use in est.devices]
    used = {**worst_use(plan, uses, LIMITED),
            "hbm_bandwidth": decode_stream_share(plan, workload, est.decode_s_per_token)}
    return {limit: float(value) for limit, value in used.items()}


def worst_use(plan: Plan, uses: Sequence[tuple[Mapping[str, Number], float]],
              fabric: Sequence[str]) -> dict[str, Number]:
    """The worst device's fraction of each `fabric` resource and of HBM capacity, from each
    device's (resource totals, HBM bytes held); arrays over variants where the totals hold
    them (variants.py)."""
    out: dict[str, Number] = dict.fromkeys((*fabric, "hbm"), 0.0)
    for (total, hbm_bytes), dp in zip(uses, plan.devices, strict=True):
        have = plan.fabric(dp.rank)
        for res in fabric:  # an absent resource counts as 1 unit, as in fractions_of
            out[res] = _worse(out[res], total[res] / max(getattr(have, res), 1))
        hbm = dp.device.memory("hbm")
        if hbm is not None:
            out["hbm"] = _worse(out["hbm"], hbm_bytes / hbm.capacity_bytes)
    return out


def _worse(a: Number, b: Number) -> Number:
    """max(a, b), elementwise where either holds variants (numpy is slow on numbers)."""
    return np.maximum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else \
        max(a, b)
