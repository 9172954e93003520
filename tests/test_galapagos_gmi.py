"""GMI on small hand-built graphs: kernel IDs, GMI insertion and placement, the one-byte
header, routing tables and the 256 x 256 limits (seeds/000 §4-6)."""

import pytest

from archipelago.errors import PartitionError
from archipelago.strategies.galapagos.gmi import (
    HOST,
    HOST_CLUSTER,
    MAX_KERNELS_PER_CLUSTER,
    Node,
    Transfer,
    assign_kernel_ids,
    check_limits,
    frame,
    gateway_name,
    insert_gmi,
    place_gmi,
    routing_tables,
    unframe,
)


def _nodes(layout: dict[str, tuple[int, int]]) -> dict[str, Node]:
    """Compute kernels at (fpga, cluster), one gateway per cluster on its first FPGA."""
    nodes = {name: Node(name, "compute", f, c) for name, (f, c) in layout.items()}
    for c in sorted({c for _, c in layout.values()}):
        first = min(f for f, cc in layout.values() if cc == c)
        nodes[gateway_name(c)] = Node(gateway_name(c), "gateway", first, c)
    nodes[HOST] = Node(HOST, "compute", -1, HOST_CLUSTER)
    return nodes


def _placer(nodes: dict[str, Node]):
    fpgas = {c: {n.fpga for n in nodes.values() if n.cluster == c} for c in
             {n.cluster for n in nodes.values()}}
    return lambda t, cluster, where: place_gmi(where, t, fpgas[cluster])


def test_scatter_to_a_remote_fpga_sits_on_the_receiver_side() -> None:
    """Fig. 6: kernel 0 scatters to 1..4. With all receivers on FPGA 1, placing the GMI
    kernel there sends one message over the network instead of four."""
    nodes = _nodes({"a": (0, 0), "b1": (1, 0), "b2": (1, 0), "b3": (1, 0), "b4": (1, 0)})
    t = Transfer("scatter", ("a",), ("b1", "b2", "b3", "b4"), (16, 16, 16, 16), "x")
    graph = insert_gmi(nodes, [t], _placer(nodes))
    gmi = graph.nodes["x.scatter"]
    assert (gmi.role, gmi.fpga, gmi.collective) == ("gmi", 1, "scatter")
    assert {(s.src, s.dst, s.row_bytes) for s in graph.streams} == {
        ("a", "x.scatter", 64), *(("x.scatter", f"b{i}", 16) for i in range(1, 5))}


def test_broadcast_goes_where_it_saves_network_bytes() -> None:
    """§5.2: receivers together -> the receiver FPGA (the row crosses once); receivers
    spread -> a tie, which stays on the sender side."""
    nodes = _nodes({"a": (0, 0), "b": (1, 0), "c": (1, 0), "d": (2, 0), "e": (3, 0)})
    graph = insert_gmi(nodes, [Transfer("broadcast", ("a",), ("b", "c"), (8,), "y"),
                               Transfer("broadcast", ("a",), ("d", "e"), (8,), "z")],
                       _placer(nodes))
    assert graph.nodes["y.broadcast"].fpga == 1
    assert graph.nodes["z.broadcast"].fpga == 0


def test_collective_from_another_cluster_becomes_a_virtual_gateway_kernel() -> None:
    nodes = _nodes({"src": (0, 0), "q": (1, 1), "k": (2, 1)})
    graph = insert_gmi(nodes, [Transfer("broadcast", ("src",), ("q", "k"), (32,), "in")],
                       _placer(nodes))
    virtual = graph.nodes["in.broadcast"]
    assert (virtual.role, virtual.cluster, virtual.fpga) == ("virtual", 1, 1)
    into = next(s for s in graph.streams if s.dst == "in.broadcast")
    assert into.inter_cluster and into.bytes_at(1) == 32 + 1  # the one-byte GMI header


def test_allgather_is_gather_then_broadcast_and_p2p_needs_no_gmi() -> None:
    nodes = _nodes({"h0": (0, 0), "h1": (0, 0), "o0": (1, 0), "o1": (1, 0), "z": (1, 0)})
    graph = insert_gmi(nodes, [
        Transfer("allgather", ("h0", "h1"), ("o0", "o1"), (4, 4), "ctx"),
        Transfer("p2p", ("o0",), ("z",), (8,), "pp")], _placer(nodes))
    kinds = {n.name: n.collective for n in graph.nodes.values() if n.role == "gmi"}
    assert kinds == {"ctx.gather": "gather", "ctx.broadcast": "broadcast"}
    assert ("ctx.gather", "ctx.broadcast", 8) in {(s.src, s.dst, s.row_bytes)
                                                  for s in graph.streams}
    assert graph.collectives["ctx.gather"].destinations == ("ctx.broadcast",)
    assert ("o0", "z") in {(s.src, s.dst) for s in graph.streams}


def test_kernel_ids_are_contiguous_per_cluster_in_role_order() -> None:
    nodes = _nodes({"a": (0, 0), "b": (0, 0), "c": (1, 1), "d": (1, 1)})
    nodes["g"] = Node("g", "gmi", 0, 0, "broadcast")
    nodes["v"] = Node("v", "virtual", 1, 1, "scatter")
    counts = assign_kernel_ids(nodes)
    assert counts == {0: 4, 1: 4}
    ids = {n.name: n.kernel_id for n in nodes.values() if n.cluster >= 0}
    assert ids == {gateway_name(0): 0, "a": 1, "b": 2, "g": 3,
                   gateway_name(1): 0, "c": 1, "d": 2, "v": 3}


def test_routing_tables_hold_own_cluster_and_other_gateways() -> None:
    """N clusters of N kernels: 2N - 1 IP addresses per FPGA instead of N^2 (§4)."""
    n = 3
    layout = {f"k{c}.{i}": (c * 10 + i % 2, c) for c in range(n) for i in range(n - 1)}
    nodes = _nodes(layout)  # each cluster: gateway + (n - 1) kernels = n kernels
    assign_kernel_ids(nodes)
    ips = [f"10.0.0.{i}" for i in range(40)]
    tables = routing_tables(nodes, ips)
    for c, table in tables.items():
        assert table.entries == 2 * n - 1
        assert table.bytes == 4 * (2 * n - 1)
        assert table.intra[0] == ips[nodes[gateway_name(c)].fpga]
        assert set(table.inter) == set(range(n)) - {c}
    assert tables[0].inter[2] == ips[nodes[gateway_name(2)].fpga]


def test_one_byte_header_round_trip_and_range() -> None:
    message = frame(37, b"\x01\x02\x03")
    assert len(message) == 4 and unframe(message) == (37, b"\x01\x02\x03")
    with pytest.raises(PartitionError, match="one-byte GMI header"):
        frame(MAX_KERNELS_PER_CLUSTER, b"")


def test_limits_of_clusters_of_clusters() -> None:
    check_limits({c: 256 for c in range(256)})  # 65,536 kernels is the ceiling
    with pytest.raises(PartitionError, match="needs 257 kernels; a cluster holds at most 256"):
        check_limits({0: 257})
    with pytest.raises(PartitionError, match="needs 257 Galapagos clusters; at most 256"):
        check_limits({c: 1 for c in range(257)})
