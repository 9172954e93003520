"""Ranking a comparison's rows, its Pareto front on latency x upfront cost, and the rows
meeting a latency target. Rows whose device has no price (or power) are ranked after the
others by a cost (energy) sort and take no part in the front: an unknown is not a zero."""

import math
from collections.abc import Callable

from archipelago.compare.rows import Row

# Each sort: the figure, and whether larger is better.
_SORTS: dict[str, tuple[Callable[[Row], float | None], bool]] = {
    "latency": (lambda r: r.latency_s, False),
    "cost": (lambda r: r.upfront_usd, False),
    "tokens-per-dollar": (lambda r: r.tokens_per_s_per_million_usd, True),
    "joules-per-token": (lambda r: r.joules_per_token, False),
    # --rate: the service's cost among rows meeting the targets (the others have none)
    "usd-per-million-tokens": (lambda r: r.usd_per_million_tokens, False),
}


def ranked(rows: list[Row], sort: str) -> list[Row]:
    """Best first by `sort` (request.SORTS); unknown figures last; ties by latency, then by
    the row's label so the order is the same on every run."""
    figure, larger = _SORTS[sort]

    def key(row: Row) -> tuple[bool, float, float, str]:
        value = figure(row)
        known = value is not None
        shown = (-value if larger else value) if value is not None else math.inf
        return (not known, shown, row.latency_s, row.label)

    return sorted(rows, key=key)


def pareto_front(rows: list[Row]) -> list[Row]:
    """The rows of known cost that no other such row beats on latency and upfront cost
    (at least as good on both, better on one), cheapest first: one sweep by cost keeping
    every row faster than all cheaper ones; rows equal on both are on it together."""
    priced = sorted((r for r in rows if r.upfront_usd is not None),
                    key=lambda r: (r.upfront_usd, r.latency_s, r.label))
    front: list[Row] = []
    best = math.inf  # the lowest latency among rows strictly cheaper than the current one
    i = 0
    while i < len(priced):
        usd = priced[i].upfront_usd
        same = [r for r in priced[i:] if r.upfront_usd == usd]
        fastest = min(r.latency_s for r in same)
        if fastest < best:
            front.extend(r for r in same if r.latency_s == fastest)
            best = fastest
        i += len(same)
    return front


def meeting(rows: list[Row], target_s: float) -> list[Row]:
    return [r for r in rows if r.latency_s <= target_s]


def cheapest_meeting(rows: list[Row], target_s: float) -> Row | None:
    """The lowest upfront cost among rows within the target (the faster on a tie); None if
    no row of known cost meets it."""
    priced = [r for r in meeting(rows, target_s) if r.upfront_usd is not None]
    return min(priced, key=lambda r: (r.upfront_usd, r.latency_s, r.label), default=None)
