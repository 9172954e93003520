"""CHEF-A2F and CHEF-M2A against exhaustive searches on instances small enough to enumerate,
and the DRAM-budget and bandwidth-sharing rules of seeds/004 §V-A."""

from itertools import product

import pytest

from archipelago.errors import PartitionError
from archipelago.hardware.catalog import get_device
from archipelago.hardware.device import Link, Resources
from archipelago.hardware.machines import Cluster, DramBank, Node
from archipelago.models.dag import dag_from_dict
from archipelago.strategies.chef.a2f import initial_deployment, objective_weights
from archipelago.strategies.chef.deployment import deploy, fits
from archipelago.strategies.chef.exact import optimal_mapping
from archipelago.strategies.chef.ip_templates import builtin_ips
from archipelago.strategies.chef.m2a import list_mapping, m2a
from archipelago.strategies.chef.simulate import INF, LayerCosts, Tables, dram_use, simulate

IPS = builtin_ips()


def _fpga(name, dsp=6000, bram=1000, banks=2, size=1 << 30, bw=10e9, freq=200e6):
    return Node(name=name, device=get_device("u280"), clock_hz=freq,
                resources=Resources(dsp=dsp, bram=bram),
                banks=(DramBank(size_bytes=size, bandwidth_Bps=bw),) * banks)


def _cluster(*fpgas, inter=2e9):
    return Cluster(name="t", nodes=fpgas, topology="switch",
                   ring_link=Link(latency_s=0, bandwidth_Bps=inter))


def _conv(name, deps, in_ch, out_ch, size=28, modality="m0"):
    return {"name": name, "type": "conv", "deps": deps, "in_ch": in_ch, "out_ch": out_ch,
            "out_rows": size, "out_cols": size, "kernel": 3, "padding": 1,
            "modality": modality}


FIVE = dag_from_dict({"name": "five", "layers": [
    _conv("a1", [], 3, 32, modality="a"), _conv("b1", [], 3, 64, modality="b"),
    _conv("a2", ["a1"], 32, 64, modality="a"), _conv("b2", ["b1"], 64, 64, modality="b"),
    {"name": "fc", "type": "fc", "deps": ["a2", "b2"], "in_features": 128 * 28 * 28,
     "out_features": 10, "modality": "fusion"},
]}, "five")


def test_lp_matches_brute_force_enumeration():
    cluster = _cluster(_fpga("x", dsp=4000, bram=300), _fpga("y", dsp=6000, bram=400))
    ips = [IPS["conv_8_16"], IPS["conv_16_32"], IPS["fc_8_16"]]
    costs = LayerCosts(FIVE)
    chosen = initial_deployment(costs, cluster, ips, max_per_fpga=4)
    weight = objective_weights(costs, cluster, ips)
    keys = [(i, ip) for i in range(2) for ip in ips]
    best = -1
    for counts in product(range(5), repeat=len(keys)):
        placed = [k for k, c in zip(keys, counts, strict=True) for _ in range(c)]
        if (not fits(cluster, placed) or any(sum(1 for f, _ in placed if f == i) > 4
                                             for i in range(2))
                or {ip.type for _, ip in placed} != {"conv", "fc"}):
            continue
        best = max(best, sum(weight[i, ip.name] for i, ip in placed))
    assert sum(weight[i, ip.name] for i, ip in chosen) == best
    assert fits(cluster, chosen)


def _m2a_tables(inter=2e9):
    cluster = _cluster(_fpga("x", banks=1), _fpga("y"), inter=inter)
    placed = [(0, IPS["conv_16_32"]), (0, IPS["fc_8_16"]), (1, IPS["conv_8_16"]),
              (1, IPS["conv_16_16"])]
    return Tables(LayerCosts(FIVE), cluster, deploy(cluster, placed))


@pytest.mark.parametrize("inter", [0.125e9, 3e9, 15e9])
def test_m2a_against_enumeration_on_five_layers(inter):
    t = _m2a_tables(inter)
    options = [[a for a in range(t.n_accs) if t.cost[i][a] < INF] for i in range(t.n_layers)]
    brute = min(simulate(t, list(m)).latency_s for m in product(*options))
    exact_map, exact = optimal_mapping(t)
    assert exact == pytest.approx(brute) and simulate(t, exact_map).latency_s == exact
    initial, final = m2a(t)
    heuristic = simulate(t, final).latency_s
    assert exact <= heuristic <= simulate(t, initial).latency_s
    assert heuristic <= 1.17 * exact  # the paper's worst mapping ratio (Table VII)


def test_same_bank_shares_bandwidth_and_transfers_follow_the_three_rules():
    cluster = _cluster(_fpga("x", banks=2, bw=8e9), _fpga("y", banks=1, bw=6e9), inter=1e9)
    ip = IPS["conv_8_16"]
    # FPGA x: accs 0, 1 on banks 0, 1, acc 2 back on bank 0; FPGA y: acc 3 on bank 0
    t = Tables(LayerCosts(FIVE), cluster, deploy(cluster, [(0, ip)] * 3 + [(1, ip)]))
    assert [a.bank for a in t.deployment.accs] == [0, 1, 0, 0]
    assert t.dram_Bps == [4e9, 8e9, 4e9, 6e9]  # bank 0 of x shared by two accelerators
    assert t.per_byte[0][2] == 0  # same bank: features stay where they are
    assert t.per_byte[0][1] == 1 / 8e9  # other bank of the same FPGA: through the chip
    assert t.per_byte[1][3] == 1 / 1e9  # other FPGA: BW_inter
    chain = dag_from_dict({"name": "chain", "layers": [
        _conv("a", [], 3, 32), _conv("b", ["a"], 32, 32),
        {"name": "p", "type": "pool", "deps": ["b"], "channels": 32, "out_rows": 14,
         "out_cols": 14, "kernel": 2, "stride": 2}]}, "chain")
    tc = Tables(LayerCosts(chain), cluster, t.deployment)
    nbytes = 32 * 28 * 28 * 4
    for second, xfer in ((2, 0.0), (1, nbytes / 8e9), (3, nbytes / 1e9)):
        s = simulate(tc, [0, second, second])
        assert s.start[1] == s.end[0] == tc.cost[0][0]
        assert s.comm_s[1] == pytest.approx(xfer)
        assert s.end[1] == pytest.approx(s.end[0] + xfer + tc.cost[1][second])
    # bank sharing halves the bandwidth the memory-bound pool sees on accelerator 0
    assert tc.cost[2][0] == pytest.approx(2 * tc.cost[2][1])


def test_dram_budget_keeps_every_fpga_within_its_dram():
    fc_bytes = (128 * 28 * 28 * 10 + 10 + 10) * 4
    small = 3 * 1024 * 1024  # x cannot hold the FC's 4 MB of weights
    cluster = _cluster(_fpga("x", banks=1, size=small), _fpga("y", size=1 << 26))
    placed = [(0, IPS["fc_8_16"]), (0, IPS["conv_16_32"]), (1, IPS["fc_8_16"]),
              (1, IPS["conv_8_16"])]
    t = Tables(LayerCosts(FIVE), cluster, deploy(cluster, placed))
    assert t.dram[-1] == fc_bytes > small
    mapping = list_mapping(t)
    assert t.fpga_of[mapping[-1]] == 1
    use = dram_use(t, m2a(t)[1])
    assert all(u <= c for u, c in zip(use, t.capacity, strict=True))


def test_budget_rejects_what_no_fpga_can_hold():
    cluster = _cluster(_fpga("x", banks=1, size=1 << 20), _fpga("y", banks=1, size=1 << 20))
    placed = [(0, IPS["fc_8_16"]), (1, IPS["conv_8_16"])]
    t = Tables(LayerCosts(FIVE), cluster, deploy(cluster, placed))
    with pytest.raises(PartitionError, match="exceed the cluster's free DRAM"):
        list_mapping(t)


@pytest.mark.parametrize("size", [1 << 20, 3 << 20, 5 << 20, 1 << 30])
def test_budget_fast_path_never_admits_what_the_check_rejects(size):
    from archipelago.strategies.chef.m2a import _Budget

    cluster = _cluster(_fpga("x", banks=1, size=size), _fpga("y", banks=1, size=5 << 20))
    placed = [(0, IPS["fc_8_16"]), (0, IPS["conv_16_32"]), (1, IPS["conv_8_16"])]
    t = Tables(LayerCosts(FIVE), cluster, deploy(cluster, placed))
    budget = _Budget(t)
    for wave in FIVE.levels:
        layers = [t.names.index(n) for n in wave]
        options = [[a for a in range(t.n_accs) if t.cost[i][a] < INF] for i in layers]
        verdicts = [budget.ok(list(zip(layers, accs, strict=True)))
                    for accs in product(*options)]
        if budget.always_ok(layers):
            assert all(verdicts)
        admitted = [accs for accs, ok in zip(product(*options), verdicts, strict=True) if ok]
        if not admitted:
            return
        budget.commit(list(zip(layers, admitted[0], strict=True)))
