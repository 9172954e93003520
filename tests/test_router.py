"""The DFX and LORA routers on hand-computed transfers (seeds/001 §V-E, seeds/002 §IV-C)."""

import pytest

from archipelago.hardware.cluster import resolve_cluster
from archipelago.hardware.device import Link
from archipelago.strategies.tensor_parallel.engines.router import (
    DFX_SYNC_OVERHEAD_S,
    dfx_all_gather_s,
    dfx_hop_s,
    lora_all_gather_s,
    lora_all_reduce_s,
    lora_link,
)

CLOCK = 200e6


def test_dfx_hop_of_a_quarter_of_a_1024_wide_fp16_vector_by_hand() -> None:
    """256 values per core = 4 beats of 64 x 16 bits. A beat is 128 B on a 100 Gb/s 64b/66b
    link (12.12 GB/s payload): 10.56 ns, two kernel cycles' worth. One hop: 4 cycles to fill
    the TX buffer, 2 + 2 cycles of clock crossing, 300 ns of link latency, 4 beats on the
    wire, 4 cycles of reorder write: 12 cycles + 300 ns + 42.24 ns = 402.24 ns."""
    link = resolve_cluster("4xu280").link(0, 1)
    beat = 128 / (100e9 * 64 / 66 / 8)
    assert beat == pytest.approx(10.56e-9)
    assert dfx_hop_s(256, link, CLOCK) == pytest.approx(12 * 5e-9 + 300e-9 + 4 * beat)
    assert dfx_hop_s(256, link, CLOCK) == pytest.approx(402.24e-9)


def test_dfx_all_gather_is_n_minus_1_store_and_forward_hops_plus_one_overhead() -> None:
    """A sub-vector leaves a core only once it has fully arrived: 3 whole hops on 4 boards,
    1 on 2; the fitted overhead is paid once per sync, whatever the ring size."""
    link = resolve_cluster("4xu280").link(0, 1)
    hop = dfx_hop_s(256, link, CLOCK)
    assert dfx_all_gather_s(256, 4, link, CLOCK) == pytest.approx(3 * hop + DFX_SYNC_OVERHEAD_S)
    assert dfx_all_gather_s(256, 2, link, CLOCK) == pytest.approx(hop + DFX_SYNC_OVERHEAD_S)
    assert dfx_all_gather_s(1024, 1, link, CLOCK) == 0


def test_dfx_router_buffers_whole_beats() -> None:
    """65 FP16 values need two 64-value beats, exactly as 128 do; 129 need a third."""
    link = resolve_cluster("2xu280").link(0, 1)
    assert dfx_hop_s(65, link, CLOCK) == dfx_hop_s(128, link, CLOCK)
    assert dfx_hop_s(129, link, CLOCK) - dfx_hop_s(128, link, CLOCK) == pytest.approx(
        2 / CLOCK + 128 / link.bandwidth_Bps)


def test_dfx_beats_never_pass_faster_than_one_per_kernel_cycle() -> None:
    """On a link faster than 1024 bits x 200 MHz the wire is paced by the router: a beat a
    cycle, so 4 beats cost 4 (fill) + 4 (clock crossings) + 4 (wire) + 4 (reorder) cycles."""
    fast = Link(latency_s=0.0, bandwidth_Bps=1e15)
    assert dfx_hop_s(256, fast, CLOCK) == pytest.approx(16 / CLOCK)


def test_lora_link_is_four_lanes_at_half_rate() -> None:
    """§V-B: 4 lanes x 12.8 Gb/s with 64b/66b: 6.21 GB/s of payload."""
    assert lora_link(300e-9).bandwidth_Bps == pytest.approx(4 * 12.8e9 * 64 / 66 / 8)


def test_lora_all_reduce_of_one_row_takes_about_220_cycles() -> None:
    """§VI-C: for GPT-2 1.5B on four boards the LayerNorm sums of one row take "approximately
    220 cycles" to communicate. 3 hops x (300 ns + one 256-bit word + an 11-cycle add)."""
    link = lora_link(300e-9)
    word = 32 / link.bandwidth_Bps
    seconds = lora_all_reduce_s(8, 4, link, CLOCK)
    assert seconds == pytest.approx(3 * (300e-9 + word + 11 / CLOCK))
    assert seconds * CLOCK == pytest.approx(220, rel=0.05)


def test_lora_full_duplex_merge_sends_two_blocks_in_three_cycles() -> None:
    """§IV-C: on four boards a block needs a full-duplex and a one-way cycle; merging the
    one-way cycles of consecutive blocks makes it 1.5 block times per block (a one-way ring
    would need 3), after the two hops to the farthest board."""
    link = lora_link(300e-9)
    block = 512  # bytes per board = 16 words
    word = 32 / link.bandwidth_Bps
    assert lora_all_gather_s(block, 4, link) == pytest.approx(2 * 300e-9 + 1.5 * 16 * word)
    assert lora_all_gather_s(block, 2, link) == pytest.approx(300e-9 + 0.5 * 16 * word)
