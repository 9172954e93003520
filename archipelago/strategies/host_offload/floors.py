"""The host-program kind's physical floors (estimate/floors.py): in one inference (setup,
which loads persistent weights, excluded as the estimate excludes it) every card reads
its blocks of the weights at least once (their int8 elements; the MRFs' padding to native
tiles need not move), from where the layout keeps them (seeds/003
Fig. 5d): persistent in its MRFs (the M20Ks, counted at more than they can deliver by
hardware/on_chip.py at the overlay's clock, beside a TensorRAM chiplet at the catalog's
32 TB/s), streamed from its DDR4 (the catalog's peak), or sent over its PCIe link from the
host (the link's bandwidth). FPGAs have no compute floor (no catalog peak)."""

from archipelago.estimate.floors import DeviceLoad, PhaseFloor, Read
from archipelago.hardware.on_chip import on_chip_Bps
from archipelago.strategies.host_offload.estimate import HostEstimate
from archipelago.strategies.host_offload.plan import HostPlan


def _sources(plan: HostPlan, card: int) -> dict[str, float]:
    """Where the card's weights come from, with each source's bandwidth."""
    design = plan.designs[card]
    device = design.device
    if plan.layout.weights == "pcie":
        return {"PCIe": plan.links[card].bandwidth_Bps}
    if plan.layout.weights == "ddr4":
        ddr = device.memory("ddr")
        assert ddr is not None  # the plan's feasibility says why otherwise; 0 bytes then
        return {"ddr": ddr.bandwidth_Bps}
    chips = {m: memory.bandwidth_Bps for m, memory in device.memories.items()
             if m == "tensorram"}
    return {"on-chip": on_chip_Bps(device.resources, design.clock_hz), **chips}


def _weight_bytes(plan: HostPlan, card: int) -> int:
    """The card's int8 weights, unpadded."""
    return sum(rows * cols for rows, cols in (b.shape for b in plan.layout.card_blocks(card)))


def card_loads(plan: HostPlan) -> tuple[DeviceLoad, ...]:
    loads = []
    for card in range(plan.cards):
        sources = _sources(plan, card)
        loads.append(DeviceLoad(f"card {card} ({plan.designs[card].device.key})",
                                (Read(float(_weight_bytes(plan, card)), tuple(sources)),),
                                sources))
    return tuple(loads)


def floors(plan: HostPlan, work: None, est: HostEstimate) -> list[PhaseFloor]:
    """The kind's floors hook: one inference."""
    return [PhaseFloor("one inference", est.latency_s, card_loads(plan))]
