"""Collectives in shared memory between the ranks the launcher forks on one host.

gloo over loopback TCP cost ~3 ms per all-gather with 4 ranks on 2 cores (issue 36,
benchmarks/gloo_floor.py), more than one-process transformers' whole token. Here a group's
ranks meet in files mapped by all of them, under the run's directory (removed with it):

- a counter per rank, each written only by its owner: the collectives it has offered; a
  rank copies its tensor into its slot, then publishes the new count and wakes the peers
  sleeping on it (futex.py); it waits for every peer's count to reach its own and reads
  their slots. One synchronisation per collective suffices because the slots are double
  buffered: a peer publishing collective n + 1 has finished reading collective n's slots,
  the ones collective n + 2 overwrites. x86's store order makes the data visible before
  the counter (futex.supported says where this runs; elsewhere the ranks use gloo).
- a slot file sized on demand, the smallest power of two that holds the largest tensor so
  far: every rank of an SPMD collective sees the same sizes, so all move to a new file at
  the same collective; a rank also publishes its byte count, which each peer checks.
- a pipe per (sender, receiver) pair for a pipeline's stage hops: the sender waits until
  the receiver has read the slot it is about to reuse (two messages back).

A wait gives up after the job's timeout (a hung peer) or as soon as the peer's process has
exited, raising PeerLost naming it; the Exchange turns that into PeerFailure naming the step.
An all-reduce adds the ranks' tensors in gloo's ring order (`ring_sum`), so results are
bit-identical to the gloo path.
"""

import ctypes
import hashlib
import math
import mmap
import os
import time
from collections.abc import Callable
from functools import reduce
from pathlib import Path

import torch
import torch.distributed as dist

from archipelago.emulate import futex

LINE = 64  # bytes per counter: an x86 cache line, so no two writers share one
LIVENESS_S = 0.25  # how often a waiting rank checks that the peer it waits for still runs
MIN_SLOT_BYTES = 4096
# gloo's bound on one ring segment (gloo/allreduce.h, AllreduceOptionsImpl::kMaxSegmentSize):
# it sets where the chunks of its ring all-reduce, each summed in its own order, begin.
GLOO_MAX_SEGMENT_BYTES = 1 << 20


class PeerLost(RuntimeError):
    """The peer a rank waited for exited, did not arrive within the timeout, or offered a
    tensor of another size than this rank's."""


def ring_sum(parts: list[torch.Tensor]) -> torch.Tensor:
    """The element-wise sum of `parts` (rank order) as gloo's ring all-reduce adds them
    (gloo/allreduce.cc, `ring`): the flat tensor falls into one chunk per rank, of whole
    segments of at most GLOO_MAX_SEGMENT_BYTES, at least two per rank; chunk c starts at
    rank c - 1 and travels down the ring, each rank adding its own part, to end at rank c."""
    ranks, flat = len(parts), [p.reshape(-1) for p in parts]
    if ranks == 1:
        return parts[0].clone()
    count, size = flat[0].numel(), flat[0].element_size()
    segments = _round_up(max(-(-count * size // GLOO_MAX_SEGMENT_BYTES), 2 * ranks), ranks)
    chunk = segments // ranks * _round_up(-(-count * size // segments), size) // size
    out = torch.empty_like(flat[0])
    for c in range(ranks):
        lo, hi = c * chunk, min((c + 1) * chunk, count)
        if lo >= hi:
            break
        torch.add(flat[(c - 1) % ranks][lo:hi], flat[(c - 2) % ranks][lo:hi], out=out[lo:hi])
        for k in range(3, ranks + 1):
            out[lo:hi].add_(flat[(c - k) % ranks][lo:hi])
    return out.view(parts[0].shape)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


REDUCTIONS: dict[dist.ReduceOp.RedOpType, Callable[[list[torch.Tensor]], torch.Tensor]] = {
    dist.ReduceOp.SUM: ring_sum,
    dist.ReduceOp.MAX: lambda parts: reduce(torch.maximum, parts[1:], parts[0].clone()),
}


def _mapped(path: Path, size: int) -> mmap.mmap:
    """`path` (created by whichever rank comes first, zero-filled) mapped shared."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_size < size:  # never shrinks: a peer may have written already
            os.ftruncate(fd, size)
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (0: not yet known, taken as running); a zombie does not."""
    if pid == 0:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


class _Counters:
    """int32 counters in a shared file, one cache line each, each written by one rank
    (ctypes cells: a read or a store is one aligned 4-byte access, and cheap)."""

    def __init__(self, path: Path, count: int) -> None:
        self._map = _mapped(path, count * LINE)
        self._cells = [ctypes.c_int32.from_buffer(self._map, k * LINE) for k in range(count)]

    def __getitem__(self, k: int) -> int:
        return self._cells[k].value

    def store(self, k: int, value: int) -> None:
        self._cells[k].value = value

    def publish(self, k: int, value: int) -> None:
        """Store `value` and wake the ranks waiting on it."""
        self._cells[k].value = value
        futex.wake(ctypes.addressof(self._cells[k]))

    def await_at_least(self, k: int, target: int, deadline: float, peer: "_Peer") -> None:
        """Return once counter `k` reaches `target`; PeerLost when `peer` exits or
        `deadline` (time.monotonic) passes first."""
        cell, checked = self._cells[k], time.monotonic()
        while (seen := cell.value) < target:
            now = time.monotonic()
            if now >= deadline:
                raise PeerLost(f"rank {peer.rank} did not arrive within {peer.timeout_s:g} s")
            if now - checked >= LIVENESS_S:
                if not peer.alive() and cell.value < target:  # it may have arrived, then ended
                    raise PeerLost(f"rank {peer.rank} exited")
                checked = now
            futex.wait(ctypes.addressof(cell), seen, min(deadline - now, LIVENESS_S))


class _Peer:
    """Another rank as a waiter sees it: its number, whether its process still runs."""

    def __init__(self, host: "Host", rank: int) -> None:
        self.host, self.rank, self.timeout_s = host, rank, host.timeout_s

    def alive(self) -> bool:
        return _alive(self.host.pids[self.rank])


class _Slots:
    """`ways` slots of one byte capacity, twice (collectives alternate between the two
    halves), in a shared file that is replaced by a larger one when a tensor outgrows it."""

    def __init__(self, stem: Path, ways: int) -> None:
        self.stem, self.ways, self.capacity = stem, ways, 0
        self.tables: dict[tuple[torch.dtype, tuple[int, ...]], list[torch.Tensor]] = {}

    def table(self, sequence: int, dtype: torch.dtype, shape: tuple[int, ...]
              ) -> torch.Tensor:
        """The slots of collective `sequence` as tensors of `dtype` and `shape`, stacked
        (`ways` first); the views are kept, since a run repeats a few shapes many times."""
        key = (dtype, shape)
        if key not in self.tables:
            # normal tensors, even when made under inference mode: an inference tensor could
            # not be written outside it (a collective while loading weights, say)
            with torch.inference_mode(False):
                nbytes = math.prod(shape) * dtype.itemsize
                if nbytes > self.capacity:
                    self._grow(nbytes)
                self.tables[key] = [half[:, :nbytes].view(dtype).view(self.ways, *shape)
                                    for half in self.bytes]
        return self.tables[key][sequence % 2]

    def _grow(self, nbytes: int) -> None:
        self.capacity = max(MIN_SLOT_BYTES, 1 << (nbytes - 1).bit_length())
        self.shared = _mapped(Path(f"{self.stem}.{self.capacity}"),
                              2 * self.ways * self.capacity)
        self.bytes = torch.frombuffer(self.shared, dtype=torch.uint8).view(2, self.ways,
                                                                           self.capacity)
        self.tables.clear()


def _check_size(sender: int, offered: int, expected: int) -> None:
    if offered != expected:
        raise PeerLost(f"rank {sender} offered {offered} bytes where this rank expected "
                       f"{expected}")


class _Group:
    """One collective group's counters (collectives offered per member, then the bytes
    offered per member for even and for odd collectives: a peer may already be offering
    the next) and slots, as one member sees them."""

    def __init__(self, host: "Host", members: tuple[int, ...]) -> None:
        name = hashlib.sha1(repr(members).encode()).hexdigest()[:16]
        self.host, self.members, self.me = host, members, members.index(host.rank)
        self.counters = _Counters(host.folder / f"group-{name}.seq", 3 * len(members))
        self.slots = _Slots(host.folder / f"group-{name}", len(members))
        self.peers = [_Peer(host, m) for m in members]
        self.sequence = 0

    def meet(self, x: torch.Tensor) -> torch.Tensor:
        """Every member's `x`, stacked in member order: a view of the shared slots, valid
        until this rank's next collective but one in the group."""
        self.sequence += 1
        ways, nbytes = len(self.members), x.nbytes
        offered = ways * (1 + self.sequence % 2)  # where this collective's byte counts are
        table = self.slots.table(self.sequence, x.dtype, tuple(x.shape))
        table[self.me].copy_(x)
        self.counters.store(offered + self.me, nbytes)
        self.counters.publish(self.me, self.sequence)
        deadline = time.monotonic() + self.host.timeout_s
        for k, peer in enumerate(self.peers):
            if k != self.me:
                self.counters.await_at_least(k, self.sequence, deadline, peer)
                _check_size(peer.rank, self.counters[offered + k], nbytes)
        return table


class _Pipe:
    """Messages from one rank to another: counters (sent, read, then the bytes of the
    last even and odd message) and a slot per parity."""

    SENT, READ, BYTES = 0, 1, 2

    def __init__(self, host: "Host", sender: int, receiver: int) -> None:
        stem = host.folder / f"pipe-{sender}-{receiver}"
        self.counters = _Counters(Path(f"{stem}.seq"), 4)
        self.slots = _Slots(stem, 1)
        self.sender, self.receiver = _Peer(host, sender), _Peer(host, receiver)
        self.sequence = 0

    def send(self, x: torch.Tensor) -> None:
        self.sequence += 1
        deadline = time.monotonic() + self.receiver.timeout_s
        self.counters.await_at_least(self.READ, self.sequence - 2, deadline, self.receiver)
        self.slots.table(self.sequence, x.dtype, tuple(x.shape))[0].copy_(x)
        self.counters.store(self.BYTES + self.sequence % 2, x.nbytes)
        self.counters.publish(self.SENT, self.sequence)

    def recv(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        self.sequence += 1
        nbytes = math.prod(shape) * dtype.itemsize
        deadline = time.monotonic() + self.receiver.timeout_s
        self.counters.await_at_least(self.SENT, self.sequence, deadline, self.sender)
        _check_size(self.sender.rank, self.counters[self.BYTES + self.sequence % 2], nbytes)
        x = self.slots.table(self.sequence, dtype, tuple(shape))[0].clone()
        self.counters.publish(self.READ, self.sequence)
        return x


class Host:
    """This rank's shared-memory state: every group and pipe it has used (one sequence
    each, however many transports name them) and the ranks' process ids."""

    def __init__(self, folder: Path, rank: int, world: int, timeout_s: float) -> None:
        folder.mkdir(exist_ok=True)
        self.folder, self.rank, self.timeout_s = folder, rank, timeout_s
        self.pids = _Counters(folder / "pids", world)
        self.pids.store(rank, os.getpid())
        self.groups: dict[tuple[int, ...], _Group] = {}
        self.pipes: dict[tuple[int, int], _Pipe] = {}

    def group(self, members: tuple[int, ...]) -> _Group:
        if members not in self.groups:
            self.groups[members] = _Group(self, members)
        return self.groups[members]

    def pipe(self, sender: int, receiver: int) -> _Pipe:
        if (sender, receiver) not in self.pipes:
            self.pipes[sender, receiver] = _Pipe(self, sender, receiver)
        return self.pipes[sender, receiver]


class SharedMemory:
    """The Exchange's transport over `members` (global ranks) of `host`'s run."""

    def __init__(self, host: Host, members: tuple[int, ...]) -> None:
        self.host, self.members = host, members

    @classmethod
    def world(cls, folder: Path, rank: int, world: int, timeout_s: float) -> "SharedMemory":
        return cls(Host(folder, rank, world, timeout_s), tuple(range(world)))

    @property
    def ranks(self) -> int:
        return len(self.members)

    def all_gather(self, x: torch.Tensor) -> list[torch.Tensor]:
        return list(self.host.group(self.members).meet(x).clone().unbind(0))

    def all_reduce(self, x: torch.Tensor, op: dist.ReduceOp.RedOpType) -> torch.Tensor:
        if op not in REDUCTIONS:
            raise ValueError(f"all-reduce {op}: shared memory reduces by "
                             f"{', '.join(map(str, REDUCTIONS))}")
        # gloo reduces a clone of `x`, in its memory order: a transposed tensor's chunks
        # run along its columns
        dense = x.clone()
        order = sorted(range(dense.dim()), key=lambda d: -dense.stride(d))
        table = self.host.group(self.members).meet(dense.permute(order))
        total = REDUCTIONS[op](list(table.unbind(0)))
        return total.permute(sorted(range(dense.dim()), key=order.__getitem__))

    def send(self, x: torch.Tensor, to: int) -> None:
        self.host.pipe(self.host.rank, to).send(x)

    def recv(self, shape: tuple[int, ...], dtype: torch.dtype, sender: int) -> torch.Tensor:
        return self.host.pipe(sender, self.host.rank).recv(shape, dtype)

    def split(self, groups: list[list[int]]) -> "SharedMemory":
        mine = next(g for g in groups if self.host.rank in g)
        return SharedMemory(self.host, tuple(mine))
