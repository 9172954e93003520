"""The two papers' FPGA routers, modelled transfer by transfer rather than as ideal
alpha-beta collectives.

DFX (seeds/001 §V-E): the router moves 64 x 16-bit beats between the register files of
neighbouring cores over Aurora 64b/66b; each core's sub-vector circulates the ring, so it
crosses N - 1 links, and at every core the reorder module writes it into the register file
(by core ID) before the router forwards it. A sub-vector is forwarded once it has arrived:
each hop costs the link latency plus its beats at the link's payload rate.

LORA (seeds/002 §IV-C, §V-B): the router drives a 4-lane Aurora 64b/66b core at 12.8 Gb/s
per lane in full-duplex streaming mode through a 256-bit port. An all-gather sends every
block both ways round the ring; one block needs a full-duplex cycle and a one-way cycle on
four boards, and merging the one-way cycles of consecutive blocks gives two blocks in three
cycles, i.e. (N - 1) / 2 block times. An all-reduce accumulates partial sums in the
router's ACC unit as they pass each board: N - 1 hops, each with an FP32 add.
"""

from math import ceil

from archipelago.hardware.device import Link

# seeds/001 §V-E: "The router seamlessly transfers 64 x 16 bit data".
DFX_BEAT_BITS = 64 * 16
# seeds/002 §VI-C: "Given the 256-bit data width of the communication IP".
LORA_PORT_BITS = 256
# seeds/002 §V-B: "we configure each Aurora IP core with four lanes and set the line rate to
# 12.8 Gbps", with 64b/66b encoding (seeds/001 §V-E: 3% overhead).
LORA_AURORA_LANES = 4
LORA_LANE_GBPS = 12.8
AURORA_PAYLOAD_FRACTION = 64 / 66
# FP32 adder latency of the router's ACC unit; taken equal to the FP16 adder's 11 cycles
# (seeds/001 §V-C, same Floating-Point Operator IP on the same U280).
ACC_ADD_CYCLES = 11


def lora_link(latency_s: float) -> Link:
    """The link LORA configures: 4 lanes x 12.8 Gb/s of 64b/66b (seeds/002 §V-B)."""
    payload_gbps = LORA_AURORA_LANES * LORA_LANE_GBPS * AURORA_PAYLOAD_FRACTION
    return Link(latency_s=latency_s, bandwidth_Bps=payload_gbps * 1e9 / 8)


def dfx_beats(values: int, value_bits: int = 16) -> int:
    """Beats that carry `values` of `value_bits` each (a partial beat is a whole beat)."""
    return ceil(values * value_bits / DFX_BEAT_BITS)


def dfx_all_gather_s(values_per_rank: int, ranks: int, link: Link, clock_hz: float,
                     value_bits: int = 16) -> float:
    """Every core's sub-vector of `values_per_rank` circulates a one-way ring: N - 1 hops,
    each the link latency, the beats at the payload rate (never faster than one beat per
    kernel cycle) and one cycle for the reorder module's write."""
    if ranks == 1:
        return 0.0
    beat_s = max(DFX_BEAT_BITS / 8 / link.bandwidth_Bps, 1 / clock_hz)
    hop_s = link.latency_s + dfx_beats(values_per_rank, value_bits) * beat_s + 1 / clock_hz
    return (ranks - 1) * hop_s


def _lora_words(nbytes: float) -> int:
    return ceil(nbytes * 8 / LORA_PORT_BITS)


def lora_all_gather_s(bytes_per_rank: float, ranks: int, link: Link) -> float:
    """Blocks go both ways round the ring: the farthest board is ceil((N-1)/2) hops away,
    and the two receive ports take (N - 1) / 2 block times (full-duplex merge, §IV-C)."""
    if ranks == 1:
        return 0.0
    word_s = LORA_PORT_BITS / 8 / link.bandwidth_Bps
    return (ceil((ranks - 1) / 2) * link.latency_s
            + (ranks - 1) / 2 * _lora_words(bytes_per_rank) * word_s)


def lora_all_reduce_s(bytes_per_rank: float, ranks: int, link: Link, clock_hz: float) -> float:
    """Partial sums pass every board once, accumulated by the ACC unit on the way."""
    if ranks == 1:
        return 0.0
    word_s = LORA_PORT_BITS / 8 / link.bandwidth_Bps
    hop_s = link.latency_s + _lora_words(bytes_per_rank) * word_s + ACC_ADD_CYCLES / clock_hz
    return (ranks - 1) * hop_s
