"""An MoE layer's router and shared experts on one rank, as transformers computes them.

Routers: Mixtral's softmax top-k (MixtralTopKRouter), or where the family declares router
options (FamilyNumerics.routing) DeepSeek's (DeepseekV3TopkRouter): sigmoid scores, the
experts of the `topk_group` groups whose two best scores sum highest, the top `per_token`
of those, their scores normalized (norm_topk_prob) and scaled by routed_scaling_factor.
Its e_score_correction_bias (a buffer, not a parameter) is taken as transformers
initializes it, zero; a checkpoint is checked for that before the ranks start (rank.py).
Shared experts (DeepseekV3MoE.shared_experts) run beside the routed ones on every token,
their columns split across the ranks like any FFN's.
"""

import torch

from archipelago.strategies.tensor_parallel.emulate.state import RankState
from archipelago.strategies.tensor_parallel.plan import ComputeStep


def route(logits: torch.Tensor, rs: RankState) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token's experts and their weights, (tokens, per_token) each."""
    moe, options = rs.spec.moe, rs.numerics.routing
    assert moe is not None
    if not options:  # Mixtral: softmax over all experts, top-k renormalized
        top, chosen = torch.topk(torch.softmax(logits.float(), dim=-1), moe.per_token, dim=-1)
        return chosen, top / top.sum(dim=-1, keepdim=True)
    scores = logits.float().sigmoid()
    groups = options["n_group"]
    best = scores.view(len(scores), groups, -1).topk(2, dim=-1)[0].sum(dim=-1)
    kept = torch.zeros_like(best).scatter_(
        1, torch.topk(best, options["topk_group"], dim=-1, sorted=False)[1], 1)
    allowed = kept.repeat_interleave(moe.experts // groups, dim=1).bool()
    chosen = torch.topk(scores.masked_fill(~allowed, float("-inf")), moe.per_token, dim=-1,
                        sorted=False)[1]
    weights = scores.gather(1, chosen)
    if options["norm_topk_prob"]:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return chosen, weights * options["routed_scaling_factor"]


def _shared(rs: RankState, role: str) -> torch.Tensor | None:
    return rs.weights.get(f"layers.{rs.layer}.{role}.weight")


def shared_up(step: ComputeStep, x: torch.Tensor, routed: torch.Tensor,
              rs: RankState) -> torch.Tensor:
    """The routed experts' up (or gate) columns, then the shared experts' local ones."""
    weight = _shared(rs, step.op.weight.replace("experts_", "shared_"))  # type: ignore[union-attr]
    return routed if weight is None else torch.cat((routed, x @ weight), dim=-1)


def shared_down(act: torch.Tensor, routed: torch.Tensor, rs: RankState) -> torch.Tensor:
    """The routed experts' weighted sum plus the shared experts' down projection of their
    gathered activations `act` (this rank's output columns)."""
    weight = _shared(rs, "shared_down")
    return routed if weight is None else routed + act @ weight
