"""Which part of every weight each board of a ring holds, and in which memory: a building
block of every synchronization scheme (sync.py).

Matrices are column-split in HBM (optionally mirrored), or split by input rows where a
scheme sums partial products; their biases are split in DDR; norm parameters split with
the columns (a column-split residual, LORA) or replicated (DFX); embeddings live in DDR;
the LM head is split by vocabulary (LORA) or whole on every device (DFX). What a scheme
puts in DDR goes to HBM on a board without DDR (U55C).

Latent attention (DeepSeek-V2 §2.1.2): the up projections (q_b, kv_b) split by query heads
like q; the down projections (q_a, kv_a) and their norms are whole on every device, which
computes the whole latent itself: every head's key and value is read from all of the
latent, so a split latent would need an all-gather before its norm that neither DFX's nor
LORA's scheme has, and the latent KV cache (kv_rank + rope_dim values per token) is then
held whole on every device too (costs.kv_cache_bytes).
"""

from archipelago.hardware.cluster import Cluster
from archipelago.hardware.device import Device
from archipelago.memo import by_content
from archipelago.models.graph import build_graph
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import WeightTensor, layer_weights, template_weights
from archipelago.split import split_bounds
from archipelago.strategies.tensor_parallel.plan import DevicePlan, MemoryKind, Shard
from archipelago.strategies.tensor_parallel.planning.heads import (
    HeadShare,
    head_share,
    head_width,
)

# Per-layer tensors whose output columns are split across ranks (everything but norms).
COLUMN_SPLIT = frozenset({"q", "k", "v", "q_b", "kv_b", "attn_out", "ffn_gate", "ffn_up",
                          "ffn_down",
                          "experts_gate", "experts_up", "experts_down",
                          "shared_gate", "shared_up", "shared_down"})
# Norms inside the head-wise split: each device normalizes its own heads, no collective,
# with the whole head_dim-wide weight.
HEAD_LOCAL = frozenset({"q_norm", "k_norm"})
# Held whole and run whole on every device: an MoE router (hidden x experts, tiny) picks
# each token's experts where they run, so no device waits on another's choice; latent
# attention's down projections (the module docstring).
REPLICATED = frozenset({"router", "q_a", "kv_a"})
# Norms over a latent every device holds whole: run whole, their weights whole.
LATENT_NORMS = frozenset({"q_a_norm", "kv_a_norm"})
# Norms that never run over the residual's split columns.
UNSPLIT_NORMS = HEAD_LOCAL | LATENT_NORMS


def kinds_of_layer_tensors(spec: ModelSpec) -> list[WeightTensor]:
    """One layer's tensors of each kind of layer (dense and MoE), one per role: what the
    per-layer shard table holds."""
    roles: dict[str, WeightTensor] = {}
    for _, ids in build_graph(spec).variants:
        for tensor in layer_weights(spec, ids[0]):
            roles.setdefault(tensor.role, tensor)
    return list(roles.values())


def placed(memory: MemoryKind, device: Device) -> MemoryKind:
    """A memory the board has: what the scheme puts in DDR goes to HBM on boards without
    DDR (U55C), and is read from there (the planner ensures HBM)."""
    return memory if device.memory(memory) is not None else "hbm"


def columns(spec: ModelSpec, name: str, length: int, ranks: int, rank: int,
            share: HeadShare) -> tuple[int, int]:
    """This rank's output columns of tensor `name`: whole heads for q, k, v and latent
    attention's up projections (its `share`, `heads.py`), contiguous near-equal slices for
    every other split."""
    per_head = head_width(spec, name)
    if per_head is None:
        return split_bounds(length, ranks, rank)
    width, kv = per_head
    if kv:
        return share.kv_start * width, share.kv_stop * width
    return share.q_start * width, share.q_stop * width


def device_plans(spec: ModelSpec, cluster: Cluster, split_norms: bool,
                 matrix_mirror: MemoryKind | None, split_head: bool,
                 row_split: frozenset[str] = frozenset()) -> list[DevicePlan]:
    """Each device's shards in the memories its board has, in its own tables; matrices of
    `row_split` are split by input rows (the columns of what feeds them)."""
    devices, ranks = cluster.devices, cluster.size
    where = tuple(_placements(device, matrix_mirror) for device in devices)
    tables = _shards(spec, ranks, split_norms, split_head, where, row_split)
    return [DevicePlan(rank, device, dict(layer), dict(other), vocab, ranks)
            for rank, (device, (layer, other, vocab)) in enumerate(zip(devices, tables,
                                                                        strict=True))]


def _placements(device: Device, matrix_mirror: MemoryKind | None
                ) -> tuple[MemoryKind, MemoryKind | None]:
    """Where `device` keeps what a scheme puts in DDR, and its mirror of the matrices."""
    mirror = placed(matrix_mirror, device) if matrix_mirror else None
    return placed("ddr", device), None if mirror == "hbm" else mirror  # one copy serves both


Shards = tuple[dict[str, Shard], dict[str, Shard], tuple[int, int]]


# Shards are frozen and a pure function of these arguments; plans get copies of the tables.
@by_content(maxsize=64)
def _shards(spec: ModelSpec, ranks: int, split_norms: bool, split_head: bool,
            where: tuple[tuple[MemoryKind, MemoryKind | None], ...],
            row_split: frozenset[str]) -> tuple[Shards, ...]:
    return tuple(_rank_shards(spec, ranks, rank, split_norms, split_head, *at, row_split)
                 for rank, at in enumerate(where))


def _rank_shards(spec: ModelSpec, ranks: int, rank: int, split_norms: bool, split_head: bool,
                 ddr: MemoryKind, mirror: MemoryKind | None, row_split: frozenset[str]
                 ) -> Shards:
    """The per-layer and other tensors' shards of `rank`, and the vocabulary rows it
    scores (`ddr` says where what goes to DDR goes)."""
    vocab = split_bounds(spec.vocab, ranks, rank) if split_head else (0, spec.vocab)
    layer: dict[str, Shard] = {}
    share = head_share(spec, ranks, rank)
    _, outside = template_weights(spec)
    for tensor in kinds_of_layer_tensors(spec):
        name, part = tensor.role.split(".")
        axis = len(tensor.shape) - 1
        start, stop = columns(spec, name, tensor.shape[axis], ranks, rank, share)
        if name in row_split and part == "weight":
            rows = columns(spec, "attn_context" if name == "attn_out" else name,
                           tensor.shape[0], ranks, rank, share)
            layer[tensor.role] = Shard(0, *rows, "hbm", mirror)
        elif name in COLUMN_SPLIT and part == "weight":
            layer[tensor.role] = Shard(axis, start, stop, "hbm", mirror)
        elif name in REPLICATED:
            layer[tensor.role] = Shard(None, memory="hbm", mirror=mirror)
        elif name in row_split:  # whole (the planner refuses such biases: each rank would add it)
            layer[tensor.role] = Shard(None, memory=ddr)
        elif name in COLUMN_SPLIT or (split_norms and name not in UNSPLIT_NORMS):
            layer[tensor.role] = Shard(axis, start, stop, ddr)
        else:
            layer[tensor.role] = Shard(None, memory=ddr)
    other: dict[str, Shard] = {}
    head_role = "embed_tokens.weight" if spec.tied_embeddings else "lm_head.weight"
    for tensor in outside:
        # The LM head is a weight matrix streamed every token, so HBM holds a copy; the DDR
        # copy serves the once-per-token embedding lookup (seeds/001 §IV-B).
        copy = "hbm" if tensor.role == head_role and ddr != "hbm" else None
        if tensor.role == "lm_head.weight" and split_head:  # untied: vocab-split
            other[tensor.role] = Shard(1, *vocab, ddr, copy)
        elif tensor.role.startswith("final_norm") and split_norms:
            start, stop = split_bounds(spec.hidden, ranks, rank)
            other[tensor.role] = Shard(0, start, stop, ddr)
        else:
            rows = vocab if copy and split_head else None  # this rank's vocabulary rows
            other[tensor.role] = Shard(None, memory=ddr, mirror=copy, mirror_rows=rows)
    return layer, other, vocab
