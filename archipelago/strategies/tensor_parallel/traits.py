"""What `archi compare` shows of a tensor-parallel plan beyond its timing: its split and the
resource bounding its decode steps, from the decode roofline (efficiency.py: weights and KV
cache at the boards' memory bandwidth, FLOPs at the engines' peak) and the time the steps
spend in collectives and inter-stage transfers."""

from archipelago.estimate.generation import Traits
from archipelago.estimate.workload import Generation
from archipelago.strategies.tensor_parallel.efficiency import DecodeEfficiency, decode_efficiency
from archipelago.strategies.tensor_parallel.estimate import Estimate
from archipelago.strategies.tensor_parallel.pipeline import PipelinePlan
from archipelago.strategies.tensor_parallel.pipeline_estimate import PipelineEstimate
from archipelago.strategies.tensor_parallel.pipeline_report import pipeline_efficiency
from archipelago.strategies.tensor_parallel.plan import Plan

_NETWORK = ("sync", "transfer")  # collectives inside a ring, hops between stages


def _network_share(est: Estimate | PipelineEstimate) -> float:
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


def traits(plan: Plan | PipelinePlan, workload: Generation,
           est: Estimate | PipelineEstimate) -> Traits:
    if isinstance(plan, PipelinePlan):
        assert isinstance(est, PipelineEstimate)  # a staged plan estimates itself so
        split = est.split
        text = f"tp={split.tp},pp={split.pp}" + (f",ep={split.ep}" if plan.spec.moe else "")
        eff = pipeline_efficiency(plan, est, workload)
        device = plan.rings[split.tp, split.ep].devices[0].device
    else:
        assert isinstance(est, Estimate)
        text, eff, device = f"tp={plan.ranks}", decode_efficiency(plan, workload, est), \
            plan.devices[0].device
    memory = "HBM" if device.memory("hbm") is not None else "DDR"
    return Traits(text, _shares(eff, memory, _network_share(est)))
