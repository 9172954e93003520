"""The two papers' FPGA routers, modelled transfer by transfer rather than as ideal
alpha-beta collectives.

DFX (seeds/001 §V-E): the router moves 64 x 16-bit beats between the register files of
neighbouring cores over Aurora 64b/66b; each core's sub-vector circulates the ring, so it
crosses N - 1 links. A hop is store-and-forward through the register file: the router fills
its TX buffer from the register file a beat per kernel cycle, the beats cross into the
Aurora core's clock, travel the link (its latency, then the beats at the payload rate),
cross back, and the reorder module writes them into the register file at the sending core's
ID offset, a beat per cycle; only then does the next hop read them out. Compute waits for
the whole gathered vector (the scoreboard holds the next instruction, §V-A; seeds/002 §II:
"computation is completely stalled during synchronization"), so the whole sync is exposed.
What the router's control, the Aurora framing and the pipeline restart add beyond that, per
sync, is the one fitted constant DFX_SYNC_OVERHEAD_S; the timing simulator charges it too,
before a sync's first hop (dfx_program/timing.py; issue #34: the hops alone put gpt2-1.5b's
sync share on four boards at 5%, against the ~17% seeds/002 §II-C quotes for DFX).

LORA (seeds/002 §IV-C, §V-B): the router drives a 4-lane Aurora 64b/66b core at 12.8 Gb/s
per lane in full-duplex streaming mode through a 256-bit port. An all-gather sends every
block both ways round the ring; one block needs a full-duplex cycle and a one-way cycle on
four boards, and merging the one-way cycles of consecutive blocks gives two blocks in three
cycles, i.e. (N - 1) / 2 block times. An all-reduce accumulates partial sums in the
router's ACC unit as they pass each board: N - 1 hops, each with an FP32 add.

An expert layer's combine (experts.py) moves each sender's output to every other board: on
DFX's router a sender's vector circulates like a sub-vector of its all-gather; on LORA's
each board's slice goes the short way round, so the time is set by the most loaded link.
"""

from functools import lru_cache
from math import ceil

from archipelago.hardware.device import Link

# seeds/001 §V-E: "The router seamlessly transfers 64 x 16 bit data".
DFX_BEAT_BITS = 64 * 16
# Not stated in seeds/001 (§VI names only the 200 MHz kernel and 410 MHz memory clocks): the
# Aurora core runs on its own user_clk, derived from the transceiver ("all logic touching the
# core must be driven by user_clk", PG074 Clocking), so the router's beats cross clock domains
# twice a hop; each crossing taken as a two-flop synchronizer, two kernel cycles.
DFX_CDC_CYCLES = 2
# Calibration (issue #20): what each DFX sync costs beyond the mechanisms above (router
# control and handshake, Aurora framing, the instruction pipeline's restart), once per sync.
# Fitted so that gpt2-345m on four U280s at 64:64 tokens gives 207.56 tokens/s (issue #20's
# point); refit with `python -m benchmarks.calibrate_dfx`. Every other point is a prediction.
# At 5.0 us (5.2 us before issue #23 overlapped the heads' Score x Value drains) it sits at
# the top of the few microseconds a router's control and the pipeline
# restart plausibly add (the hops above take 1.2 us on four boards). It was 7.9 us while the
# plan split the LM head by vocabulary with an argmax gather, which the paper never
# describes (four syncs per layer, none for the head): the whole head on every core is the
# per-token cost that fit had folded into the syncs.
DFX_SYNC_OVERHEAD_S = 5.005e-6
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


def dfx_hop_s(values: int, link: Link, clock_hz: float, value_bits: int = 16) -> float:
    """One store-and-forward hop of a sub-vector of `values`: TX buffer fill, two clock
    crossings, the link latency, the beats at the payload rate (never faster than one beat
    per kernel cycle) and the reorder module's write, all one after the other."""
    beats = dfx_beats(values, value_bits)
    cycle_s = 1 / clock_hz
    wire_beat_s = max(DFX_BEAT_BITS / 8 / link.bandwidth_Bps, cycle_s)
    buffer_s = 2 * beats * cycle_s  # TX fill from, and reorder write into, the register file
    return buffer_s + 2 * DFX_CDC_CYCLES * cycle_s + link.latency_s + beats * wire_beat_s


def dfx_all_gather_s(values_per_rank: int, ranks: int, link: Link, clock_hz: float,
                     value_bits: int = 16) -> float:
    """Every core's sub-vector of `values_per_rank` circulates a one-way ring: N - 1 hops
    in step (each link carries one sub-vector a step), plus the per-sync overhead."""
    if ranks == 1:
        return 0.0
    return ((ranks - 1) * dfx_hop_s(values_per_rank, link, clock_hz, value_bits)
            + DFX_SYNC_OVERHEAD_S)


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


@lru_cache(maxsize=256)
def ring_slice_load(ranks: int, senders: int) -> int:
    """Slices the busiest directed link carries when `senders` adjacent boards each send
    every other board its slice the short way round a ring of `ranks` (a tie, N/2 hops,
    goes clockwise). Adjacent senders share the most links: the worst placement."""
    load: dict[tuple[int, int], int] = {}
    for src in range(senders):
        for hops in range(1, ranks):
            step = 1 if hops <= ranks - hops else -1
            for h in range(min(hops, ranks - hops)):
                link = ((src + step * h) % ranks, step)
                load[link] = load.get(link, 0) + 1
    return max(load.values(), default=0)


def lora_all_to_all_s(bytes_per_slice: float, senders: int, ranks: int, link: Link) -> float:
    """Each sender's slices reach the farthest board ceil((N-1)/2) hops away, streamed
    through the busiest link a block after another (full-duplex ports, seeds/002 §IV-C)."""
    if ranks == 1 or senders == 0:
        return 0.0
    word_s = LORA_PORT_BITS / 8 / link.bandwidth_Bps
    return (ceil((ranks - 1) / 2) * link.latency_s
            + ring_slice_load(ranks, senders) * _lora_words(bytes_per_slice) * word_s)
