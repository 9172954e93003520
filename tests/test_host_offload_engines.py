"""NPU overlay, PCIe and CPU-proxy models of the host-offload row (seeds/003 §III-IV)."""

import itertools
import json

import pytest

from archipelago.errors import ConfigError
from archipelago.hardware.catalog import get_device
from archipelago.hardware.link import Link
from archipelago.strategies.host_offload import proxies
from archipelago.strategies.host_offload.npu_overlay import npu_design
from archipelago.strategies.host_offload.pcie import concurrent_s, transfer_s
from archipelago.strategies.host_offload.program import Instr
from archipelago.strategies.host_offload.proxies import (
    NATIVE_CALL_S,
    CPUProfile,
    fit_linear,
    load_profile,
    measure_profile,
    save_profile,
)


def test_pcie_concurrent_transfers_overlap_on_separate_links() -> None:
    a10 = Link(latency_s=1e-6, bandwidth_Bps=7.877e9)  # PCIe Gen3 x8 (catalog.yaml)
    # the calibration sentence of §IV: 32 KiB to four A10 PACs takes 8 us, 1.3x one card
    assert concurrent_s([(a10, 32768)] * 4) == pytest.approx(8e-6)
    assert concurrent_s([(a10, 32768)]) == pytest.approx(8e-6 / 1.3)
    # by hand: fixed cost 8/1.3 - 32768/7.877e3 us = 1.993884 us; two S10 cards with 4096
    # and 1024 bytes: the slowest is 1.993884 + 4096/15754 = 2.253884 us, x 1.1 = 2.479273 us
    s10 = Link(latency_s=1e-6, bandwidth_Bps=15.754e9)
    both = concurrent_s([(s10, 4096), (s10, 1024)])
    assert both == pytest.approx(2.479273e-6, rel=1e-5)
    assert both < transfer_s(s10, 4096) + transfer_s(s10, 1024)  # overlapped, not summed


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


class FakeClock:
    """perf_counter for a machine where every call of a kernel on n elements takes
    `overhead` + n x `slope` seconds, whatever else runs."""

    def __init__(self, overhead: float, slope: float) -> None:
        self.now, self.overhead, self.slope = 0.0, overhead, slope

    def __call__(self) -> float:
        return self.now

    def kernel(self, n: int) -> None:
        self.now += self.overhead + n * self.slope


def test_measuring_recovers_a_known_overhead_and_slope(monkeypatch, tmp_path) -> None:
    clock = FakeClock(overhead=700e-9, slope=0.25e-9)  # numpy-like dispatch, per element
    monkeypatch.setattr(proxies.time, "perf_counter", clock)
    monkeypatch.setattr(proxies, "KERNELS", {**proxies.KERNELS,
                                             "cpu_add": (lambda n, r: (n,), clock.kernel)})
    profile = measure_profile({"cpu_add": (50000, 80000)})  # the grid, plus these lengths
    sizes = [n for n, _ in profile.points["cpu_add"]]
    assert sizes == [*proxies.VECTOR_SIZES[:-1], 50000, 65536, 80000]
    fit = profile.fits["cpu_add"]
    assert fit.overhead_s == pytest.approx(700e-9, rel=1e-9)
    assert fit.per_element_s == pytest.approx(0.25e-9, rel=1e-9)
    assert (fit.low, fit.high) == (64, proxies.FIT_MAX_ELEMENTS)  # 80,000 left out
    # priced as a native call: numpy's 700 ns replaced by NATIVE_CALL_S
    assert profile.time_s("cpu_add", 4000) == pytest.approx(NATIVE_CALL_S + 1000e-9)
    path = tmp_path / "host.json"
    save_profile(profile, path)
    assert load_profile(path).points == profile.points


def test_fit_weighs_relative_error_and_keeps_costs_non_negative() -> None:
    # 1 us per call + 1 ns per element, the longest point 10% high: relative weighting keeps
    # the short points' overhead (0.99 us); an unweighted fit halves it (0.49 us)
    noisy = [(64, 1.064e-6), (1024, 2.024e-6), (16384, 17.384e-6), (65536, 1.1 * 66.536e-6)]
    assert fit_linear(noisy).overhead_s == pytest.approx(1e-6, rel=0.05)
    flat = fit_linear([(100, 2e-6), (1000, 1e-6)])  # falling times: no per-element cost,
    # the overhead their mean weighted by 1/t^2: (2/4 + 1/1) / (1/4 + 1/1) us
    assert (flat.overhead_s, flat.per_element_s) == (pytest.approx(1.2e-6), 0.0)
    through_zero = fit_linear([(100, 1e-9), (1000, 20e-9)])  # intercept < 0: refitted as 0
    assert through_zero.overhead_s == 0.0 and through_zero.per_element_s > 0


def test_model_cpu_time_grows_linearly_with_the_vector_length() -> None:
    profile = CPUProfile("numpy-like", {"cpu_tanh": ((64, 0.2e-6 + 64 * 0.18e-9),
                                                     (65536, 0.2e-6 + 65536 * 0.18e-9))})
    times = [profile.time_s("cpu_tanh", n) for n in (1000, 2000, 4000, 8000)]
    steps = [b - a for a, b in itertools.pairwise(times)]
    assert steps[1] == pytest.approx(2 * steps[0]) and steps[2] == pytest.approx(4 * steps[0])
    assert times[0] == pytest.approx(NATIVE_CALL_S + 1000 * 0.18e-9)  # no numpy dispatch
    numpy = CPUProfile("numpy-like", profile.points, native=False)
    assert numpy.time_s("cpu_tanh", 1000) == pytest.approx(0.2e-6 + 1000 * 0.18e-9)


def test_a_bad_profile_names_the_file_and_field(tmp_path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"calls": {"cpu_sort": [[1, 1e-6]]}}))
    with pytest.raises(ConfigError, match="unknown API call"):
        load_profile(path)
    with pytest.raises(ConfigError, match="not found"):
        load_profile(tmp_path / "missing.json")
    path.write_text(json.dumps({"calls": {"cpu_add": [[64, 1e-6], [64, 2e-6]]}}))
    with pytest.raises(ConfigError, match=r"'calls\.cpu_add': needs times at two sizes"):
        load_profile(path)
    assert load_profile().time_s("cpu_softmax", 32000) > 0  # the shipped profile
