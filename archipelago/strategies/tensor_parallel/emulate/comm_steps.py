"""Communication handlers, one per CommStep kind, over this rank's Exchange (exchange.py)."""

from collections.abc import Callable

import torch

from archipelago.strategies.tensor_parallel.emulate.state import RankState
from archipelago.strategies.tensor_parallel.plan import CommStep

NEXT_TOKEN = "next_token"  # env entry argmax_gather writes: the token every rank agrees on


CommHandler = Callable[[CommStep, dict[str, torch.Tensor], RankState], None]


def _what(step: CommStep, rs: RankState) -> str:
    return f"'{step.tensor}'" + ("" if rs.layer is None else f" (layer {rs.layer})")


def _check_width(step: CommStep, full: torch.Tensor) -> torch.Tensor:
    assert full.shape[-1] == step.width, (step, tuple(full.shape))
    return full


def all_gather(step: CommStep, env: dict[str, torch.Tensor], rs: RankState) -> None:
    """Every rank's slice of `step.tensor`, concatenated in rank order along the last dim."""
    parts = rs.exchange.all_gather(env[step.tensor], step.kind, _what(step, rs))
    env[step.tensor] = _check_width(step, torch.cat(parts, dim=-1))


def all_reduce(step: CommStep, env: dict[str, torch.Tensor], rs: RankState) -> None:
    """Element-wise sum of every rank's partial `step.tensor`."""
    total = rs.exchange.all_reduce(env[step.tensor], step.kind, _what(step, rs))
    env[step.tensor] = _check_width(step, total)


def argmax_gather(step: CommStep, env: dict[str, torch.Tensor], rs: RankState) -> None:
    """Each rank offers (max logit, global token id) of its vocab slice for the last token; the
    largest wins, the lowest id on ties (as argmax over the whole vocabulary would pick).
    float64 carries both exactly."""
    logits = env[step.tensor][-1]
    best = int(torch.argmax(logits))
    offer = torch.tensor([float(logits[best]), rs.vocab_slice[0] + best], dtype=torch.float64)
    table = torch.stack(rs.exchange.all_gather(offer, step.kind, _what(step, rs)))
    assert table.numel() == step.width, (step, tuple(table.shape))
    env[NEXT_TOKEN] = table[int(torch.argmax(table[:, 0])), 1].long()


COMM: dict[str, CommHandler] = {
    "all_gather": all_gather,
    "all_reduce": all_reduce,
    "argmax_gather": argmax_gather,
}
