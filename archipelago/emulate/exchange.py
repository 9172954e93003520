"""The Exchange: the only way activations leave a rank. It counts collectives by kind and the
bytes each puts on one link of a ring (the DFX and LORA rings, seeds/001 §IV-B, seeds/002
§III-B: an all-gather forwards the other ranks' R - 1 slices, a reduce-scatter plus
all-gather all-reduce sends 2 (R - 1) / R of the tensor; gloo may route differently) and the
bytes a point-to-point send puts on the sender's link (a pipeline's stage hops), beats
the watchdog before each, and turns a collective that fails under it (a peer died or timed
out) into PeerFailure naming the step, so the launcher can tell victims from culprits.

The bytes move over a transport: gloo (any launch, torchrun's across hosts too), or shared
memory between the ranks the launcher forked on this host (shared_memory.py: the run's
all-gathers alone about 10x faster than over gloo on loopback, benchmarks/gloo_floor.py;
bit-identical results).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Protocol

import torch
import torch.distributed as dist

from archipelago.emulate import futex
from archipelago.emulate.shared_memory import SharedMemory
from archipelago.emulate.watchdog import Heartbeat


class PeerFailure(Exception):
    """A collective failed on this rank because of another rank."""

    @classmethod
    def during(cls, doing: str, err: Exception) -> PeerFailure:
        lines = str(err).strip().splitlines() or [type(err).__name__]
        reason = re.sub(r"^\[[^\]]*\]\s*", "", lines[0])  # drop gloo's source location
        return cls(f"{doing} failed: {reason}")


class Transport(Protocol):
    """How a group's collectives and a rank's point-to-point transfers move (global rank
    numbers for `to` and `sender`)."""

    @property
    def ranks(self) -> int: ...

    def all_gather(self, x: torch.Tensor) -> list[torch.Tensor]: ...

    def all_reduce(self, x: torch.Tensor, op: dist.ReduceOp.RedOpType) -> torch.Tensor: ...

    def send(self, x: torch.Tensor, to: int) -> None: ...

    def recv(self, shape: tuple[int, ...], dtype: torch.dtype, sender: int
             ) -> torch.Tensor: ...

    def split(self, groups: list[list[int]]) -> Transport: ...


class Gloo:
    """The transport over gloo `group` (None: the default process group)."""

    def __init__(self, timeout_s: float, group: dist.ProcessGroup | None = None) -> None:
        self.timeout_s, self.group = timeout_s, group

    @property
    def ranks(self) -> int:
        return dist.get_world_size(self.group)

    def all_gather(self, x: torch.Tensor) -> list[torch.Tensor]:
        parts = [torch.empty_like(x) for _ in range(self.ranks)]
        dist.all_gather(parts, x.contiguous(), group=self.group)
        return parts

    def all_reduce(self, x: torch.Tensor, op: dist.ReduceOp.RedOpType) -> torch.Tensor:
        total = x.clone()
        dist.all_reduce(total, op=op, group=self.group)
        return total

    def send(self, x: torch.Tensor, to: int) -> None:
        dist.send(x.contiguous(), to)

    def recv(self, shape: tuple[int, ...], dtype: torch.dtype, sender: int) -> torch.Tensor:
        x = torch.empty(shape, dtype=dtype)
        dist.recv(x, sender)
        return x

    def split(self, groups: list[list[int]]) -> Gloo:
        """Every rank creates every group, in the same order (gloo's new_group needs it)."""
        timeout = timedelta(seconds=self.timeout_s)
        made = [(g, dist.new_group(g, timeout=timeout)) for g in groups]
        return Gloo(self.timeout_s, next(pg for g, pg in made if dist.get_rank() in g))


def in_shared_memory(shared: Path | None) -> bool:
    """Whether `transport` moves the collectives through shared memory (else over gloo)."""
    return shared is not None and futex.supported()


def transport(shared: Path | None, rank: int, world: int, timeout_s: float) -> Transport:
    """Shared memory in folder `shared` where the ranks share this host (the launcher's)
    and futex.supported() holds; gloo's default process group otherwise."""
    if in_shared_memory(shared):
        return SharedMemory.world(shared, rank, world, timeout_s)
    return Gloo(timeout_s)


class Exchange:
    """This rank's collectives over `transport` (a pipeline stage's tensor-parallel ranks
    form a group of their own: `split`), and its point-to-point transfers to other ranks
    (global rank numbers)."""

    def __init__(self, heartbeat: Heartbeat, transport: Transport) -> None:
        self.heartbeat = heartbeat
        self.transport = transport
        self.counts: Counter[str] = Counter()
        self.link_bytes: Counter[str] = Counter()  # by collective kind, one ring link

    def split(self, groups: list[list[int]]) -> Exchange:
        """The Exchange over the one of `groups` (global ranks, a partition of the world)
        that holds this rank; every rank calls it with the same groups."""
        return Exchange(self.heartbeat, self.transport.split(groups))

    def _run(self, kind: str, what: str, call: Callable[[], object]) -> object:
        self.heartbeat.collective()
        try:
            result = call()
        except (RuntimeError, dist.DistError) as err:
            raise PeerFailure.during(f"{kind} of {what}", err) from None
        self.counts[kind] += 1
        return result

    def all_gather(self, x: torch.Tensor, kind: str, what: str) -> list[torch.Tensor]:
        parts = self._run(kind, what, lambda: self.transport.all_gather(x))
        self.link_bytes[kind] += (len(parts) - 1) * x.nelement() * x.element_size()
        return parts

    def all_reduce(self, x: torch.Tensor, kind: str, what: str,
                   op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM) -> torch.Tensor:
        """Element-wise `op` (a sum, or the maximum) of every rank's `x`."""
        total = self._run(kind, what, lambda: self.transport.all_reduce(x, op))
        ranks = self.transport.ranks
        self.link_bytes[kind] += 2 * (ranks - 1) * x.nelement() * x.element_size() / ranks
        return total

    def send(self, x: torch.Tensor, to: int, kind: str, what: str) -> None:
        """`x` to global rank `to`, its bytes counted on this rank's outgoing link."""
        self._run(kind, what, lambda: self.transport.send(x, to))
        self.link_bytes[kind] += x.nelement() * x.element_size()

    def recv(self, shape: tuple[int, ...], dtype: torch.dtype, sender: int, kind: str,
             what: str) -> torch.Tensor:
        """A tensor of `shape` and `dtype` from global rank `sender` (its link's bytes are
        the sender's)."""
        return self._run(kind, what, lambda: self.transport.recv(shape, dtype, sender))

    def gather_to_root(self, result: object) -> list | None:
        """Every rank's (picklable) result on rank 0, in rank order; None on other ranks
        (over gloo's default group whatever the transport: once per run)."""
        out = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
        self._run("gather", "the results", lambda: dist.gather_object(result, out, dst=0))
        return out
