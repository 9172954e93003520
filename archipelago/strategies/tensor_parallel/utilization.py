"""How much of each device limit a tensor-parallel plan uses: what a design-space search
(seeds/002 §V-D, Eq. 13) constrains and minimizes."""

from archipelago.strategies.tensor_parallel.estimate import Estimate
from archipelago.strategies.tensor_parallel.plan import Plan
from archipelago.strategies.tensor_parallel.rings import one_ring


def utilization(plan: Plan, est: Estimate) -> dict[str, float]:
    """Worst-device fraction used of each limited resource (memory capacity and the HBM
    bandwidth the engine streams at included)."""
    plan = one_ring(plan, "the design search")
    out = {"dsp": 0.0, "bram": 0.0, "uram": 0.0, "hbm": 0.0, "hbm_bandwidth": 0.0}
    for use, dp in zip(est.devices, plan.devices, strict=True):
        used = use.total.fractions_of(dp.device.resources)
        for res in ("dsp", "bram", "uram"):
            out[res] = max(out[res], used[res])
        hbm = dp.device.memory("hbm")
        if hbm is not None:
            out["hbm"] = max(out["hbm"], use.hbm_bytes / hbm.capacity_bytes)
            streamed = plan.engine.hbm_bytes_per_cycle * plan.engine.config.clock_hz
            out["hbm_bandwidth"] = max(out["hbm_bandwidth"], streamed / hbm.bandwidth_Bps)
    return out
