"""How many distinct routed experts a batch of tokens reads in one MoE layer.

Routing assumption (uniform, independent): each token's router picks its `per_token` experts
as a uniformly random subset of the `experts`, independently of the other tokens. One token
leaves a given expert unpicked with probability 1 - k/E, so B tokens leave it unpicked with
probability (1 - k/E)^B, and the expected number of distinct experts read is
E x (1 - (1 - k/E)^B). One token reads exactly k; as B grows, every expert is read. Trained
routers are balanced towards this by their load-balancing losses (Switch Transformer,
Fedus et al. 2022 §2.2; Mixtral, Jiang et al. 2024 §5); a measured skew is the engine
config's to state (`EXPERT_SKEW`).

Skewed routing. Tokens stay independent, but expert i (in order of popularity, i = 1..E)
is among a token's k with probability p_i proportional to i^-s (a Zipf law of exponent
`skew` s, fitted as the slope of log load against log rank of an expert's measured token
counts), capped at 1 with the excess spread over the others so the p_i still add up to k.
Whatever the router's choices within a token, expert i is read by some of B tokens with
probability 1 - (1 - p_i)^B, so the expected distinct experts are the sum of those. s = 0
is uniform routing; as s grows the same k experts serve every token and a batch reads k.
"""

from typing import Annotated

from pydantic import Field

# A Zipf exponent past this sends practically every token to the same k experts (the top
# expert's share over the next one's is 2^s); larger values are typos.
MAX_SKEW = 16.0

EXPERT_SKEW = Annotated[float, Field(
    ge=0.0, le=MAX_SKEW,
    description="measured routing skew of a mixture of experts: the Zipf exponent of the "
                "experts' loads against their popularity rank (0: uniform routing, the "
                "default; models/expert_routing.py)")]


def inclusion_probabilities(experts: int, per_token: int, skew: float) -> list[float]:
    """p_i, the chance expert i (by popularity) is among a token's `per_token`: k x i^-s
    over the sum, each capped at 1 with what it loses spread over the uncapped ones in
    proportion (they then add up to k)."""
    weights = [(i + 1) ** -skew for i in range(experts)]
    p, free, budget = [0.0] * experts, list(range(experts)), float(per_token)
    while free:
        total = sum(weights[i] for i in free)
        over = [i for i in free if budget * weights[i] / total >= 1.0]
        if not over:
            for i in free:
                p[i] = budget * weights[i] / total
            break
        for i in over:
            p[i] = 1.0
        budget -= len(over)
        free = [i for i in free if i not in over]
    return p


def expected_distinct_experts(experts: int, per_token: int, tokens: int,
                              skew: float = 0.0) -> float:
    """The expected distinct experts `tokens` tokens route to: E x (1 - (1 - k/E)^B) under
    uniform routing (`skew` 0), else the sum over experts of 1 - (1 - p_i)^B."""
    if not 0 < per_token <= experts or tokens < 0 or not 0.0 <= skew <= MAX_SKEW:
        raise ValueError(f"need 0 < per_token {per_token} <= experts {experts}, tokens "
                         f"{tokens} >= 0 and 0 <= skew {skew} <= {MAX_SKEW}")
    if tokens == 1:  # a token reads its k, whatever the skew (and without rounding)
        return float(per_token)
    if skew == 0.0:
        return experts * (1.0 - (1.0 - per_token / experts) ** tokens)
    return sum(1.0 - (1.0 - p) ** tokens
               for p in inclusion_probabilities(experts, per_token, skew))
