"""The fixed-point format a CHEF/H2H build's hls4ml projects compute in (`archi build
--hls-precision`, the engine config's `hls_precision`): read by the plan's config, so it is
checked before any work, and by the emitter (emit/config.py), which writes it."""

import re

from archipelago.errors import ArchipelagoError

DEFAULT_PRECISION = "ap_fixed<16,6>"  # hls4ml's default precision (its docs, "Precision")
_FIXED = re.compile(r"^ap_fixed<(\d+),\s*(-?\d+)>$")


def fixed_bits(precision: str) -> tuple[int, int]:
    """(width, integer bits) of an `ap_fixed<W,I>`; anything else is a one-line refusal."""
    found = _FIXED.match(precision.strip())
    if not found or not 1 < int(found[1]) <= 32 or not 0 < int(found[2]) < int(found[1]):
        raise ArchipelagoError(f"hls_precision {precision!r}: give ap_fixed<W,I> with "
                               "1 < W <= 32 and 0 < I < W (e.g. ap_fixed<16,6>)")
    return int(found[1]), int(found[2])
