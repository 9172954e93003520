"""What `archi compare` shows of a tensor-parallel plan beyond its timing: its split and the
resource bounding its decode steps, from the decode roofline (efficiency.py: weights and KV
cache at the boards' memory bandwidth, FLOPs at the engines' peak) and the time the steps
spend in collectives and inter-stage transfers."""

from archipelago.estimate.generation import Traits
from archipelago.estimate.workload import Generation
from archipelago.strategies.tensor_parallel.efficiency import DecodeEfficiency, decode_efficiency
from archipelago.strategies.tensor_parallel.estimate import Estimate
from archipelago.strategies.tensor_parallel.staged import StagedPlan

_NETWORK = ("sync", "transfer")  # collectives inside a ring, hops between stages


def _network_share(est: Estimate) -> float:
    """The decode steps' collective and transfer time over their whole time."""
    decode_s = est.latency_s - est.prefill_s
    if decode_s <= 0:
        return 0.0
    spent = sum(est.breakdown_s.get(c, 0.0) - est.prefill_breakdown_s.get(c, 0.0)
                for c in _NETWORK)
    return spent / decode_s


def _shares(eff: DecodeEfficiency | None, memory: str, network: float) -> dict[str, float]:
    if eff is None:  # no decode step after the first token: nothing to rate
        return {}
    return {f"{memory} bandwidth": eff.bandwidth, "compute": eff.compute, "network": network}


def traits(plan: StagedPlan, workload: Generation, est: Estimate) -> Traits:
    split = plan.split
    text = (f"tp={split.tp},pp={split.pp}" + (f",ep={split.ep}" if plan.spec.moe else "")
            if plan.shows_split else f"tp={plan.ranks}")
    device = plan.program.devices[0].device
    memory = "HBM" if device.memory("hbm") is not None else "DDR"
    eff = decode_efficiency(plan, workload, est)
    return Traits(text, _shares(eff, memory, _network_share(est)))
