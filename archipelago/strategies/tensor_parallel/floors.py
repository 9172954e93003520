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

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from archipelago.estimate.floors import DeviceLoad, PhaseFloor, Read, below, refusal
from archipelago.estimate.generation_floors import FIGURES, PassWork, generation_floors
from archipelago.estimate.workload import Generation
from archipelago.hardware.device import Device
from archipelago.models.graph import build_graph
from archipelago.models.phase_reads import EXPERT_STACKS, expert_share, matmul_flops
from archipelago.models.weights import embedding_weights, layer_weights, output_weights
from archipelago.strategies.tensor_parallel.costs import kv_cache_bytes
from archipelago.strategies.tensor_parallel.estimate import Estimate
from archipelago.strategies.tensor_parallel.plan import DevicePlan, Plan, Shard
from archipelago.strategies.tensor_parallel.staged import Stage, StagedPlan

Number = float | np.ndarray

Where = tuple[str, ...]  # the memories holding a copy


@dataclass(frozen=True)
class BoardShards:
    """Elements one board reads, by the memories holding them: of its stage's layers
    (expert stacks apart, read by the pass's share of experts) and of the output ops."""

    layer: dict[Where, float]
    experts: dict[Where, float]
    head: dict[Where, float]

    @property
    def key(self) -> tuple:
        """Its counts, comparable: boards alike read alike."""
        return tuple(tuple(sorted(d.items())) for d in (self.layer, self.experts, self.head))


def _where(shard: Shard) -> Where:
    return (shard.memory,) if shard.mirror is None else (shard.memory, shard.mirror)


def kinds_of_layers(plan: Plan, layers: range) -> tuple[tuple[int, int], ...]:
    """(a layer of each kind, how many of `layers` are of that kind): DeepSeek's dense
    layers beside its MoE ones hold other tensors, so each kind is counted as itself."""
    return tuple((ids[0], n) for _, ids in build_graph(plan.spec).variants
                 if (n := sum(i in layers for i in ids)))


def board_shards(plan: Plan, dp: DevicePlan, kinds: tuple[tuple[int, int], ...]
                 ) -> BoardShards:
    """What `dp` reads of its stage's layers (`kinds`, kinds_of_layers) and of the output
    ops (a layer's tensors are all read but its expert stacks, read by share; no
    embedding table is read but a tied head's)."""
    spec = plan.spec
    layer: dict[Where, float] = defaultdict(float)
    experts: dict[Where, float] = defaultdict(float)
    head: dict[Where, float] = defaultdict(float)
    for first, count in kinds:
        for tensor in layer_weights(spec, first):
            shard = dp.shard_for(tensor)
            into = experts if tensor.role in EXPERT_STACKS else layer
            into[_where(shard)] += count * shard.numel(tensor)
    for tensor in output_weights(spec):
        head[_where(dp.shard_for(tensor))] += dp.shard_for(tensor).numel(tensor)
    if spec.is_decoder and spec.tied_embeddings:  # the head reads its vocabulary rows
        table = next(t for t in embedding_weights(spec) if t.role == "embed_tokens.weight")
        rows = dp.vocab_slice[1] - dp.vocab_slice[0]
        head[_where(dp.shard_for(table))] += rows * table.shape[1]
    return BoardShards(dict(layer), dict(experts), dict(head))


def _shards_key(plan: Plan, dp: DevicePlan, kinds: tuple[tuple[int, int], ...]) -> tuple:
    """What a board's `BoardShards` depend on: its shards, frozen objects the stages'
    programs share (planning/shards.py makes them once per ring shape), by identity (the
    plan keeps them alive while its floors are counted), its vocabulary rows and the kinds
    of its stage's layers."""
    return (id(plan.spec), *map(id, dp.layer_shards.values()),
            *map(id, dp.other_shards.values()), dp.vocab_slice, kinds)


@dataclass(frozen=True)
class Board:
    """One board of a stage, standing for every board whose reads and work are alike."""

    name: str
    device: Device
    shards: BoardShards
    stage: Stage
    kv_per_token: float  # bytes of its KV cache per cached token and sequence

    def load(self, work: PassWork, share: float) -> DeviceLoad:
        """Its load in a pass whose tokens read `share` of each expert stack."""
        program = self.stage.program
        size = program.bytes_per_param
        moved: dict[Where, float] = defaultdict(float)
        for where, n in self.shards.layer.items():
            moved[where] += n * size
        for where, n in self.shards.experts.items():
            moved[where] += n * share * size
        for where, n in (self.shards.head.items() if self.stage.last else ()):
            moved[where] += n * size
        moved[("hbm",)] += self.kv_per_token * work.cached * work.sequences
        flops = matmul_flops(program.spec, work.new_tokens, work.sequences, self.stage.layers,
                             output=self.stage.last) / program.ranks
        bandwidths = {m: memory.bandwidth_Bps for m, memory in self.device.memories.items()}
        return DeviceLoad(self.name, tuple(Read(b, w) for w, b in sorted(moved.items())),
                          bandwidths, flops, self.device.peak_fp16_flops)


def boards(plan: StagedPlan) -> list[Board]:
    """Every board of every stage, one per kind of board alike (the same shards, device,
    share of layers and output ops): the floor is the busiest board's."""
    shards: dict[tuple, BoardShards] = {}
    found: dict[tuple, Board] = {}
    for stage in plan.stages:
        program = stage.program
        per_token = matmul_flops(program.spec, 1, 1, stage.layers, output=stage.last)
        kinds = kinds_of_layers(program, stage.layers)
        for dp in program.devices:
            key = _shards_key(program, dp, kinds)
            if key not in shards:
                shards[key] = board_shards(program, dp, kinds)
            kv = kv_cache_bytes(program, dp.rank, 1, 1, len(stage.layers))
            alike = (shards[key].key, dp.device.key, len(stage.layers), stage.last,
                     per_token, program.ranks, kv)
            if alike not in found:
                found[alike] = Board(f"rank {stage.nodes[dp.rank]} ({dp.device.key})",
                                     dp.device, shards[key], stage, kv)
    return list(found.values())


def floors(plan: StagedPlan, work: Generation, est: Estimate) -> list[PhaseFloor]:
    """The kind's floors hook: every board of every stage (`est`'s prefill and decode
    figures are all it reads)."""
    alike, skew = boards(plan), plan.engine.expert_skew
    return generation_floors(est, work, lambda p: tuple(
        board.load(p, expert_share(plan.spec, p.tokens, skew)) for board in alike))


@dataclass(frozen=True)
class Timing:
    """The figures of an estimate its floors bound (`GenerationTiming`'s), for many
    designs at once where they are arrays over them (a design search's)."""

    prefill_s: Number = 0.0
    decode_s_first: Number = 0.0
    decode_s_last: Number = 0.0
    decode_s_per_token: Number = 0.0


def phase_bounds(plan: StagedPlan, work: Generation) -> list[tuple[str, tuple[float, str]]]:
    """Each phase the floors hook checks and its floor (seconds, why): what a design
    search holds each design of `plan` to (a floor does not depend on the engine)."""
    return [(phase.phase, phase.floor()) for phase in floors(plan, work, Timing())]


def design_refusals(bounds: list[tuple[str, tuple[float, str]]], timing: Timing,
                    count: int, where: str) -> list[str | None]:
    """What `check_floors` over the floors hook refuses each of `count` designs with
    (`bounds`: `phase_bounds`; `timing`'s figures arrays over the designs), the first phase
    below its floor; None for a design above them all."""
    out: list[str | None] = [None] * count
    for phase, bound in bounds:
        estimates = np.broadcast_to(np.ravel(getattr(timing, FIGURES[phase])), (count,))
        for i in np.flatnonzero(below(estimates, bound[0])):
            out[i] = out[i] or refusal(phase, float(estimates[i]), bound, where)
    return out
