"""How much of each FPGA's fabric a dataflow plan uses: what `archi explore`'s search over
the Galapagos space constrains and minimizes (seeds/002 Eq. 13's second objective)."""

from archipelago.strategies.galapagos.estimate import StreamEstimate
from archipelago.strategies.galapagos.plan import DataflowPlan

# The fabric a search limits on every board (explore/evaluate.py's FABRIC); AI Engines join
# where a build uses them.
LIMITED = ("dsp", "bram", "uram")


def utilization(plan: DataflowPlan, workload: object, est: StreamEstimate
                ) -> dict[str, float]:
    """The worst FPGA's fraction of each of its DSPs, BRAMs and URAMs (an absent resource
    counts as one unit, as `Resources.fractions_of` has it), and of its AI Engines where
    the build uses any."""
    worst = dict.fromkeys(LIMITED, 0.0)
    for use in plan.fpgas:
        used = use.resources.fractions_of(use.device.resources)
        for res in LIMITED:
            worst[res] = max(worst[res], used[res])
        if use.resources.aie:
            worst["aie"] = max(worst.get("aie", 0.0), used["aie"])
    return worst
