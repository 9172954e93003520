"""Synchronization schemes as data, and the public building blocks they are made of.

A scheme says where a ring's boards exchange activations and how the weights are split
(`Scheme`); `ring_program` turns one into the ring program (plan.Plan) of a model on a
ring: the embed, block and output steps every board runs and each board's shards. A new
scheme is one module declaring a `Scheme` and one `register_scheme` call; a strategy pairs
a registered scheme with an engine (planner.py). DFX's and LORA's are in sync_schemes.py.
"""

from dataclasses import dataclass
from typing import Any, Literal

from archipelago.errors import ArchipelagoError
from archipelago.hardware.cluster import Cluster
from archipelago.memo import by_content
from archipelago.models.graph import Graph, absorbed_block, build_graph
from archipelago.models.graph_ops import Op
from archipelago.models.spec import ModelSpec
from archipelago.split import split_bounds
from archipelago.strategies.tensor_parallel.plan import (
    CommStep,
    ComputeStep,
    LayerBlock,
    MemoryKind,
    Plan,
    Step,
)
from archipelago.strategies.tensor_parallel.planning.heads import busiest, head_width
from archipelago.strategies.tensor_parallel.planning.shards import (
    LATENT_NORMS,
    REPLICATED,
    UNSPLIT_NORMS,
    device_plans,
)

# LayerNorm partial sums travel as FP32 pairs (sum, sum of squares) per row.
STATS_VALUES, STATS_BYTES = 2, 4
Overlap = Literal["none", "matmul_blocks"]


@dataclass(frozen=True)
class Scheme:
    """Where a ring synchronizes, as data.

    gather_after     ops whose (column-split) output every board all-gathers
    reduce_after     ops split by input rows (`row_split` weights) whose partial sums are
                     all-reduced
    early            gathers that leave head by head as their op produces them
    overlap          what hides the gathers: nothing (compute stalls) or the consuming
                     matmuls traversed column-major
    column_residual  the residual stream stays column-split: norms run on local columns
                     with an all-reduce of their partial sums, their parameters split
    vocab_split      each board scores its vocabulary slice and an argmax gather picks the
                     token; otherwise the output ops run whole on every board
    matrix_mirror    a second copy of every matrix (LORA's prefill copy in DDR)
    """

    name: str
    gather_after: tuple[str, ...]
    reduce_after: tuple[str, ...] = ()
    early: frozenset[str] = frozenset()
    overlap: Overlap = "none"
    column_residual: bool = False
    vocab_split: bool = False
    matrix_mirror: MemoryKind | None = None


_SCHEMES: dict[str, Scheme] = {}


def register_scheme(scheme: Scheme) -> Scheme:
    """Make `scheme` available to strategies by its name."""
    if scheme.name in _SCHEMES and _SCHEMES[scheme.name] != scheme:
        raise ValueError(f"synchronization scheme '{scheme.name}' registered twice")
    _SCHEMES[scheme.name] = scheme
    return scheme


def get_scheme(name: str) -> Scheme:
    if name not in _SCHEMES:
        raise ArchipelagoError(f"unknown synchronization scheme '{name}'; known: "
                               f"{', '.join(sorted(_SCHEMES))}")
    return _SCHEMES[name]


def local_out(op: Op, spec: ModelSpec, ranks: int, columns_split: bool) -> int:
    """The busiest device's output features of `op` (every device waits for it at the next
    collective): all of a replicated tensor's or a latent's norm, whole heads for q, k, v,
    their per-head norms and latent attention's per-head ops (`heads.head_width`), the
    widest slice of any other split."""
    if op.weight in REPLICATED or op.name in LATENT_NORMS:
        return op.fan_out
    per_head = head_width(spec, op.name) if op.kind != "attn_context" else None
    if per_head is not None:
        share = busiest(spec, ranks)
        return (share.kv_heads if per_head[1] else share.q_heads) * per_head[0]
    widest = split_bounds(op.fan_out, ranks, 0)[1]
    if op.kind in {"linear", "activation", "gated_activation", "lm_head"}:
        return widest
    if columns_split and op.kind in {"norm", "residual", "embedding"}:
        return widest
    return op.fan_out


def compute(op: Op, spec: ModelSpec, ranks: int, columns_split: bool = False) -> ComputeStep:
    """`op` on the busiest device's slice."""
    return ComputeStep(op, local_out(op, spec, ranks, columns_split),
                       busiest(spec, ranks).q_heads if op.heads else 0)


def gathered(spec: ModelSpec, op: Op, ranks: int, value_bytes: float = 2.0,
             overlap: Overlap = "none", early: bool = False) -> CommStep:
    """The all-gather of `op`'s output: all heads' attention result (the context, or
    latent attention's absorbed `v_up`; whole heads a device, the busiest's slice setting
    the pace), the FFN's active columns, otherwise the hidden size."""
    per_head = head_width(spec, "attn_context")
    width, local = {"ffn_act": op.fan_out}.get(op.name, spec.hidden), 0
    if op.name in ("attn_context", "v_up") and per_head is not None:
        width = spec.heads * per_head[0]
        local = busiest(spec, ranks).q_heads * per_head[0]
    return CommStep("all_gather", op.name, width, value_bytes, overlap, early=early,
                    local=local)


def distributed_norm(op: Op, ranks: int, group_rows: int) -> list[Step]:
    """LayerNorm over local columns: partial sums, their all-reduce, then normalization."""
    local = split_bounds(op.fan_out, ranks, 0)[1]
    return [ComputeStep(op, local, stage="stats"),
            CommStep("all_reduce", op.name, STATS_VALUES, STATS_BYTES, "row_groups", group_rows),
            ComputeStep(op, local, stage="apply")]


def lm_head_steps(op: Op, spec: ModelSpec, ranks: int) -> list[Step]:
    """Each rank scores its vocabulary slice; (max, argmax) pairs pick the token."""
    return [compute(op, spec, ranks), CommStep("argmax_gather", op.name, 2 * ranks)]


def scheme_steps(scheme: Scheme, ops: tuple[Op, ...], spec: ModelSpec, ranks: int,
                 activation_bytes: float, group_rows: int) -> list[Step]:
    """The steps of `ops` under `scheme`: each op on its slice, then its sync."""
    steps: list[Step] = []
    for op in ops:
        if scheme.column_residual and op.kind == "norm" and op.name not in UNSPLIT_NORMS:
            steps.extend(distributed_norm(op, ranks, group_rows))
        elif scheme.vocab_split and op.kind == "lm_head":
            steps.extend(lm_head_steps(op, spec, ranks))
        elif op.name in scheme.reduce_after:  # every board's partial sum of the whole output
            steps.append(ComputeStep(op, op.fan_out))
        else:
            steps.append(compute(op, spec, ranks, scheme.column_residual))
        if op.name in scheme.gather_after:
            steps.append(gathered(spec, op, ranks, activation_bytes, scheme.overlap,
                                  early=op.name in scheme.early))
        elif op.name in scheme.reduce_after:
            steps.append(CommStep("all_reduce", op.name, op.fan_out, activation_bytes))
    return steps


def whole_steps(ops: tuple[Op, ...]) -> list[Step]:
    """`ops` whole on every board (DFX's final norm and LM head: seeds/001 §IV-B splits only
    the attention and FC weights, so every core scores the whole vocabulary and its
    reduce-max unit, §V-C, picks the same token)."""
    return [ComputeStep(op, op.fan_out) for op in ops]


Blocks = tuple[tuple[Step, ...], tuple[Step, ...]]  # a prompt's steps, one token's (or ())


def _block(scheme: Scheme, ops: tuple[Op, ...], layer: int, spec: ModelSpec, ranks: int,
           activation_bytes: float, group_rows: int) -> Blocks:
    """The steps of `layer`'s kind of block, and of its one-token form where it differs
    (latent attention absorbed; else empty)."""
    one = absorbed_block(spec, layer)
    return (tuple(scheme_steps(scheme, ops, spec, ranks, activation_bytes, group_rows)),
            () if one == ops else
            tuple(scheme_steps(scheme, one, spec, ranks, activation_bytes, group_rows)))


# Steps are frozen and a pure function of these arguments; plans get copies.
@by_content(maxsize=64)
def _steps(spec: ModelSpec, scheme: Scheme, ranks: int, activation_bytes: float,
           group_rows: int) -> tuple[tuple[Step, ...], tuple[Step, ...], tuple[Blocks, ...]]:
    """The embed and output steps, and each kind of block's (graph.variants' order)."""
    graph = build_graph(spec)
    embed, output = (tuple(scheme_steps(scheme, ops, spec, ranks, activation_bytes,
                                        group_rows)) for ops in (graph.embed, graph.output))
    blocks = tuple(_block(scheme, ops, ids[0], spec, ranks, activation_bytes, group_rows)
                   for ops, ids in graph.variants)
    return embed, output if scheme.vocab_split else tuple(whole_steps(graph.output)), blocks


def ring_program(strategy: str, scheme: Scheme, spec: ModelSpec, cluster: Cluster,
                 engine: Any, bytes_per_param: float, activation_bytes: float = 2.0,
                 group_rows: int = 1, numerics: str = "fp16", kv_bytes: float | None = None
                 ) -> Plan:
    """The ring program of `spec` on `cluster` under `scheme`, run by `engine`'s cores."""
    embed, output, blocks = _steps(spec, scheme, cluster.size, activation_bytes, group_rows)
    devices = device_plans(spec, cluster, scheme.column_residual, scheme.matrix_mirror,
                           scheme.vocab_split, frozenset(scheme.reduce_after))
    graph: Graph = build_graph(spec)
    (block, one), others = blocks[0], zip(graph.variants[1:], blocks[1:], strict=True)
    return Plan(strategy=strategy, scheme=scheme.name, spec=spec, graph=graph,
                cluster=cluster, engine=engine, bytes_per_param=bytes_per_param,
                embed_steps=list(embed), block_steps=list(block), output_steps=list(output),
                devices=devices, numerics=numerics, kv_bytes=kv_bytes,
                decode_steps=list(one) if one else None,
                other_blocks=[LayerBlock(ids, list(steps), list(other) if other else None)
                              for (_, ids), (steps, other) in others])
