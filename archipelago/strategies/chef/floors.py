"""The scheduled-DAG kind's physical floors (estimate/floors.py): in one inference every
FPGA reads the FP32 weights of the layers mapped to it at least once, from its own DRAM
(CHEF keeps them there, seeds/004 §IV; H2H buffers some there) or from outside the board
(H2H's host memory, seeds/004 §III). Each path is counted at more than it can carry: the
DRAM at the larger of its banks' sum and the catalog's peak of the board's memories, the
outside at its PCIe link plus twice every link to another board (H2H relays through the
host at twice a pair's bandwidth). FPGAs have no compute floor (no catalog peak)."""

from typing import Any

from archipelago.estimate.floors import DeviceLoad, PhaseFloor, Read
from archipelago.hardware.machines import Cluster, host_link_of
from archipelago.models.dag_layers import BYTES_PER_ELEMENT
from archipelago.strategies.chef.plan import ScheduledDAG


def _sources(cluster: Cluster, fpga: int) -> dict[str, float]:
    node = cluster.nodes[fpga]
    device = node.device
    dram = max(sum(b.bandwidth_Bps for b in node.banks),
               sum(m.bandwidth_Bps for m in device.memories.values()))
    host = node.host_link or (host_link_of(device) if device.host_link or
                              device.host_link_Bps else None)
    outside = (host.bandwidth_Bps if host else 0.0) + 2 * sum(
        cluster.pair_Bps(fpga, other) for other in range(cluster.size) if other != fpga)
    return {name: bps for name, bps in (("dram", dram), ("outside", outside)) if bps > 0}


def fpga_loads(plan: ScheduledDAG) -> tuple[DeviceLoad, ...]:
    """Each FPGA that runs a layer: its layers' weight bytes, from DRAM or outside."""
    weights: dict[int, float] = {}
    for name, fpga in plan.placement().items():
        elements = plan.dag.by_name[name].weight_elements
        weights[fpga] = weights.get(fpga, 0.0) + elements * BYTES_PER_ELEMENT
    loads = []
    for fpga, moved in sorted(weights.items()):
        sources = _sources(plan.cluster, fpga)
        if sources:
            loads.append(DeviceLoad(f"FPGA {fpga} ({plan.cluster.nodes[fpga].name})",
                                    (Read(moved, tuple(sources)),), sources))
    return tuple(loads)


def floors(plan: ScheduledDAG, work: Any, est: dict[str, Any]) -> list[PhaseFloor]:
    """The kind's floors hook: one inference of the DAG."""
    return [PhaseFloor("one inference", est["latency_s"], fpga_loads(plan))]
