"""Alpha-beta costs of collectives on the cluster topologies.

`total_bytes` is always the size of the complete result vector (all ranks' parts together),
so callers never have to know how a collective splits it. Each hop costs alpha (latency)
plus bytes / beta (bandwidth).
"""

from collections.abc import Callable

from archipelago.hardware.cluster import Cluster
from archipelago.hardware.device import Link


def _hop(link: Link, nbytes: float) -> float:
    return link.latency_s + nbytes / link.bandwidth_Bps


def ring_all_gather_s(total_bytes: float, ranks: int, link: Link) -> float:
    """Each rank forwards one 1/N part per step around a unidirectional ring: N-1 steps."""
    assert total_bytes >= 0 and ranks >= 1
    if ranks == 1:
        return 0.0
    return (ranks - 1) * _hop(link, total_bytes / ranks)


def ring_all_reduce_s(total_bytes: float, ranks: int, link: Link) -> float:
    """Reduce-scatter then all-gather: 2(N-1) steps of 1/N parts."""
    assert total_bytes >= 0 and ranks >= 1
    return 2 * ring_all_gather_s(total_bytes, ranks, link)


def switch_all_gather_s(total_bytes: float, ranks: int, link: Link, switch_s: float) -> float:
    """Every rank sends its part to the N-1 others through one full-duplex port; the sends
    serialize on that port, and every message crosses the switch once."""
    assert total_bytes >= 0 and ranks >= 1
    if ranks == 1:
        return 0.0
    part = total_bytes / ranks
    return link.latency_s + switch_s + (ranks - 1) * part / link.bandwidth_Bps


def _on_topology(total_bytes: float, cluster: Cluster, ranks: int | None,
                 ring: Callable[[float, int, Link], float], switch_passes: int) -> float:
    """A collective on the cluster's own topology: `ring` on a ring, else `switch_passes`
    all-gather passes through the switch (or host star)."""
    ranks = cluster.size if ranks is None else ranks
    if ranks == 1:
        return 0.0
    assert cluster.link is not None
    if cluster.topology == "ring":
        return ring(total_bytes, ranks, cluster.link)
    return switch_passes * switch_all_gather_s(total_bytes, ranks, cluster.link,
                                               cluster.switch_latency_s)


def all_gather_s(total_bytes: float, cluster: Cluster, ranks: int | None = None) -> float:
    return _on_topology(total_bytes, cluster, ranks, ring_all_gather_s, 1)


def all_reduce_s(total_bytes: float, cluster: Cluster, ranks: int | None = None) -> float:
    """Reduce-scatter then all-gather: twice an all-gather's traffic on either topology."""
    return _on_topology(total_bytes, cluster, ranks, ring_all_reduce_s, 2)
