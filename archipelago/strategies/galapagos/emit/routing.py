"""Routing tables of the enhanced Galapagos Network Layer (seeds/000 §4, Fig. 4): per
cluster, the intra-cluster table (kernel ID -> IP, TUSER bit 16 = 0) and the gateway table
(cluster -> its gateway's IP, bit 16 = 1) that every FPGA of the cluster holds, and what
they take in memory against one flat table of every kernel."""

from typing import Any

from archipelago.engines.base import memory_blocks
from archipelago.strategies.galapagos.gmi import (
    IP_ENTRY_BYTES,
    MAX_KERNELS_PER_CLUSTER,
    RoutingTables,
)
from archipelago.strategies.galapagos.plan import DataflowPlan


def routing_file(plan: DataflowPlan, table: RoutingTables, kernels: int) -> dict[str, Any]:
    """`kernels`: of the whole build, for the flat one-table alternative (§4's N^2)."""
    cluster = plan.clusters[table.cluster]
    # Both tables live in BRAM sized for 256 IPv4 entries (seeds/000 §4).
    bram = 2 * memory_blocks(8 * IP_ENTRY_BYTES, MAX_KERNELS_PER_CLUSTER).bram
    return {
        "cluster": table.cluster,
        "fpgas": [plan.fpgas[f].ip for f in cluster.fpgas],
        "intra_cluster": [{"kernel": k, "ip": ip} for k, ip in enumerate(table.intra)],
        "gateways": [{"cluster": c, "ip": ip} for c, ip in sorted(table.inter.items())],
        "entries": table.entries,
        "bytes": table.bytes,
        "bram36_per_fpga": bram,
        "flat_table_bytes": kernels * IP_ENTRY_BYTES,
    }
