"""The Cluster Builder's description files (seeds/000 §6.1): the Cluster Description
(how many clusters, which encoders and FPGAs each holds, its gateway) and the Layer
Description (every kernel's module, configuration and parallelism, its sources and
destinations as [cluster, kernel ID], and the streams between kernels by name)."""

from collections import defaultdict
from typing import Any

from archipelago.strategies.galapagos.emit.galapagos_xml import ip_name
from archipelago.strategies.galapagos.gmi import (
    HOST,
    MAX_CLUSTERS,
    MAX_KERNELS_PER_CLUSTER,
    gateway_name,
)
from archipelago.strategies.galapagos.plan import DataflowPlan

# One row per stream (tens of thousands in a large build): bytes per row, whether they grow
# with the sequence (Softmax rows), whether the consumer needs the whole matrix first (K,
# V), whether the stream crosses clusters through a gateway.
STREAM_FIELDS = ("src", "dst", "bytes_per_row", "per_key", "whole_matrix", "inter_cluster")


def cluster_description(plan: DataflowPlan) -> dict[str, Any]:
    nodes = plan.nodes
    return {
        "model": plan.spec.name,
        "hardware": plan.cluster.name,
        "limits": {"kernels_per_cluster": MAX_KERNELS_PER_CLUSTER, "clusters": MAX_CLUSTERS},
        "clusters": [
            {"id": c.index, "encoders": list(c.layers), "kernels": c.kernels,
             "fpgas": list(c.fpgas),
             "gateway": {"kernel": 0, "fpga": nodes[gateway_name(c.index)].fpga},
             "logical_file": f"{cluster_dir(c.index)}/logical.xml",
             "map_file": f"{cluster_dir(c.index)}/map.xml"}
            for c in plan.clusters
        ],
    }


def cluster_dir(index: int) -> str:
    return f"cluster_{index:03d}"


def _address(plan: DataflowPlan, name: str) -> list[int]:
    """[cluster, kernel ID]; the host is [-1, -1]."""
    node = plan.nodes[name]
    return [node.cluster, node.kernel_id]


def _module(plan: DataflowPlan, name: str) -> dict[str, Any]:
    """What the Layer Builder needs to generate a kernel's IP."""
    node, design = plan.nodes[name], plan.designs.get(name)
    entry: dict[str, Any] = {"name": name, "ip": ip_name(name), "cluster": node.cluster,
                             "kernel": node.kernel_id, "type": node.role, "fpga": node.fpga}
    if node.role in {"gmi", "virtual"}:
        t = plan.collectives[name]
        entry["collective"] = node.collective
        entry["parts"] = list(t.row_bytes)
    if name in plan.compute:
        k = plan.compute[name]
        entry |= {"layer": k.layer, "role": k.role, "split": k.split, "lo": k.lo, "hi": k.hi,
                  "residual": k.residual}
    if design is not None:
        job = design.job
        entry |= {"module": job.op, "stages": list(job.stages), "fan_in": job.fan_in,
                  "fan_out": job.fan_out,
                  "parallelism": {"tiles": design.tiles, "pes": design.pes,
                                  "lanes": design.lanes},
                  "resources": {"dsp": design.resources.dsp, "bram": design.resources.bram,
                                "uram": design.resources.uram}}
    return entry


def layer_description(plan: DataflowPlan) -> dict[str, Any]:
    sources: dict[str, list[str]] = defaultdict(list)
    destinations: dict[str, list[str]] = defaultdict(list)
    for s in plan.streams:
        sources[s.dst].append(s.src)
        destinations[s.src].append(s.dst)
    kernels = []
    for name in plan.nodes:
        if name == HOST:
            continue
        entry = _module(plan, name)
        entry["sources"] = [_address(plan, n) for n in sources[name]]
        entry["destinations"] = [_address(plan, n) for n in destinations[name]]
        kernels.append(entry)
    return {
        "model": plan.spec.name,
        "row_interval_cycles": plan.row_interval,
        "max_seq_len": plan.engine.config.max_seq_len,
        "kernels": kernels,
        "stream_fields": list(STREAM_FIELDS),
        "streams": [[s.src, s.dst, s.row_bytes, s.per_key, s.whole, s.inter_cluster]
                    for s in plan.streams],
    }
