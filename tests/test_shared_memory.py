"""The shared-memory transport of the emulation's collectives: bit-identical to gloo's results
on the same inputs (its all-reduce sums in gloo's ring order), hand-computed small cases, and
a peer that never arrives or exits turned into PeerFailure naming the step and the rank."""

import multiprocessing
import os
import socket
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from archipelago.api import emulate
from archipelago.emulate import futex
from archipelago.emulate.errors import RankFailure
from archipelago.emulate.exchange import Exchange, Gloo, PeerFailure
from archipelago.emulate.shared_memory import SharedMemory, ring_sum
from archipelago.emulate.watchdog import FAULT_ENV, Heartbeat
from tests.test_emulate import GPT2, write_config

pytestmark = pytest.mark.skipif(not futex.supported(), reason="shared memory: Linux x86-64")

# Element counts around gloo's chunk and segment boundaries: fewer elements than ranks,
# uneven chunks, and 2.5 M fp32 (10 MB: 12 segments of gloo's at most 1 MiB, not 2 per rank).
SIZES = [1, 2, 7, 17, 1023, 65537, 2_500_000]
CASES = [*((torch.float32, n) for n in SIZES), (torch.float16, 17), (torch.float16, 4099),
         (torch.float64, 1023)]


def _inputs(rank: int, size: int, dtype: torch.dtype) -> torch.Tensor:
    """Values spread over six decades, so that the order of a sum shows in its bits."""
    gen = torch.Generator().manual_seed(1000 * size + rank)
    scale = 10.0 ** torch.randint(-3, 4, (size,), generator=gen)
    return (torch.randn(size, generator=gen) * scale).to(dtype)


def _both_ways(rank: int, ranks: int, port: int, folder: Path) -> None:
    """One rank: every collective over gloo and over shared memory, results saved."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    ways = {"gloo": Gloo(30.0), "shared": SharedMemory.world(folder, rank, ranks, 30.0)}
    out: dict[str, list[torch.Tensor]] = {name: [] for name in ways}
    matrix = _inputs(rank, 24, torch.float32).view(4, 6)
    for name, way in ways.items():
        for dtype, size in CASES:
            out[name].append(way.all_reduce(_inputs(rank, size, dtype), dist.ReduceOp.SUM))
        out[name].append(way.all_reduce(matrix.t(), dist.ReduceOp.SUM))  # not contiguous
        out[name].append(way.all_reduce(matrix, dist.ReduceOp.MAX))
        out[name] += way.all_gather(matrix[:, 1:4])
        out[name] += way.all_gather(torch.tensor([rank * 1.5, rank], dtype=torch.float64))
        for step in range(5):  # a pipe reuses its two slots; the sizes grow and shrink
            rows = [1, 300, 2, 5000, 1][step]
            if rank == 0:
                way.send(torch.full((rows, 3), step, dtype=torch.int32), ranks - 1)
            if rank == ranks - 1:
                out[name].append(way.recv((rows, 3), torch.int32, 0))
    torch.save(out, folder / f"rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_shared_memory_collectives_equal_gloos_bit_for_bit(tmp_path: Path) -> None:
    """Three ranks: chunks of uneven length, each summed in an order of its own. They fork
    from this process, torch imported already, on one thread each as the launcher's forked
    ranks do (launch._forked_here); spawned, each paid a fresh interpreter importing torch
    and this module's transformers: 41 s of the test's 42 on two shared cores."""
    ranks, context = 3, multiprocessing.get_context("fork")
    port = _port()
    procs = [context.Process(target=_both_ways, args=(r, ranks, port, tmp_path))
             for r in range(ranks)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=300)
    assert [proc.exitcode for proc in procs] == [0] * ranks
    for rank in range(ranks):
        out = torch.load(tmp_path / f"rank{rank}.pt")
        assert len(out["shared"]) == len(out["gloo"]) > len(CASES)
        for gloo, shared in zip(out["gloo"], out["shared"], strict=True):
            assert gloo.dtype == shared.dtype and gloo.shape == shared.shape
            assert torch.equal(gloo, shared)
    # the order shows: adding in rank order instead differs from gloo somewhere
    fp32 = out["gloo"][CASES.index((torch.float32, 65537))]
    in_order = sum(_inputs(r, 65537, torch.float32) for r in range(ranks))
    assert not torch.equal(fp32, in_order)


def test_ring_sum_adds_each_chunk_from_the_rank_before_its_owner() -> None:
    """Three ranks, one element (chunk 0, owned by rank 0): (x2 + x1) + x0. In fp32
    1e8 + 1 rounds to 1e8, so rank order, (x0 + x1) + x2, would give 0."""
    parts = [torch.tensor([1.0]), torch.tensor([1e8]), torch.tensor([-1e8])]
    assert ring_sum(parts).tolist() == [1.0]
    # six elements over 3 ranks: chunks of 2 (gloo's 2 segments per rank, 1 element each);
    # chunk 1 is (x0 + x2) + x1, chunk 2 (x1 + x0) + x2
    parts = [torch.tensor([1.0, 1.0, 1e8, 1e8, -1e8, -1e8]),
             torch.tensor([1e8, 1e8, -1e8, -1e8, 1.0, 1.0]),
             torch.tensor([-1e8, -1e8, 1.0, 1.0, 1e8, 1e8])]
    assert ring_sum(parts).tolist() == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert ring_sum([torch.tensor([[2.5]])]).tolist() == [[2.5]]


def _exchange(tmp_path: Path, timeout_s: float) -> Exchange:
    return Exchange(Heartbeat(0), SharedMemory.world(tmp_path, 0, 2, timeout_s))


def test_a_peer_that_never_arrives_times_out_naming_the_step(tmp_path: Path) -> None:
    exchange = _exchange(tmp_path, 0.5)
    start = time.monotonic()
    with pytest.raises(PeerFailure, match=r"^all_gather of 'h' \(layer 3\) failed: rank 1 "
                                          r"did not arrive within 0\.5 s$"):
        exchange.all_gather(torch.ones(4), "all_gather", "'h' (layer 3)")
    assert 0.5 <= time.monotonic() - start < 5
    with pytest.raises(PeerFailure, match=r"^stage_recv of x failed: rank 1 did not arrive"):
        exchange.recv((2,), torch.float32, 1, "stage_recv", "x")
    assert exchange.counts == {}  # failed collectives are not counted


def _join_and_leave(folder: Path) -> None:
    SharedMemory.world(folder, 1, 2, 60.0)


def test_a_peer_that_exited_fails_the_step_long_before_the_timeout(tmp_path: Path) -> None:
    exchange = _exchange(tmp_path, 60.0)
    peer = multiprocessing.get_context("fork").Process(target=_join_and_leave,
                                                       args=(tmp_path,))
    peer.start()
    peer.join()
    start = time.monotonic()
    with pytest.raises(PeerFailure, match=r"^all_reduce of x failed: rank 1 exited$"):
        exchange.all_reduce(torch.ones(3), "all_reduce", "x")
    assert time.monotonic() - start < 5


def test_a_peer_offering_other_sizes_is_refused(tmp_path: Path) -> None:
    first = _exchange(tmp_path, 5.0)
    second = Exchange(Heartbeat(1), SharedMemory.world(tmp_path, 1, 2, 5.0))
    # rank 1 offers 8 bytes first (it does not wait: rank 0's offer is not there yet)...
    context = multiprocessing.get_context("fork")
    peer = context.Process(target=second.all_gather, args=(torch.ones(2), "k", "x"))
    peer.start()
    with pytest.raises(PeerFailure, match=r"^k of x failed: rank 1 offered 8 bytes where "
                                          r"this rank expected 12$"):
        first.all_gather(torch.ones(3), "k", "x")
    peer.kill()
    peer.join()


def test_slots_first_used_under_inference_mode_serve_outside_it(tmp_path: Path) -> None:
    """Generation runs under inference mode, loading (W8A8's row maxima) outside it."""
    alone = SharedMemory.world(tmp_path, 0, 1, 5.0)
    with torch.inference_mode():
        assert alone.all_gather(torch.ones(3))[0].tolist() == [1.0, 1.0, 1.0]
    total = alone.all_reduce(torch.tensor([2.0, -1.0, 0.5]), dist.ReduceOp.MAX)
    assert total.tolist() == [2.0, -1.0, 0.5]


def test_the_launchers_ranks_meet_in_shared_memory_and_name_a_hung_peers_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 hangs before its 3rd collective: rank 1's all-gather gives up after the job's
    timeout naming the step and the rank (gloo's words would be a socket's)."""
    monkeypatch.setenv(FAULT_ENV, "0:hang:3")
    with pytest.raises(RankFailure) as caught:
        emulate(write_config(tmp_path / "gpt2", GPT2), "2xu280", "dfx", {"tokens": "4:4"},
                timeout_s=2)
    assert str(caught.value) == (
        "rank 0 (u280 'u280_0', tensor shard 1 of 2) hung: stopped after 2 collectives while "
        "others reached 3; rank 1 (u280 'u280_1', tensor shard 2 of 2): all_gather of "
        "'ffn_act' (layer 0) failed: rank 0 did not arrive within 2 s")
