"""The tensor-parallel engines' design spaces: which parameters `archi explore` may move,
and their candidate values (seeds/002 §V-D: "define a set of candidate values for each
hardware parameter"), bounded by the board's resources rather than by the published engine.

Each strategy registers a builder `space(spec, device)`. The bounds come from the engines'
own resource models (`DFXEngine.resources`, `SystolicEngine.unit_counts`), so a change of
operator mapping or DSP packing bounds the search through them:
- the largest DFX matrix unit (values per cycle) and LORA array side whose engine, with the
  leanest other parameters, fits the device's DSP, BRAM and URAM;
- the per-channel HBM port width from the device's HBM channels and bandwidth (below);
- the KV-cache URAMs from the device's URAM count;
- the HBM channels the engine reads from: all of the device's (seeds/001 §V-B, seeds/002
  §V-C).
Clocks stay at the published ones (seeds/001 §VI, seeds/002 Table IV): the model has no
timing-closure term to say a faster kernel clock would be met, and no per-device kernel
clock ceiling was found in the sources searched (2026-11).

Dependent parameters are encoded so every gene combination is valid: the tile side is a
multiple of the array side, and the vector-mode tiles never need more PEs than the array has.
The published design point is always a candidate (added where the device's bounds leave it
out), so a search never returns anything worse than the paper's own configuration.
"""

from collections.abc import Callable, Iterable
from typing import Any

from archipelago.engines.base import add_resources
from archipelago.errors import ArchipelagoError
from archipelago.estimate.workload import Generation
from archipelago.explore.spaces import DesignSpace
from archipelago.hardware.device import Device, Memory
from archipelago.models.spec import ModelSpec
from archipelago.strategies.tensor_parallel import LORA_F as LORA_F_DESIGN
from archipelago.strategies.tensor_parallel import LORA_Q as LORA_Q_DESIGN
from archipelago.strategies.tensor_parallel.engines.dfx import DFXConfig, DFXEngine
from archipelago.strategies.tensor_parallel.engines.systolic import SystolicEngine
from archipelago.strategies.tensor_parallel.engines.systolic_config import (
    SystolicConfig,
    SystolicVariants,
)
from archipelago.strategies.tensor_parallel.utilization import LIMITED

# AMBA AXI4 (ARM IHI 0022): a data bus is 8 to 1024 bits wide; the widest port a kernel
# can put on one HBM channel.
AXI_MAX_BITS = 1024
AXI_MIN_BITS = 256  # the narrowest port the spaces offer (the U280's HBM AXI width, PG276)
# seeds/002 §VI-A-d: LORA holds the KV cache in "All 864" of the U280's 960 URAMs, leaving
# a tenth for the other buffers: the largest share a space offers, beside 0 and quarters.
KV_URAM_SHARES = (0.0, 0.25, 0.5, 0.75, 0.9)
# Candidate sides of a LORA array: multiples of 8 (the published 32 and 64 among them) up
# to the largest the device fits, and of the DFX matrix unit's d (a power of two).
SA_STEP, SA_MAX = 8, 512
DFX_DEPTHS = (8, 16, 32, 64, 128)
DFX_VALUES = tuple(2**k for k in range(8, 15))  # d x l values a cycle: 256 .. 16,384
N_ACC = (16, 32, 64, 128, 256)
TOKEN_WINDOWS = (16, 32, 64, 128)
TILE_MULTIPLES, TV_DIVISORS = (1, 2, 4), (1, 2, 4)


def _hbm(device: Device, engine: str) -> Memory:
    """The HBM an engine streams its weights from (seeds/001 §IV-B, seeds/002 §V-C)."""
    hbm = device.memory("hbm")
    if device.kind != "fpga" or hbm is None:
        raise ArchipelagoError(f"the {engine} engine runs on HBM FPGAs; '{device.key}' is a "
                               f"{device.kind} without HBM")
    return hbm


def port_bits(hbm: Memory, clock_hz: float, reach: bool) -> tuple[int, ...]:
    """Powers of two from AXI_MIN_BITS to AXI_MAX_BITS per HBM channel: up to the widest
    whose rate at `clock_hz` stays within the channel's share of the peak (an engine that
    assumes its port's rate is met), or with `reach`, up to the narrowest that reaches it
    (an engine that caps the rate at the channel's own)."""
    channel_bits = hbm.bandwidth_Bps / hbm.channels * 8 / clock_hz
    out, bits = [], AXI_MIN_BITS
    while bits <= AXI_MAX_BITS:
        if bits <= channel_bits or reach:
            out.append(bits)
        if bits >= channel_bits:
            break
        bits *= 2
    return tuple(out) or (AXI_MIN_BITS,)


def _with(candidates: Iterable[Any], published: Any) -> tuple[Any, ...]:
    """The candidates, and the published value where the device's bounds left it out."""
    return tuple(sorted({*candidates, published}))


def _fits(total: Any, device: Device) -> bool:
    return not total.exceeding(device.resources)


# --- DFX ---------------------------------------------------------------------------------
DFX_PUBLISHED = {"d": 64, "values": 1024, "window_tokens": 64, "channel_bits": 512}


def _format(workload: Generation | None, published: str) -> str:
    """The number format a space is bounded in: the workload's `--precision`, or the
    strategy's own (its DSP packing and dequantization change what fits)."""
    return workload.precision if workload is not None and workload.precision else published


def dfx_bounds(spec: ModelSpec, device: Device, precision: str = "fp16"
               ) -> dict[str, tuple[Any, ...]]:
    """DFX's genes on `device`: matrix-unit sizes d x l whose core (smallest window, the
    device's channels, `precision`) fits its fabric, for some depth d; port widths from its
    HBM."""
    hbm = _hbm(device, "DFX")
    lean = {"hbm_channels": hbm.channels, "window_tokens": min(TOKEN_WINDOWS),
            "precision": precision}

    def fits(d: int, values: int) -> bool:
        engine = DFXEngine(DFXConfig(**lean, d=d, l=max(1, values // d)), 1)
        return _fits(add_resources(*engine.resources(spec).values()), device)

    depths = [d for d in DFX_DEPTHS if fits(d, d)]
    values = [v for v in DFX_VALUES if any(fits(d, v) for d in depths if d <= v)]
    return {"d": _with(depths, DFX_PUBLISHED["d"]),
            "values": _with(values, DFX_PUBLISHED["values"]),
            "window_tokens": TOKEN_WINDOWS,
            "channel_bits": _with(port_bits(hbm, DFXConfig().clock_hz, reach=False),
                                  DFX_PUBLISHED["channel_bits"])}


def dfx(spec: ModelSpec, device: Device, workload: Generation | None = None) -> DesignSpace:
    """seeds/001 §V-B: a d x l matrix unit fed d x l values a cycle from every HBM channel."""
    channels = _hbm(device, "DFX").channels

    def decode(genes: dict[str, Any]) -> dict[str, Any]:
        return {"d": genes["d"], "l": max(1, genes["values"] // genes["d"]),
                "window_tokens": genes["window_tokens"], "channel_bits": genes["channel_bits"],
                "hbm_channels": channels}

    return DesignSpace(dfx_bounds(spec, device, _format(workload, DFXConfig().precision)),
                       decode, DFX_PUBLISHED)


# --- LORA --------------------------------------------------------------------------------
def systolic_bounds(spec: ModelSpec, device: Device, precision: str,
                    clocks: tuple[float, ...], published: dict[str, Any]
                    ) -> dict[str, tuple[Any, ...]]:
    """LORA's genes on `device`: array sides whose core (fewest accumulators, no KV URAM,
    the smallest window) fits its fabric at `precision`, accumulators that fit beside the
    smallest array, port widths and KV URAMs from its HBM and URAMs."""
    hbm = _hbm(device, "LORA")

    def fitting(configs: list[SystolicConfig]) -> list[bool]:
        engine = SystolicEngine(SystolicVariants.of(configs), device, spec, 1)
        counts = engine.unit_counts(spec)
        ok = [True] * len(configs)
        for res in LIMITED:
            total = sum(unit.get(res, 0) for unit in counts.values())
            have = getattr(device.resources, res)
            ok = [a and bool(b) for a, b in zip(ok, (total <= have).ravel(), strict=True)]
        return ok

    lean = {"precision": precision, "hbm_channels": hbm.channels, "kv_uram": 0,
            "token_window": min(TOKEN_WINDOWS), "hbm_axi_bits": AXI_MIN_BITS}
    sides = range(SA_STEP, SA_MAX + 1, SA_STEP)
    arrays = [SystolicConfig(**lean, d_sa=d, t_m=d, t_v=d, n_acc=min(N_ACC)) for d in sides]
    d_sa = [c.d_sa for c, ok in zip(arrays, fitting(arrays), strict=True) if ok]
    accs = [SystolicConfig(**lean, d_sa=SA_STEP, t_m=SA_STEP, t_v=SA_STEP, n_acc=n)
            for n in N_ACC]
    n_acc = [c.n_acc for c, ok in zip(accs, fitting(accs), strict=True) if ok]
    uram = device.resources.uram
    return {"d_sa": _with(d_sa, published["d_sa"]), "t_m_per_d_sa": TILE_MULTIPLES,
            "t_v_divisor": TV_DIVISORS, "n_acc": _with(n_acc, published["n_acc"]),
            "hbm_axi_bits": _with(port_bits(hbm, min(clocks), reach=True),
                                  published["hbm_axi_bits"]),
            "kv_uram": _with((round(s * uram) for s in KV_URAM_SHARES), published["kv_uram"]),
            "token_window": TOKEN_WINDOWS, "clock_hz": clocks}


def _systolic_baseline(design: dict[str, Any]) -> dict[str, Any]:
    """A published LORA prototype (the strategies' registration, seeds/002 §VI-A-d) as
    genes: tiles as wide as the array, every PE in vector mode (t_v = d_sa^2 / t_m)."""
    genes = {name: design[name] for name in
             ("d_sa", "n_acc", "hbm_axi_bits", "kv_uram", "token_window", "clock_hz")}
    return {**genes, "t_m_per_d_sa": design["t_m"] // design["d_sa"],
            "t_v_divisor": design["d_sa"] ** 2 // design["t_m"] // design["t_v"]}


def _systolic(clocks: tuple[float, ...], design: dict[str, Any]
              ) -> Callable[[ModelSpec, Device, Generation | None], DesignSpace]:
    """A LORA prototype's space: `design` (the strategies' registration) is the published
    point and its format the default one."""
    published = _systolic_baseline(design)

    def space(spec: ModelSpec, device: Device, workload: Generation | None = None
              ) -> DesignSpace:
        channels = _hbm(device, "LORA").channels
        precision = _format(workload, design["precision"])

        def decode(genes: dict[str, Any]) -> dict[str, Any]:
            d_sa = genes["d_sa"]
            t_m = d_sa * genes["t_m_per_d_sa"]
            return {"d_sa": d_sa, "t_m": t_m,
                    "t_v": max(1, d_sa * d_sa // t_m // genes["t_v_divisor"]),
                    "n_acc": genes["n_acc"], "hbm_axi_bits": genes["hbm_axi_bits"],
                    "hbm_channels": channels, "kv_uram": genes["kv_uram"],
                    "token_window": genes["token_window"], "clock_hz": genes["clock_hz"]}

        return DesignSpace(systolic_bounds(spec, device, precision, clocks, published),
                           decode, published)

    return space


# Clocks up to each prototype's published one (seeds/002 Table IV). Strategies name their
# space when they register (`design_space=".../space:LORA_F"`).
LORA_F = _systolic((150e6, 200e6), LORA_F_DESIGN)
LORA_Q = _systolic((150e6, 200e6, 250e6), LORA_Q_DESIGN)
DFX = dfx
