"""DFX compute core (seeds/001 §IV-V): cycle and resource model.

The core streams weight tiles of d x l FP16 values from 32 HBM channels (32 x 512 bits per
cycle at 200 MHz, §V-B) into a matrix function unit of l adder-tree lanes of depth log2(d)
(§V-C). Tiles are visited in a zigzag of d x d blocks (§V-B, Fig. 9): d / l tiles across,
then one tile down, so each lane keeps d / l partial sums in flight, and its one scalar FP16
adder (the 2 x l "scalar addition" DSPs of §V-C, 11 cycles) must finish adding one tile
row's partial sum before the next tile row's arrives for the same column. A block row
therefore takes max(d / l, 11) cycles whenever the matrix has more than one tile row.

Every matrix-matrix product runs as a sequence of matrix-vector products (§IV-C), and the
controller counts decoder layers per token (§V-A): the prompt is summarized one token at a
time through the whole model, exactly like generation (`token_serial_prefill`), which is
why DFX "retains" its GFLOPS in both stages (§VII). LayerNorm, Softmax and residuals are
sequences of d-wide vector instructions on the VFU; dependent instructions stall on the
scoreboard (§V-A), so each pays its pipeline latency. WTE/WPE rows for the embedding come
from DDR once per token (§IV-B: DDR data have "a negligible effect on the overall
performance"); the LM head, a weight matrix like any other, streams the whole vocabulary
from HBM on every core (the plan splits only attention and FC weights). Synchronization
goes through the router (`router.py`, §V-E): four stalling ring all-gathers per layer,
LayerNorm and residuals replicated on every core (§VII).
"""

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from archipelago.engines.base import (
    FP16_ADD_CYCLES,
    FP16_EXP_CYCLES,
    FP16_MUL_CYCLES,
    FP16_RECIP_CYCLES,
    CycleHandler,
    Number,
    block_counts,
    ceil_div,
    dispatch_cycles,
    floor_log2,
    least,
)
from archipelago.hardware.cluster import Cluster
from archipelago.hardware.device import Resources
from archipelago.models.graph_ops import Phase
from archipelago.models.spec import ModelSpec
from archipelago.strategies.tensor_parallel.engines.dfx_config import DFXConfig, DFXVariants
from archipelago.strategies.tensor_parallel.engines.router import dfx_all_gather_s
from archipelago.strategies.tensor_parallel.engines.widening import (
    dequant_units,
    kv_widen_cycles,
    rescale_cycles,
)
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep

# Load/store bypass the VFU execution stage: one cycle (seeds/001 §V-C).
BYPASS_CYCLES = 1
# Not stated in seeds/001: comparator-tree levels of the reduce-max unit (§V-C, SFU_M) taken
# as one registered cycle each.
COMPARE_LEVEL_CYCLES = 1

# Calibration (issues #2 and #9): the one constant of this engine, the fraction of cycles in
# which the matrix unit is fed the tile it could take (HBM refresh and page switches, DMA
# arbitration between 32 channels). Fitted so that gpt2-345m on one U280 at 64:64 tokens
# gives DFX's 93.1 tokens/s (the point issue #2 names); refit with
# `python -m benchmarks.calibrate_dfx`. Every other configuration is a prediction.
# Issue #23: it was 0.9265 while every head's Score x Value paid its pipeline drain; the
# timing simulator (dfx_program/timing.py) without it, its cycles all mechanisms, predicts
# 102.8 tokens/s for this point: the 10% it leaves is what this constant stands for. The
# simulator divides its matrix block rows by the same figure (issue #34, units.py).
DFX_TILE_EFFICIENCY = 0.8975
WEIGHTED = ("linear", "lm_head")  # the kinds that stream weights

class DFXEngine:
    """Cycles per plan step and resources of one core; stateless apart from its config."""

    name = "dfx"
    # §V-A: the controller runs the decoder layers once per token, prompt tokens included.
    token_serial_prefill = True
    instruction_set: ClassVar[str | None] = DFXConfig.instruction_set
    # its build: every core's compiled program (§IV-C)
    builder: ClassVar[str] = \
        "archipelago.strategies.tensor_parallel.dfx_program.build:write_programs"
    # §V-A/B: one token of one sequence at a time; "weights and biases cannot be reused in
    # matrix multiplications due to no input batching".
    one_sequence: ClassVar[str | None] = (
        "DFX runs one sequence at a time (seeds/001 §V-A, §V-B: no input batching): a batch "
        "is costed as its sequences in turn")
    # One token at a time, its weights streamed for it (§V-B): a step reads that token's k
    # experts, whatever the routing.
    expert_skew = 0.0

    def __init__(self, config: DFXConfig | DFXVariants | None = None, ranks: int = 1,
                 table_Bps: float | None = None) -> None:
        """`ranks` sizes the router's buffers by a device's share; `table_Bps` is the rate
        of the memory the WTE/WPE rows come from: one HBM pseudo-channel's on a board
        without DDR, else (None) the configured DDR channel's (§IV-B)."""
        self.config = config or DFXConfig()
        self.ranks, self.table_Bps = ranks, table_Bps
        self.table_values_per_cycle = self.config.row_values_per_cycle(
            self.config.ddr_Bps if table_Bps is None else table_Bps)
        self._cycles: dict[str, CycleHandler] = {
            "linear": self._linear, "lm_head": self._lm_head,
            "attn_score": self._attn_score, "softmax": self._softmax,
            "attn_context": self._attn_context, "norm": self._norm,
            "residual": self._residual, "activation": self._activation,
            "gated_activation": self._gated_activation, "embedding": self._embedding,
        }

    def variants(self, configs: Sequence[DFXConfig]) -> "DFXEngine":
        """This core's variants `configs` (differing from its config in VARIED parameters
        only) as one engine whose figures have a leading axis over them."""
        return DFXEngine(DFXVariants.of(configs), self.ranks, self.table_Bps)

    @property
    def hbm_bytes_per_cycle(self) -> Number:
        """Bytes the tile stream pulls from HBM each cycle (at most the 32 x 512 bits)."""
        c = self.config
        size = c.format.weight_bytes
        return least(c.d * c.l, c.stream_values_per_cycle(size)) * size

    @property
    def peak_ops_per_s(self) -> Number:
        """The MFU's roof: l lanes of d multipliers feeding adder trees, one d x l tile
        per cycle (seeds/001 §V-B, §V-C), a multiply and an add per weight."""
        c = self.config
        return 2 * c.d * c.l * c.clock_hz

    def seconds(self, step: ComputeStep, phase: Phase) -> np.ndarray:
        return self.cycles(step, phase) / self.config.clock_hz

    def streamed_bytes(self, step: ComputeStep, phase: Phase) -> np.ndarray:
        """HBM bytes `step` reads at each context: a matrix's weights, or every local
        head's keys or values, once per row; zero for the VFU's on-chip rows."""
        m, t, fmt, op = phase.new_tokens, np.asarray(phase.context), self.config.format, step.op
        nbytes = (m * op.fan_in * step.local_out * fmt.weight_bytes if op.kind in WEIGHTED
                  else step.local_heads * m * op.fan_in * t * fmt.kv_bytes
                  if op.kind in ("attn_score", "attn_context") else 0.0)
        return np.zeros_like(t, dtype=float) + nbytes

    def read_roof(self, step: ComputeStep, phase: Phase) -> tuple[str, np.ndarray] | None:
        """`streamed_bytes`' memory, its most bytes a second (§V-B); None: VFU work."""
        c, kind = self.config, step.op.kind
        if kind not in (*WEIGHTED, "attn_score", "attn_context"):
            return None
        size = c.format.weight_bytes if kind in WEIGHTED else c.format.kv_bytes
        rate = min(c.d * c.l, c.stream_values_per_cycle(size)) * size * c.clock_hz
        return "HBM stream" + ("" if kind in WEIGHTED else ", KV cache"), np.full(
            np.shape(phase.context), rate)

    def cycles(self, step: ComputeStep, phase: Phase) -> np.ndarray:
        return dispatch_cycles(self._cycles, "DFX", step, phase)

    def collective_seconds(self, step: CommStep, rows: int, cluster: Cluster) -> float:
        """The router's ring circulation of each core's slice (seeds/001 §V-E); an expert
        combine circulates each sender's whole vector the same way (experts.py)."""
        ranks = cluster.size
        if ranks == 1:
            return 0.0
        values = step.width if step.kind == "all_to_all" else step.share(ranks)
        return dfx_all_gather_s(rows * values, ranks, cluster.link(0, 1),
                                self.config.clock_hz, self.config.data_bits)

    # --- matrix instructions (MFU + SFU_M) ---------------------------------------------
    def matrix_vector_cycles(self, fan_in: int | np.ndarray, fan_out: int | np.ndarray,
                             stored_bytes: float | None = None) -> np.ndarray:
        """One input row against a fan_in x fan_out matrix of `stored_bytes` values (None:
        weights): zigzag blocks of d / l tiles, each block row max(tiles x feed, adder
        latency) once partial sums recur (§V-B/C)."""
        c = self.config
        tile_feed = c.tile_feed_cycles if stored_bytes is None else c.feed_cycles(stored_bytes)
        rows, groups = ceil_div(fan_in, c.d), ceil_div(fan_out, c.l)
        width = c.zigzag_tiles
        full, rest = groups // width, groups % width

        def block(tiles: int | np.ndarray) -> np.ndarray:
            feed = tiles * tile_feed
            recur = np.where(rows > 1, np.maximum(feed, FP16_ADD_CYCLES), feed)
            return np.where(tiles > 0, feed + (rows - 1) * recur, 0)

        return (full * block(width) + block(rest)) / DFX_TILE_EFFICIENCY

    def _linear(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """The tiles, then the MFU's drain (and a group format's scaling, widening.py)."""
        return m * self.matrix_vector_cycles(step.op.fan_in, step.local_out) + \
            self.config.mfu_latency + rescale_cycles(self.config.format)

    def _lm_head(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """MM of the last row against the vocabulary, then argmax (SFU_M's reduce-max)."""
        return self._linear(step, m, t) + self._reduce_max_cycles

    def _attn_score(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """MaskedMM: the query against Key^T (head_dim x t) tiles, then ReduMax, per head."""
        c = self.config
        kv = c.format.kv_bytes
        per_head = (m * self.matrix_vector_cycles(step.op.fan_in, t, kv) + c.mfu_latency
                    + self._reduce_max_cycles)
        return step.local_heads * per_head + kv_widen_cycles(c.format)

    def _attn_context(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """MM: Score x Value, Value stored transposed (§V-B), per head. The next head's
        MaskedMM does not depend on this MM (the scoreboard holds an instruction only on an
        overlap with a running one's destination, §V-A; "instructions without dependencies
        work in parallel", §IV-C), so it enters the pipelined MPU behind this MM's last
        tile: only the last head's pipeline drain is exposed (the timing simulator,
        dfx_program/timing.py, schedules it so)."""
        c = self.config
        return (step.local_heads * m * self.matrix_vector_cycles(t, step.op.fan_in,
                                                                 c.format.kv_bytes)
                + c.mfu_latency + kv_widen_cycles(c.format))

    @property
    def _reduce_max_cycles(self) -> Number:
        return floor_log2(self.config.l) * COMPARE_LEVEL_CYCLES

    # --- vector instructions (VFU + SFU_V) ---------------------------------------------
    def _passes(self, rows: int, width: int | np.ndarray) -> np.ndarray:
        """One vector instruction over `rows` rows of `width`, d lanes per cycle."""
        return rows * ceil_div(width, self.config.d)

    def _accum(self, rows: int, width: int | np.ndarray) -> np.ndarray:
        """`accum`: the SFU_V adder tree reduces each d-chunk, then one scalar adder sums the
        chunk results, each add waiting for the previous one (§V-C)."""
        c = self.config
        return self._passes(rows, width) * FP16_ADD_CYCLES + c.tree_cycles

    def _softmax(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """sub max, exp, accum, recip, mul: a dependent chain per head (§IV-C)."""
        chain = (3 * self._passes(m, t) + FP16_ADD_CYCLES + FP16_EXP_CYCLES
                 + self._accum(m, t) + FP16_RECIP_CYCLES + FP16_MUL_CYCLES)
        return step.local_heads * chain

    def _norm(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """LayerNorm as the vector-instruction sequence of §IV-C: accum, mul(1/W), sub, mul
        (square), accum, mul(1/W), add(eps), recip_sqrt, mul, mul(gamma), add(beta), with
        gamma and beta loaded into the register file. Run on the whole row on every core:
        DFX does not split LayerNorm (§VII Scalability)."""
        width = step.op.fan_out
        elementwise = 5 * self._passes(m, width) + 2 * FP16_ADD_CYCLES + 3 * FP16_MUL_CYCLES
        scalars = m + 2 * FP16_MUL_CYCLES + FP16_ADD_CYCLES + FP16_RECIP_CYCLES  # a row a cycle
        loads = 2 * (self._passes(1, width) + BYPASS_CYCLES)
        return 2 * self._accum(m, width) + elementwise + scalars + loads

    def _residual(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """Replicated on every core like LayerNorm (§VII Scalability)."""
        return BYPASS_CYCLES + self._passes(m, step.local_out) + FP16_ADD_CYCLES

    def _activation(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """GELU by lookup + linear interpolation in SFU_M, on the MFU output stream."""
        return np.asarray(FP16_MUL_CYCLES + FP16_ADD_CYCLES)

    def _gated_activation(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """SFU_M activation, then a VFU multiply pass."""
        return (FP16_MUL_CYCLES + FP16_ADD_CYCLES + self._passes(m, step.local_out)
                + FP16_MUL_CYCLES)

    def _embedding(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """WTE and WPE rows from DDR (or HBM where the board has no DDR), then one add
        pass."""
        width = step.op.fan_out
        row_cycles = 2 * width / self.table_values_per_cycle
        return m * (row_cycles + self._passes(1, width)) + FP16_ADD_CYCLES

    def resources(self, spec: ModelSpec) -> dict[str, Resources]:
        """One core's resources by unit (`unit_counts`)."""
        return {unit: Resources(**{name: int(count) for name, count in counts.items()})
                for unit, counts in self.unit_counts(spec).items()}

    def unit_counts(self, spec: ModelSpec) -> dict[str, dict[str, Number]]:
        """DSP from §V-C's operator mapping; BRAM/URAM from the buffers the core needs;
        arrays over variants where the config holds them."""
        c = self.config
        d, l = c.d, c.l  # noqa: E741
        # MFU: d*l multipliers (1 DSP), (d-1)*l tree adders (2 DSP), l scalar adders (2 DSP).
        mfu = {"dsp": d * l + 2 * (d - 1) * l + 2 * l}
        # VFU: d lanes of add, sub, mul (1 DSP each) and exp (2 DSP) (§V-C).
        vfu = {"dsp": d * (1 + 1 + 1 + 2)}
        # SFU_V: d-input adder tree (2 DSP per adder) and scalar recip, mul, rsqrt (1 DSP)
        # and add (2 DSP); SFU_M: GELU linear interpolation (mul + add) and the head-scale
        # multiplier on each of l lanes; masking and reduce-max are comparators in LUTs.
        sfu = {"dsp": 2 * (d - 1) + 3 + 2 + l * (1 + 2 + 1)}
        word = d * c.data_bits  # one d-vector per register-file access
        live_values = 7 * spec.hidden + spec.widest_ffn  # activations of one token in a block
        buffers = _buffers(
            # DMA: one burst FIFO per HBM channel and one for DDR (assumed 512 deep).
            (c.hbm_channels + 1, block_counts(c.channel_bits, 512)),
            # Vector register file: the window of tokens' live activations (§V-D).
            (1, block_counts(word, c.window_tokens * live_values // d)),
            # Score row double buffer for Softmax over the longest context.
            (1, block_counts(word, 2 * ceil_div(spec.max_positions, d))),
            # Router TX and RX buffers of 64 x 16-bit beats (§V-E): a hop moves one core's
            # sub-vector, so they hold this core's share of the widest sync, not all of it.
            (2, block_counts(word, c.window_tokens * ceil_div(spec.widest_ffn, self.ranks)
                             // d)),
            # Value transpose unit: a double-buffered d x d tile (§V-B).
            (1, block_counts(word, 2 * d)),
            # GELU table: 2048 (slope, intercept) FP16 pairs per lane (§V-C).
            (l, block_counts(2 * c.data_bits, 2048)),
            # Instruction buffer and scalar register file.
            (1, block_counts(64, 1024)), (1, block_counts(c.data_bits, 1024)),
        )
        units = {"mfu": mfu, "vfu": vfu, "sfu": sfu, "buffers": buffers}
        # A narrower stored format's widening lanes, one per value the MFU takes a cycle,
        # and one FP16 multiplier (1 DSP) per lane's sum for a group's scale (widening.py).
        dequant = dequant_units(c.format, d * l, l)
        return {**units, "dequant": dequant} if dequant else units


def _buffers(*parts: tuple[Number, dict[str, Number]]) -> dict[str, Number]:
    """The BRAM and URAM of buffers given as (copies, one's `block_counts`)."""
    return {res: sum(copies * one[res] for copies, one in parts) for res in ("bram", "uram")}
