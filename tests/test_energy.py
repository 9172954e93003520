"""Cost and energy: every catalog board priced and powered with a dated source, and the
arithmetic of estimate/energy against hand-computed cases."""

import re
from pathlib import Path

import pytest

from archipelago.estimate.energy import (
    board_power,
    board_price,
    cost_energy,
    energy_j,
    joules_per_token,
    tokens_per_s_per_million_usd,
    upfront_usd,
)
from archipelago.hardware.catalog import catalog, device_from_dict, get_device, raw_catalog

YEAR = re.compile(r"\b(19|20)\d\d\b")


@pytest.mark.parametrize("key", sorted(raw_catalog()))
def test_every_catalog_board_has_a_price_and_a_power_with_a_dated_source(key: str) -> None:
    entry = raw_catalog()[key]
    for field in ("price_usd", "power_w"):
        assert field in entry, f"{key} has no {field}"
        source = entry[field]["source"]
        assert source.strip() and YEAR.search(source), f"{key}.{field}: {source!r}"
    if "measured_power_w" in entry:
        assert YEAR.search(entry["measured_power_w"]["source"]), key
    device = get_device(key)
    assert device.price_usd is not None and device.price_usd > 0
    assert device.power_w is not None and device.power_w > 0


def test_dfx_table_ii_prices_and_the_datasheet_powers() -> None:
    """seeds/001 Table II: $7,795 per U280, $11,458 per V100; DS963: 225 W; V100 SXM2 300 W."""
    u280, v100 = get_device("u280"), get_device("v100")
    assert (u280.price_usd, v100.price_usd) == (7795, 11458)
    assert upfront_usd(u280, 4) == 31180 and upfront_usd(v100, 4) == 45832  # Table II totals
    assert board_power(u280).watts == 225 and board_power(v100).watts == 300
    assert "DS963" in board_power(u280).basis and "TDP" in board_power(u280).basis
    price = board_price(u280)
    assert price is not None and price[0] == 7795 and "seeds/001" in price[1]


def test_energy_arithmetic_by_hand() -> None:
    # 4 boards x 225 W x 0.5 s = 450 J; 64 output tokens -> 7.03125 J per token
    assert energy_j(225, 4, 0.5) == pytest.approx(450.0)
    assert joules_per_token(450.0, 64) == pytest.approx(7.03125)
    # 128 tokens/s on $31,180 = 4,105.2 tokens/s per million $
    assert tokens_per_s_per_million_usd(128, 31180) == pytest.approx(128 / 0.03118)
    assert tokens_per_s_per_million_usd(128, None) is None


def test_cost_energy_of_four_u280_on_a_hand_computed_generation() -> None:
    row = cost_energy(get_device("u280"), boards=4, latency_s=0.5, output_tokens=64)
    assert row.upfront_usd == 31180
    assert row.energy_j == pytest.approx(450.0)
    assert row.joules_per_token == pytest.approx(450.0 / 64)
    assert row.tokens_per_s_per_million_usd == pytest.approx(128 / 0.03118)


def test_a_measured_average_is_preferred_over_tdp() -> None:
    entry = {**raw_catalog()["u280"], "measured_power_w": {"value": 45, "source": "x"}}
    board = device_from_dict("myu280", entry, "test")
    power = board_power(board)
    assert power is not None and power.watts == 45 and power.basis.startswith("measured")
    assert cost_energy(board, 2, 1.0, 10).energy_j == pytest.approx(90.0)


def test_a_custom_device_without_price_or_power_is_unknown_not_a_crash() -> None:
    entry = {k: v for k, v in raw_catalog()["u280"].items() if k not in ("price_usd", "power_w")}
    board = device_from_dict("mine", entry, "test")
    assert board_power(board) is None and board_price(board) is None
    row = cost_energy(board, boards=4, latency_s=0.5, output_tokens=64)
    assert (row.upfront_usd, row.power, row.energy_j, row.joules_per_token,
            row.tokens_per_s_per_million_usd) == (None, None, None, None, None)


def test_a_custom_figure_under_a_catalog_key_is_not_given_the_catalog_source() -> None:
    entry = {**raw_catalog()["u280"], "power_w": {"value": 100, "source": "mine"}}
    board = device_from_dict("u280", entry, "test")
    assert board != catalog()["u280"]
    assert board_power(board).basis.endswith("given in custom device 'u280'")


def test_the_hardware_doc_table_matches_the_catalog() -> None:
    """docs/hardware.md's price and power table is the catalog's, row for row."""
    text = (Path(__file__).parents[1] / "docs" / "hardware.md").read_text()
    rows = {m[1]: (m[2], m[3]) for m in re.finditer(
        r"^\| `([a-z0-9-]+)` \| [^|]+ \| ([\d,.]+) \| [^|]+ \| ([\d,.]+) \|", text, re.M)}
    assert set(rows) == set(raw_catalog())
    for key, (watts, usd) in rows.items():
        device = get_device(key)
        assert (float(watts.replace(",", "")), float(usd.replace(",", ""))) == (
            device.power_w, device.price_usd), key
