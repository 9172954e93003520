"""Host <-> card transfers over PCIe (seeds/003 §IV, *API primitives*, Fig. 4b).

Every card sits on its own physical PCIe link, so transfers to several cards run at the
same time: the slowest link sets the time, and the host's share of issuing them (software,
descriptors, its memory) stretches it by a factor that grows with the card count.
"""

from collections.abc import Sequence
from dataclasses import dataclass

# seeds/003 §IV: "for smaller payload sizes less than 32 KB ... sending/receiving data to/
# from four FPGAs takes only 1.2-1.4x higher latency than to/from a single FPGA, and can all
# be done in less than 8 us" (measured on the 4 x A10 PAC prototype, PCIe Gen3 x8).
# The two constants below are derived from that sentence, the only calibration of this
# model: four cards cost the midpoint 1.3x of one, i.e. 0.1x more per extra card; and a
# 32 KiB transfer to four A10 PACs takes the stated 8 us bound, so one card takes
# 8 us / 1.3 = 6.15 us, of which 32 KiB / 7.877 GB/s = 4.16 us is the wire: 1.99 us fixed.
EXTRA_CARD_FACTOR = 0.3 / 3
_A10_PAC_Bps = 7.877e9
TRANSFER_LATENCY_S = 8e-6 / (1 + 3 * EXTRA_CARD_FACTOR) - 32 * 1024 / _A10_PAC_Bps


@dataclass(frozen=True)
class PCIeLink:
    """One card's link: fixed cost per transfer and payload bandwidth."""

    bandwidth_Bps: float
    latency_s: float = TRANSFER_LATENCY_S

    def transfer_s(self, nbytes: int) -> float:
        return self.latency_s + nbytes / self.bandwidth_Bps


def concurrent_s(transfers: Sequence[tuple[PCIeLink, int]]) -> float:
    """Transfers issued together, one per card: the slowest, stretched by the host's issue
    share for each further card. Two transfers to the same card would serialize: pass
    them as one."""
    if not transfers:
        return 0.0
    slowest = max(link.transfer_s(nbytes) for link, nbytes in transfers)
    return slowest * (1 + EXTRA_CARD_FACTOR * (len(transfers) - 1))
