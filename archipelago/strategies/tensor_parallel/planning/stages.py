"""A tensor x pipeline split (`--split`) and its layer boundaries balanced by time.

`tp` boards of one ring run each stage as tensor parallel (the single-ring plan); `pp`
stages run the layers in order, the first also the embedding, the last the final norm and
LM head. `ep` places a mixture of experts inside each stage's ring (experts.py): 1 splits
every expert's columns across the ring, `tp` gives each board E / tp whole experts; left
out, the planner costs both and keeps the faster.
"""

import heapq
import math
import re
from dataclasses import dataclass
from functools import lru_cache

from archipelago.errors import ArchipelagoError

# The keys `--split` takes besides `auto`.
SPLIT_KEYS = ("tp", "pp", "layers", "ep")
_HELP = "--split takes auto or tp=T,pp=P[,layers=A+B+...][,ep=E] (e.g. tp=4,pp=8,ep=4)"


@dataclass(frozen=True)
class Split:
    """`tp` boards per stage, `pp` stages; `layers` the layer count of each stage (None:
    balanced by estimated time when planned); `ep` boards of a stage sharing out whole
    experts (1: every expert's columns split over the `tp` boards; None: the planner's
    choice)."""

    tp: int
    pp: int
    layers: tuple[int, ...] | None = None
    ep: int | None = None


def _whole(key: str, text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,6}", text) or int(text) < 1:
        raise ArchipelagoError(f"--split {key}={text[:24]!r}: must be a whole number >= 1; "
                               f"{_HELP}")
    return int(text)


def parse_split(text: str | None) -> Split | str | None:
    """None (the cluster's own shape: one ring runs tensor parallel alone, several rings are
    split automatically), "auto", or the user's Split; a one-line error names the bad part
    and the valid forms."""
    if text is None or not text.strip():
        return None
    text = text.strip().lower()
    if text == "auto":
        return "auto"
    given: dict[str, str] = {}
    for part in text.split(","):
        key, eq, value = (p.strip() for p in part.partition("="))
        if not eq or key not in SPLIT_KEYS:
            raise ArchipelagoError(f"--split: '{part.strip()[:24]}' is not one of "
                                   f"{', '.join(k + '=' for k in SPLIT_KEYS)}; {_HELP}")
        if key in given:
            raise ArchipelagoError(f"--split: {key} given twice; {_HELP}")
        given[key] = value
    if "tp" not in given or "pp" not in given:
        raise ArchipelagoError(f"--split '{text[:40]}': give both tp= and pp=; {_HELP}")
    tp, pp = _whole("tp", given["tp"]), _whole("pp", given["pp"])
    layers = None
    if "layers" in given:
        layers = tuple(_whole("layers", n) for n in given["layers"].split("+"))
        if len(layers) != pp:
            raise ArchipelagoError(f"--split layers={given['layers'][:40]}: {len(layers)} "
                                   f"stage(s) for pp={pp}; give one count per stage")
    ep = _whole("ep", given["ep"]) if "ep" in given else None
    return Split(tp, pp, layers, ep)


def stage_seconds(counts: tuple[int, ...], layer_s: float, first_s: float,
                  last_s: float) -> list[float]:
    """Each stage's time: its layers, plus the embedding on the first, the output on the
    last."""
    times = [n * layer_s for n in counts]
    times[0] += first_s
    times[-1] += last_s
    return times


def balanced_layers(layers: int, stages: int, layer_s: float, first_s: float,
                    last_s: float) -> tuple[int, ...]:
    """Layer counts (each >= 1) minimizing the slowest stage, layers costing `layer_s`
    each, the first stage also `first_s`, the last `last_s` (stages in a row set the rate
    of a pipelined stream). The bottleneck is the least candidate n x layer_s + extra that
    every stage can meet with all layers placed (bisection over the sorted candidates, the
    same for every stage count past two: a split search asks for many); the excess is then
    taken from the slowest stages, the later one first on a tie."""
    if not 1 <= stages <= layers:
        raise ValueError(f"{stages} stages for {layers} layers")
    if stages == 1:
        return (layers,)
    extras = [0.0] * stages
    extras[0] += first_s
    extras[-1] += last_s
    if layer_s <= 0:  # nothing to balance by: even counts
        base, more = divmod(layers, stages)
        return tuple(base + (s < more) for s in range(stages))
    kinds = sorted(set(extras))  # each distinct extra: its stages share one capacity

    def capacity(bound: float) -> dict[float, int]:
        # a relative tolerance keeps a bound equal to n x layer_s + extra at n layers
        return {e: math.floor((bound - e) / layer_s * (1 + 1e-12) + 1e-9) for e in kinds}

    def feasible(bound: float) -> bool:
        caps = capacity(bound)
        return min(caps.values()) >= 1 and sum(caps[e] for e in extras) >= layers

    candidates = _bounds(layers, layer_s, tuple(kinds))
    low, high = 0, len(candidates) - 1
    while low < high:
        mid = (low + high) // 2
        if feasible(candidates[mid]):
            high = mid
        else:
            low = mid + 1
    caps = capacity(candidates[low])
    counts = [min(caps[e], layers - stages + 1) for e in extras]
    # the slowest first, the later on a tie; a stage down to one layer is never taken
    slowest = [(-(n * layer_s + e), -s) for s, (n, e) in enumerate(zip(counts, extras,
                                                                      strict=True)) if n > 1]
    heapq.heapify(slowest)
    for _ in range(sum(counts) - layers):
        _, s = heapq.heappop(slowest)
        counts[-s] -= 1
        if counts[-s] > 1:
            heapq.heappush(slowest, (-(counts[-s] * layer_s + extras[-s]), s))
    return tuple(counts)


@lru_cache(maxsize=256)
def _bounds(layers: int, layer_s: float, extras: tuple[float, ...]) -> tuple[float, ...]:
    """Every stage time a bottleneck can take, sorted: n x layer_s + extra, n in 1..layers."""
    return tuple(sorted({n * layer_s + e for e in extras for n in range(1, layers + 1)}))
