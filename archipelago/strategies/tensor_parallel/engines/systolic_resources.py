"""A LORA core's fabric resources (seeds/002 §V-D, Eq. 5-7): the MPU's DSPs at the format's
packing, the VFU's, the buffers' BRAM and URAM, and a quantized format's widening and
scaling units (widening.py). Every count is an array over variants where the config holds
them (systolic_config.SystolicVariants)."""

import numpy as np

from archipelago.engines.base import Number, ceil_div, least
from archipelago.models.spec import ModelSpec
from archipelago.number_formats import NumberFormat
from archipelago.strategies.tensor_parallel.engines.systolic_config import (
    LINK_PORT_BITS,
    SystolicConfig,
    SystolicVariants,
)
from archipelago.strategies.tensor_parallel.engines.widening import dequant_units

# DSP cost of one operator (Table II's Psi), from the FP16 operator mapping of the same
# board's DFX core (seeds/001 §V-C: multiplier 1 DSP, adder 2 DSPs, exponential 2 DSPs).
PSI_FP16 = {"mul": 1.0, "add": 2.0, "exp": 2.0, "square": 1.0}
# UltraScale+ memory primitives (UG573): BRAM18 = 1024 x 18 (Eq. 5), BRAM36 = 512 x 72 in
# the reshape mode Eq. 6 uses with 36-bit words; URAM288 = 288 Kb.
URAM_BYTES = 288 * 1024 // 8


def unit_counts(c: SystolicConfig | SystolicVariants, fmt: NumberFormat, packed: int,
                lanes: Number, spec: ModelSpec, ranks: int, local_kv_values: int
                ) -> dict[str, dict[str, Number]]:
    """Resources by unit: an integer format's MPU packs `packed` products per DSP (seeds/002
    §V-A, engines/dsp_packing.py; int32 sums in LUTs), an FP16 one spends a multiplier and
    an adder per PE; `lanes` widening lanes and one scaling multiplier per array column
    where the format needs them."""
    if fmt.integer:
        mpu_dsp = np.ceil(c.d_sa ** 2 / packed)
    else:
        mpu_dsp = c.d_sa ** 2 * int(PSI_FP16["mul"] + PSI_FP16["add"])
    # Eq. 7 for the ACC units, plus the Scaling module's mul and add on N_acc lanes and
    # the GELU piece-wise linear unit (one mul, one add per lane).
    acc = ((PSI_FP16["exp"] + PSI_FP16["square"]) * c.n_acc
           + PSI_FP16["add"] * (3 * c.n_acc - 1))
    scaling = 2 * (PSI_FP16["mul"] + PSI_FP16["add"]) * c.n_acc
    units = {"mpu": {"dsp": mpu_dsp}, "vfu": {"dsp": np.trunc(acc + scaling)},
             "buffers": _buffers(c, fmt, spec, ranks, local_kv_values)}
    dequant = dequant_units(fmt, lanes, c.d_sa * int(PSI_FP16["mul"]))
    return {**units, "dequant": dequant} if dequant else units


def _buffers(c: SystolicConfig | SystolicVariants, fmt: NumberFormat, spec: ModelSpec,
             ranks: int, local_kv_values: int) -> dict[str, Number]:
    bits = fmt.activation_bits  # the array's operands, weights widened on their way in
    local = ceil_div(spec.hidden, ranks)  # the widest column slice
    local_ffn = ceil_div(spec.widest_ffn, ranks)
    # Eq. 5: double-buffered weight tile, partitioned P_w = D_sa ways (one weight per
    # systolic column per cycle), BRAM18 units of 1024 x 18 -> counted as BRAM36 halves.
    p_w = c.d_sa
    weight18 = np.ceil(bits / 18) * np.ceil(c.t_m ** 2 / (1024 * p_w)) * p_w * 2
    # Eq. 6: AXI read buffers of every HBM channel and the router's TX/RX buffers. The
    # router packs and sends this board's block and unpacks each peer's block into the
    # on-chip buffer as it arrives (§IV-C Data Sending/Receiving), so N_tran covers one
    # board's share of the widest gather (the FFN activation), not the gathered whole.
    axi = c.hbm_channels * np.ceil(c.hbm_axi_bits / 36)  # N_tran = 512: one block deep
    router = 2 * np.ceil(LINK_PORT_BITS / 36) * np.ceil(
        c.token_window * local_ffn // (LINK_PORT_BITS // bits) / 512)
    # Intermediate activations of the local columns (LayerNorm, residual, FFN) for the
    # token window: the buffer §II-C says dominates BRAM use.
    inter_values = c.token_window * (6 * local + 2 * local_ffn)
    inter = np.ceil(inter_values * bits / (36 * 1024))
    bram = np.ceil(weight18 / 2) + axi + router + inter
    kv_need = np.ceil(spec.layers * spec.max_positions * local_kv_values * fmt.kv_bytes
                      / URAM_BYTES)
    return {"bram": bram, "uram": least(c.kv_uram, kv_need)}
