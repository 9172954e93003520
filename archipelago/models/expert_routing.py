"""How many distinct routed experts a batch of tokens reads in one MoE layer.

Routing assumption (uniform, independent): each token's router picks its `per_token` experts
as a uniformly random subset of the `experts`, independently of the other tokens. One token
leaves a given expert unpicked with probability 1 - k/E, so B tokens leave it unpicked with
probability (1 - k/E)^B, and the expected number of distinct experts read is
E x (1 - (1 - k/E)^B). One token reads exactly k; as B grows, every expert is read. Trained
routers are balanced towards this by their load-balancing losses (Switch Transformer,
Fedus et al. 2022 §2.2; Mixtral, Jiang et al. 2024 §5); a measured skew is the engine
config's to state.
"""


def expected_distinct_experts(experts: int, per_token: int, tokens: int) -> float:
    """E x (1 - (1 - k/E)^B): the expected distinct experts `tokens` tokens route to."""
    if not 0 < per_token <= experts or tokens < 0:
        raise ValueError(f"need 0 < per_token {per_token} <= experts {experts} and tokens "
                         f"{tokens} >= 0")
    return experts * (1.0 - (1.0 - per_token / experts) ** tokens)
