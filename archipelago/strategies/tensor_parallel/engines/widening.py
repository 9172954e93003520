"""Where a quantized format's values become the datapath's operands, and what that costs:
the DFX and LORA cores widen INT4 weights (and an INT8 KV cache) to FP16 in LUTs beside
their FP16 arrays, and scale a group-quantized matrix's sums by their groups' FP16 scales.
Both engines size the lanes by the values their arrays take a cycle."""

from typing import Any

from archipelago.engines.base import FP16_MUL_CYCLES
from archipelago.number_formats import NumberFormat

# Widening a stored value to an FP16 operand, in LUTs (UG574: a LUT6 computes any function
# of up to 6 inputs; four with MUXF7/MUXF8 any of 8): an INT4 code's 16 output bits from
# one 4-input LUT each, an INT8 code's from four LUT6s each.
WIDEN_LUTS = {4: 16, 8: 64}
# A registered LUT stage: the widening's latency, once per stream.
WIDEN_CYCLES = 1


def widens_weights(fmt: NumberFormat) -> bool:
    """INT4 weights beside FP16 activations: widened to FP16 before the products (an INT8
    array takes INT4 codes sign-extended, in wiring)."""
    return fmt.weight_bits < fmt.activation_bits and not fmt.integer


def widens_kv(fmt: NumberFormat) -> bool:
    """An INT8 KV cache beside FP16 activations: codes widened as they are read (their
    per-tensor scale folded into Softmax's scaling and the output's)."""
    return fmt.kv_bytes < fmt.activation_bytes


def rescale_cycles(fmt: NumberFormat) -> int:
    """A group-quantized format's latency per matrix: the codes widened on their way in,
    the sums scaled by their group's FP16 scale (one FP16 multiply) on their way out."""
    return WIDEN_CYCLES + FP16_MUL_CYCLES if fmt.group else 0


def kv_widen_cycles(fmt: NumberFormat) -> int:
    return WIDEN_CYCLES if widens_kv(fmt) else 0


def dequant_units(fmt: NumberFormat, lanes: Any, scalers: Any) -> dict[str, Any]:
    """LUTs and DSPs of `fmt`'s widening on `lanes` values a cycle and of its group scaling
    by `scalers` DSPs (numbers, or arrays over a search's variants); empty where the format
    needs neither."""
    if not (widens_weights(fmt) or widens_kv(fmt) or fmt.group):
        return {}
    per_lane = ((WIDEN_LUTS[fmt.weight_bits] if widens_weights(fmt) else 0)
                + (WIDEN_LUTS[8] if widens_kv(fmt) else 0))
    luts = lanes * per_lane
    return {"dsp": scalers * bool(fmt.group), "lut": luts}
