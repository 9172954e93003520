"""Communication handlers, one per CommStep kind, over this rank's Exchange.

The Exchange is the only way activations leave a rank. It counts collectives by kind, beats
the watchdog before each, and turns a collective that fails under it (a peer died or timed
out) into PeerFailure naming the step, so the launcher can tell victims from culprits.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from archipelago.emulate.watchdog import Heartbeat
from archipelago.plan import CommStep

if TYPE_CHECKING:
    from archipelago.emulate.state import RankState

NEXT_TOKEN = "next_token"  # env entry argmax_gather writes: the token every rank agrees on


class PeerFailure(Exception):
    """A collective failed on this rank because of another rank."""

    @classmethod
    def during(cls, doing: str, err: Exception) -> PeerFailure:
        lines = str(err).strip().splitlines() or [type(err).__name__]
        reason = re.sub(r"^\[[^\]]*\]\s*", "", lines[0])  # drop gloo's source location
        return cls(f"{doing} failed: {reason}")


class Exchange:
    """This rank's collectives over the default gloo process group."""

    def __init__(self, heartbeat: Heartbeat) -> None:
        self.heartbeat = heartbeat
        self.counts: Counter[str] = Counter()

    def _run(self, kind: str, what: str, call: Callable[[], object]) -> None:
        self.heartbeat.collective()
        try:
            call()
        except (RuntimeError, dist.DistError) as err:
            raise PeerFailure.during(f"{kind} of {what}", err) from None
        self.counts[kind] += 1

    def all_gather(self, x: torch.Tensor, kind: str, what: str) -> list[torch.Tensor]:
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        self._run(kind, what, lambda: dist.all_gather(parts, x.contiguous()))
        return parts

    def all_reduce(self, x: torch.Tensor, kind: str, what: str) -> torch.Tensor:
        total = x.clone()
        self._run(kind, what, lambda: dist.all_reduce(total, op=dist.ReduceOp.SUM))
        return total

    def gather_to_root(self, result: object) -> list | None:
        """Every rank's (picklable) result on rank 0, in rank order; None on other ranks."""
        out = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
        self._run("gather", "the results", lambda: dist.gather_object(result, out, dst=0))
        return out


CommHandler = Callable[[CommStep, dict[str, torch.Tensor], "RankState"], None]


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
