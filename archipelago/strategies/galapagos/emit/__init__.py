"""Writers of deployment files. `write_build` emits a Galapagos build from a DataflowPlan:

    cluster_description.json, layer_description.json   the Cluster Builder inputs (§6.1)
    cluster_NNN/logical.xml, cluster_NNN/map.xml       the Galapagos middleware inputs
    routing/cluster_NNN.json                            the Network Layer's tables (§4)
    summary.json                                        counts, fabric per FPGA, file list

Writers know nothing about how the plan was made; they only render it, inside one
directory (`OutputDir`).
"""

from collections import defaultdict
from pathlib import Path
from typing import Any

from archipelago.emit.output_dir import OutputDir
from archipelago.errors import PartitionError
from archipelago.strategies.galapagos.emit.cluster_builder import (
    cluster_description,
    cluster_dir,
    layer_description,
)
from archipelago.strategies.galapagos.emit.galapagos_xml import logical_xml, map_xml
from archipelago.strategies.galapagos.emit.routing import routing_file
from archipelago.strategies.galapagos.estimate import feasibility
from archipelago.strategies.galapagos.gmi import Node
from archipelago.strategies.galapagos.plan import DataflowPlan


def _summary(plan: DataflowPlan, files: list[str], root: Path) -> dict[str, Any]:
    return {
        "model": plan.spec.name,
        "hardware": plan.cluster.name,
        "kernels": plan.kernel_count,
        "clusters": len(plan.clusters),
        "fpgas_needed": plan.fpgas_needed,
        "fpgas_available": plan.cluster.size,
        "fpgas": [{"index": u.index, "cluster": u.cluster, "ip": u.ip, "mac": u.mac,
                   "kernels": len(u.kernels), "dsp": u.resources.dsp,
                   "bram": u.resources.bram, "uram": u.resources.uram} for u in plan.fpgas],
        "files": [*files, "summary.json"],
        "out": str(root),
    }


def write_build(plan: DataflowPlan, out: Path | str, force: bool = False) -> dict[str, Any]:
    """Write every build file under `out`; returns the summary (also in summary.json)."""
    members: dict[int, list[Node]] = defaultdict(list)
    for node in plan.nodes.values():
        members[node.cluster].append(node)
    with OutputDir(out, force) as target:
        target.write_json("cluster_description.json", cluster_description(plan))
        target.write_json("layer_description.json", layer_description(plan), compact=True)
        for cluster in plan.clusters:
            ordered = sorted(members[cluster.index], key=lambda n: n.kernel_id)
            folder = cluster_dir(cluster.index)
            target.write_text(f"{folder}/logical.xml", logical_xml(ordered))
            target.write_text(f"{folder}/map.xml", map_xml(plan, cluster, ordered))
            table = routing_file(plan, plan.tables[cluster.index], plan.kernel_count)
            target.write_json(f"routing/{folder}.json", table, compact=True)
        summary = _summary(plan, target.written, target.root)
        target.write_json("summary.json", summary, compact=True)
    return summary


def write_feasible_build(plan: DataflowPlan, out: Path | str, force: bool = False
                         ) -> dict[str, Any]:
    """The dataflow kind's writers (`archi build`): no files for a plan over the devices'
    hardware limits."""
    reasons = feasibility(plan, 1)  # hardware limits only: any sequence length fits one token
    if reasons:
        raise PartitionError(f"no build for an infeasible plan: {'; '.join(reasons)}")
    return write_build(plan, out, force)
