"""Intra-layer tensor parallelism over a ring of identical HBM FPGAs, with two sync schemes.

`dfx` (seeds/001 §IV-B, Algorithm 1): Q/K/V split head-wise, every other matrix split
column-wise, each partial output all-gathered (after attention, the attention projection,
FFN1+GELU and FFN2) while compute stalls; LayerNorm and residual run replicated. WTE/WPE,
biases and LayerNorm parameters live in DDR, weight matrices in HBM (§IV-B).

`lora` (seeds/002 §III): the residual stream stays column-split, so residuals and
LayerNorm run on local columns (LayerNorm parameters split too) with an all-reduce of the
partial sums; activations are all-gathered only where a matmul needs global data (before
QKV, the attention projection, FC0 and FC1): four all-gathers and two all-reduces per block,
hidden behind compute by row packing, early broadcast and column-major traversal.

Decoders beyond GPT-2/OPT/LLaMA (models/hf_families/) split the same way: query heads of
any head_dim and GQA key/value heads head-wise, per-head q/k norms with their heads, parallel
blocks' sublayers each as their sequential twin. A mixture of experts is split here like
any FFN: every expert's columns across the ring (the router whole on every device), with
a token's active experts as one FFN of `MoE.active_ffn` columns; experts.py places whole
experts on each board instead (`--split ...,ep=`), with the all-to-all combine that needs.
Features whose synchronization neither paper defines are refused (the kind declares what
it splits in __init__.py).
"""

from typing import Any

from archipelago.errors import PartitionError
from archipelago.hardware.cluster import Cluster
from archipelago.hardware.device import Device
from archipelago.memo import by_content
from archipelago.models.graph import Graph, Op, build_graph
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import template_weights
from archipelago.strategies.registry import feature_refusal
from archipelago.strategies.tensor_parallel.dfx import DFXConfig, DFXEngine
from archipelago.strategies.tensor_parallel.heads import (
    HeadShare,
    busiest,
    check_heads,
    head_share,
)
from archipelago.strategies.tensor_parallel.pipeline import (
    pipelined,
)
from archipelago.strategies.tensor_parallel.plan import (
    CommStep,
    ComputeStep,
    DevicePlan,
    MemoryKind,
    Plan,
    Shard,
    Step,
    split_bounds,
)
from archipelago.strategies.tensor_parallel.systolic import SystolicConfig, SystolicEngine

FP16_BYTES = 2
# LayerNorm partial sums travel as FP32 pairs (sum, sum of squares) per row.
STATS_VALUES, STATS_BYTES = 2, 4
# Per-layer tensors whose output columns are split across ranks (everything but norms).
_COLUMN_SPLIT = frozenset({"q", "k", "v", "attn_out", "ffn_gate", "ffn_up", "ffn_down",
                           "experts_gate", "experts_up", "experts_down",
                           "shared_gate", "shared_up", "shared_down"})
# Norms inside the head-wise split: each device normalizes its own heads, no collective,
# with the whole head_dim-wide weight.
_HEAD_LOCAL = frozenset({"q_norm", "k_norm"})
# Held whole and run whole on every device: an MoE router (hidden x experts, tiny) picks
# each token's experts where they run, so no device waits on another's choice.
_REPLICATED = frozenset({"router"})
# DFX synchronizes after these ops (seeds/001 Algorithm 1, lines 13, 15, 22, 24).
_DFX_SYNC_AFTER = ("attn_context", "attn_out", "ffn_act", "ffn_down")
# LORA gathers these outputs before the matmuls that consume them (seeds/002 §III-A).
_LORA_GATHER = ("attn_norm", "attn_context", "ffn_norm", "ffn_act")
# ... and broadcasts SmulV's output head by head as it is produced (seeds/002 §III-B).
_LORA_EARLY = frozenset({"attn_context"})


def _check_inputs(spec: ModelSpec, cluster: Cluster, strategy: str) -> None:
    refused = feature_refusal(spec, strategy)
    if refused:
        raise PartitionError(refused)
    device = cluster.require_identical(strategy)
    if device.kind != "fpga" or device.memory("hbm") is None:
        raise PartitionError(f"strategy '{strategy}' runs on HBM FPGAs; '{device.key}' is a "
                             f"{device.kind} without HBM")
    if cluster.size > 1 and cluster.topology != "ring":
        raise PartitionError(f"strategy '{strategy}' synchronizes over a ring; cluster "
                             f"'{cluster.name}' has topology '{cluster.topology}'")
    check_heads(spec, cluster.size)
    if spec.vocab < cluster.size:
        raise PartitionError(f"{spec.name}: the vocabulary ({spec.vocab} tokens) is smaller "
                             f"than the device count ({cluster.size}); each device scores a "
                             "slice of at least one token")
    if not spec.is_decoder:
        raise PartitionError(f"strategy '{strategy}' generates text with decoders; {spec.name}"
                             " is an encoder (try strategy 'galapagos')")


def _placed(memory: MemoryKind, device: Device) -> MemoryKind:
    """A memory the board has: what the scheme puts in DDR goes to HBM on boards without
    DDR (U55C), and is read from there (`_check_inputs` ensures HBM)."""
    return memory if device.memory(memory) is not None else "hbm"


def _columns(spec: ModelSpec, name: str, length: int, ranks: int, rank: int,
             share: HeadShare) -> tuple[int, int]:
    """This rank's output columns of tensor `name`: whole heads for q, k, v (its `share`,
    `heads.py`), contiguous near-equal slices for every other split."""
    if name == "q":
        return share.q_start * spec.head_dim, share.q_stop * spec.head_dim
    if name in ("k", "v"):
        return share.kv_start * spec.head_dim, share.kv_stop * spec.head_dim
    return split_bounds(length, ranks, rank)


def _device_plans(spec: ModelSpec, cluster: Cluster, split_norms: bool,
                  matrix_mirror: MemoryKind | None, split_head: bool) -> list[DevicePlan]:
    """Each device's shards (`_rank_shards`) in the memories its board has, in its own
    tables."""
    devices, ranks = cluster.devices, cluster.size
    placed = tuple(_placements(device, matrix_mirror) for device in devices)
    tables = _shards(spec, ranks, split_norms, split_head, placed)
    return [DevicePlan(rank, device, dict(layer), dict(other), vocab, ranks)
            for rank, (device, (layer, other, vocab)) in enumerate(zip(devices, tables,
                                                                        strict=True))]


def _placements(device: Device, matrix_mirror: MemoryKind | None
                ) -> tuple[MemoryKind, MemoryKind | None]:
    """Where `device` keeps what a scheme puts in DDR, and its mirror of the matrices."""
    mirror = _placed(matrix_mirror, device) if matrix_mirror else None
    return _placed("ddr", device), None if mirror == "hbm" else mirror  # one copy serves both


Shards = tuple[dict[str, Shard], dict[str, Shard], tuple[int, int]]


# Shards are frozen and a pure function of these arguments; plans get copies of the tables.
@by_content(maxsize=64)
def _shards(spec: ModelSpec, ranks: int, split_norms: bool, split_head: bool,
            placed: tuple[tuple[MemoryKind, MemoryKind | None], ...]) -> tuple[Shards, ...]:
    return tuple(_rank_shards(spec, ranks, rank, split_norms, split_head, *where)
                 for rank, where in enumerate(placed))


def _rank_shards(spec: ModelSpec, ranks: int, rank: int, split_norms: bool, split_head: bool,
                 ddr: MemoryKind, mirror: MemoryKind | None) -> Shards:
    """Matrices column-split in HBM (optionally mirrored), their biases split in DDR; norm
    parameters split with the columns (LORA) or replicated (DFX); embeddings in DDR; the LM
    head split by vocabulary (LORA) or whole on every device (DFX). What goes to DDR goes to
    HBM on a board without DDR (`ddr` says where it goes). Returns the per-layer and other
    tensors' shards and the vocabulary rows this rank scores."""
    vocab = split_bounds(spec.vocab, ranks, rank) if split_head else (0, spec.vocab)
    layer: dict[str, Shard] = {}
    share = head_share(spec, ranks, rank)
    block, outside = template_weights(spec)
    for tensor in block:
        name, part = tensor.role.split(".")
        axis = len(tensor.shape) - 1
        start, stop = _columns(spec, name, tensor.shape[axis], ranks, rank, share)
        if name in _COLUMN_SPLIT and part == "weight":
            layer[tensor.role] = Shard(axis, start, stop, "hbm", mirror)
        elif name in _REPLICATED:
            layer[tensor.role] = Shard(None, memory="hbm", mirror=mirror)
        elif name in _COLUMN_SPLIT or (split_norms and name not in _HEAD_LOCAL):
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


def _local_out(op: Op, spec: ModelSpec, ranks: int, columns_split: bool) -> int:
    """The busiest device's output features of `op` (every device waits for it at the next
    collective): all of a replicated tensor's, whole heads for q, k, v and their per-head
    norms, the widest slice of any other split."""
    if op.weight in _REPLICATED:
        return op.fan_out
    share = busiest(spec, ranks)
    if op.name in ("q", "q_norm"):
        return share.q_heads * spec.head_dim
    if op.name in ("k", "v", "k_norm"):
        return share.kv_heads * spec.head_dim
    widest = split_bounds(op.fan_out, ranks, 0)[1]
    if op.kind in {"linear", "activation", "gated_activation", "lm_head"}:
        return widest
    if columns_split and op.kind in {"norm", "residual", "embedding"}:
        return widest
    return op.fan_out


def _compute(op: Op, spec: ModelSpec, ranks: int, columns_split: bool = False) -> ComputeStep:
    return ComputeStep(op, _local_out(op, spec, ranks, columns_split),
                       busiest(spec, ranks).q_heads if op.heads else 0)


def _gathered(spec: ModelSpec, op: Op, ranks: int, value_bytes: float = 2.0,
              overlap: str = "none", early: bool = False) -> CommStep:
    """The all-gather of `op`'s output: all heads' attention context (whole heads a device,
    the busiest's slice setting the pace), the FFN's active columns, otherwise the hidden
    size."""
    width = {"attn_context": spec.q_dim, "ffn_act": op.fan_out}.get(op.name, spec.hidden)
    local = busiest(spec, ranks).q_heads * spec.head_dim if op.name == "attn_context" else 0
    return CommStep("all_gather", op.name, width, value_bytes, overlap,  # type: ignore[arg-type]
                    early=early, local=local)


def _lm_head_steps(op: Op, spec: ModelSpec, ranks: int) -> list[Step]:
    """Each rank scores its vocabulary slice; (max, argmax) pairs pick the token."""
    return [_compute(op, spec, ranks), CommStep("argmax_gather", op.name, 2 * ranks)]


def _dfx_output_steps(graph: Graph) -> list[Step]:
    """The final LayerNorm and the LM head, whole on every core: seeds/001 §IV-B splits
    only the attention and FC weights and counts four syncs per decoder layer and no other,
    so every core scores the whole vocabulary and its reduce-max unit (§V-C) picks the same
    token ("each FPGA runs identical operations ... to run GPT-2 end-to-end")."""
    return [ComputeStep(op, op.fan_out) for op in graph.output]


def dfx_block_steps(graph: Graph, ranks: int) -> list[Step]:
    steps: list[Step] = []
    for op in graph.block:
        steps.append(_compute(op, graph.spec, ranks))
        if op.name in _DFX_SYNC_AFTER:
            steps.append(_gathered(graph.spec, op, ranks))
    return steps


def _distributed_norm(op: Op, ranks: int, group_rows: int) -> list[Step]:
    """LayerNorm over local columns: partial sums, their all-reduce, then normalization."""
    local = split_bounds(op.fan_out, ranks, 0)[1]
    return [ComputeStep(op, local, stage="stats"),
            CommStep("all_reduce", op.name, STATS_VALUES, STATS_BYTES, "row_groups", group_rows),
            ComputeStep(op, local, stage="apply")]


def lora_steps(ops: tuple[Op, ...], spec: ModelSpec, ranks: int,
               activation_bytes: float, group_rows: int) -> list[Step]:
    steps: list[Step] = []
    for op in ops:
        if op.kind == "norm" and op.name not in _HEAD_LOCAL:
            steps.extend(_distributed_norm(op, ranks, group_rows))
        elif op.kind == "lm_head":
            steps.extend(_lm_head_steps(op, spec, ranks))
        else:
            steps.append(_compute(op, spec, ranks, columns_split=True))
        if op.name in _LORA_GATHER or (op.name == "final_norm" and spec.is_decoder):
            steps.append(_gathered(spec, op, ranks, activation_bytes, "matmul_blocks",
                                   early=op.name in _LORA_EARLY))
    return steps


def _plan(strategy: str, scheme: str, graph: Graph, cluster: Cluster, engine: Any,
          bytes_per_param: float, steps: tuple[list[Step], list[Step], list[Step]],
          devices: list[DevicePlan], numerics: str = "fp16") -> Plan:
    return Plan(strategy=strategy, scheme=scheme, spec=graph.spec, graph=graph,
                cluster=cluster, engine=engine, bytes_per_param=bytes_per_param,
                embed_steps=steps[0], block_steps=steps[1], output_steps=steps[2],
                devices=devices, numerics=numerics)


def _table_Bps(device: Device) -> float | None:
    """Where DFX reads WTE/WPE rows: one HBM pseudo-channel on a board without DDR (U55C),
    else None (the engine's DDR channel)."""
    hbm = device.memory("hbm")
    if device.memory("ddr") is not None or hbm is None:
        return None
    return hbm.bandwidth_Bps / hbm.channels



def plan_dfx(spec: ModelSpec, cluster: Cluster, config: DFXConfig) -> Plan:
    _check_inputs(spec, cluster, "dfx")
    engine = DFXEngine(config, cluster.size, _table_Bps(cluster.devices[0]))
    steps = _lists(_dfx_steps(spec, cluster.size))
    devices = _device_plans(spec, cluster, False, None, False)
    return _plan("dfx", "dfx", build_graph(spec), cluster, engine, FP16_BYTES, steps, devices)


def _lists(steps: tuple[tuple[Step, ...], ...]) -> tuple[list[Step], list[Step], list[Step]]:
    """A plan's own (embed, block, output) step lists."""
    embed, block, output = steps
    return list(embed), list(block), list(output)


# Steps are frozen and a pure function of the spec and ring size; plans get copies.
@by_content(maxsize=64)
def _dfx_steps(spec: ModelSpec, ranks: int) -> tuple[tuple[Step, ...], ...]:
    graph = build_graph(spec)
    return (tuple(_compute(op, spec, ranks) for op in graph.embed),
            tuple(dfx_block_steps(graph, ranks)), tuple(_dfx_output_steps(graph)))


def _plan_lora(strategy: str, spec: ModelSpec, cluster: Cluster,
               config: SystolicConfig) -> Plan:
    _check_inputs(spec, cluster, strategy)
    engine = SystolicEngine(config, cluster.devices[0], spec, cluster.size)
    steps = _lists(_lora_steps(spec, cluster.size, config.weight_bytes, config.pack_rows))
    devices = _device_plans(spec, cluster, True, "ddr", True)
    return _plan(strategy, "lora", build_graph(spec), cluster, engine, config.weight_bytes,
                 steps, devices, config.precision)


# Steps are frozen and a pure function of these arguments; plans get copies.
@by_content(maxsize=64)
def _lora_steps(spec: ModelSpec, ranks: int, activation_bytes: float,
                group_rows: int) -> tuple[tuple[Step, ...], ...]:
    graph = build_graph(spec)
    return tuple(tuple(lora_steps(ops, spec, ranks, activation_bytes, group_rows))
                 for ops in (graph.embed, graph.block, graph.output))



def plan_lora_f(spec: ModelSpec, cluster: Cluster, config: SystolicConfig) -> Plan:
    return _plan_lora("lora-f", spec, cluster, config)


def plan_lora_q(spec: ModelSpec, cluster: Cluster, config: SystolicConfig) -> Plan:
    return _plan_lora("lora-q", spec, cluster, config)


# Each strategy plans one ring as above, and stages of rings across a cluster of several
# (or as `--split` says) with its ring plan as every stage's program (pipeline.py); the
# kind's registration (`__init__.py`) names these.
dfx_planner = pipelined("dfx", plan_dfx)
lora_f_planner = pipelined("lora-f", plan_lora_f)
lora_q_planner = pipelined("lora-q", plan_lora_q)
