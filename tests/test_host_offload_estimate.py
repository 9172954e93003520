"""The modelling tool (seeds/003 §III): aggregation with overlap, breakdown, sizing."""

import pytest

from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.recurrent import MatvecSpec, build_recurrent
from archipelago.strategies.host_offload.estimate import estimate_host
from archipelago.strategies.host_offload.plan import make_host_plan
from archipelago.strategies.host_offload.proxies import (
    KERNELS,
    NATIVE_CALL_S,
    CPUProfile,
    load_profile,
)
from archipelago.strategies.host_offload.sizing import (
    cards_of,
    fewest_cards,
    fits,
    largest_persistent,
)

# 1 ns per element, 1 us of numpy dispatch that the native pricing drops
FLAT_CPU = CPUProfile("1 ns per element", {k: ((1000, 2e-6), (2000, 3e-6)) for k in KERNELS})


def test_matvec_latency_by_hand_with_concurrent_transfers() -> None:
    plan = make_host_plan(MatvecSpec(name="m", rows=800, cols=800),
                          resolve_cluster("2xs10-2800"), steps=1)
    est = estimate_host(plan, FLAT_CPU)
    # both cards get all 800 inputs (3,200 B) at once: (1.993884 + 3200/15754) us x 1.1;
    # each runs 400 x 800 = 2 native tiles on 4 tile engines: 10 + 12 cycles at 200 MHz;
    # both return 400 outputs (1,600 B) at once: (1.993884 + 1600/15754) us x 1.1;
    # the CPU concatenates the two row blocks: a native call + 800 x 1 ns.
    load, run, read, concat = 2.416708e-6, 0.11e-6, 2.304990e-6, NATIVE_CALL_S + 0.8e-6
    assert est.latency_s == pytest.approx(load + run + read + concat, rel=1e-5)
    assert est.breakdown_s["comm"] == pytest.approx(load + read, rel=1e-5)
    assert est.breakdown_s["fpga"] == pytest.approx(run, rel=1e-5)
    assert est.breakdown_s["cpu"] == pytest.approx(concat)
    assert est.per_call["fpga_ld_input"]["count"] == 2
    assert est.top_calls(1)[0][0] == "fpga_ld_input"
    assert est.feasible and est.onchip_bytes == [320_000, 320_000]


def test_column_blocks_pay_the_cpu_reductions() -> None:
    from archipelago.strategies.host_offload.partition import parse_grid

    spec = MatvecSpec(name="m", rows=4000, cols=4000)
    rows = estimate_host(make_host_plan(spec, resolve_cluster("4xs10-2800"), 1,
                                        grid=parse_grid("4x1")), FLAT_CPU)
    cols = estimate_host(make_host_plan(spec, resolve_cluster("4xs10-2800"), 1,
                                        grid=parse_grid("1x4")), FLAT_CPU)
    assert cols.per_call["cpu_add"]["count"] == 3 and "cpu_add" not in rows.per_call
    assert cols.breakdown_s["cpu"] > rows.breakdown_s["cpu"]


def test_model_too_big_for_the_cards_says_what_it_needs() -> None:
    spec = build_recurrent("lstm", 4000)
    est = estimate_host(make_host_plan(spec, resolve_cluster("1xa10-1150"), 1), FLAT_CPU)
    assert not est.feasible
    assert "needs" in est.reasons[0] and "holds" in est.reasons[0]
    streamed = make_host_plan(spec, resolve_cluster("1xs10-2800"), 1, weights="ddr4")
    assert estimate_host(streamed, FLAT_CPU).feasible


def test_fewest_cards_matches_brute_force() -> None:
    spec = build_recurrent("lstm", 2400)
    profile = load_profile()
    for device in ("s10-2800", "s10-2100-tr"):
        brute = {}
        for n in range(1, 9):
            plan = make_host_plan(spec, cards_of(device, n), 2)
            est = estimate_host(plan, profile)
            brute[n] = est.latency_s if est.feasible else None
        for target in [t for t in brute.values() if t is not None] + [1e-9]:
            expected = min((n for n, t in brute.items() if t is not None and t <= target),
                           default=None)
            got = fewest_cards(spec, device, target, 2, profile, max_cards=8)
            assert got.cards == expected, (device, target)


def test_largest_persistent_matches_brute_force() -> None:
    for name, cluster in (("lstm", "2xs10-2800"), ("nmt-luong", "1xa10-1150")):
        def build(h, name=name):
            return build_recurrent(name, h, vocab=1000)

        devices = resolve_cluster(cluster)
        fitting = [k * 16 for k in range(1, 400) if fits(build(k * 16), devices)]
        assert fitting, name
        assert largest_persistent(build, devices, granularity=16) == max(fitting)


def test_streamed_weights_cost_their_transfer_each_use() -> None:
    spec = MatvecSpec(name="m", rows=800, cols=800)
    one = resolve_cluster("1xs10-2800")
    persistent, pcie, ddr4 = (estimate_host(make_host_plan(spec, one, 1, weights=w), FLAT_CPU)
                              for w in ("persistent", "pcie", "ddr4"))
    # 640,000 INT8 weights: over PCIe Gen3 x16 (1.993884 us + 640000 / 15.754 GB/s) or
    # from the four DDR4-2400 banks of the card (640000 / 76.8 GB/s), before the execute
    assert pcie.latency_s - persistent.latency_s == pytest.approx(1.993884e-6 + 40.6246e-6,
                                                                  rel=1e-5)
    assert ddr4.latency_s - persistent.latency_s == pytest.approx(8.33333e-6, rel=1e-5)
