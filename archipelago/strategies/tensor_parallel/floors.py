"""The tensor-parallel kind's physical floors (estimate/floors.py), board by board.

In a pass, each board of a stage reads its shards of the weights its stage's layers (and,
on the last stage, the output ops) must read (models/phase_reads.py: an expert stack by the
share of distinct experts the pass's tokens route to, no embedding table but a tied head's
rows), from the memory the plan keeps each shard in (planning/shards.py), or from either
copy where LORA mirrors a matrix in HBM and DDR (seeds/002 §V-C); and, from HBM, the KV
cache of its heads that the pass attends to (costs.kv_cache_bytes). Bandwidths are the
catalog's peaks of each board's memories (catalog.yaml `memories`, e.g. the U280's 460 GB/s
HBM and 38 GB/s DDR, seeds/001 §IV-B). None of the kind's engines keeps weights on chip
across passes: every weight is streamed from off-chip memory each pass.

FPGAs have no compute floor: the catalog gives no peak FLOPs for a board (its arithmetic is
the design the fabric holds, and multipliers built of LUTs are not bounded by the DSP
count), and a floor must never be above what physics allows.
"""

from archipelago.estimate.floors import DeviceLoad, PhaseFloor, Read
from archipelago.estimate.generation_floors import PassWork, generation_floors
from archipelago.estimate.workload import Generation
from archipelago.models.phase_reads import matmul_flops, read_share
from archipelago.models.weights import WeightTensor, output_weights, template_weights
from archipelago.strategies.tensor_parallel.costs import kv_cache_bytes
from archipelago.strategies.tensor_parallel.estimate import Estimate
from archipelago.strategies.tensor_parallel.plan import DevicePlan, Plan, Shard
from archipelago.strategies.tensor_parallel.staged import Stage, StagedPlan


def _read(shard: Shard, elements: float) -> tuple[float, tuple[str, ...]]:
    return elements, (shard.memory,) if shard.mirror is None else (shard.memory, shard.mirror)


def _head_tensors(plan: Plan, dp: DevicePlan) -> list[tuple[float, tuple[str, ...]]]:
    """The output ops' tensors this board reads, as (elements, memories): a tied head reads
    its vocabulary rows of the embedding table (the HBM mirror or the whole table)."""
    spec = plan.spec
    found = [_read(dp.shard_for(t), dp.shard_for(t).numel(t)) for t in output_weights(spec)]
    if spec.is_decoder and spec.tied_embeddings:
        table = next(t for t in template_weights(spec)[1] if t.role == "embed_tokens.weight")
        rows = dp.vocab_slice[1] - dp.vocab_slice[0]
        found.append(_read(dp.shard_for(table), rows * table.shape[1]))
    return found


def _layer_tensors(plan: Plan, dp: DevicePlan, tokens: int
                   ) -> list[tuple[float, tuple[str, ...]]]:
    """One layer's shards this board reads in a pass of `tokens` tokens."""
    block: tuple[WeightTensor, ...] = template_weights(plan.spec)[0]
    return [_read(dp.shard_for(t), dp.shard_for(t).numel(t) * read_share(plan.spec, t, tokens))
            for t in block]


def stage_loads(stage: Stage, work: PassWork) -> list[DeviceLoad]:
    """Every board of `stage` in a pass."""
    plan, layers = stage.program, len(stage.layers)
    flops = matmul_flops(plan.spec, work.new_tokens, work.sequences, stage.layers,
                         output=stage.last) / plan.ranks
    loads = []
    for dp in plan.devices:
        reads = [Read(n * layers * plan.bytes_per_param, where)
                 for n, where in _layer_tensors(plan, dp, work.tokens)]
        if stage.last:
            reads += [Read(n * plan.bytes_per_param, where)
                      for n, where in _head_tensors(plan, dp)]
        reads.append(Read(kv_cache_bytes(plan, dp.rank, work.cached, work.sequences, layers),
                          ("hbm",)))
        bandwidths = {m: memory.bandwidth_Bps for m, memory in dp.device.memories.items()}
        loads.append(DeviceLoad(f"rank {stage.nodes[dp.rank]} ({dp.device.key})",
                                tuple(reads), bandwidths, flops, dp.device.peak_fp16_flops))
    return loads


def floors(plan: StagedPlan, work: Generation, est: Estimate) -> list[PhaseFloor]:
    """The kind's floors hook: every board of every stage."""
    return generation_floors(est, work, lambda p: tuple(
        load for stage in plan.stages for load in stage_loads(stage, p)))
