"""The most bytes per second a device's on-chip memories can deliver: the bandwidth a
physical floor (estimate/floors.py) reads on-chip weights at, where a plan keeps them there
(Galapagos' kernels, seeds/000 §8.2.1; the NPU overlay's persistent MRFs, seeds/003).

It over-counts on purpose, so a floor stays below what the device can do: every block RAM
and UltraRAM read on both ports at their widest every cycle (UG573: RAMB36E2 512 x 72 bits
at its widest, URAM288 4096 x 72 bits, both dual-ported; Intel's M20K, at most 40 bits per
port in the Stratix 10 Embedded Memory User Guide, is counted at the same 144 bits), every
LUT read as one bit of distributed RAM (UG574: a LUT6 is a 64 x 1 single-port RAM) and
every flip-flop as one bit, every cycle of the fabric's clock; and every AI Engine
fetching 512 bits per cycle at 1 GHz (seeds/000 §9.1, §9.3: "each AIE can fetch 512 bits
of data ... per cycle"; "can operate at a frequency of 1 GHz").
"""

from archipelago.hardware.device import Resources

BLOCK_BITS_PER_CYCLE = 2 * 72  # two ports at 72 bits (UG573)
AIE_BITS_PER_CYCLE = 512  # seeds/000 §9.3
AIE_CLOCK_HZ = 1e9  # seeds/000 §9.1


def on_chip_Bps(fabric: Resources, clock_hz: float) -> float:
    """Bytes per second `fabric`'s memories, LUTs, flip-flops and AI Engines can deliver
    (an over-count: module docstring) with the fabric at `clock_hz`."""
    fabric_bits = (fabric.bram + fabric.uram) * BLOCK_BITS_PER_CYCLE + fabric.lut + fabric.ff
    return (fabric_bits * clock_hz + fabric.aie * AIE_BITS_PER_CYCLE * AIE_CLOCK_HZ) / 8
