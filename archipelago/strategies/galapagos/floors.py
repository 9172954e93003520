"""The dataflow kind's physical floors (estimate/floors.py): every FPGA holds its kernels'
int8 weights on chip (seeds/000 §8.2.1; on Versal, the matrices in AI Engine data memory,
§9.3) and reads each at least once per sequence, at the most its on-chip memories can
deliver (hardware/on_chip.py) at the kernels' clock. Neither the whole model's latency nor a
sequence's interval (1 / throughput) can be shorter. FPGAs have no compute floor (the
catalog gives no peak: the arithmetic is the design in the fabric)."""

from archipelago.estimate.floors import DeviceLoad, PhaseFloor, Read
from archipelago.estimate.workload import Sequence
from archipelago.hardware.on_chip import on_chip_Bps
from archipelago.strategies.galapagos.estimate import StreamEstimate
from archipelago.strategies.galapagos.plan import DataflowPlan

_LINEAR = frozenset({"q", "k", "v", "attn_out", "ffn_up", "ffn_down"})  # weight matrices


def fpga_loads(plan: DataflowPlan) -> tuple[DeviceLoad, ...]:
    """Each FPGA's weight bytes (int8), read from its on-chip memories once."""
    clock = plan.engine.config.clock_hz
    loads = []
    for fpga in plan.fpgas:
        kernels = [plan.compute[k] for k in fpga.kernels if k in plan.compute]
        weights = sum(k.design.job.fan_in * k.design.job.fan_out for k in kernels
                      if k.role in _LINEAR)
        loads.append(DeviceLoad(f"FPGA {fpga.index} ({fpga.device.key})",
                                (Read(float(weights), ("on-chip",)),),
                                {"on-chip": on_chip_Bps(fpga.device.resources, clock)}))
    return tuple(loads)


def floors(plan: DataflowPlan, work: Sequence, est: StreamEstimate) -> list[PhaseFloor]:
    """The kind's floors hook."""
    loads = fpga_loads(plan)
    return [PhaseFloor("the whole model's pass", est.latency_s, loads),
            PhaseFloor("a sequence's interval (1 / throughput)", 1 / est.throughput_per_s,
                       loads)]
