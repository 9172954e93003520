"""Galapagos's design space: how parallel its kernels are built, bounded by the FPGA's
fabric rather than by the published build.

Every kernel of a Galapagos build is sized for one row interval (seeds/000 §7-8: the Linear
kernels' Tiles x PEs, the attention PEs, the Softmax and LayerNorm lanes all follow from
the cycles a row may take; hls_stream.py, aie.py); the published build takes H cycles a row
(Table 1's I -> 767 at H = 768), on Versal the Q/K/V kernels' AI Engine time a row (§9.3).
The space's one gene is that interval: the published one, halved down to 1 cycle and
doubled twice, keeping those at which every kernel group of an encoder (a head's
dot-product and softmax-matmul kernels share an FPGA; a Linear split to its narrowest
slice, one column or one head) fits one FPGA under the engine's utilization cap, by the
engine's own resource model: the DSPs, BRAMs and URAMs of the board and, on Versal parts
with them, its AI Engine tiles. A shorter interval is more DSPs per kernel and more FPGAs
per encoder; whether the cluster has them is the estimate's feasibility, as for any plan.

Kept at the published values: the kernel clock (no timing model says a faster one closes),
the flit width (the 100G stream's), `max_seq_len` (the build's FIFOs, a workload choice),
the utilization cap (a mapping policy, not a kernel) and one encoder per cluster (§7.2).
"""

from math import ceil
from typing import Any

from archipelago.engines.base import add_resources
from archipelago.errors import PartitionError
from archipelago.estimate.workload import Sequence
from archipelago.explore.spaces import DesignSpace
from archipelago.hardware.device import Device
from archipelago.models.spec import ModelSpec
from archipelago.strategies.galapagos.aie import AIEEngine
from archipelago.strategies.galapagos.gmi import HOST
from archipelago.strategies.galapagos.hls_stream import HLSStreamEngine
from archipelago.strategies.galapagos.kernel_design import StreamConfig
from archipelago.strategies.galapagos.unroll import Unroller

# Doublings of the published interval a space offers: a slower build on fewer FPGAs.
SLOWER = 2


def engine_for(device: Device, config: StreamConfig | None = None) -> HLSStreamEngine:
    """The engine Galapagos builds on `device`: AI Engines where it has them (§9)."""
    config = config or StreamConfig()
    return AIEEngine(config) if device.resources.aie else HLSStreamEngine(config)


def encoder_fits(spec: ModelSpec, device: Device, engine: HLSStreamEngine,
                 row_interval: int) -> bool:
    """Every kernel group of one encoder, its Linears split as finely as needed, fits one
    `device` under the engine's utilization cap at `row_interval` cycles a row."""
    try:
        unroller = Unroller(spec, engine, device, row_interval)
        layer = unroller.layer(0, HOST)
    except PartitionError:
        return False
    designs = {k.name: k.design.resources for k in layer.kernels}
    return all(engine.fits(add_resources(*(designs[n] for n in group)), device)
               for group in layer.groups)


def row_intervals(spec: ModelSpec, device: Device) -> tuple[int, ...]:
    """The gene's values on `device`: the published interval, halved to 1 and doubled
    SLOWER times, those whose kernels fit the device (the published one always kept)."""
    engine = engine_for(device)
    published = engine.default_row_interval(spec)
    halvings = max(0, ceil(published).bit_length())
    tried = {max(1, ceil(published / 2**k)) for k in range(halvings + 1)}
    tried |= {published * 2**k for k in range(1, SLOWER + 1)}
    return tuple(sorted({ii for ii in tried if encoder_fits(spec, device, engine, ii)}
                        | {published}))


def galapagos(spec: ModelSpec, device: Device, workload: Sequence | None = None
              ) -> DesignSpace:
    """The row interval every kernel is sized for; the published one decodes to the engine's
    default (no `row_interval` set), so the published build reads as such."""
    published = engine_for(device).default_row_interval(spec)

    def decode(genes: dict[str, Any]) -> dict[str, Any]:
        ii = genes["row_interval"]
        return {"row_interval": None if ii == published else ii}

    return DesignSpace({"row_interval": row_intervals(spec, device)}, decode,
                       {"row_interval": published})
