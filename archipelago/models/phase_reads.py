"""What a pass of tokens through a transformer must read and compute, at the least: the
counts behind every text-generation kind's physical floors (estimate/floors.py).

Reads: every tensor of the layers the pass runs, once (the pass's tokens share it), except
  - an expert stack (`experts_*`), of which only the distinct experts the pass's tokens
    route to are read (models/expert_routing.py: uniform routing; one token reads its k,
    a long prompt nearly all);
  - an embedding table, of which only the looked-up rows are read (counted as none: a
    floor may leave bytes out, never add them), unless it is the tied LM head's matrix.
FLOPs: the matrix products only (2 x in x out per token and matrix, the MoE FFN as wide as
a token's routed and shared experts, the LM head for the last token of a decoder's
sequence); attention's scores and the element-wise ops are left out, so that a cheaper
attention algorithm cannot fall below the floor.
"""

from archipelago.models.expert_routing import expected_distinct_experts
from archipelago.models.graph import Phase, build_graph
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import WeightTensor

EXPERT_STACKS = frozenset({"experts_gate.weight", "experts_up.weight", "experts_down.weight"})
_TABLES = frozenset({"embed_tokens.weight", "embed_positions.weight", "embed_types.weight"})


def read_share(spec: ModelSpec, tensor: WeightTensor, tokens: int) -> float:
    """The share of `tensor` a pass of `tokens` tokens (all sequences together) must read."""
    if tensor.role in EXPERT_STACKS:
        assert spec.moe is not None  # only MoE layers hold expert stacks
        moe = spec.moe
        return expected_distinct_experts(moe.experts, moe.per_token, tokens) / moe.experts
    if tensor.role in _TABLES:
        head = spec.is_decoder and spec.tied_embeddings and tensor.role == "embed_tokens.weight"
        return 1.0 if head else 0.0
    return 1.0


def matmul_flops(spec: ModelSpec, new_tokens: int, sequences: int,
                 layers: range | None = None, output: bool = True) -> float:
    """FLOPs of the matrix products of `sequences` sequences passing `new_tokens` tokens
    each through `layers` (all by default) and, with `output`, the output ops."""
    graph = build_graph(spec)
    phase = Phase(new_tokens, new_tokens)
    chosen = set(range(spec.layers) if layers is None else layers)
    blocks = graph.variants or ((graph.block, tuple(range(spec.layers))),)
    total = sum(len(chosen.intersection(ids))
                * sum(op.flops(phase) for op in ops if op.kind == "linear")
                for ops, ids in blocks)
    if output:
        last = Phase(1, new_tokens) if spec.is_decoder else phase
        total += sum(op.flops(last) for op in graph.output if op.kind in {"linear", "lm_head"})
    return float(total * sequences)
