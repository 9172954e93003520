"""Cluster YAML files: one format for every cluster, of which the two older ones are special
cases that keep loading. Numbers may be written `{value, source}` like the catalog.

    name: hacc                   # optional; default: the file's name without .yaml
    nodes:                       # the devices, in order (at least one, at most 4,096 in all)
      - device: u280             # a catalog key (`archi catalog`) or a key of custom_devices
        name: u280               # optional; default DEVICE_i (i: its position); unique
        count: 1                 # optional: this many identical nodes (named NAME_k)
        clock_mhz: 200           # optional; default: the catalog clock, else 200 MHz
        resources: {dsp: 9024}   # optional: replaces these of the catalog's resources
        host_link: pcie4-x16     # optional: its PCIe link to the host, by name or as `link`
        banks:                   # optional; default: one per HBM (else DDR) channel
          count: 32              #   1..1024
          size_bytes: 268435456  #   default: the memory's capacity / count
          bandwidth_gbytes_s: 12 #   GB/s (1e-3..1e5); default: min(channel's share, 64 B x clock)
    topology: switch             # ring | switch | host_star (default ring)
    link:                        # every hop; default: the first device's ports, else PCIe
      latency_ns: 300            #   0 or 1e-3..1e9 (1 ps .. 1 s)
      bandwidth_gbps: 100        #   Gb/s, or bandwidth_gbytes_s in GB/s (exactly one):
                                 #   1 MB/s .. 10 TB/s
      encoding: 64b66b           #   none | 8b10b | 64b66b | 128b130b (hardware/link.py)
                                 # or a catalog link or switch by name: `link: nvlink4`
    switch_latency_ns: 1100      # between switches (Galapagos' d); default 0
    rings: 8                     # optional: the nodes, in order, as 8 equal rings (default 1)
    inter_ring_link:             # between rings; default: a 100G switch port (machines.py)
      latency_ns: 85             #   the same fields as `link`
      bandwidth_gbps: 100
    host_relay: false            # pairs talk through host memory at half their bandwidth
    pairs:                       # optional BW_inter of named pairs (CHEF), else the link's
      - {a: u280, b: u250, bandwidth_gbytes_s: 3}
    custom_devices: {}           # devices beside the catalog, in the catalog's format
    host_profile: cpu.json       # the host CPU's proxy profile, relative to this file

Numbers are strict: `true` or `"16"` where a number goes is an error naming the field.

The older spellings: `devices: [{device, count}]` for `nodes` (today's rings and switches),
and CHEF's `fpgas: [{name, device, freq_mhz, dsp, bram, banks}]` with `p2p_gbps` (GB/s),
`host_relay` and `pairs: [{a, b, gbps}]`, which is read as the nodes above on a `switch`
(`host_star` when relayed) whose link has the P2P bandwidth and no latency (seeds/004 §III
costs a transfer its size over BW_inter).
"""

from functools import cache
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from archipelago.errors import ConfigError, UnknownNameError, elide, some_choices
from archipelago.hardware.catalog import catalog, device_from_dict, get_link, unwrap_sourced
from archipelago.hardware.device import MAX_CHANNELS
from archipelago.hardware.link import ENCODINGS, Encoding, Link, line_Bps
from archipelago.hardware.machines import (
    GB,
    MAX_DEVICES,
    Cluster,
    MAX_BANK_Bps,
    MAX_LINK_Bps,
    MIN_LINK_Bps,
    Node,
    Topology,
    default_link,
    make_node,
    switch_port_link,
)
from archipelago.names import Name
from archipelago.safe_read import load_mapping
from archipelago.yaml_loader import load_packaged

# Bounds of a user's file, far past any board (a U280 has 32 HBM banks at 14 GB/s, 9,024
# DSPs; a VU19P 9 M LUTs): they stop typos before a bank count of 10^30 becomes zero-sized
# banks or a resource count overflows a solver.
_MAX_BANKS = MAX_CHANNELS  # a bank per channel by default; as many when given
_MAX_RESOURCE = 2**30
_MAX_PAIRS = 2**16  # every pair of 362 nodes (CHEF plans on at most 256)
# A link's bandwidth, 1 MB/s to 10 TB/s (machines.MIN_LINK_Bps, MAX_LINK_Bps, which say why),
# in the two units a file may use: GB/s and Gb/s (8 bits a byte); a bank's up to 100 TB/s.
_MIN_GBYTES_S, _MAX_GBYTES_S = MIN_LINK_Bps / GB, MAX_LINK_Bps / GB
_MIN_GBPS, _MAX_GBPS = 8 * _MIN_GBYTES_S, 8 * _MAX_GBYTES_S
# A hop's latency: none (CHEF's transfers, seeds/004 §III), else at least a picosecond (light
# crosses 0.3 mm in one; anything shorter is a typo or a denormal like 5e-324, which turns
# a size over a time into infinity) and at most a second (a WAN round trip is ~0.1 s).
_MIN_LATENCY_NS, _MAX_LATENCY_NS = 1e-3, 1e9


def _zero_or_resolvable(latency_ns: float) -> float:
    if 0 < latency_ns < _MIN_LATENCY_NS:
        raise ValueError(f"{latency_ns!r} ns is below a picosecond: give 0 (no latency) or "
                         f"{_MIN_LATENCY_NS:g}..{_MAX_LATENCY_NS:g} ns")
    return latency_ns


LatencyNs = Annotated[float, Field(ge=0, le=_MAX_LATENCY_NS),
                      AfterValidator(_zero_or_resolvable)]


class _Spec(BaseModel):
    # strict: a number written `true` or `"16"` is an error naming the field, not 1 or 16
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class _Bandwidth(_Spec):
    """Exactly one of Gb/s (as network ports are quoted) or GB/s (as CHEF quotes P2P)."""

    bandwidth_gbps: float | None = Field(default=None, ge=_MIN_GBPS, le=_MAX_GBPS)
    bandwidth_gbytes_s: float | None = Field(default=None, ge=_MIN_GBYTES_S, le=_MAX_GBYTES_S)

    @model_validator(mode="after")
    def _exactly_one(self) -> "_Bandwidth":
        if (self.bandwidth_gbps is None) == (self.bandwidth_gbytes_s is None):
            raise ValueError("give exactly one of bandwidth_gbps (Gb/s) and "
                             "bandwidth_gbytes_s (GB/s)")
        return self

    def bandwidth_Bps(self, encoding: Encoding = "none") -> float:
        if self.bandwidth_gbps is not None:
            return line_Bps(self.bandwidth_gbps, encoding)
        assert self.bandwidth_gbytes_s is not None  # _exactly_one
        return self.bandwidth_gbytes_s * ENCODINGS[encoding] * GB


class _Link(_Bandwidth):
    """A hop's alpha-beta parameters; a line code (Aurora's 64b/66b costs 2 bits in 66)
    takes its share of the bandwidth given."""

    latency_ns: LatencyNs
    encoding: Encoding = "none"

    def to_link(self) -> Link:
        return Link(latency_s=self.latency_ns * 1e-9, bandwidth_Bps=self.bandwidth_Bps(
            self.encoding))


_LinkField = _Link | Annotated[str, Field(max_length=200)]


def _named_link(given: _Link | str | None, source: str, field: str) -> Link | None:
    """A link as written: its figures, or a catalog link or switch by name."""
    if given is None or isinstance(given, _Link):
        return None if given is None else given.to_link()
    try:
        return get_link(given)
    except UnknownNameError as err:
        raise ConfigError(source, field, str(err)) from None


class _Banks(_Spec):
    """A node's DRAM banks (seeds/004 §VI: per FPGA its banks' count, size, bandwidth)."""

    count: int | None = Field(default=None, gt=0, le=_MAX_BANKS)
    size_bytes: int | None = Field(default=None, gt=0, le=2**50)
    bandwidth_gbytes_s: float | None = Field(default=None, ge=_MIN_GBYTES_S,
                                             le=MAX_BANK_Bps / GB)


class _Resources(_Spec):
    """Fabric resources replacing the catalog's (hardware/device.Resources)."""

    dsp: int | None = Field(default=None, ge=0, le=_MAX_RESOURCE)
    bram: int | None = Field(default=None, ge=0, le=_MAX_RESOURCE)
    uram: int | None = Field(default=None, ge=0, le=_MAX_RESOURCE)
    lut: int | None = Field(default=None, ge=0, le=_MAX_RESOURCE)
    ff: int | None = Field(default=None, ge=0, le=_MAX_RESOURCE)
    aie: int | None = Field(default=None, ge=0, le=_MAX_RESOURCE)


class _Node(_Spec):
    """`count` identical devices of the catalog (or `custom_devices`)."""

    device: str = Field(max_length=200)
    name: Name | None = None
    count: int = Field(default=1, ge=1, le=MAX_DEVICES)
    clock_mhz: float | None = Field(default=None, ge=1, le=2000)
    resources: _Resources = _Resources()
    banks: _Banks = _Banks()
    host_link: _LinkField | None = None


class _Pair(_Bandwidth):
    """BW_inter of two named nodes (seeds/004 (3)), before a host relay halves it."""

    a: str = Field(max_length=200)
    b: str = Field(max_length=200)


class ClusterFile(_Spec):
    """The cluster YAML format (this module's docstring); `devices` is the older name of
    `nodes`, CHEF's `fpgas` spelling is translated before validation."""

    name: Name | None = None
    nodes: list[_Node] = Field(min_length=1, max_length=MAX_DEVICES,
                               validation_alias=AliasChoices("nodes", "devices"))
    topology: Topology = "ring"
    link: _LinkField | None = None
    switch_latency_ns: LatencyNs = 0.0
    rings: int = Field(default=1, ge=1, le=MAX_DEVICES)
    inter_ring_link: _LinkField | None = None
    host_relay: bool = False
    pairs: list[_Pair] = Field(default_factory=list, max_length=_MAX_PAIRS)
    custom_devices: dict[str, dict[str, Any]] = Field(default_factory=dict)
    host_profile: str | None = None  # relative to the YAML file


# ---- CHEF's spelling (seeds/004 §VI) -----------------------------------------------------
# Its fields renamed in the format above, and back, so an error names a field as written.
_CHEF_NAMES = {"freq_mhz": "clock_mhz", "bandwidth_gbps": "bandwidth_gbytes_s",
               "gbps": "bandwidth_gbytes_s"}
_AS_WRITTEN = {"clock_mhz": "freq_mhz", "bandwidth_gbytes_s": "bandwidth_gbps"}


def _renamed(entry: Any) -> Any:
    if not isinstance(entry, dict):
        return entry
    return {_CHEF_NAMES.get(k, k): _renamed(v) if k == "banks" else v
            for k, v in entry.items()}


def _chef_node(entry: Any) -> Any:
    """An `fpgas` entry as a node: its loose `dsp` and `bram` become its resources."""
    node = _renamed(entry)
    if isinstance(node, dict) and {"dsp", "bram"} & set(node):
        node["resources"] = {k: node.pop(k) for k in ("dsp", "bram") if k in node}
    return node


def _from_chef_spelling(doc: dict[str, Any]) -> dict[str, Any]:
    """CHEF's `fpgas` document in the format above: P2P at `p2p_gbps` GB/s over a switch
    (the host's star where it relays), with no latency term (seeds/004 §III)."""
    out = {k: v for k, v in doc.items() if k not in ("fpgas", "p2p_gbps", "pairs")}
    fpgas, pairs = doc["fpgas"], doc.get("pairs", [])
    out["nodes"] = [_chef_node(e) for e in fpgas] if isinstance(fpgas, list) else fpgas
    out["pairs"] = [_renamed(p) for p in pairs] if isinstance(pairs, list) else pairs
    out.setdefault("topology", "host_star" if doc.get("host_relay") is True else "switch")
    if "p2p_gbps" in doc:
        out["link"] = {"latency_ns": 0, "bandwidth_gbytes_s": doc["p2p_gbps"]}
    return out


def _chef_field(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Where a field of the translated document came from in CHEF's spelling."""
    head, rest = loc[:1], tuple(_AS_WRITTEN.get(p, p) for p in loc[1:] if p != "resources")
    if head == ("link",):
        return ("p2p_gbps",)
    if head == ("pairs",):
        return ("pairs", *("gbps" if p == "bandwidth_gbps" else p for p in rest))
    return ("fpgas", *rest) if head == ("nodes",) else loc


def _union_label(part: object) -> bool:
    return isinstance(part, str) and (part.startswith("function-")
                                      or part in {"_Link", "str", "constrained-str"})


def _parse(data: dict[str, Any], source: str) -> ClusterFile:
    """Validate a document in any spelling; an error names the field as the user wrote it."""
    data = unwrap_sourced(data)
    chef = "fpgas" in data
    try:
        return ClusterFile.model_validate(_from_chef_spelling(data) if chef else data)
    except ValidationError as err:
        first = err.errors()[0]
        # a link is figures or a name: the union's member labels are no field of the file
        first = {**first, "loc": tuple(p for p in first["loc"] if not _union_label(p))}
        if chef:
            first = {**first, "loc": _chef_field(first["loc"])}
        raise ConfigError.from_validation(source, SimpleNamespace(errors=lambda: [first]),
                                          whole="cluster") from None


# ---- from the validated file to a Cluster ---------------------------------------------------
def _nodes(spec: ClusterFile, source: str, key: str) -> list[Node]:
    """Each entry's `count` nodes; `key` is what the file calls its node list."""
    known = dict(catalog())
    for name, entry in spec.custom_devices.items():
        known[name.lower()] = device_from_dict(name, entry, source)
    total = sum(entry.count for entry in spec.nodes)
    if total > MAX_DEVICES:
        raise ConfigError(source, key, f"{total} devices in all; the limit is {MAX_DEVICES}")
    nodes: list[Node] = []
    for i, entry in enumerate(spec.nodes):
        device = known.get(entry.device.lower())
        if device is None:
            raise ConfigError(source, f"{key}.{i}.device", f"unknown device "
                              f"'{elide(entry.device, 60)}'; valid: "
                              f"{some_choices(sorted(known), 120, 'archi catalog')}")
        banks, clock = entry.banks, entry.clock_mhz
        try:
            node = make_node(device, entry.name or device.key, clock * 1e6 if clock else None,
                             entry.resources.model_dump(exclude_none=True), banks.count,
                             banks.size_bytes,
                             banks.bandwidth_gbytes_s * GB if banks.bandwidth_gbytes_s else None)
        except ValueError as err:
            raise ConfigError(source, f"{key}.{i}.banks", str(err)) from None
        host = _named_link(entry.host_link, source, f"{key}.{i}.host_link")
        for k in range(entry.count):
            name = (f"{device.key}_{len(nodes)}" if entry.name is None
                    else entry.name if entry.count == 1 else f"{entry.name}_{k}")
            nodes.append(node.model_copy(update={"name": name, "host_link": host}))
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ConfigError(source, f"{key}.name", f"node names must be unique; "
                          f"'{elide(twice, 60)}' is given twice")
    return nodes


def _pairs(spec: ClusterFile, names: list[str], source: str) -> dict[tuple[int, int], float]:
    index = {name: i for i, name in enumerate(names)}
    table = {}
    for k, pair in enumerate(spec.pairs):
        for end in (pair.a, pair.b):
            if end not in index:
                raise ConfigError(source, f"pairs.{k}", f"unknown node '{elide(end, 60)}'; "
                                  f"nodes: {elide(', '.join(names), 160)}")
        if pair.a == pair.b:
            raise ConfigError(source, f"pairs.{k}", f"'{elide(pair.a, 60)}' paired with "
                              "itself (a link from a node to itself); a pair is two different "
                              "nodes")
        i, j = sorted((index[pair.a], index[pair.b]))
        if (i, j) in table:
            raise ConfigError(source, f"pairs.{k}", f"'{elide(pair.a, 60)}' and "
                              f"'{elide(pair.b, 60)}' are paired twice; give each pair's "
                              "bandwidth once")
        table[i, j] = pair.bandwidth_Bps()
    return table


def cluster_from_dict(data: object, source: str, folder: Path | None = None,
                      default_name: str = "cluster") -> Cluster:
    """A cluster document in any spelling; `folder` is where `host_profile` is relative to."""
    if not isinstance(data, dict):
        raise ConfigError(source, "cluster", "top level must be a mapping")
    spec = _parse(data, source)
    key = next((k for k in ("fpgas", "devices") if k in data), "nodes")
    nodes = _nodes(spec, source, key)
    link = _named_link(spec.link, source, "link")
    if link is None and len(nodes) > 1:
        link = default_link(nodes[0].device)
    profile = (folder or Path()) / spec.host_profile if spec.host_profile else None
    if len(nodes) % spec.rings:
        raise ConfigError(source, "rings", f"{len(nodes)} nodes do not form {spec.rings} "
                          f"equal rings; give a ring count dividing {len(nodes)}")
    between = _named_link(spec.inter_ring_link, source, "inter_ring_link") or switch_port_link()
    return Cluster(name=spec.name or default_name, nodes=tuple(nodes), topology=spec.topology,
                   ring_link=link, switch_latency_s=spec.switch_latency_ns * 1e-9,
                   host_relay=spec.host_relay,
                   pair_bandwidth_Bps=_pairs(spec, [n.name for n in nodes], source),
                   host_profile=profile, rings=spec.rings,
                   inter_ring_link=between if spec.rings > 1 else None)


def load_cluster_file(path: Path) -> Cluster:
    """A user's cluster YAML file (any spelling)."""
    return cluster_from_dict(load_mapping(path, "cluster"), str(path), path.parent, path.stem)


@cache
def builtin_clusters() -> list[str]:
    """The clusters packaged in archipelago/hardware/clusters/, by name (listed once: every
    cluster name a command resolves is checked against them)."""
    folder = resources.files("archipelago.hardware").joinpath("clusters")
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir()
                  if p.name.endswith(".yaml"))


def load_builtin(name: str) -> Cluster:
    source = f"clusters/{name}.yaml"
    text = resources.files("archipelago.hardware").joinpath(source).read_text()
    return cluster_from_dict(load_packaged(text), source, default_name=name)
