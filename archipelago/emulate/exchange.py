"""The Exchange: the only way activations leave a rank. It counts collectives by kind and the
bytes each puts on one link of a ring (the DFX and LORA rings, seeds/001 §IV-B, seeds/002
§III-B: an all-gather forwards the other ranks' R - 1 slices, a reduce-scatter plus
all-gather all-reduce sends 2 (R - 1) / R of the tensor; gloo may route differently) and the
bytes a point-to-point send puts on the sender's link (a pipeline's stage hops), beats
the watchdog before each, and turns a collective that fails under it (a peer died or timed
out) into PeerFailure naming the step, so the launcher can tell victims from culprits.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import torch
import torch.distributed as dist

from archipelago.emulate.watchdog import Heartbeat


class PeerFailure(Exception):
    """A collective failed on this rank because of another rank."""

    @classmethod
    def during(cls, doing: str, err: Exception) -> PeerFailure:
        lines = str(err).strip().splitlines() or [type(err).__name__]
        reason = re.sub(r"^\[[^\]]*\]\s*", "", lines[0])  # drop gloo's source location
        return cls(f"{doing} failed: {reason}")


class Exchange:
    """This rank's collectives over `group` (None: the default gloo process group; a
    pipeline stage's tensor-parallel ranks form a group of their own), and its
    point-to-point transfers to other ranks (global rank numbers)."""

    def __init__(self, heartbeat: Heartbeat, group: dist.ProcessGroup | None = None) -> None:
        self.heartbeat = heartbeat
        self.group = group
        self.counts: Counter[str] = Counter()
        self.link_bytes: Counter[str] = Counter()  # by collective kind, one ring link

    def _run(self, kind: str, what: str, call: Callable[[], object]) -> None:
        self.heartbeat.collective()
        try:
            call()
        except (RuntimeError, dist.DistError) as err:
            raise PeerFailure.during(f"{kind} of {what}", err) from None
        self.counts[kind] += 1

    def all_gather(self, x: torch.Tensor, kind: str, what: str) -> list[torch.Tensor]:
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(self.group))]
        self._run(kind, what, lambda: dist.all_gather(parts, x.contiguous(), group=self.group))
        self.link_bytes[kind] += (len(parts) - 1) * x.nelement() * x.element_size()
        return parts

    def all_reduce(self, x: torch.Tensor, kind: str, what: str,
                   op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM) -> torch.Tensor:
        """Element-wise `op` (a sum, or the maximum) of every rank's `x`."""
        total = x.clone()
        self._run(kind, what, lambda: dist.all_reduce(total, op=op, group=self.group))
        ranks = dist.get_world_size(self.group)
        self.link_bytes[kind] += 2 * (ranks - 1) * x.nelement() * x.element_size() / ranks
        return total

    def send(self, x: torch.Tensor, to: int, kind: str, what: str) -> None:
        """`x` to global rank `to`, its bytes counted on this rank's outgoing link."""
        self._run(kind, what, lambda: dist.send(x.contiguous(), to))
        self.link_bytes[kind] += x.nelement() * x.element_size()

    def recv(self, shape: tuple[int, ...], dtype: torch.dtype, sender: int, kind: str,
             what: str) -> torch.Tensor:
        """A tensor of `shape` and `dtype` from global rank `sender` (its link's bytes are
        the sender's)."""
        x = torch.empty(shape, dtype=dtype)
        self._run(kind, what, lambda: dist.recv(x, sender))
        return x

    def gather_to_root(self, result: object) -> list | None:
        """Every rank's (picklable) result on rank 0, in rank order; None on other ranks."""
        out = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
        self._run("gather", "the results", lambda: dist.gather_object(result, out, dst=0))
        return out
