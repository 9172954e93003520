"""Design spaces bounded by the board, the bounds worked out by hand from the catalog's
U280 and V80 figures and the engines' resource formulas (seeds/001 §V-C, seeds/002 Eq. 5-7),
and explore's HBM bandwidth figure the same as `plan`'s."""

import pytest

from archipelago.api import plan_and_estimate
from archipelago.errors import ArchipelagoError
from archipelago.estimate.workload import Generation
from archipelago.explore.search import SearchRequest, run_search
from archipelago.explore.spaces import design_space
from archipelago.strategies.registry import get_strategy


def test_dfx_bounds_on_the_u280_and_the_v80_by_hand() -> None:
    """A DFX core of d x l = V values a cycle takes 3V MFU DSPs (V multipliers, (d-1) l tree
    adders and l scalar adders at 2 DSPs), plus the VFU's 5d and the SFU's 2(d-1) + 5 + 4l.
    U280 (9,024) and V80 (10,848): V = 2,048 fits (6,144 + at most 640 + 1,287), 4,096 does
    not (12,288 alone). HBM port per channel at 200 MHz: U280 460 GB/s / 32 = 14.375 GB/s =
    575 bits a cycle -> 512; V80 819.2 / 32 = 25.6 GB/s = 1,024 bits -> 1,024."""
    u280 = design_space("dfx", "gpt2-345m", "1xu280").genes
    v80 = design_space("dfx", "gpt2-345m", "1xv80").genes
    assert u280["values"] == v80["values"] == (256, 512, 1024, 2048)
    assert u280["d"] == v80["d"] == (8, 16, 32, 64, 128)
    assert u280["channel_bits"] == (256, 512)
    assert v80["channel_bits"] == (256, 512, 1024)


def test_lora_bounds_on_the_u280_and_the_v80_by_hand() -> None:
    """LORA's array of D_sa^2 PEs: FP16 3 DSPs a PE (a multiplier and a 2-DSP adder), W8A8
    half a DSP (two int8 products a DSP48E2, §V-A), a third on the V80's DSP58 (its INT8
    dot-product mode, AM004; engines/dsp_packing.py); the VFU with 16 accumulators takes
    (2 + 1) 16 + 2 (3 x 16 - 1) + 2 (1 + 2) 16 = 238.
    U280, 9,024 DSPs: FP16 3 D^2 <= 8,786 -> D <= 54.1, the largest multiple of 8 is 48;
    W8A8 D^2 / 2 <= 8,786 -> D <= 132.6 -> 128.
    V80, 10,848: FP16 D <= 60.0 -> 56; W8A8 D^2 / 3 <= 10,610 -> D <= 178.4 -> 176.
    KV URAMs: 0, quarters and 90% of 960 (U280: 240, 480, 720, 864) and of 1,925 (V80: 481,
    962, 1,444, 1,732), the published 864 beside them. AXI ports per HBM channel: 256 up to
    the first width reaching the channel at 150 MHz, within AXI's 1,024 bits (U280 766 bits,
    V80 1,365 bits: 1,024 both)."""
    fp16_u280 = design_space("lora-f", "gpt2-345m", "1xu280").genes
    fp16_v80 = design_space("lora-f", "gpt2-345m", "1xv80").genes
    int8_u280 = design_space("lora-q", "gpt2-345m", "1xu280").genes
    int8_v80 = design_space("lora-q", "gpt2-345m", "1xv80").genes
    assert max(fp16_u280["d_sa"]) == 48 and max(fp16_v80["d_sa"]) == 56
    assert max(int8_u280["d_sa"]) == 128 and max(int8_v80["d_sa"]) == 176
    assert int8_v80["d_sa"] == tuple(range(8, 177, 8))
    assert fp16_u280["kv_uram"] == (0, 240, 480, 720, 864)
    assert fp16_v80["kv_uram"] == (0, 481, 864, 962, 1444, 1732)
    assert fp16_u280["hbm_axi_bits"] == fp16_v80["hbm_axi_bits"] == (256, 512, 1024)
    # the published LORA-Q array (64 x 64) is a candidate on both
    assert 64 in int8_u280["d_sa"] and 64 in int8_v80["d_sa"]


def test_a_board_without_hbm_is_refused_in_one_line() -> None:
    with pytest.raises(ArchipelagoError, match=r"^the LORA engine runs on HBM FPGAs; 'u250' is "
                       r"a fpga without HBM$"):
        design_space("lora-q", "gpt2-345m", "1xu250")


def test_explore_reports_the_bandwidth_share_plan_reports() -> None:
    """One definition: the share of the boards' HBM bandwidth decode streams at. The best
    design's figure from the search equals `archi plan`'s of the same engine (before, the
    search reported the engine's port rate over the peak: 62% where plan said 8%)."""
    best = run_search(SearchRequest("gpt2-345m", "2xv80", "lora-q", Generation(8, 8), 40,
                                    "", "x"))
    result = plan_and_estimate("gpt2-345m", "2xv80", "lora-q", {"tokens": "8:8"},
                               best.engine)
    planned = get_strategy("lora-q").plan_kind.hook("report").summarize(*result).as_json()
    assert planned["bandwidth_efficiency"] == pytest.approx(best.utilization["hbm_bandwidth"],
                                                            rel=1e-12)
    assert planned["latency_s"] == pytest.approx(best.latency_s, rel=1e-12)


def test_the_engine_grows_with_the_board() -> None:
    """At batch 8 LORA-Q's best engine on a V80 (10,848 DSPs, 819 GB/s of HBM) is another
    engine than on a U55C (9,024, 460 GB/s), and faster: before, both boards ran the
    published 64 x 64 array."""
    work = Generation(8, 8, 8)
    u55c = run_search(SearchRequest("gpt2-345m", "1xu55c", "lora-q", work, 400, "", "x"))
    v80 = run_search(SearchRequest("gpt2-345m", "1xv80", "lora-q", work, 400, "", "x"))
    assert u55c.engine != v80.engine and v80.latency_s < u55c.latency_s
    assert v80.engine["d_sa"] > 64 and v80.utilization["dsp"] > 0.6


def test_a_space_is_bounded_in_the_workload_s_format() -> None:
    """LORA-Q asked for W4A16 runs FP16 PEs (3 DSPs each) with one FP16 group scaler per
    array column: 3 D^2 + D + 238 <= 9,024 -> D <= 54.0 -> 48 on a U280, beside the
    published 64 (a candidate even where it does not fit, and then refused by the plan);
    W4A8 packs two INT4 x INT8 products a DSP48E2 as W8A8 does, so its bound stays 128."""
    w4a16 = design_space("lora-q", "gpt2-345m", "1xu280", Generation(32, 32, precision="w4a16"))
    assert w4a16.genes["d_sa"] == (8, 16, 24, 32, 40, 48, 64)
    w4a8 = design_space("lora-q", "gpt2-345m", "1xu280", Generation(32, 32, precision="w4a8"))
    assert max(w4a8.genes["d_sa"]) == 128
