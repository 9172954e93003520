"""What a pass of tokens through a transformer must read and compute, at the least: the
counts behind every text-generation kind's physical floors (estimate/floors.py).

Reads: every tensor of the layers the pass runs, once (the pass's tokens share it), except
  - an expert stack (`experts_*`), of which only the distinct experts the pass's tokens
    route to are read (models/expert_routing.py: the plan's routing, uniform unless its
    engine config states a skew; one token reads its k, a long prompt nearly all);
  - an embedding table, of which only the looked-up rows are read (counted as none: a
    floor may leave bytes out, never add them), unless it is the tied LM head's matrix.
FLOPs: the matrix products only (2 x in x out per token and matrix, the MoE FFN as wide as
a token's routed and shared experts, the LM head for the last token of a decoder's
sequence); attention's scores and the element-wise ops are left out, so that a cheaper
attention algorithm cannot fall below the floor.
"""

from archipelago.memo import by_content
from archipelago.models.expert_routing import expected_distinct_experts
from archipelago.models.graph import build_graph
from archipelago.models.graph_ops import Phase
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import WeightTensor, all_weights

EXPERT_STACKS = frozenset({"experts_gate.weight", "experts_up.weight", "experts_down.weight"})
_TABLES = frozenset({"embed_tokens.weight", "embed_positions.weight", "embed_types.weight"})


def expert_share(spec: ModelSpec, tokens: int, skew: float = 0.0) -> float:
    """The share of an expert stack a pass of `tokens` tokens reads (1 without experts),
    their router's skew `skew` being the plan's (the engine config's `expert_skew`): the
    floor assumes the routing its estimate does, or a skewed estimate would fall below it."""
    moe = spec.moe
    if moe is None:
        return 1.0
    return expected_distinct_experts(moe.experts, moe.per_token, tokens, skew) / moe.experts


def read_share(spec: ModelSpec, tensor: WeightTensor, tokens: int) -> float:
    """The share of `tensor` a pass of `tokens` tokens (all sequences together) must read."""
    if tensor.role in EXPERT_STACKS:
        return expert_share(spec, tokens)
    if tensor.role in _TABLES:
        head = spec.is_decoder and spec.tied_embeddings and tensor.role == "embed_tokens.weight"
        return 1.0 if head else 0.0
    return 1.0


# A pure function of the spec's fields; every estimate's floors ask it.
@by_content(maxsize=64)
def weight_elements(spec: ModelSpec) -> tuple[float, float]:
    """The elements every pass reads (all but the expert stacks and embedding tables, a
    tied head's included) and those of the expert stacks, read by `expert_share`."""
    always = experts = 0.0
    for tensor in all_weights(spec):
        if tensor.role in EXPERT_STACKS:
            experts += tensor.numel
        else:
            always += tensor.numel * read_share(spec, tensor, 1)
    return always, experts


# Likewise: the floors of every estimate ask it, for each stage and pass.
@by_content(maxsize=64)
def _flops_per_token(spec: ModelSpec) -> tuple[tuple[float, ...], float]:
    """Running sums of the layers' matrix FLOPs per token (entry l: layers 0..l-1), and
    the output ops'."""
    graph = build_graph(spec)
    one = Phase(1, 1)
    per_layer = [0.0] * spec.layers
    for ops, ids in graph.variants or ((graph.block, tuple(range(spec.layers))),):
        for layer in ids:
            per_layer[layer] = float(sum(op.flops(one) for op in ops if op.kind == "linear"))
    sums = [0.0]
    for flops in per_layer:
        sums.append(sums[-1] + flops)
    head = float(sum(op.flops(one) for op in graph.output if op.kind in {"linear", "lm_head"}))
    return tuple(sums), head


def matmul_flops(spec: ModelSpec, new_tokens: int, sequences: int,
                 layers: range | None = None, output: bool = True) -> float:
    """FLOPs of the matrix products of `sequences` sequences passing `new_tokens` tokens
    each through the contiguous `layers` (all by default) and, with `output`, the output
    ops (a decoder's for the last token only)."""
    sums, head = _flops_per_token(spec)
    layers = range(spec.layers) if layers is None else layers
    total = new_tokens * (sums[layers.stop] - sums[layers.start])
    if output:
        total += head * (1 if spec.is_decoder else new_tokens)
    return total * sequences
