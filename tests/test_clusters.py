"""The one cluster format: the built-in clusters of seeds/004 (Table II, §VII-B), the older
`devices:` and `fpgas:` spellings loading to the same clusters, the per-pair bandwidth with
its host relay, and the cluster families `resolve_cluster` loops over."""

from importlib import resources

import pytest
import yaml

from archipelago.errors import ArchipelagoError, ConfigError, PartitionError, UnknownNameError
from archipelago.families import families
from archipelago.hardware.catalog import unsourced_numbers
from archipelago.hardware.cluster import resolve_cluster
from archipelago.hardware.cluster_file import builtin_clusters, cluster_from_dict

# The built-in clusters as CHEF's `fpgas:` files wrote them before the one format (their
# comments and citations left out): each must still load, to the converted built-in.
OLD_SPELLING = {
    "hacc": """
name: hacc
p2p_gbps: 3
fpgas:
  - name: u280
    device: u280
    freq_mhz: 200
    banks: {count: 32, bandwidth_gbps: 12}
  - name: u250
    device: u250
    freq_mhz: 150
    banks: {count: 4, bandwidth_gbps: 8}
""",
    "chef-cluster1": """
name: chef-cluster1
p2p_gbps: 0.25
host_relay: true
fpgas:
  - {name: vc707, device: vc707, freq_mhz: 150}
  - {name: zcu102, device: zcu102, freq_mhz: 200}
  - {name: zc706, device: zc706, freq_mhz: 150}
  - {name: xcku060, device: xcku060, freq_mhz: 200}
  - {name: xc7z045, device: xc7z045, freq_mhz: 150}
  - {name: vcu118, device: vcu118, freq_mhz: 200}
""",
    "chef-cluster2": """
name: chef-cluster2
p2p_gbps: 3
fpgas:
  - {name: u50lv, device: u50lv, freq_mhz: 200}
  - {name: u30, device: u30, freq_mhz: 200}
""",
    "chef-cluster3": """
name: chef-cluster3
p2p_gbps: 3
fpgas:
  - {name: u280, device: u280, freq_mhz: 200}
  - {name: u250, device: u250, freq_mhz: 150}
""",
}


def _raw_builtin(name: str) -> dict:
    text = resources.files("archipelago.hardware").joinpath(f"clusters/{name}.yaml").read_text()
    return yaml.safe_load(text)


def test_builtin_clusters_table_ii_boards_and_every_number_cited():
    assert builtin_clusters() == ["chef-cluster1", "chef-cluster2", "chef-cluster3", "hacc"]
    devices = {name: [d.key for d in resolve_cluster(name).devices] for name in builtin_clusters()}
    assert devices["chef-cluster1"] == ["vc707", "zcu102", "zc706", "xcku060", "xc7z045",
                                        "vcu118"]
    assert devices["chef-cluster2"] == ["u50lv", "u30"]
    assert devices["chef-cluster3"] == devices["hacc"] == ["u280", "u250"]
    for name in builtin_clusters():
        assert unsourced_numbers(_raw_builtin(name)) == [], name


@pytest.mark.parametrize("name", sorted(OLD_SPELLING))
def test_the_old_fpgas_spelling_loads_to_the_converted_builtin(name):
    old = cluster_from_dict(yaml.safe_load(OLD_SPELLING[name]), f"old/{name}.yaml")
    assert old == resolve_cluster(name)


def test_hacc_on_board_figures():
    hacc = resolve_cluster("hacc")
    u280, u250 = hacc.nodes
    assert (u280.clock_hz, len(u280.banks), u280.banks[0].bandwidth_Bps) == (200e6, 32, 12e9)
    assert (u250.clock_hz, len(u250.banks), u250.banks[0].bandwidth_Bps) == (150e6, 4, 8e9)
    assert u280.resources.dsp == 9024 and u280.device.key == "u280"
    assert hacc.pair_Bps(0, 1) == hacc.pair_Bps(1, 0) == 3e9


@pytest.mark.parametrize("spelling", ["old", "new"])
def test_host_relay_halves_and_pairs_override(tmp_path, spelling):
    cluster1 = resolve_cluster("chef-cluster1")
    assert cluster1.pair_Bps(0, 5) == pytest.approx(0.125e9)
    fast = cluster1.with_bandwidth(15)  # --bandwidth: every pair, relay or not
    assert fast.pair_Bps(2, 3) == 15e9 and fast.pair_Bps(0, 5) == 15e9
    path = tmp_path / "c.yaml"
    path.write_text({
        "old": "name: c\np2p_gbps: 2\nhost_relay: true\nfpgas:\n"
               "  - {name: a, device: u280, freq_mhz: 200}\n"
               "  - {name: b, device: zc706, freq_mhz: 100}\n"
               "  - {name: c, device: zc706, freq_mhz: 100}\n"
               "pairs: [{a: a, b: b, gbps: 1}]\n",
        "new": "nodes:\n  - {name: a, device: u280, clock_mhz: 200}\n"
               "  - {name: b, device: zc706, clock_mhz: 100, count: 2}\n"
               "topology: host_star\nhost_relay: true\n"
               "link: {latency_ns: 0, bandwidth_gbps: 16}\n"
               "pairs: [{a: b_0, b: a, bandwidth_gbytes_s: 1}]\n"}[spelling])
    custom = resolve_cluster(str(path))
    assert custom.pair_Bps(0, 1) == 0.5e9 and custom.pair_Bps(0, 2) == 1e9
    # one 512-bit port at 100 MHz caps the ZC706 bank below its 12.8 GB/s datasheet peak
    assert custom.nodes[1].banks[0].bandwidth_Bps == 6.4e9
    assert custom.topology == "host_star" and custom.name == "c"


def test_the_classic_devices_spelling_is_the_nodes_list():
    body = {"name": "lab", "topology": "switch", "switch_latency_ns": 250,
            "link": {"latency_ns": 500, "bandwidth_gbps": 100}}
    classic = cluster_from_dict({**body, "devices": [{"device": "u55c", "count": 2}]}, "a")
    assert classic == cluster_from_dict({**body, "nodes": [{"device": "u55c", "count": 2}]},
                                        "b")
    assert [n.name for n in classic.nodes] == ["u55c_0", "u55c_1"]
    assert classic.link(0, 1).bandwidth_Bps == 12.5e9
    assert classic.switch_latency_s == pytest.approx(250e-9)


def test_resized_keeps_the_network():
    """The device-count sweep of a report: the first node, repeated, on the same link."""
    ring = resolve_cluster("4xu280")
    three = ring.resized(3)
    assert three == resolve_cluster("3xu280")
    hacc = resolve_cluster("hacc").resized(2)
    assert [d.key for d in hacc.devices] == ["u280", "u280"]
    assert hacc.nodes[1].clock_hz == 200e6 and len(hacc.nodes[1].banks) == 32
    assert hacc.link(0, 1) == resolve_cluster("hacc").link(0, 1) and hacc.name == "2xu280"


def test_node_overrides_and_defaults():
    cluster = cluster_from_dict({"nodes": [
        {"device": "u280", "name": "big", "count": 2, "resources": {"dsp": 4000},
         "banks": {"count": 4, "size_bytes": 1 << 30}},
        {"device": "u250"}]}, "c.yaml")
    big, _, u250 = cluster.nodes
    assert [n.name for n in cluster.nodes] == ["big_0", "big_1", "u250_2"]
    assert (big.resources.dsp, big.resources.bram) == (4000, 2016)  # BRAM from the catalog
    assert len(big.banks) == 4 and big.dram_bytes == 4 << 30
    # the U250's four DDR4 channels (77 GB/s in all) at the default 200 MHz clock
    assert len(u250.banks) == 4 and u250.clock_hz == 200e6
    assert u250.banks[0].bandwidth_Bps == min(77e9 / 4, 64 * 200e6)
    assert cluster.link(0, 1).latency_s == 300e-9  # the first device's own Aurora ports


@pytest.mark.parametrize(("doc", "field", "problem"), [
    ({"fpgas": [{"device": "nope", "freq_mhz": 200}]}, "fpgas.0.device",
     "unknown device 'nope'"),
    ({"p2p_gbps": -1, "fpgas": [{"device": "u280", "freq_mhz": 200}]}, "p2p_gbps", "0.001"),
    ({"fpgas": [{"device": "u280", "freq_mhz": 0}]}, "fpgas.0.freq_mhz", "1"),
    ({"fpgas": [{"device": "u280", "dsp": -1}]}, "fpgas.0.dsp", "0"),
    ({"fpgas": [{"device": "u280", "banks": {"bandwidth_gbps": 0}}]},
     "fpgas.0.banks.bandwidth_gbps", "0.001"),
    ({"p2p_gbps": 1, "fpgas": [{"device": "u280", "name": "a"}, {"device": "u250"}],
      "pairs": [{"a": "a", "b": "u250_1", "gbps": "x"}]}, "pairs.0.gbps", "number"),
    ({"nodes": [{"device": "u280", "name": "a"}], "pairs": [{"a": "a", "b": "z",
                                                           "bandwidth_gbps": 1}]},
     "pairs.0", "unknown node 'z'"),
    ({"nodes": [{"device": "u280", "name": "a", "count": 2}],
      "pairs": [{"a": "a_1", "b": "a_1", "bandwidth_gbps": 1}]}, "pairs.0", "with itself"),
    ({"nodes": [{"device": "u280"}], "link": {"latency_ns": 1, "bandwidth_gbps": 1,
                                              "bandwidth_gbytes_s": 1}},
     "link", "exactly one of bandwidth_gbps"),
    ({"nodes": [{"device": "u280", "name": "a"}, {"device": "u250", "name": "a"}]},
     "nodes.name", "'a' is given twice"),
    ({"nodes": [{"device": "cpu", "banks": {"count": 2}}],
      "custom_devices": {"cpu": {"name": "CPU", "kind": "cpu", "vendor": "x"}}},
     "nodes.0.banks", "no HBM or DDR"),
    ({"devices": [{"device": "u280"}], "nodes": [{"device": "u280"}]}, "devices", "Extra"),
    # a bank per channel: 10^12 channels were a MemoryError building the node
    ({"nodes": [{"device": "big"}], "custom_devices": {"big": {
        "name": "Big", "kind": "fpga", "vendor": "x", "memories": {"hbm": {
            "capacity_bytes": 2**33, "bandwidth_Bps": 4.6e11, "channels": 10**12}}}}},
     "big.memories.hbm.channels", "less than or equal to 1024"),
    ({"nodes": [{"device": "big"}], "custom_devices": {"big": {
        "name": "Big", "kind": "fpga", "vendor": "x", "memories": {"hbm": {
            "capacity_bytes": 10**24, "bandwidth_Bps": 4.6e11, "channels": 32}}}}},
     "big.memories.hbm.capacity_bytes", "less than or equal to 1152921504606846976"),
])
def test_bad_files_name_the_field_as_written(doc, field, problem):
    with pytest.raises(ConfigError, match=r"c\.yaml: field '([^']*)'") as err:
        cluster_from_dict(doc, "c.yaml")
    assert err.value.field == field and problem in str(err.value)


def test_cluster_families_in_order_and_unknown_names():
    assert [f.name for f in families("cluster")] == ["cluster-shorthand", "cluster-builtin",
                                                     "cluster-file"]
    assert resolve_cluster("2xu280").size == 2 and resolve_cluster("hacc").size == 2
    with pytest.raises(UnknownNameError) as err:
        resolve_cluster("no-such-cluster")
    message = str(err.value)
    assert "\n" not in message and "NxDEVICE" in message and "u280" in message
    assert "chef-cluster1" in message and "hacc" in message and "<cluster YAML path>" in message
    with pytest.raises(ArchipelagoError, match=r"out of range 1\.\.4096"):
        resolve_cluster("4097xu280")


@pytest.mark.parametrize(("text", "counts"), [("2x2x2xu280", 3), ("1X2x3x4xu280", 4)])
def test_more_than_two_counts_are_a_misspelt_cluster_not_a_device(text, counts):
    """'2x2x2xu280' read as two rings of two '2xu280' devices was "unknown device
    '2xu280'" and the catalog's 26 devices."""
    with pytest.raises(ArchipelagoError) as err:
        resolve_cluster(text)
    assert str(err.value) == (f"cluster '{text}' gives {counts} counts; a cluster is spelt "
                              "NxDEVICE (4xu280: N devices) or RxNxDEVICE (8x4xu280: R rings "
                              "of N)")


def test_builtin_clusters_catalog_table():
    table = next(f for f in families("cluster") if f.name == "cluster-builtin").catalog()
    assert table.key == "clusters" and table.columns == ("name", "devices", "device mix",
                                                         "link")
    assert table.rows["hacc"] == (2, "1xu280 + 1xu250", "switch, 3 GB/s per pair")
    assert table.rows["chef-cluster1"][2] == "host_star, host relay, 0.125 GB/s per pair"
    assert table.as_json()["chef-cluster2"]["devices"] == 2


def test_any_cluster_reaches_chef_whose_shape_check_says_why():
    from archipelago.models.dag_zoo import builtin_dag
    from archipelago.strategies.chef.plan import ChefConfig
    from archipelago.strategies.chef.planners import plan_chef

    with pytest.raises(PartitionError, match="'a100_0' of cluster '2xa100' is a gpu"):
        plan_chef(builtin_dag("vfs"), resolve_cluster("2xa100"), ChefConfig())


def test_a_nodes_fabric_override_binds_tensor_parallel_plans(tmp_path):
    """A cluster file that leaves a design 3,000 of a U280's 9,024 DSPs (a shell's share
    taken out) makes DFX's 3,587-DSP core not fit: the check reads the node's fabric, not
    the catalog board's (it used to call such a plan feasible)."""
    import json

    from tests.test_chef_cli import archi

    path = tmp_path / "shell.yaml"
    path.write_text("nodes:\n  - {device: u280, count: 4, resources: {dsp: 3000}}\n")
    out = archi("plan", "gpt2-1.5b", "--cluster", str(path), "--strategy", "dfx",
                "--tokens", "64:64", "--json")
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    assert data["feasible"] is False
    assert "device 0 (u280): DSP needs 3587, has 3000 (587 over)" in data["reasons"]
    whole = archi("plan", "gpt2-1.5b", "--cluster", "4xu280", "--strategy", "dfx",
                  "--tokens", "64:64", "--json")
    assert whole.returncode == 0, whole.stderr
