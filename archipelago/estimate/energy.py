"""Cost and energy of a cluster of identical boards running one generation (issue 22).

Power model: every board draws its stated power for the whole of each phase (prefill and
every decode step), so a generation's energy is boards x watts x latency. The stated power
is a measured average where a paper reports one for that board (`measured_power_w` in the
catalog), else the board's TDP or maximum total power from its datasheet (`power_w`): an
upper bound for a board that is not fully busy, which a memory-bound decode step is not.
Idle power is not modelled: the boards are taken to serve back-to-back requests, so there
is no idle time between generations to charge, and no seed or datasheet gives an idle
figure for these boards under load (DFX §VII measures only averages while generating).
Host CPUs, switches and cooling are left out, as DFX Table II leaves them out of its cost.

Upfront cost is boards x the board's price (`price_usd`, list or street price with its
source and date in the catalog). A device without a power or price figure (a user's
custom device) gives None, printed as "unknown", never a guess.
"""

from dataclasses import dataclass

from archipelago.hardware.catalog import catalog, raw_catalog
from archipelago.hardware.device import Device


@dataclass(frozen=True)
class PowerModel:
    """The power one board is charged while it generates, and where the figure is from."""

    watts: float
    basis: str


def _source(device: Device, field: str) -> str:
    """The catalog's source for `field` of `device` where the figure is the catalog's, else
    a note that the user gave it (a custom device, or one overriding a catalog figure)."""
    known = catalog().get(device.key)
    if known is not None and getattr(known, field) == getattr(device, field):
        return str(raw_catalog()[device.key][field]["source"])
    return f"given in custom device '{device.key}'"


def board_power(device: Device) -> PowerModel | None:
    """A measured average where a paper gives one for the board, else its TDP or maximum
    power; None where the device has neither (a custom device without `power_w`)."""
    if device.measured_power_w is not None:
        return PowerModel(device.measured_power_w,
                          f"measured average, {_source(device, 'measured_power_w')}")
    if device.power_w is not None:
        return PowerModel(device.power_w, f"board TDP / max power, {_source(device, 'power_w')}")
    return None


def board_price(device: Device) -> tuple[float, str] | None:
    """The board's price in US$ and its source; None where the device has none."""
    if device.price_usd is None:
        return None
    return device.price_usd, _source(device, "price_usd")


def energy_j(watts_per_board: float, boards: int, seconds: float) -> float:
    """Joules drawn by `boards` boards at `watts_per_board` each for `seconds`."""
    return watts_per_board * boards * seconds


def joules_per_token(joules: float, output_tokens: int) -> float:
    """Energy over the generation per output token of all sequences (batch x output)."""
    return joules / output_tokens


def upfront_usd(device: Device, boards: int) -> float | None:
    """Accelerators' upfront cost, boards x price (DFX Table II: CPU, memory and storage
    excluded); None where the price is unknown."""
    return None if device.price_usd is None else boards * device.price_usd


def tokens_per_s_per_million_usd(tokens_per_s: float, usd: float | None) -> float | None:
    """DFX Table II's performance / cost (tokens/s per million US$); None if cost unknown."""
    return None if usd is None else tokens_per_s / (usd / 1e6)


@dataclass(frozen=True)
class CostEnergy:
    """One row's cost and energy: None where the device lacks the figure."""

    upfront_usd: float | None
    tokens_per_s_per_million_usd: float | None
    power: PowerModel | None
    energy_j: float | None
    joules_per_token: float | None


def cost_energy(device: Device, boards: int, latency_s: float,
                output_tokens: int) -> CostEnergy:
    """Cost and energy of `boards` x `device` generating `output_tokens` tokens (every
    sequence's, batch x output length) in `latency_s` (prefill plus every decode step)."""
    usd = upfront_usd(device, boards)
    power = board_power(device)
    joules = None if power is None else energy_j(power.watts, boards, latency_s)
    return CostEnergy(
        upfront_usd=usd,
        tokens_per_s_per_million_usd=tokens_per_s_per_million_usd(
            output_tokens / latency_s, usd),
        power=power,
        energy_j=joules,
        joules_per_token=None if joules is None else joules_per_token(joules, output_tokens))
