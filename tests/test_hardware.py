"""Catalog sources, cluster shorthand and YAML cluster files."""

import pytest
from typer.testing import CliRunner

from archipelago.cli import app
from archipelago.errors import ArchipelagoError, ConfigError, UnknownNameError
from archipelago.hardware.catalog import (
    catalog,
    get_device,
    get_switch,
    raw_catalog,
    raw_links,
    raw_switches,
    switches,
    unsourced_numbers,
)
from archipelago.hardware.cluster import resolve_cluster
from archipelago.hardware.cluster_file import load_cluster_file

REQUIRED = {"u280", "u250", "u50", "u55c", "vck190", "sidewinder", "stratix10gx2800",
            "arria10gx1150", "v100", "a100", "t4", "h100", "v80", "vck5000", "vhk158"}
GIB = 2**30


def test_catalog_has_every_required_device_and_every_number_a_source() -> None:
    assert set(catalog()) >= REQUIRED
    assert unsourced_numbers(raw_catalog()) == []
    assert set(switches()) == {"eth-100g", "eth-200g", "eth-400g", "z9100"}
    assert unsourced_numbers(raw_switches()) == []
    assert unsourced_numbers(raw_links()) == []


def test_unsourced_numbers_finds_a_bare_figure() -> None:
    entry = {"ports": 32, "latency_s": {"value": 3e-7, "source": " "}, "name": "x"}
    assert unsourced_numbers(entry, "sw") == ["sw.ports", "sw.latency_s"]


def test_u280_figures_from_the_seeds() -> None:
    u280 = get_device("u280")
    assert (u280.resources.dsp, u280.resources.bram, u280.resources.uram) == (9024, 2016, 960)
    assert u280.memory("hbm").bandwidth_Bps == 460e9 and u280.memory("hbm").channels == 32


def test_versal_hbm_figures_against_the_datasheets() -> None:
    """Pinned by hand: DS950's XCVH1782 / XCVH1582 rows, and PG313's HBM arithmetic (two
    stacks x eight 128-bit channels, each two 64-bit pseudo channels, at 3200 MT/s)."""
    pseudo_channels, pc_Bps = 2 * 8 * 2, 64 / 8 * 3200e6
    for key, dsp, bram, uram in (("v80", 10848, 3741, 1925), ("vhk158", 7392, 2541, 1301)):
        device = get_device(key)
        assert (device.resources.dsp, device.resources.bram, device.resources.uram) == (
            dsp, bram, uram)
        hbm = device.memory("hbm")
        assert hbm is not None and hbm.capacity_bytes == 32 * GIB
        assert hbm.channels == pseudo_channels
        assert hbm.bandwidth_Bps == pytest.approx(pseudo_channels * pc_Bps)  # 819.2 GB/s
    v80 = get_device("v80")
    assert v80.network is not None and (v80.network.kind, v80.network.ports,
                                        v80.network.gbps) == ("qsfp56", 4, 200)
    assert v80.host_link_Bps == pytest.approx(8 * 32e9 * 128 / 130 / 8, rel=1e-3)  # Gen5 x8


def test_vck5000_is_the_vc1902_without_hbm() -> None:
    vck5000, vck190 = get_device("vck5000"), get_device("vck190")
    assert vck5000.resources == vck190.resources and vck5000.resources.aie == 400
    assert vck5000.memory("hbm") is None and vck5000.memory("ddr").capacity_bytes == 12 * GIB
    assert vck5000.network is not None and (vck5000.network.ports, vck5000.network.gbps) == (
        2, 100)
    assert vck5000.host_link_Bps == pytest.approx(8 * 16e9 * 128 / 130 / 8, rel=1e-3)  # Gen4 x8


def test_u55c_and_u250_memories() -> None:
    """U55C: 16 GB HBM2 and no DDR (DS978); U250: four 16 GB DDR4 banks at 77 GB/s (DS962)."""
    u55c, u250 = get_device("u55c"), get_device("u250")
    assert u55c.memory("ddr") is None and u55c.memory("hbm").capacity_bytes == 16 * GIB
    ddr = u250.memory("ddr")
    assert u250.memory("hbm") is None and (ddr.capacity_bytes, ddr.channels) == (64 * GIB, 4)
    assert ddr.bandwidth_Bps == 77e9


def test_switch_links() -> None:
    """One hop through a switch: its line rate / 8 and its port-to-port latency; a board
    slower than the switch runs at its own port speed."""
    for name, gbps in (("eth-100g", 100), ("eth-200g", 200), ("eth-400g", 400)):
        link = get_switch(name).link()
        assert link.bandwidth_Bps == gbps * 1e9 / 8 and link.latency_s == pytest.approx(300e-9)
    assert get_switch("ETH-400G").link_for(get_device("u280")).bandwidth_Bps == 12.5e9
    assert get_switch("eth-100g").link_for(get_device("v80")).bandwidth_Bps == 12.5e9
    assert get_switch("eth-400g").link_for(get_device("v80")).bandwidth_Bps == 25e9
    with pytest.raises(ArchipelagoError, match="'vhk158' has no network ports"):
        get_switch("eth-100g").link_for(get_device("vhk158"))
    with pytest.raises(UnknownNameError, match="eth-100g, eth-200g, eth-400g"):
        get_switch("eth-800g")


def test_catalog_command_lists_the_new_boards() -> None:
    out = CliRunner().invoke(app, ["catalog"], terminal_width=200)
    assert out.exit_code == 0
    for key in ("v80", "vck5000", "vhk158"):
        assert key in out.stdout


def test_shorthand_is_an_aurora_ring() -> None:
    cluster = resolve_cluster("4xu280")
    assert cluster.size == 4 and cluster.topology == "ring"
    assert cluster.link(0, 1).bandwidth_Bps == pytest.approx(100e9 * 64 / 66 / 8)
    assert cluster.link(0, 1).latency_s == pytest.approx(300e-9)


def test_unknown_device_lists_choices() -> None:
    with pytest.raises(UnknownNameError, match="u280"):
        resolve_cluster("4xu999")
    with pytest.raises(ArchipelagoError, match="NxDEVICE"):
        resolve_cluster("lots-of-fpgas")


def test_cluster_yaml(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("name: lab\ndevices:\n  - {device: u55c, count: 2}\ntopology: switch\n"
                    "link: {latency_ns: 500, bandwidth_gbps: 100}\nswitch_latency_ns: 250\n")
    cluster = load_cluster_file(path)
    assert cluster.size == 2 and cluster.topology == "switch"
    assert cluster.link(0, 1).bandwidth_Bps == pytest.approx(12.5e9)
    assert cluster.switch_latency_s == pytest.approx(250e-9)


@pytest.mark.parametrize(("body", "field"), [
    ("devices:\n  - {device: nope}\n", "devices.0.device"),
    ("devices:\n  - {device: u280, count: 0}\n", "devices.0.count"),
    ("devices: []\n", "devices"),
    ("devices:\n  - {device: u280}\ntopology: mesh\n", "topology"),
    ("devices: [\n", "yaml"),
])
def test_bad_cluster_yaml_names_the_field(tmp_path, body: str, field: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=rf"bad\.yaml: field '{field}'"):
        resolve_cluster(str(path))
