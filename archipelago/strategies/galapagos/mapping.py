"""Map kernels to FPGAs and FPGAs to Galapagos clusters.

Kernels are packed first-fit in stream order under a utilization cap, a group (a head's
dot-product and softmax-matmul kernels, which exchange the M x M probabilities) always onto
one FPGA. Given more FPGAs than the cap needs, a cluster's kernels are spread over its
share of them (seeds/000 §8.2 gives each encoder six) by lowering the cap until first fit
uses that many. An FPGA belongs to one cluster; each cluster holds whole encoders when
their kernels fit the 256-ID space, otherwise an encoder's FPGAs are cut into several
clusters in stream order.
"""

from collections.abc import Sequence
from functools import lru_cache

Cost = tuple[int, ...]  # (DSP, BRAM, URAM) of one group of kernels
_BISECTIONS = 24


@lru_cache(maxsize=64)
def first_fit(costs: tuple[Cost, ...], capacity: tuple[float, ...]) -> tuple[tuple[int, ...], ...]:
    """Group indices per FPGA: each group goes to the first FPGA where it still fits.
    Identical encoders have identical `costs`, so each shape is packed once."""
    bins: list[list[int]] = []
    used: list[list[int]] = []
    for g, need in enumerate(costs):
        for i, have in enumerate(used):
            if all(h + n <= c for h, n, c in zip(have, need, capacity, strict=True)):
                bins[i].append(g)
                used[i] = [h + n for h, n in zip(have, need, strict=True)]
                break
        else:
            bins.append([g])
            used.append(list(need))
    return tuple(tuple(b) for b in bins)


def next_fit(costs: tuple[Cost, ...], capacity: tuple[float, ...]) -> tuple[tuple[int, ...], ...]:
    """Consecutive runs of groups per FPGA (stream order kept, a new FPGA when full)."""
    bins: list[list[int]] = []
    used: list[float] = []
    for g, need in enumerate(costs):
        total = [u + n for u, n in zip(used, need, strict=True)] if bins else None
        if total is not None and all(x <= c for x, c in zip(total, capacity, strict=True)):
            bins[-1].append(g)
            used = total
        else:
            bins.append([g])
            used = list(need)
    return tuple(tuple(b) for b in bins)


@lru_cache(maxsize=64)
def spread(costs: tuple[Cost, ...], device: Cost, cap: float,
           fpgas: int) -> tuple[tuple[int, ...], ...]:
    """Consecutive runs over at most `fpgas` FPGAs at the lowest cap that allows it (the
    classic linear partition), or first fit at `cap` when runs cannot get that few."""
    if len(next_fit(costs, tuple(cap * d for d in device))) > fpgas:
        return first_fit(costs, tuple(cap * d for d in device))
    low, high = 0.0, cap
    for _ in range(_BISECTIONS):
        mid = (low + high) / 2
        if len(next_fit(costs, tuple(mid * d for d in device))) <= fpgas:
            high = mid
        else:
            low = mid
    return next_fit(costs, tuple(high * d for d in device))


def cut_clusters(bins: Sequence[Sequence[str]], budget: int) -> list[list[int]]:
    """Consecutive FPGAs (indices into `bins`) per cluster, at most `budget` kernels each."""
    clusters: list[list[int]] = [[]]
    count = 0
    for i, kernels in enumerate(bins):
        if clusters[-1] and count + len(kernels) > budget:
            clusters.append([])
            count = 0
        clusters[-1].append(i)
        count += len(kernels)
    return clusters


def fpga_address(index: int) -> tuple[str, str]:
    """(IPv4, MAC) of FPGA `index` on the build's private network (locally administered
    MACs, 10/8 addresses)."""
    n = index + 1
    octets = (n >> 16 & 255, n >> 8 & 255, n & 255)
    return "10.{}.{}.{}".format(*octets), "02:00:00:{:02x}:{:02x}:{:02x}".format(*octets)
