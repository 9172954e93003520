"""Host <-> card transfers over PCIe (seeds/003 §IV, *API primitives*, Fig. 4b).

Every card sits on its own physical PCIe link (the cluster's `host_link(i)`), so transfers
to several cards run at the same time: the slowest link sets the time, and the host's share
of issuing them (software, descriptors, its memory) stretches it by a factor that grows with
the card count. One transfer costs the host's issue time plus the link's alpha-beta time.
"""

from collections.abc import Sequence
from functools import cache

from archipelago.hardware.catalog import get_link
from archipelago.hardware.link import Link

# seeds/003 §IV: "for smaller payload sizes less than 32 KB ... sending/receiving data to/
# from four FPGAs takes only 1.2-1.4x higher latency than to/from a single FPGA, and can all
# be done in less than 8 us" (measured on the 4 x A10 PAC prototype, PCIe Gen3 x8).
# The constants below are derived from that sentence, the only calibration of this model:
# four cards cost the midpoint 1.3x of one, i.e. 0.1x more per extra card; and a 32 KiB
# transfer to four A10 PACs takes the stated 8 us bound, so one card takes 8 us / 1.3 =
# 6.15 us, of which 32 KiB / 7.877 GB/s = 4.16 us is the wire: 1.99 us fixed, the Gen3 x8
# link's own latency (catalog.yaml) and the host's issue time, the rest.
EXTRA_CARD_FACTOR = 0.3 / 3
_A10_PAC_Bps = 7.877e9
TRANSFER_LATENCY_S = 8e-6 / (1 + 3 * EXTRA_CARD_FACTOR) - 32 * 1024 / _A10_PAC_Bps
_CALIBRATION_LINK = "pcie3-x8"


@cache
def host_issue_s() -> float:
    """The host's fixed time to issue one transfer: seeds/003's fixed cost less the
    latency of the link it was measured on."""
    return TRANSFER_LATENCY_S - get_link(_CALIBRATION_LINK).latency_s


def transfer_s(link: Link, nbytes: int) -> float:
    """One transfer of `nbytes` to or from a card on `link`, issued by the host."""
    return host_issue_s() + link.latency_s + nbytes / link.bandwidth_Bps


def concurrent_s(transfers: Sequence[tuple[Link, int]]) -> float:
    """Transfers issued together, one per card: the slowest, stretched by the host's issue
    share for each further card. Two transfers to the same card would serialize: pass
    them as one."""
    if not transfers:
        return 0.0
    slowest = max(transfer_s(link, nbytes) for link, nbytes in transfers)
    return slowest * (1 + EXTRA_CARD_FACTOR * (len(transfers) - 1))
