"""Durations a user types (`50ms`, `1s`, `800us`): one parser for every option that takes
one (compare's --latency-target, serve's --ttft and --tpot)."""

import re

from archipelago.errors import ArchipelagoError

UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}


def parse_seconds(option: str, text: str) -> float:
    """Positive seconds from a number and a unit; a one-line error naming `option`."""
    match = re.fullmatch(r"\s*([0-9]{1,9}(?:\.[0-9]{0,9})?)\s*([a-zµ]+)\s*", text.lower())
    if not match or match.group(2) not in UNITS or float(match.group(1)) <= 0:
        raise ArchipelagoError(f"{option} '{text[:40]}': give a positive number and a unit "
                               f"({', '.join(UNITS)}), e.g. 50ms")
    return float(match.group(1)) * UNITS[match.group(2)]
