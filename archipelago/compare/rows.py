"""A comparison's rows: each estimated combination with its upfront cost and energy
(estimate/energy.py: every board draws its stated power for each phase, prefill and the
decode steps; per token is the total over every sequence's output tokens), and the
combinations that were refused or do not fit, with their reasons grouped."""

import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from archipelago.estimate import energy
from archipelago.hardware.catalog import get_device
from archipelago.serving.cost import DEFAULT_ELECTRICITY, DEFAULT_LIFETIME_YEARS, bill, cost


@dataclass(frozen=True)
class Row:
    """One combination that fits: its timing and traits (from the journal record) and its
    cost and energy (from the catalog now); None where the device has no price or power."""

    strategy: str
    device: str
    count: int
    batch: int
    latency_s: float
    tokens_per_s: float
    prefill_s: float
    decode_s_per_token: float
    split: str
    binding: str
    upfront_usd: float | None
    tokens_per_s_per_million_usd: float | None
    watts_per_board: float | None
    prefill_j: float | None
    decode_j: float | None
    joules_per_token: float | None
    shares: dict[str, float] = field(default_factory=dict)
    engine: str = "published"  # the engine it ran: published, or a searched one's label
    precision: str | None = None  # the format asked for; None: the strategy's own
    serving: dict[str, Any] | None = None  # `--rate`: replicas, boards, $/M tokens (served)

    @property
    def usd_per_million_tokens(self) -> float | None:
        """The service's $ per million (prompt + output) tokens; None: not served, or a
        device without a price, power or host."""
        return None if self.serving is None else self.serving.get("usd_per_million_tokens")

    @property
    def label(self) -> str:
        batch = f" batch {self.batch}" if self.batch > 1 else ""
        fmt = "" if self.precision is None else f" {self.precision}"
        return f"{self.strategy} {self.count}x{self.device}{batch}{fmt}"

    def to_dict(self) -> dict[str, Any]:
        """Every field; `precision` only where a format was asked for and `serving` only with
        --rate (without them a row is what it was before they were dimensions)."""
        data = asdict(self)
        for name in ("precision", "serving"):
            if data[name] is None:
                del data[name]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Row":
        """The row of `to_dict`'s object (other keys beside it are left out; a field with
        a default may be absent)."""
        return cls(**{f.name: data[f.name] for f in fields(cls)
                      if f.name in data or f.default is MISSING})


def row_of(record: dict[str, Any], output_tokens: int) -> Row:
    """The row of a fitting combination's journal record, costed for `output_tokens` per
    sequence."""
    device, boards = get_device(record["device"]), record["count"]
    power = energy.board_power(device)
    tokens = record["batch"] * output_tokens
    usd = energy.upfront_usd(device, boards)
    decode_s = record["latency_s"] - record["prefill_s"]
    prefill_j = decode_j = per_token = None
    if power is not None:
        prefill_j = energy.energy_j(power.watts, boards, record["prefill_s"])
        decode_j = energy.energy_j(power.watts, boards, decode_s)
        per_token = energy.joules_per_token(prefill_j + decode_j, tokens)
    return Row(record["strategy"], record["device"], boards, record["batch"],
               record["latency_s"], record["tokens_per_s"], record["prefill_s"],
               record["decode_s_per_token"], record["split"], record["binding"], usd,
               energy.tokens_per_s_per_million_usd(record["tokens_per_s"], usd),
               None if power is None else power.watts, prefill_j, decode_j, per_token,
               dict(record["shares"]), record.get("engine", "published"),
               record.get("precision"), served(record))


def served(record: dict[str, Any]) -> dict[str, Any] | None:
    """A record's serving figures with the boards its replicas take and, priced from the
    catalog now (serving/cost.py: boards and hosts over DEFAULT_LIFETIME_YEARS, energy at
    the confirming simulation's busy share and DEFAULT_ELECTRICITY), the $ per million
    tokens at the rate; `cost_reason` where the catalog cannot price it."""
    figures = record.get("serving")
    if figures is None:
        return None
    replicas = figures["replicas"]
    out = {**figures, "meets": replicas is not None,
           "boards": None if replicas is None else replicas * record["count"],
           "usd_per_million_tokens": None, "usd_per_million_output_tokens": None,
           "capital_usd": None, "cost_reason": None}
    if replicas is None:
        return out
    items, reason = bill([get_device(record["device"])] * out["boards"])
    if reason is not None:
        return {**out, "cost_reason": reason}
    made = figures["output_tokens_per_s"]
    priced = cost(items, made, made + figures["prompt_tokens_per_s"], figures["busy_share"],
                  DEFAULT_ELECTRICITY, DEFAULT_LIFETIME_YEARS)
    return {**out, "capital_usd": priced["capital_usd"],
            "usd_per_million_tokens": priced["usd_per_million_tokens"],
            "usd_per_million_output_tokens": priced["usd_per_million_output_tokens"]}


@dataclass(frozen=True)
class Refusal:
    """Combinations refused (or not fitting) for one reason, the device and cluster names
    in it made general so that one line covers them all."""

    strategy: str
    reason: str
    members: tuple[tuple[str, int, int, str | None], ...]  # (device, count, batch, format)

    def where(self) -> str:
        """`u280, u55c x1,2,4,8; u50 x2` (devices with the same counts together; `batch B`
        where batches differ or are not 1; `in fp16,w4a16`, the formats asked for, where
        the same devices and counts are refused in each)."""
        counts: dict[tuple[str, int, str | None], list[int]] = {}
        for device, count, batch, fmt in self.members:
            counts.setdefault((device, batch, fmt), []).append(count)
        alike: dict[tuple[tuple[int, ...], int, str | None], list[str]] = {}
        for (device, batch, fmt), found in counts.items():
            alike.setdefault((tuple(sorted(found)), batch, fmt), []).append(device)
        formats: dict[tuple[tuple[str, ...], tuple[int, ...], int], list[str | None]] = {}
        for (found, batch, fmt), devices in alike.items():
            formats.setdefault((tuple(devices), found, batch), []).append(fmt)
        batches = {m[2] for m in self.members}
        return "; ".join(f"{', '.join(devices)} x{','.join(map(str, found))}"
                         + (f" batch {b}" if len(batches) > 1 or b > 1 else "")
                         + ("" if fmts == [None] else f" in {','.join(map(str, fmts))}")
                         for (devices, found, b), fmts in formats.items())

    def line(self) -> str:
        return f"{self.strategy} on {self.where()}: {self.reason}"


def _general(reason: str, device: str, count: int) -> str:
    """`reason` with this combination's cluster and device names made placeholders."""
    text = re.sub(rf"\b{count}x{re.escape(device)}\b", "<count>x<device>", reason)
    return re.sub(rf"(?<![\w-]){re.escape(device)}(?![\w-])", "<device>", text)


def _named(general: str, devices: set[str], counts: set[int]) -> str:
    """A grouped reason with the placeholders the whole group shares named again (one
    device: its name; one count too: the cluster)."""
    if len(devices) != 1:
        return general
    (device,) = devices
    if len(counts) == 1:
        general = general.replace("<count>x<device>", f"{next(iter(counts))}x{device}")
    return general.replace("<device>", device)


def group_reasons(failed: list[tuple[dict[str, Any], str]]) -> list[Refusal]:
    """One Refusal per (strategy, reason once generalised); a reason met once keeps its
    names as they were."""
    groups: dict[tuple[str, str], list[tuple[dict[str, Any], str]]] = {}
    for record, reason in failed:
        general = _general(reason, record["device"], record["count"])
        groups.setdefault((record["strategy"], general), []).append((record, reason))
    out = []
    for (strategy, general), items in groups.items():
        shown = _named(general, {r["device"] for r, _ in items}, {r["count"] for r, _ in items})
        out.append(Refusal(strategy, shown, tuple(
            (r["device"], r["count"], r["batch"], r.get("precision")) for r, _ in items)))
    return out


def first_reason(record: dict[str, Any]) -> str:
    """A not-fitting record's reason: its first, and how many more."""
    reasons = record.get("reasons") or ["does not fit"]
    more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
    return reasons[0] + more
