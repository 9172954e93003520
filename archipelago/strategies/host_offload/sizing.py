"""Server sizing with the modelling tool (seeds/003 §III): the fewest cards of a type that
meet a latency target, and the largest model that stays persistent on a set of cards.

Both lean on one monotone fact: a card's share of every matrix only shrinks as cards are
added and only grows as the model widens, so "fits on chip" flips once along either axis
and is found by bisection; latency is not monotone in the card count (more cards, more
transfers) and is scanned upward from the first count that fits.
"""

from collections.abc import Callable
from dataclasses import dataclass

from archipelago.hardware.cluster import Cluster, parse_shorthand
from archipelago.models.recurrent import RecurrentSpec
from archipelago.strategies.host_offload.estimate import HostEstimate, estimate_host
from archipelago.strategies.host_offload.layout import WeightsMode, make_layout
from archipelago.strategies.host_offload.npu_overlay import NPUConfig, npu_design
from archipelago.strategies.host_offload.plan import feasibility, make_host_plan
from archipelago.strategies.host_offload.proxies import CPUProfile

MAX_CARDS = 16  # PCIe slots of a 2-socket server such as the R740 (seeds/003 Table II)


def cards_of(device: str, count: int) -> Cluster:
    cluster = parse_shorthand(f"{count}x{device}")
    assert cluster is not None
    return cluster


def fits(spec: RecurrentSpec, cluster: Cluster, weights: WeightsMode = "persistent",
         engine: NPUConfig | None = None) -> bool:
    """Whether the weights fit as asked, from the layout alone (nothing recorded)."""
    designs = tuple(npu_design(d, engine) for d in cluster.devices)
    return not feasibility(make_layout(spec, cluster.size, weights), designs)


def first_true(lo: int, hi: int, test: Callable[[int], bool]) -> int | None:
    """Smallest x in [lo, hi] with test(x), for a test that is False then True."""
    if not test(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if test(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class Sizing:
    device: str
    cards: int | None
    estimate: HostEstimate | None


def fewest_cards(spec: RecurrentSpec, device: str, target_s: float, steps: int,
                 profile: CPUProfile, weights: WeightsMode = "persistent",
                 engine: NPUConfig | None = None, max_cards: int = MAX_CARDS) -> Sizing:
    """The fewest cards of `device` whose plan fits and meets `target_s`."""
    first = first_true(1, max_cards, lambda n: fits(spec, cards_of(device, n), weights, engine))
    for n in range(first or max_cards + 1, max_cards + 1):
        plan = make_host_plan(spec, cards_of(device, n), steps, weights, engine=engine)
        est = estimate_host(plan, profile)
        if est.latency_s <= target_s:
            return Sizing(device, n, est)
    return Sizing(device, None, None)


def largest_persistent(build: Callable[[int], RecurrentSpec], cluster: Cluster,
                       granularity: int = 16, engine: NPUConfig | None = None) -> int | None:
    """The largest hidden size (a multiple of `granularity`) whose model `build(hidden)`
    stays persistent on `cluster`; None when even the smallest does not."""
    def fit(k: int) -> bool:
        return fits(build(k * granularity), cluster, "persistent", engine)

    if not fit(1):
        return None
    hi = 2
    while fit(hi):
        hi *= 2
    # fit(hi // 2) holds and fit(hi) does not: the last fitting k is one before the first
    # k in (hi // 2, hi] that fails.
    first_fail = first_true(hi // 2 + 1, hi, lambda k: not fit(k))
    assert first_fail is not None
    return (first_fail - 1) * granularity
