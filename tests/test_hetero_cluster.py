"""Heterogeneous clusters of seeds/004 (Table II, §VII-B)."""

import pytest

from archipelago.errors import ConfigError, UnknownNameError
from archipelago.hardware.catalog import raw_catalog, unsourced_numbers
from archipelago.hardware.hetero import builtin_hetero_clusters, resolve_hetero_cluster


def test_builtin_clusters_and_table_ii_boards():
    assert builtin_hetero_clusters() == ["chef-cluster1", "chef-cluster2", "chef-cluster3",
                                         "hacc"]
    devices = {name: [f.device for f in resolve_hetero_cluster(name).fpgas]
               for name in builtin_hetero_clusters()}
    assert devices["chef-cluster1"] == ["vc707", "zcu102", "zc706", "xcku060", "xc7z045",
                                        "vcu118"]
    assert devices["chef-cluster2"] == ["u50lv", "u30"]
    assert devices["chef-cluster3"] == devices["hacc"] == ["u280", "u250"]
    assert unsourced_numbers(raw_catalog()) == []


def test_hacc_on_board_figures():
    hacc = resolve_hetero_cluster("hacc")
    u280, u250 = hacc.fpgas
    assert (u280.freq_hz, len(u280.banks), u280.banks[0].bandwidth_Bps) == (200e6, 32, 12e9)
    assert (u250.freq_hz, len(u250.banks), u250.banks[0].bandwidth_Bps) == (150e6, 4, 8e9)
    assert hacc.inter_Bps[0][1] == 3e9


def test_host_relay_halves_and_override(tmp_path):
    cluster1 = resolve_hetero_cluster("chef-cluster1")
    assert cluster1.inter_Bps[0][5] == pytest.approx(0.125e9)
    fast = resolve_hetero_cluster("chef-cluster1", bandwidth_gbps=15)
    assert fast.inter_Bps[2][3] == 15e9 and fast.inter_Bps[3][3] == 0
    path = tmp_path / "c.yaml"
    path.write_text("name: c\np2p_gbps: 2\nhost_relay: true\nfpgas:\n"
                    "  - {name: a, device: u280, freq_mhz: 200}\n"
                    "  - {name: b, device: zc706, freq_mhz: 100}\n"
                    "pairs: [{a: a, b: b, gbps: 1}]\n")
    custom = resolve_hetero_cluster(str(path))
    assert custom.inter_Bps[0][1] == 0.5e9
    # one 512-bit port at 100 MHz caps the ZC706 bank below its 12.8 GB/s datasheet peak
    assert custom.fpgas[1].banks[0].bandwidth_Bps == 6.4e9


def test_bad_cluster_files(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: c\np2p_gbps: 2\nfpgas:\n  - {device: nope, freq_mhz: 200}\n")
    with pytest.raises(ConfigError, match="unknown device 'nope'"):
        resolve_hetero_cluster(str(path))
    path.write_text("name: c\np2p_gbps: -1\nfpgas:\n  - {device: u280, freq_mhz: 200}\n")
    with pytest.raises(ConfigError, match="p2p_gbps"):
        resolve_hetero_cluster(str(path))
    with pytest.raises(UnknownNameError, match="hacc"):
        resolve_hetero_cluster("no-such-cluster")
