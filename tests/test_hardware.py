"""Catalog sources, cluster shorthand and YAML cluster files."""

import pytest

from archipelago.errors import ArchipelagoError, ConfigError, UnknownNameError
from archipelago.hardware.catalog import catalog, get_device, raw_catalog, unsourced_numbers
from archipelago.hardware.cluster import load_cluster_file, resolve_cluster

REQUIRED = {"u280", "u250", "u50", "u55c", "vck190", "sidewinder", "stratix10gx2800",
            "arria10gx1150", "v100", "a100", "t4", "h100"}


def test_catalog_has_every_required_device_and_every_number_a_source() -> None:
    assert set(catalog()) >= REQUIRED
    assert unsourced_numbers(raw_catalog()) == []


def test_u280_figures_from_the_seeds() -> None:
    u280 = get_device("u280")
    assert (u280.resources.dsp, u280.resources.bram, u280.resources.uram) == (9024, 2016, 960)
    assert u280.memory("hbm").bandwidth_Bps == 460e9 and u280.memory("hbm").channels == 32


def test_shorthand_is_an_aurora_ring() -> None:
    cluster = resolve_cluster("4xu280")
    assert cluster.size == 4 and cluster.topology == "ring"
    assert cluster.link.bandwidth_Bps == pytest.approx(100e9 * 64 / 66 / 8)
    assert cluster.link.latency_s == pytest.approx(300e-9)


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
    assert cluster.link.bandwidth_Bps == pytest.approx(12.5e9)
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
