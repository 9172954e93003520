"""Intra-layer tensor parallelism over a ring of identical FPGAs.

Scheme `dfx` (seeds/001 §IV-B, Algorithm 1): Q/K/V split head-wise, every other matrix split
column-wise, each partial output all-gathered (four syncs per block: after attention, the
attention projection, FFN1+GELU and FFN2); LayerNorm and residual run replicated. WTE/WPE,
biases and LayerNorm parameters live in DDR, weight matrices in HBM (§IV-B).
"""

from dataclasses import dataclass, field
from typing import Any

from archipelago.engines.dfx import DFXConfig, DFXEngine
from archipelago.errors import ArchipelagoError, PartitionError
from archipelago.hardware.cluster import Cluster
from archipelago.models.graph import Graph, Op, build_graph
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import embedding_weights, layer_weights, output_weights
from archipelago.plan import CommStep, ComputeStep, DevicePlan, Plan, Shard, Step
from archipelago.strategies.registry import register

FP16_BYTES = 2
# Per-layer tensors whose output columns are split across ranks (everything but norms).
_COLUMN_SPLIT = frozenset({"q", "k", "v", "attn_out", "ffn_gate", "ffn_up", "ffn_down"})
# DFX synchronizes after these ops (seeds/001 Algorithm 1, lines 13, 15, 22, 24).
_DFX_SYNC_AFTER = ("attn_context", "attn_out", "ffn_act", "ffn_down")


@dataclass(frozen=True)
class PlanOptions:
    """Knobs a user may set on any strategy; `engine` overrides engine design parameters."""

    engine: dict[str, Any] = field(default_factory=dict)


def split_bounds(total: int, ranks: int, rank: int) -> tuple[int, int]:
    """Contiguous near-equal slices (the first `total % ranks` slices one larger)."""
    base, extra = divmod(total, ranks)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def check_divisible(spec: ModelSpec, ranks: int) -> None:
    """Head-wise and column-wise splits need every split dimension to divide evenly."""
    for what, value in (("attention heads", spec.heads), ("key/value heads", spec.kv_heads),
                        ("FFN width", spec.ffn), ("hidden size", spec.hidden)):
        if value % ranks:
            raise PartitionError(
                f"{spec.name}: {what} ({value}) is not divisible by the device count ({ranks});"
                f" choose a device count that divides {value}"
            )


def _check_cluster(cluster: Cluster, strategy: str) -> None:
    if not cluster.homogeneous:
        kinds = sorted({d.key for d in cluster.devices})
        raise PartitionError(f"strategy '{strategy}' needs identical devices; "
                             f"cluster '{cluster.name}' mixes {kinds}")
    device = cluster.devices[0]
    if device.kind != "fpga" or device.memory("hbm") is None:
        raise PartitionError(f"strategy '{strategy}' runs on HBM FPGAs; '{device.key}' is a "
                             f"{device.kind} without HBM")
    if cluster.size > 1 and cluster.topology != "ring":
        raise PartitionError(f"strategy '{strategy}' synchronizes over a ring; cluster "
                             f"'{cluster.name}' has topology '{cluster.topology}'")


def _device_plan(spec: ModelSpec, cluster: Cluster, rank: int) -> DevicePlan:
    ranks = cluster.size
    layer: dict[str, Shard] = {}
    for tensor in layer_weights(spec, 0):
        name, part = tensor.role.split(".")
        if name not in _COLUMN_SPLIT:
            layer[tensor.role] = Shard(None, memory="ddr")
            continue
        axis = len(tensor.shape) - 1
        start, stop = split_bounds(tensor.shape[axis], ranks, rank)
        layer[tensor.role] = Shard(axis, start, stop, "hbm" if part == "weight" else "ddr")
    other: dict[str, Shard] = {}
    for tensor in (*embedding_weights(spec), *output_weights(spec)):
        if tensor.role == "lm_head.weight":  # untied head: vocab-split like the WTE read
            start, stop = split_bounds(spec.vocab, ranks, rank)
            other[tensor.role] = Shard(1, start, stop, "ddr")
        else:
            other[tensor.role] = Shard(None, memory="ddr")
    return DevicePlan(rank, cluster.devices[rank], layer, other)


def _local_out(op: Op, ranks: int) -> int:
    if op.kind in {"linear", "activation", "gated_activation"}:
        return op.fan_out // ranks
    if op.kind == "lm_head":
        return -(-op.fan_out // ranks)
    return op.fan_out


def dfx_block_steps(graph: Graph, ranks: int) -> list[Step]:
    steps: list[Step] = []
    for op in graph.block:
        heads = op.heads // ranks if op.heads else 0
        steps.append(ComputeStep(op, _local_out(op, ranks), heads))
        if op.name in _DFX_SYNC_AFTER:
            width = graph.spec.hidden if op.name != "ffn_act" else graph.spec.ffn
            steps.append(CommStep("all_gather", op.name, width))
    return steps


def _output_steps(graph: Graph, ranks: int) -> list[Step]:
    steps: list[Step] = []
    for op in graph.output:
        steps.append(ComputeStep(op, _local_out(op, ranks)))
        if op.kind == "lm_head":  # each rank's (max, argmax) pair, gathered to pick the token
            steps.append(CommStep("argmax_gather", op.name, 2 * ranks))
    return steps


@register("dfx", "tensor parallel, DFX sync scheme: 4 ring all-gathers per block (seeds/001)")
def plan_dfx(spec: ModelSpec, cluster: Cluster, options: PlanOptions | None = None) -> Plan:
    options = options or PlanOptions()
    _check_cluster(cluster, "dfx")
    check_divisible(spec, cluster.size)
    if not spec.is_decoder:
        raise PartitionError(f"strategy 'dfx' generates text with decoders; {spec.name} is an "
                             "encoder (try strategy 'galapagos')")
    try:
        engine = DFXEngine(DFXConfig(**options.engine))
    except (TypeError, AssertionError) as err:
        raise ArchipelagoError(f"invalid DFX engine parameters {options.engine}: {err}") from None
    graph = build_graph(spec)
    ranks = cluster.size
    return Plan(
        strategy="dfx", scheme="dfx", spec=spec, graph=graph, cluster=cluster, engine=engine,
        bytes_per_param=FP16_BYTES,
        embed_steps=[ComputeStep(op, op.fan_out) for op in graph.embed],
        block_steps=dfx_block_steps(graph, ranks),
        output_steps=_output_steps(graph, ranks),
        devices=[_device_plan(spec, cluster, r) for r in range(ranks)],
    )
