"""Cost per million tokens of a served deployment: the boards and the host servers they
sit in (hosts = ceil(boards / cards per host), catalog `hosts`), their prices amortized
evenly over a stated lifetime, and their energy at a stated electricity price.

Energy model: average power = full power (board TDP + host power) x utilization, where
utilization defaults to the simulation's mean busy share; idle draw is not modelled (an idle
machine counts as drawing nothing), so `--utilization 1` gives the full-power bound. Names no
kind: any device with a price, a power and a host is costed."""

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from archipelago.errors import ArchipelagoError
from archipelago.hardware.catalog import get_host
from archipelago.hardware.device import Device

SECONDS_PER_YEAR = 365.25 * 86400
# US average retail electricity price, $/kWh: EIA Electric Power Monthly, industrial sector
# 8.06 cents (2023 annual, as charted by Statista from EIA, 2024-03), commercial about
# 12 cents; 0.10 sits between the two.
DEFAULT_ELECTRICITY = 0.10
DEFAULT_LIFETIME_YEARS = 3.0  # a common depreciation period for servers
MAX_ELECTRICITY = 10.0  # $/kWh: past any tariff; more is a typo
MAX_LIFETIME_YEARS = 30.0


@dataclass(frozen=True)
class Item:
    """Equipment bought: `count` of a thing at `price_usd` each, drawing `power_w` each."""

    name: str
    count: int
    price_usd: float
    power_w: float


def bill(devices: Sequence[Device]) -> tuple[list[Item], str | None]:
    """The boards of a deployment (one entry per board) and the hosts they need, or the
    reason they cannot be costed (a device without a price, power or host)."""
    items: list[Item] = []
    for key, count in Counter(d.key for d in devices).items():
        device = next(d for d in devices if d.key == key)
        missing = [f for f in ("price_usd", "power_w", "host") if getattr(device, f) is None]
        if missing:
            return [], f"device '{key}' has no {' or '.join(missing)} in the catalog"
        host = get_host(device.host or "")
        items += [Item(key, count, device.price_usd or 0.0, device.power_w or 0.0),
                  Item(host.key, math.ceil(count / host.cards), host.price_usd, host.power_w)]
    return items, None


def check_pricing(electricity: float, lifetime_years: float, utilization: float | None
                  ) -> None:
    """Refuse out-of-range cost inputs in one line, naming the option."""
    if not 0 <= electricity <= MAX_ELECTRICITY:
        raise ArchipelagoError(f"--electricity {electricity:g}: must be in "
                               f"[0, {MAX_ELECTRICITY:g}] $/kWh")
    if not 0 < lifetime_years <= MAX_LIFETIME_YEARS:
        raise ArchipelagoError(f"--lifetime-years {lifetime_years:g}: must be in "
                               f"(0, {MAX_LIFETIME_YEARS:g}]")
    if utilization is not None and not 0 <= utilization <= 1:
        raise ArchipelagoError(f"--utilization {utilization:g}: must be in [0, 1]")


def cost(items: Sequence[Item], output_tokens_per_s: float, total_tokens_per_s: float,
         utilization: float, electricity: float, lifetime_years: float
         ) -> dict[str, float | None]:
    """Capital and energy in $/s and $/h, and $ per million output and per million total
    (prompt + output) tokens at the given throughputs."""
    capital = sum(i.count * i.price_usd for i in items)
    power_w = sum(i.count * i.power_w for i in items)
    capital_per_s = capital / (lifetime_years * SECONDS_PER_YEAR)
    energy_per_s = power_w * utilization / 1000 * electricity / 3600
    per_s = capital_per_s + energy_per_s

    def per_million(rate: float) -> float | None:  # None: nothing served, no figure
        return per_s / rate * 1e6 if rate > 0 else None

    return {"capital_usd": capital, "full_power_w": power_w, "utilization": utilization,
            "capital_usd_per_h": capital_per_s * 3600, "energy_usd_per_h": energy_per_s * 3600,
            "usd_per_million_output_tokens": per_million(output_tokens_per_s),
            "usd_per_million_tokens": per_million(total_tokens_per_s)}
