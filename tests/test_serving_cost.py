"""Cost per million tokens (serving/cost.py): a hand-computed bill and figure, the catalog's
hosts, and `archi serve`'s cost against the formula applied to its own JSON throughput."""

import json
import math

import pytest

from archipelago.errors import ArchipelagoError
from archipelago.hardware.catalog import get_device, get_host, raw_hosts, unsourced_numbers
from archipelago.serving.cost import Item, bill, check_pricing, cost
from tests.cli_here import archi_here as archi


def test_cost_of_a_tiny_deployment_by_hand() -> None:
    """2 boards at $1,000 and 100 W in one $500, 50 W host, over 1 year (31,557,600 s), at
    $0.36/kWh and half utilization, serving 10 output and 30 total tokens a second:
    capital $2,500 -> 2500 / 31557600 $/s; energy 250 W x 0.5 = 0.125 kW x $0.36 = $0.045/h
    = 1.25e-5 $/s."""
    items = [Item("board", 2, 1000.0, 100.0), Item("host", 1, 500.0, 50.0)]
    got = cost(items, 10.0, 30.0, 0.5, 0.36, 1.0)
    per_s = 2500 / 31_557_600 + 1.25e-5
    assert got["capital_usd"] == 2500 and got["full_power_w"] == 250
    assert got["energy_usd_per_h"] == pytest.approx(0.045)
    assert got["usd_per_million_output_tokens"] == pytest.approx(per_s / 10 * 1e6)
    assert got["usd_per_million_tokens"] == pytest.approx(per_s / 30 * 1e6)
    assert cost(items, 0.0, 0.0, 0.5, 0.36, 1.0)["usd_per_million_tokens"] is None


def test_bill_needs_a_host_per_eight_cards() -> None:
    """Nine U280s need two 8-slot hosts; an evaluation kit without a host is not costed."""
    items, reason = bill([get_device("u280")] * 9)
    assert reason is None
    host = get_host("pcie-4u-8")
    assert [(i.name, i.count) for i in items] == [("u280", 9), ("pcie-4u-8", 2)]
    assert items[1].price_usd == host.price_usd and host.cards == 8
    items, reason = bill([get_device("vck190")])
    assert items == [] and reason is not None and "vck190" in reason and "host" in reason


def test_every_host_figure_has_a_source() -> None:
    assert raw_hosts() and unsourced_numbers(raw_hosts()) == []


@pytest.mark.parametrize("args, says", [
    ((-0.1, 3.0, None), "--electricity"), ((0.1, 0.0, None), "--lifetime-years"),
    ((0.1, 3.0, 1.5), "--utilization"), ((math.nan, 3.0, None), "--electricity")])
def test_pricing_refused_in_one_line(args: tuple, says: str) -> None:
    with pytest.raises(ArchipelagoError, match=says) as err:
        check_pricing(*args)
    assert "\n" not in str(err.value)


_SERVE = ("serve", "gpt2-345m", "--cluster", "2xh100", "--strategy", "gpu-graph",
          "--rate", "4", "--output", "32", "--requests", "100")


def test_archi_serve_cost_equals_the_hand_formula() -> None:
    """Two H100s in one DGX-class host at $0.2/kWh over 4 years at 0.5 utilization; the
    figure recomputed from the JSON's own throughputs and the catalog's prices."""
    run = archi(*_SERVE, "--electricity", "0.2", "--lifetime-years", "4",
                "--utilization", "0.5", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    h100, host = get_device("h100"), get_host("dgx-h100")
    capital = 2 * (h100.price_usd or 0) + host.price_usd
    watts = 2 * (h100.power_w or 0) + host.power_w
    per_s = capital / (4 * 365.25 * 86400) + watts * 0.5 / 1000 * 0.2 / 3600
    out = result["throughput_tokens_per_s"]
    total = out + result["throughput_prompt_tokens_per_s"]
    got = result["cost"]
    assert got["capital_usd"] == pytest.approx(capital)
    assert got["usd_per_million_output_tokens"] == pytest.approx(per_s / out * 1e6)
    assert got["usd_per_million_tokens"] == pytest.approx(per_s / total * 1e6)
    table = archi(*_SERVE)
    assert table.returncode == 0 and "cost per million tokens" in table.stdout


def test_archi_serve_cost_defaults() -> None:
    """Without the options: $0.10/kWh, 3 years, the mean simulated busy share."""
    run = archi(*_SERVE, "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    got, busy = result["cost"], result["busy_share"]
    assert got["electricity_usd_per_kwh"] == 0.10 and got["lifetime_years"] == 3
    assert got["utilization"] == pytest.approx(sum(busy) / len(busy))


@pytest.mark.parametrize("extra, says", [
    (("--electricity", "-1"), "--electricity"), (("--lifetime-years", "0"), "--lifetime"),
    (("--utilization", "2"), "--utilization")])
def test_archi_serve_refuses_bad_pricing(extra: tuple[str, ...], says: str) -> None:
    run = archi(*_SERVE, *extra)
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], run.stderr


def test_bad_host_refused_at_the_edge() -> None:
    """A device naming an unknown host, or a host entry with zero cards, is refused in one
    line naming the field."""
    from archipelago.errors import ConfigError
    from archipelago.hardware.catalog import _validated, device_from_dict, raw_catalog
    from archipelago.hardware.device import Host

    with pytest.raises(ConfigError, match="host") as err:
        device_from_dict("mine", {**raw_catalog()["u280"], "host": "rack-9"}, "my.yaml")
    assert "\n" not in str(err.value) and "pcie-4u-8" in str(err.value)
    with pytest.raises(ConfigError, match="cards") as err:
        _validated(Host, "h", {"name": "h", "cards": 0, "price_usd": 1.0, "power_w": 1.0}, "y")
    assert "\n" not in str(err.value)
