"""The forms a user names a cluster in, each a registered family (archipelago/families.py):
`NxDEVICE` shorthand (`4xu280`; `RxNxDEVICE`, R such groups joined by a 100G switch), a
built-in cluster (`hacc`, `chef-cluster1`..3) and a path to a cluster YAML file
(hardware/cluster_file.py gives its format). `resolve_cluster` tries them in that order.
The one cluster type they all give is hardware/machines.Cluster.
"""

import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

from archipelago import refs
from archipelago.errors import ArchipelagoError, elide
from archipelago.families import CatalogTable, Family, register_family, resolve
from archipelago.hardware.catalog import catalog, get_device
from archipelago.hardware.machines import (
    MAX_DEVICES,
    SWITCH_TO_SWITCH_LATENCY_S,
    Cluster,
    Topology,
    host_link_of,
    make_node,
    ports_link,
    repeated,
    switch_port_link,
    switched_link,
)
from archipelago.safe_read import probe

__all__ = ["MAX_DEVICES", "Cluster", "parse_shorthand", "resolve_cluster"]
# Cluster files, built-in or a user's, are read by cluster_file.py, imported when a name is
# one (`NxDEVICE` needs only the catalog).
_FILES = "archipelago.hardware.cluster_file"
_builtin_names = refs.lazy(f"{_FILES}:builtin_clusters")
_load_builtin = refs.lazy(f"{_FILES}:load_builtin")

_SHORTHAND = re.compile(r"^(?:([0-9]+)x)?([0-9]+)x([a-z0-9_.-]+)$", re.IGNORECASE)


def _count(text: str, digits: str, what: str) -> int:
    digits = digits.lstrip("0") or "0"
    if not 1 <= len(digits) <= len(str(MAX_DEVICES)) or not 1 <= int(digits) <= MAX_DEVICES:
        raise ArchipelagoError(f"cluster '{text}': {what} {digits[:24]} is out of range "
                               f"1..{MAX_DEVICES}")
    return int(digits)


def parse_shorthand(text: str) -> Cluster | None:
    """`NxDEVICE`: N identical devices. FPGAs with two ports form an Aurora ring as in DFX;
    with one port they hang off 100G switches, chained switch to switch, as Galapagos
    deploys them (seeds/000 §8.1, Fig. 17); without ports they sit on the host's PCIe.
    `RxNxDEVICE`: R such groups of N, each group reaching a 100G switch through one port
    (machines.RING_SWITCH): rings for tensor parallel, the switch between stages. GPUs'
    NVLink and FPGAs' Aurora are their ports' catalog links (machines.ports_link)."""
    match = _SHORTHAND.match(text.strip())
    if not match:
        return None
    if re.match(r"[0-9]+x", match.group(3), re.IGNORECASE):  # 2x2x2xu280: not '2xu280'
        counts = re.match(r"(?:[0-9]+x)+", text.strip(), re.IGNORECASE)
        given = len(re.findall(r"[0-9]+x", counts[0] if counts else "", re.IGNORECASE))
        raise ArchipelagoError(f"cluster '{elide(text.strip())}' gives {given} counts; a "
                               "cluster is spelt NxDEVICE (4xu280: N devices) or RxNxDEVICE "
                               "(8x4xu280: R rings of N)")
    rings = _count(text, match.group(1), "ring count") if match.group(1) else 1
    per_ring, key = _count(text, match.group(2), "device count"), match.group(3).lower()
    if rings * per_ring > MAX_DEVICES:
        raise ArchipelagoError(f"cluster '{text}': {rings} x {per_ring} devices exceed the "
                               f"limit of {MAX_DEVICES}")
    device = get_device(key)
    nodes = repeated(make_node(device, device.key), rings * per_ring)
    between = {"rings": rings, "inter_ring_link": switch_port_link()} if rings > 1 else {}
    ports = device.network.ports if device.network is not None else 0
    if ports == 1:
        return Cluster(name=text, nodes=nodes, topology="switch",
                       ring_link=switched_link(device),
                       switch_latency_s=SWITCH_TO_SWITCH_LATENCY_S, **between)
    link = ports_link(device) if ports else host_link_of(device)
    topology: Topology = "ring" if ports else "host_star"
    return Cluster(name=text, nodes=nodes, topology=topology, ring_link=link, **between)


# The catalog is package data, read once (hardware/catalog.py); a cluster is frozen.
@lru_cache(maxsize=128)
def _shorthand(text: str) -> Cluster:
    cluster = parse_shorthand(text)
    assert cluster is not None  # the family's `matches` said it is shorthand
    return cluster


def _is_cluster_file(text: str) -> bool:
    # an empty name is no path: Path("") is the working directory
    path = Path(text)
    return bool(text.strip()) and (path.suffix in {".yaml", ".yml"}
                                   or probe(path, "cluster") is not None)


def _mix(cluster: Cluster) -> str:
    """The devices of a cluster as shorthand groups, in order of first appearance."""
    return " + ".join(f"{n}x{key}" for key, n in Counter(d.key for d in cluster.devices).items())


def _network(cluster: Cluster) -> str:
    if cluster.size == 1 or cluster.ring_link is None:
        return "-"
    pair = min(cluster.pair_Bps(i, j) for i in range(cluster.size)
               for j in range(i + 1, cluster.size))
    relay = ", host relay" if cluster.host_relay else ""
    return f"{cluster.topology}{relay}, {pair / 1e9:g} GB/s per pair"


def _builtin_table() -> CatalogTable:
    clusters = {name: _load_builtin(name) for name in _builtin_names()}
    return CatalogTable("clusters", "built-in clusters (or NxDEVICE, or a cluster YAML file)",
                        ("name", "devices", "device mix", "link"),
                        {name: (c.size, _mix(c), _network(c)) for name, c in clusters.items()})


register_family(Family(
    "cluster-shorthand", "cluster", lambda text: _SHORTHAND.match(text.strip()) is not None,
    _shorthand, lambda: ["NxDEVICE (e.g. 4xu280; RxNxDEVICE: R rings, e.g. 8x4xu280; "
                         f"DEVICE: {len(catalog())} in `archi catalog`)"],
    order=10))
register_family(Family(
    "cluster-builtin", "cluster", lambda text: text in _builtin_names(), _load_builtin,
    _builtin_names, _builtin_table, order=20))
register_family(Family(
    "cluster-file", "cluster", _is_cluster_file,
    lambda text: refs.lazy(f"{_FILES}:load_cluster_file")(Path(text)),
    lambda: ["<cluster YAML path>"], order=30))


def resolve_cluster(text: str) -> Cluster:
    """The cluster `text` names: shorthand, a built-in name or a YAML path (first match)."""
    return resolve("cluster", text)
