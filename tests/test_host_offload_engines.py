"""NPU overlay, PCIe and CPU-proxy models of the host-offload row (seeds/003 §III-IV)."""

import json

import pytest

from archipelago.errors import ConfigError
from archipelago.hardware.catalog import get_device
from archipelago.strategies.host_offload.npu_overlay import npu_design
from archipelago.strategies.host_offload.pcie import PCIeLink, concurrent_s
from archipelago.strategies.host_offload.program import Instr
from archipelago.strategies.host_offload.proxies import (
    load_profile,
    measure_profile,
    save_profile,
)


def test_pcie_concurrent_transfers_overlap_on_separate_links() -> None:
    a10 = PCIeLink(7.877e9)
    # the calibration sentence of §IV: 32 KiB to four A10 PACs takes 8 us, 1.3x one card
    assert concurrent_s([(a10, 32768)] * 4) == pytest.approx(8e-6)
    assert concurrent_s([(a10, 32768)]) == pytest.approx(8e-6 / 1.3)
    # by hand: fixed cost 8/1.3 - 32768/7.877e3 us = 1.993884 us; two S10 cards with 4096
    # and 1024 bytes: the slowest is 1.993884 + 4096/15754 = 2.253884 us, x 1.1 = 2.479273 us
    s10 = PCIeLink(15.754e9)
    both = concurrent_s([(s10, 4096), (s10, 1024)])
    assert both == pytest.approx(2.479273e-6, rel=1e-5)
    assert both < s10.transfer_s(4096) + s10.transfer_s(1024)  # overlapped, not summed


def test_npu_designs_follow_the_dsp_and_m20k_budgets() -> None:
    s10, a10, tr = (npu_design(get_device(k)) for k in ("s10-2800", "a10-1150", "s10-2100-tr"))
    # 80% of the DSPs at Brainwave's 96,000 MACs per 5,760 DSPs, in tiles of 400 x 40 MACs
    assert (s10.tiles, a10.tiles, tr.tiles) == (4, 1, 3)
    assert s10.macs == 4 * 400 * 40
    # 80% of 11,721 M20Ks (2,560 bytes each), rounded down to whole 400 x 400 INT8 tiles
    assert s10.mrf_bytes == 24_000_000 and s10.chiplet_bytes == 0
    assert tr.onchip_bytes > s10.onchip_bytes > a10.onchip_bytes


def test_npu_matvec_and_chain_cycles_by_hand() -> None:
    s10 = npu_design(get_device("s10-2800"))
    # 800 x 1200: 2 x 3 native tiles over 4 tile engines = 2 rounds of 400/40 cycles, plus
    # the pipeline: 4 stages + log2(40) -> 6 adder levels + log2(4) = 2 cross-tile = 12
    assert s10.matvec_s(800, 1200) == pytest.approx((2 * 10 + 12) / 200e6)
    chain = [Instr("fpga_matvec", 800, matrix="m", cols=1200), Instr("fpga_sigmoid", 800),
             Instr("fpga_mul", 800)]
    assert s10.execute_s(chain) == pytest.approx((2 * 10 + 12 + 12 + 12) / 200e6)


def test_tensorram_share_splits_weights_by_rate_within_capacity() -> None:
    tr = npu_design(get_device("s10-2100-tr"))
    fabric_rate = tr.macs * tr.clock_hz
    small = tr.fabric_share(1_000_000)
    assert small == pytest.approx(fabric_rate / (fabric_rate + tr.chiplet_Bps))
    full = tr.fabric_share(tr.onchip_bytes)  # everything full: fabric holds its MRFs' share
    assert full == pytest.approx(tr.mrf_bytes / tr.onchip_bytes)


def test_cpu_proxies_are_measured_positive_and_grow_with_size(tmp_path) -> None:
    sizes = {"cpu_add": (256, 16384, 1048576), "cpu_softmax": (256, 16384, 1048576),
             "cpu_matvec": (4096, 262144, 4194304), "cpu_pickTop": (256, 16384, 1048576)}
    profile = measure_profile(sizes)
    for name, points in profile.points.items():
        times = [t for _, t in points]
        assert all(t > 0 for t in times), name
        assert times == sorted(times), f"{name}: {times}"
    path = tmp_path / "host.json"
    save_profile(profile, path)
    again = load_profile(path)
    assert again.points == profile.points
    lo, mid = profile.points["cpu_add"][0], profile.points["cpu_add"][1]
    halfway = again.time_s("cpu_add", (lo[0] + mid[0]) // 2)
    assert lo[1] <= halfway <= mid[1]


def test_a_bad_profile_names_the_file_and_field(tmp_path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"calls": {"cpu_sort": [[1, 1e-6]]}}))
    with pytest.raises(ConfigError, match="unknown API call"):
        load_profile(path)
    with pytest.raises(ConfigError, match="not found"):
        load_profile(tmp_path / "missing.json")
    assert load_profile().time_s("cpu_softmax", 32000) > 0  # the shipped profile
