"""The DFX and LORA routers on hand-computed transfers (seeds/001 §V-E, seeds/002 §IV-C)."""

import pytest

from archipelago.hardware.cluster import resolve_cluster
from archipelago.strategies.tensor_parallel.router import (
    dfx_all_gather_s,
    lora_all_gather_s,
    lora_all_reduce_s,
    lora_link,
)

CLOCK = 200e6


def test_dfx_all_gather_of_a_1024_wide_fp16_vector_on_a_4_ring_beat_by_beat() -> None:
    """256 values per core = 4 beats of 64 x 16 bits. A beat is 128 B on a 100 Gb/s 64b/66b
    link (12.12 GB/s payload): 10.56 ns, two kernel cycles' worth. Each sub-vector makes 3
    hops of 300 ns + 4 beats + 1 reorder cycle, so the last one lands after 3 hops."""
    link = resolve_cluster("4xu280").link
    beat = 128 / (100e9 * 64 / 66 / 8)
    assert beat == pytest.approx(10.56e-9)
    hop = 300e-9 + 4 * beat + 5e-9
    assert dfx_all_gather_s(256, 4, link, CLOCK) == pytest.approx(3 * hop)
    assert dfx_all_gather_s(256, 4, link, CLOCK) == pytest.approx(1.0417e-6, rel=1e-4)
    assert dfx_all_gather_s(1024, 1, link, CLOCK) == 0


def test_dfx_partial_beats_are_whole_beats() -> None:
    link = resolve_cluster("2xu280").link
    assert dfx_all_gather_s(65, 2, link, CLOCK) == dfx_all_gather_s(128, 2, link, CLOCK)
    assert dfx_all_gather_s(129, 2, link, CLOCK) > dfx_all_gather_s(128, 2, link, CLOCK)


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
