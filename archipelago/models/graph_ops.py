"""The operators of a transformer's graph (models/graph.py): `Op`, what one costs per
`Phase` of tokens, and `Routed`, the expert dimension of a mixture's FFN ops. Shapes are per
token; a Phase supplies how many new tokens flow through and how long the attended context
is, so the same ops serve prefill, decode at any context length, and encoder passes.
"""

from dataclasses import dataclass
from typing import Literal

import numpy as np

from archipelago.models.expert_routing import expected_distinct_experts

OpKind = Literal[
    "embedding", "norm", "linear", "attn_score", "softmax", "attn_context",
    "activation", "gated_activation", "residual", "lm_head",
]


@dataclass(frozen=True)
class Phase:
    """`new_tokens` enter the model while attending to `context` keys (which include them).
    `context` may be an array of lengths: engines then cost a whole decode run in one numpy
    pass, one entry per context length."""

    new_tokens: int
    context: int | np.ndarray
    causal: bool = True

    def __post_init__(self) -> None:
        assert self.new_tokens >= 1 and np.all(np.asarray(self.context) >= self.new_tokens), \
            (self.new_tokens, self.context)

    @property
    def attended_pairs(self) -> int:
        """(query, key) pairs scored: token at position p attends to p+1 keys when causal."""
        if not self.causal:
            return self.new_tokens * self.context
        first = self.context - self.new_tokens + 1
        return self.new_tokens * (first + self.context) // 2

    def pairs_within(self, window: int | None) -> int | np.ndarray:
        """Pairs scored when each query sees at most `window` keys (sliding-window
        attention): positions that see c keys contribute min(c, window)."""
        if window is None:
            return self.attended_pairs
        if not self.causal:
            return self.new_tokens * np.minimum(self.context, window)
        first, last = self.context - self.new_tokens + 1, self.context
        top = np.minimum(last, window)  # queries with first..top keys are under the window
        under = np.where(top >= first, (first + top) * (top - first + 1) // 2, 0)
        return under + window * (last - np.maximum(first - 1, top))


def prefill(tokens: int) -> Phase:
    return Phase(tokens, tokens)


def decode(context: int) -> Phase:
    return Phase(1, context)


@dataclass(frozen=True)
class Routed:
    """The expert dimension of an FFN op of a mixture (module docstring): its fan_out (gate,
    up: `axis` "out") or fan_in (down: "in") is a token's `per_token` of `experts` experts,
    `width` columns each, plus `shared` columns of shared experts every token runs.
    `bound`: a step reads at most min(experts, tokens x per_token) of them, the worst case a
    router can hit (a board of whole experts, planning/experts.py), not the expectation."""

    experts: int
    per_token: int
    width: int
    shared: int
    axis: Literal["in", "out"]
    bound: bool = False

    def read_scale(self, tokens: int, skew: float) -> float:
        """The weights a step of `tokens` tokens reads over those one token runs (>= 1)."""
        read = (min(self.experts, tokens * self.per_token) if self.bound
                else expected_distinct_experts(self.experts, self.per_token, tokens, skew))
        return (read * self.width + self.shared) / (self.per_token * self.width + self.shared)


@dataclass(frozen=True)
class Op:
    """One operator. `weight` names the tensor role it reads (e.g. 'q' for q.weight/q.bias);
    `inputs` are the ops (or 'block_in') whose outputs it consumes, so the graph is a DAG.
    `routed`: the op runs over a mixture's experts (its weights read depend on the tokens)."""

    name: str
    kind: OpKind
    fan_in: int
    fan_out: int
    inputs: tuple[str, ...]
    weight: str | None = None
    heads: int = 0
    window: int | None = None  # attention ops of a sliding-window layer
    routed: Routed | None = None

    def read_scale(self, tokens: int, skew: float = 0.0) -> float:
        """The weights a step of `tokens` tokens reads over fan_in x fan_out (what one token
        runs): 1 for a dense op; the distinct experts' share for a routed one, under the
        routing skew `skew` (models/expert_routing.py)."""
        return 1.0 if self.routed is None else self.routed.read_scale(tokens, skew)

    def flops(self, phase: Phase) -> int:
        """Floating-point operations (multiply and add counted separately)."""
        n = phase.new_tokens
        if self.kind in {"linear", "lm_head"}:
            return 2 * n * self.fan_in * self.fan_out
        if self.kind in {"attn_score", "attn_context"}:
            return 2 * self.heads * self.fan_in * phase.pairs_within(self.window)
        if self.kind == "softmax":  # max, sub, exp, sum, scale
            return 5 * self.heads * phase.pairs_within(self.window)
        if self.kind == "norm":
            return 8 * n * self.fan_out
        if self.kind in {"activation", "gated_activation", "residual", "embedding"}:
            return n * self.fan_out * (2 if self.kind == "gated_activation" else 1)
        raise AssertionError(self.kind)
