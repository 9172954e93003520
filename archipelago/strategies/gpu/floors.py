"""The GPU rows' physical floors (estimate/floors.py): each pass, every GPU reads its share
of the weights the pass must read (models/phase_reads.py) and of the batch's KV caches from
its one memory (HBM or GDDR) at the datasheet bandwidth (catalog.yaml, each GPU's
`memories`), in the plan's number format (`--precision`, formats.py: bytes per weight and
per cached value), and does its share of the matrix FLOPs at the datasheet dense tensor
peak of that format (`GPUPlan.tensor_ops_per_s`). Megatron's split gives every GPU a 1/N
share of both; the busiest GPU has at least that, so a 1/N share is a floor."""

from archipelago.estimate.floors import DeviceLoad, PhaseFloor, Read
from archipelago.estimate.generation_floors import PassWork, generation_floors
from archipelago.estimate.workload import Generation
from archipelago.models.phase_reads import expert_share, matmul_flops, weight_elements
from archipelago.strategies.gpu.estimate import GPUEstimate
from archipelago.strategies.gpu.plan import GPUPlan


def pass_loads(plan: GPUPlan, work: PassWork) -> tuple[DeviceLoad, ...]:
    """One GPU's load (each GPU's alike) in a pass."""
    spec, ranks = plan.spec, plan.ranks
    always, experts = weight_elements(spec)
    weights = always + experts * expert_share(spec, work.tokens, plan.config.expert_skew)
    fmt = plan.format
    cache = work.sequences * plan.graph.kv_cache_bytes(work.cached, fmt.kv_bytes)
    memory = next(iter(plan.device.memories))
    moved = (weights * fmt.weight_bytes + cache) / ranks
    return (DeviceLoad(f"each GPU ({plan.device.key})", (Read(moved, (memory,)),),
                       {memory: plan.memory_Bps},
                       matmul_flops(spec, work.new_tokens, work.sequences) / ranks,
                       plan.tensor_ops_per_s),)


def floors(plan: GPUPlan, work: Generation, est: GPUEstimate) -> list[PhaseFloor]:
    """The kind's floors hook."""
    return generation_floors(est, work, lambda p: pass_loads(plan, p))
