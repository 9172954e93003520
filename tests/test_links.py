"""One link vocabulary (issue 31 point 4): the alpha-beta link's arithmetic by hand, the
catalog's links against the devices naming them, the cluster answering the hop between two
nodes and a node's host link, and the GPU and host-offload kinds costing a cluster file's
links the way the alpha-beta model says."""

import pytest
from pydantic import ValidationError

from archipelago.api import make_plan, plan_and_estimate
from archipelago.compare.request import default_devices, parse_devices
from archipelago.engines.base import EngineConfig
from archipelago.errors import ConfigError, UnknownNameError
from archipelago.hardware.catalog import catalog, catalog_links, compare_defaults, get_link
from archipelago.hardware.cluster import resolve_cluster
from archipelago.hardware.cluster_file import cluster_from_dict
from archipelago.hardware.link import CatalogLink, Link, line_Bps
from archipelago.models.recurrent import MatvecSpec
from archipelago.strategies.gpu.steps import collectives_s
from archipelago.strategies.host_offload.estimate import estimate_host
from archipelago.strategies.host_offload.plan import make_host_plan
from archipelago.strategies.host_offload.proxies import KERNELS, CPUProfile
from archipelago.strategies.registry import strategies

FLAT_CPU = CPUProfile("1 ns per element", {k: ((1000, 2e-6), (2000, 3e-6)) for k in KERNELS})


# ---- the link type ----------------------------------------------------------------------
def test_a_transfer_is_latency_plus_bytes_over_bandwidth() -> None:
    link = Link(latency_s=1e-6, bandwidth_Bps=2e9)
    assert link.transfer_s(0) == 1e-6
    assert link.transfer_s(4000) == pytest.approx(1e-6 + 2e-6)  # 4 kB at 2 GB/s: 2 us
    slower = link.at_bandwidth(1e9)
    assert (slower.latency_s, slower.transfer_s(4000)) == (1e-6, pytest.approx(5e-6))


def test_line_codes_take_their_share() -> None:
    # 100 Gb/s Aurora: 64 of 66 bits, 12.12 GB/s; PCIe Gen2 x8: 40 Gb/s x 8/10 = 4 GB/s;
    # Gen3 x16: 128 Gb/s x 128/130 = 15.75 GB/s
    assert line_Bps(100, "64b66b") == pytest.approx(12.121212e9)
    assert line_Bps(40, "8b10b") == pytest.approx(4e9)
    assert get_link("pcie3-x16").bandwidth_Bps == pytest.approx(15.753846e9)
    assert get_link("PCIe5-x16").bandwidth_Bps == pytest.approx(63.015385e9)
    assert get_link("aurora-qsfp28") == Link(latency_s=300e-9, kind="aurora",
                                             bandwidth_Bps=100e9 * 64 / 66 / 8)
    assert get_link("eth-400g").bandwidth_Bps == 50e9  # a switch's hop at its line rate
    with pytest.raises(UnknownNameError, match="nvlink4"):
        get_link("nvlink9")


def test_a_catalog_link_gives_one_rate() -> None:
    with pytest.raises(ValidationError, match="exactly one of line_gbps and bandwidth_Bps"):
        CatalogLink(key="x", name="x", kind="pcie", latency_s=0, line_gbps=8,
                    bandwidth_Bps=1e9)


# ---- the catalog's links against the devices naming them --------------------------------
def test_each_device_port_link_matches_its_ports() -> None:
    """Aurora links run at the port's line rate; an NVLink entry is all the GPU's links
    (ports x per-link Gb/s / 8): the device's figures and the link's must agree."""
    named = {k: d for k, d in catalog().items() if d.network and d.network.link}
    assert {"u280", "v80", "v100", "a100", "h100", "h200"} <= set(named)
    for key, device in named.items():
        entry = catalog_links()[device.network.link]
        if entry.kind == "nvlink":
            assert entry.bandwidth_Bps == device.network.ports * device.network.gbps * 1e9 / 8
        else:
            assert entry.line_gbps == device.network.gbps, key


def test_each_host_link_figure_is_its_pcie_generation_within_datasheet_rounding() -> None:
    """A datasheet's host bandwidth (U280: "16 GB/s") is its slot's nominal (Gen3 x16:
    15.75 GB/s) rounded: within 2%, never another generation or width."""
    for key, device in catalog().items():
        if device.host_link_Bps is None:
            continue
        assert device.host_link is not None, key
        nominal = catalog_links()[device.host_link].link().bandwidth_Bps
        assert device.host_link_Bps == pytest.approx(nominal, rel=0.02), key


def test_shorthand_clusters_take_their_ports_catalog_link() -> None:
    assert resolve_cluster("2xh100").link(0, 1) == get_link("nvlink4")
    assert resolve_cluster("4xa100").link(2, 3).bandwidth_Bps == 300e9
    assert resolve_cluster("2xl4").link(0, 1).kind == "pcie"  # no NVLink: the hosts' PCIe
    assert resolve_cluster("2xl4").host_link(1).bandwidth_Bps == 32e9  # the datasheet's
    assert resolve_cluster("2xv80").link(0, 1) == get_link("aurora-qsfp56")
    rack = resolve_cluster("2x2xu280")
    assert rack.link(1, 2) == get_link("z9100") and rack.link(0, 1) == get_link("aurora-qsfp28")


# ---- the cluster answers ----------------------------------------------------------------
def test_a_cluster_files_pair_bandwidth_is_answered_by_link() -> None:
    doc = {"nodes": [{"device": "u280", "name": n} for n in "abc"], "topology": "switch",
           "link": {"latency_ns": 500, "bandwidth_gbytes_s": 3},
           "pairs": [{"a": "c", "b": "a", "bandwidth_gbytes_s": 0.5}]}
    cluster = cluster_from_dict(doc, "c.yaml")
    pair = cluster.link(0, 2)
    assert pair == cluster.link(2, 0)
    assert (pair.latency_s, pair.bandwidth_Bps) == (pytest.approx(500e-9), 0.5e9)
    assert cluster.link(0, 1).bandwidth_Bps == 3e9  # no pair named: the file's link
    relayed = cluster_from_dict({**doc, "host_relay": True}, "c.yaml")
    assert relayed.link(0, 2).bandwidth_Bps == 0.25e9 and relayed.pair_Bps(1, 2) == 1.5e9
    assert cluster.with_bandwidth(15).link(0, 2).bandwidth_Bps == 15e9  # --bandwidth
    with pytest.raises(ValueError, match="two different nodes"):
        cluster.link(1, 1)


def test_a_cluster_file_names_catalog_links_and_host_links() -> None:
    cluster = cluster_from_dict({"nodes": [
        {"device": "u280", "name": "a", "host_link": "pcie4-x16"},
        {"device": "u280", "name": "b", "host_link": {"latency_ns": 2000,
                                                      "bandwidth_gbytes_s": 4}},
        {"device": "u280", "name": "c"}], "link": "eth-100g"}, "c.yaml")
    assert cluster.link(0, 1) == get_link("eth-100g")
    assert cluster.host_link(0) == get_link("pcie4-x16")
    given = cluster.host_link(1)
    assert (given.latency_s, given.bandwidth_Bps) == (pytest.approx(2e-6), 4e9)
    assert cluster.host_link(2) == Link(latency_s=1e-6, bandwidth_Bps=16e9,  # the U280's
                                        kind="pcie")
    with pytest.raises(ConfigError, match=r"field 'nodes\.0\.host_link': unknown link 'pcie9'"):
        cluster_from_dict({"nodes": [{"device": "u280", "host_link": "pcie9"}]}, "c.yaml")
    mine = {"name": "m", "kind": "fpga", "vendor": "v", "host_link": "pcie3-x8",
            "network": {"kind": "qsfp28", "ports": 2, "gbps": 25}}
    custom = cluster_from_dict({"nodes": [{"device": "mine", "count": 2}],
                                "custom_devices": {"mine": mine}}, "c.yaml")
    assert custom.link(0, 1) == get_link("aurora-qsfp28").model_copy(  # Aurora at 25 Gb/s
        update={"bandwidth_Bps": 25e9 * 64 / 66 / 8})
    assert custom.host_link(1) == get_link("pcie3-x8")  # no figure of its own: the slot's
    typo = {**mine, "network": {**mine["network"], "link": "nvlink9"}}
    with pytest.raises(ConfigError, match=r"field 'mine\.network\.link': unknown link"):
        cluster_from_dict({"nodes": [{"device": "mine"}], "custom_devices": {"mine": typo}},
                          "c.yaml")


# ---- the kinds read their links from the cluster ----------------------------------------
def _gpu_file(tmp_path, latency_ns: float, name: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text("nodes: [{device: h100, count: 2}]\n"
                    f"link: {{latency_ns: {latency_ns}, bandwidth_gbytes_s: 100}}\n")
    return str(path)


def test_a_gpu_plan_costs_its_cluster_files_link(tmp_path) -> None:
    plan = make_plan("llama2-7b", _gpu_file(tmp_path, 2000, "a"), "gpu-graph")
    assert (plan.link.latency_s, plan.link.bandwidth_Bps) == (pytest.approx(2e-6), 100e9)
    # NCCL's ring on 2 GPUs: 3.6 us + 2(N-1) x 2 us + 2(N-1)/N x bytes / 100 GB/s; one
    # token's hidden row, 4,096 FP16 = 8,192 B; the logits' gather, half the steps, of
    # 32,000 FP16 = 64,000 B
    hidden, logits = collectives_s(plan, new_tokens=1, batch=1)
    assert hidden == pytest.approx(3.6e-6 + 2 * 2e-6 + 8192 / 100e9)
    assert logits == pytest.approx(3.6e-6 + 2e-6 + 0.5 * 64000 / 100e9)


def test_a_gpu_ring_runs_at_its_slowest_hop(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("nodes: [{device: h100, name: a}, {device: h100, name: b}, "
                    "{device: h100, name: c}, {device: h100, name: d}]\nlink: nvlink4\n"
                    "pairs: [{a: b, b: c, bandwidth_gbytes_s: 50}]\n")
    plan = make_plan("llama2-7b", str(path), "gpu-graph")
    assert (plan.link.bandwidth_Bps, plan.link.latency_s) == (50e9, 0.4e-6)


def test_a_slower_gpu_link_adds_its_latency_to_every_ring_step(tmp_path) -> None:
    """Tokens 8:4 are 4 steps (the prefill and 3 decodes), each with 2 all-reduces per
    layer and the embedding's (65 for 32 layers) of 2(N-1) = 2 ring steps and a gather of 1:
    1 us more per ring step is 4 x (65 x 2 + 1) = 524 us more, all of it collectives. Each
    captured decode step takes its 131 us more; the prompt, issued op by op, hides most of
    its share under the host's issue."""
    fast, slow = (plan_and_estimate("llama2-7b", _gpu_file(tmp_path, ns, str(ns)),
                                    "gpu-graph", {"tokens": "8:4"}).estimate
                  for ns in (2000, 3000))
    key = "all-reduce / gather"
    assert slow.breakdown_s[key] - fast.breakdown_s[key] == pytest.approx(524e-6)
    assert slow.decode_s_per_token - fast.decode_s_per_token == pytest.approx(131e-6)
    assert 3 * 131e-6 <= slow.latency_s - fast.latency_s + 1e-12 <= 524e-6


def test_a_host_offload_plan_costs_its_cluster_files_host_links() -> None:
    """As test_host_offload_estimate's matvec by hand, on a slower host link: 3 us and
    8 GB/s. A transfer is the host's issue (seeds/003's 1.993884 us less the Gen3 x8 link's
    1 us it was measured on) plus the link's alpha-beta time, x 1.1 for two cards at once."""
    cluster = cluster_from_dict({"nodes": [{"device": "s10-2800", "count": 2, "host_link": {
        "latency_ns": 3000, "bandwidth_gbytes_s": 8}}]}, "c.yaml")
    plan = make_host_plan(MatvecSpec(name="m", rows=800, cols=800), cluster, steps=1)
    assert [(k.latency_s, k.bandwidth_Bps) for k in plan.links] == [(3e-6, 8e9)] * 2
    est = estimate_host(plan, FLAT_CPU)
    issue = 1.993884e-6 - 1e-6
    load = (issue + 3e-6 + 3200 / 8e9) * 1.1  # every input to both cards
    read = (issue + 3e-6 + 1600 / 8e9) * 1.1  # each card's 400 outputs back
    assert est.breakdown_s["comm"] == pytest.approx(load + read, rel=1e-5)


# ---- configs and the default devices ----------------------------------------------------
def test_every_engine_config_derives_from_engine_config() -> None:
    for name, strategy in strategies().items():
        assert issubclass(strategy.engine_config, EngineConfig), name


def test_compares_default_devices_are_the_catalogs_tagged_ones() -> None:
    """Every HBM FPGA (the decoder strategies stream weights from HBM) and four GPUs."""
    tagged = set(compare_defaults())
    hbm_fpgas = {k for k, d in catalog().items() if d.kind == "fpga" and d.memory("hbm")}
    assert tagged == hbm_fpgas | {"v100", "a100", "h100", "l4"}
    assert set(parse_devices(default_devices())) == tagged
