"""LORA compute core (seeds/002 §IV-V): a D_sa x D_sa systolic MPU reused for matrix-matrix
(T_m x T_m tiles, Fig. 3b) and vector-matrix work (a T_m vector against T_v adjacent tiles,
Fig. 8), and a VFU of N_acc accumulators for LayerNorm, Softmax, GELU and scaling.

Latency follows Eq. 8 (double-buffered tiles: L_buf + max(L_buf, L_cal) x CNT + L_cal, CNT
the iterations after the first load); the hybrid memory of §V-C streams prefill weights from
DDR and decode weights from HBM; the KV cache sits in URAM and spills to HBM.

What the text settles:
- A decode iteration takes 2 T_m cycles, not T_m. §V-C: a 32 x 32 array at 200 MHz demands
  "approximately 11 GB/s" in prefill and "around 190 GB/s" in decode. Prefill moves one
  2 KB FP16 weight tile per T_m^3 / D_sa^2 = 32 cycles: 12.8e9 B/s = 11.9 GiB/s, so the
  paper's GB are GiB. Decode moves T_v = 32 tiles (64 KB) per iteration: in 2 T_m = 64
  cycles that is 204.8e9 B/s = 190.7 GiB/s ("around 190"); in T_m cycles it would be 381.
  Physically: the vector crosses each T_m-long 1D array, then its last PE drains.
- An iteration's T_v tiles are the next T_v in traversal order, across rows of tiles. §IV-A
  loads "a vector of dimension T_m along with T_v adjacent tiles" and §IV-B feeds every 1D
  array "the same horizontal vector input"; neither says adjacent along which axis. Were an
  iteration confined to one row of tiles, a 1024-column matrix (16 tiles of 64) would leave
  48 of LORA-Q's 64 arrays idle and its decode would be bound by the array, not by HBM -
  yet §VI-A-d says LORA-Q's parallelism on GPT-2 345M (whose q, k, v, out and FFN-down
  matrices are all 1024 columns wide) "is bounded by the HBM bandwidth", and §IV-B-c that
  the INT8 array grows until HBM bounds decode. So the horizontal input carries each tile
  row's T_m slice (the "additional data paths" of §IV-B) and a board's narrow slice of a
  matrix fills the array like a wide one; partial sums of one column block meet in the
  write-back.
- Decode is bound by HBM, not by the array, once D_sa^2 x bytes / 2 per cycle exceeds what
  HBM delivers: each HBM pseudo-channel gives min(AXI width x kernel clock, HBM_EFFICIENCY
  x its share of the 460 GB/s peak). At 200 MHz a 512-bit port carries 12.8 GB/s, 409.6
  GB/s over 32 channels (89% of peak); at 250 MHz the port (16 GB/s) outruns the
  channel's 14.375 GB/s. W8A8 halves the bytes of each tile (§V-A), so an HBM-bound int8
  decode streams the same GB/s for half the bytes.
- Attention (QK^T, SV) runs in the same vector mode over every local head's tiles, its
  operands read from the URAM KV cache (72 bits per URAM per cycle, UG573) or, past what
  the URAMs hold, from HBM (§V-C); Softmax rows pipeline through the VFU like LayerNorm's.

Resources follow Eq. 5-7. One fitted constant, HBM_EFFICIENCY (see below). Synchronization
runs on LORA's own router (`router.py`, §IV-C, §V-B). A mixture's experts: a step streams
the tiles of the distinct experts its tokens route to, each token's vector or rows meeting
its own experts' only (`ComputeStep.read`).

A design search (§V-D) costs many cores that differ only in their hardware parameters: the
same engine runs them at once when its config holds each parameter as an array over the
variants (`SystolicVariants`), every formula broadcasting that axis against the contexts'.
"""

from collections.abc import Sequence
from math import ceil
from typing import ClassVar

import numpy as np

from archipelago.engines.base import (
    FP16_ADD_CYCLES,
    FP16_EXP_CYCLES,
    FP16_MUL_CYCLES,
    FP16_RECIP_CYCLES,
    CycleHandler,
    ceil_div,
    dispatch_cycles,
    least,
)
from archipelago.engines.dsp_packing import products_per_dsp
from archipelago.errors import PartitionError
from archipelago.hardware.cluster import Cluster
from archipelago.hardware.device import Device, Resources
from archipelago.models.graph_ops import Phase
from archipelago.models.spec import ModelSpec
from archipelago.strategies.tensor_parallel.engines.router import (
    lora_all_gather_s,
    lora_all_reduce_s,
    lora_all_to_all_s,
    lora_link,
)
from archipelago.strategies.tensor_parallel.engines.systolic_config import (
    SystolicConfig,
    SystolicVariants,
)
from archipelago.strategies.tensor_parallel.engines.systolic_resources import (
    URAM_BYTES,
    Number,
    unit_counts,
)
from archipelago.strategies.tensor_parallel.engines.widening import (
    kv_widen_cycles,
    rescale_cycles,
)
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep
from archipelago.strategies.tensor_parallel.planning.heads import cached_values

# UltraScale+ URAM288 read port: 72 bits per cycle (UG573); one port per URAM reads the KV
# cache while the other writes the new token's keys and values.
URAM_READ_BYTES = 72 // 8
# Read latency of an on-chip buffer access (L_buf for on-chip operands): two cycles for a
# registered BRAM read (UG573).
ONCHIP_READ_CYCLES = 2
# A decode iteration: the T_m vector crosses each 1D array, then its last PE drains
# (seeds/002 §V-C's "around 190 GB/s" for 32 x 32 at 200 MHz; see the module doc).
DECODE_WAVEFRONT_PASSES = 2
# The one fitted constant: the fraction of an HBM pseudo-channel's peak (the U280's 460
# GB/s over 32, seeds/002 §VI-A-c) that the decode's tile reads sustain (refresh, row
# activations and the AXI switch between the kernel's ports and the pseudo-channels);
# plausible between 0.5 and 1. Fitted by `python -m benchmarks.calibrate_lora` to the one
# calibration point issue 20 names: LORA-F, gpt2-345m, 32:256 tokens on one U280 = 678.4
# ms end to end, with the published LORA-F engine (48 x 48 at 200 MHz, the strategies'
# registration derives it from seeds/002 §VI-A-d), whose 460.8 GB/s decode demand HBM
# bounds (tests/test_lora_engine.py). Decode streams 303 GB/s there (66% of peak), the rest
# Eq. 8's first loads and last computes and the VFU. (0.6885, issue 20, fitted at 40 x 40.)
HBM_EFFICIENCY = 0.6986


def _eq8(l_buf: float | np.ndarray, l_cal: float, iterations: int | np.ndarray) -> np.ndarray:
    """Eq. 8 over double-buffered iterations: the first load, then each later load hidden
    behind (or hiding) the previous iteration's compute, then the last compute."""
    return l_buf + np.maximum(l_buf, l_cal) * (iterations - 1) + l_cal


class SystolicEngine:
    """Cycles per plan step and resources of one LORA core."""

    name = "systolic"
    # The prompt runs as T_m x T_m matrix tiles (Fig. 3b), not token by token.
    token_serial_prefill = False
    # seeds/002 describes LORA's datapath and Control Unit, but no instruction set to emit.
    instruction_set: ClassVar[str | None] = None
    # so its build is what the Control Unit and HLS source are made from: each board's
    # memory layout, the synchronization schedule, the engine parameters as a header
    builder: ClassVar[str] = \
        "archipelago.strategies.tensor_parallel.lora_build.emit:write_build"
    # A batch's decode vectors share each weight tile the Control Unit loads: the MPU takes
    # them in turn against the buffered T_v tiles (Fig. 8), or as the rows of a T_m x T_m
    # activation tile (Fig. 3b) with the tiles from HBM, whichever is sooner (`_matmul`).
    # §III-B designs for "an input batch size of one" to keep latency low; nothing in the
    # datapath stops B rows sharing a tile, so B sequences run together.
    one_sequence: ClassVar[str | None] = None

    def __init__(self, config: SystolicConfig | SystolicVariants, device: Device,
                 spec: ModelSpec, ranks: int) -> None:
        self.config, self.device, self.spec, self.ranks = config, device, spec, ranks
        hbm, ddr = device.memory("hbm"), device.memory("ddr")
        assert hbm is not None, "LORA streams decode weights from HBM (seeds/002 §V-C)"
        channel_peak = hbm.bandwidth_Bps / hbm.channels
        per_channel = least(config.hbm_axi_bits / 8 * config.clock_hz,
                            HBM_EFFICIENCY * channel_peak)
        self.hbm_bytes_per_cycle = config.hbm_channels * per_channel / config.clock_hz
        # Prefill weights and tables stream from DDR (§V-C), or on a board without DDR
        # (U55C) from the HBM copy the plan keeps instead.
        self.ddr_bytes_per_cycle = (ddr.bandwidth_Bps / config.clock_hz if ddr is not None
                                    else self.hbm_bytes_per_cycle)
        self.local_kv_values = cached_values(spec, ranks)  # per token and layer
        self.uram_bytes_per_cycle = config.kv_uram * URAM_READ_BYTES
        self.format = fmt = config.format
        # Integer products one DSP packs a cycle (engines/dsp_packing.py); FP16 formats
        # spend DSPs per operator instead (systolic_resources.PSI_FP16).
        self.packed = 1
        if fmt.integer:
            if device.dsp_kind is None:
                raise PartitionError(f"--precision {fmt.name}: device '{device.key}' states "
                                     "no dsp_kind, which sets the products a DSP packs")
            self.packed = products_per_dsp(device.dsp_kind, fmt.weight_bits,
                                           fmt.activation_bits)
        # K and V of every layer, in the format's KV width (SmoothQuant O3 quantizes the
        # attention matmuls' inputs too, seeds/002 §IV-B-c: INT8 under W8A8)
        kv_bytes_per_token = spec.layers * self.local_kv_values * fmt.kv_bytes
        self.kv_tokens_onchip = config.kv_uram * URAM_BYTES // kv_bytes_per_token
        # The ACC module's binary tree over N_acc partial sums, an FP16 adder per level.
        self._tree_cycles = np.ceil(np.log2(np.maximum(config.n_acc, 2))) * FP16_ADD_CYCLES
        self._cycles: dict[str, CycleHandler] = {
            "linear": self._matmul, "lm_head": self._matmul,
            "attn_score": self._attention, "attn_context": self._attention,
            "softmax": self._softmax, "norm": self._norm, "residual": self._elementwise,
            "activation": self._elementwise, "gated_activation": self._gated,
            "embedding": self._embedding,
        }

    def variants(self, configs: Sequence[SystolicConfig]) -> "SystolicEngine":
        """This core's variants `configs` (differing from its config in VARIED parameters
        only) as one engine whose figures have a leading axis over them."""
        return SystolicEngine(SystolicVariants.of(configs), self.device, self.spec, self.ranks)

    @property
    def expert_skew(self) -> float:
        return self.config.expert_skew

    @property
    def peak_ops_per_s(self) -> float:
        """The array's roof: D_sa^2 PEs, one multiply-accumulate each per cycle (Fig. 3b's
        T_m^3 / D_sa^2 cycles per tile pair, seeds/002)."""
        return 2 * self.config.d_sa ** 2 * self.config.clock_hz

    def seconds(self, step: ComputeStep, phase: Phase) -> np.ndarray:
        return self.cycles(step, phase) / self.config.clock_hz

    def streamed_bytes(self, step: ComputeStep, phase: Phase) -> np.ndarray:
        """Weight and KV-cache bytes `step` reads at each context (HBM, DDR or the URAM KV
        cache), whole tiles as the MPU fetches them; zero for VFU work on buffered rows."""
        m, t = phase.new_tokens, np.asarray(phase.context)
        kind, sequences = step.op.kind, step.sequences
        if kind in ("linear", "lm_head"):  # a decode batch shares each tile
            read, meets = step.read(m * sequences, self.config.expert_skew)
            rows = ceil(m * sequences * meets) if m > 1 else 1
            nbytes = self._weight_tiles(read, rows) * self._tile_bytes
        elif kind in ("attn_score", "attn_context"):  # each sequence its own KV cache
            nbytes = sequences * self._kv_tiles(step, m, t) * self._kv_tile_bytes
        elif kind == "embedding":
            nbytes = m * sequences * self._embedding_row_bytes(step)
        else:
            nbytes = 0.0
        return np.zeros_like(t, dtype=float) + nbytes

    def read_roof(self, step: ComputeStep, phase: Phase) -> tuple[str, np.ndarray] | None:
        """Where `streamed_bytes` come from and at most how fast (§V-C): decode weights from
        HBM, prefill's from DDR, decode K and V from the URAMs (HBM past what they hold),
        prefill's from on-chip buffers; None for the VFU's buffered rows."""
        kind, t, clock = step.op.kind, np.zeros(np.shape(phase.context)), self.config.clock_hz
        if kind in ("linear", "lm_head"):
            return (("HBM stream", t + self.hbm_bytes_per_cycle * clock) if phase.new_tokens == 1
                    else ("DDR stream", t + self.ddr_bytes_per_cycle * clock))
        if kind not in ("attn_score", "attn_context"):
            return None
        if phase.new_tokens == 1:
            return "KV cache", clock / self._kv_cycles_per_byte(phase.context, step.sequences)
        return "on-chip tiles", t + self._kv_tile_bytes / ONCHIP_READ_CYCLES * clock

    def collective_seconds(self, step: CommStep, rows: int, cluster: Cluster) -> float:
        """LORA's router: all-gathers both ways round the ring with merged one-way cycles,
        all-reduces accumulated hop by hop in its ACC unit (seeds/002 §IV-C)."""
        ranks = cluster.size
        if ranks == 1:
            return 0.0
        link = lora_link(cluster.link(0, 1).latency_s)
        if step.kind == "all_reduce":  # every rank holds the full partial-sum vector
            return lora_all_reduce_s(rows * step.width * step.value_bytes, ranks, link,
                                     self.config.clock_hz)
        if step.kind == "all_to_all":  # each sender's slices, the short way round
            return lora_all_to_all_s(rows * step.share(ranks) * step.value_bytes,
                                     step.senders, ranks, link)
        per_rank = rows * step.share(ranks) * step.value_bytes
        return lora_all_gather_s(per_rank, ranks, link)

    # --- MPU ---------------------------------------------------------------------------
    @property
    def _tile_bytes(self) -> float:
        """A weight tile as stored (group scales included)."""
        return self.config.t_m ** 2 * self.format.weight_bytes

    @property
    def _kv_tile_bytes(self) -> float:
        return self.config.t_m ** 2 * self.format.kv_bytes

    def _fill(self) -> int:
        """Systolic fill and drain: a wavefront crosses the array twice."""
        return 2 * self.config.d_sa

    def _vector_matrix(self, tiles: int | np.ndarray, cycles_per_byte: float | np.ndarray,
                       vectors: float = 1, tile_bytes: float | None = None) -> np.ndarray:
        """Fig. 8: per iteration one vector meets the next T_v tiles in 2 T_m cycles (L_cal)
        while the following T_v tiles stream in (L_axi), Eq. 8; a batch's `vectors` pass
        the buffered tiles in turn, so L_cal grows and L_axi does not."""
        c = self.config
        iterations = ceil_div(tiles, c.t_v)
        size = self._tile_bytes if tile_bytes is None else tile_bytes
        l_axi = tiles / iterations * size * np.asarray(cycles_per_byte)
        return _eq8(l_axi, vectors * DECODE_WAVEFRONT_PASSES * c.t_m, iterations)

    def _matrix_matrix(self, m: int, k: int | np.ndarray, n: int | np.ndarray,
                       stream_bytes_per_cycle: Number | None) -> np.ndarray:
        """Fig. 3b: T_m x T_m tile pairs, T_m^3 / D_sa^2 cycles each; Eq. 8. Tiles stream
        in at `stream_bytes_per_cycle`, or (None) are read from on-chip buffers."""
        c = self.config
        count = ceil_div(m, c.t_m) * ceil_div(k, c.t_m) * ceil_div(n, c.t_m)
        l_cal = c.t_m ** 3 / c.d_sa ** 2
        l_buf = (ONCHIP_READ_CYCLES if stream_bytes_per_cycle is None
                 else self._tile_bytes / stream_bytes_per_cycle)
        return _eq8(l_buf, l_cal, count) + self._fill()

    def _kv_cycles_per_byte(self, context: np.ndarray, sequences: int = 1) -> np.ndarray:
        """The KV read's pace: the URAM-held rows and the rows spilled to HBM stream side by
        side, the slower share setting it; a batch's caches share the URAMs."""
        held = sequences * context
        spilled = np.maximum(held - self.kv_tokens_onchip, 0) / held
        ports = self.uram_bytes_per_cycle  # none where no URAM holds the cache
        uram = np.where(ports > 0, (1 - spilled) / np.maximum(ports, 1), 0.0)
        return np.maximum(uram, spilled / self.hbm_bytes_per_cycle)

    # --- VFU ---------------------------------------------------------------------------
    def _sweeps(self, rows: int, width: int | np.ndarray, sweeps: int) -> np.ndarray:
        """`sweeps` passes of N_acc lanes over each of `rows` rows (rows pipeline)."""
        return rows * sweeps * ceil_div(width, self.config.n_acc)


    def _stats(self, rows: int, width: int | np.ndarray) -> np.ndarray:
        """LayerNorm partial sums: one sweep squaring and adding (Eq. 7's ACC), the tree,
        then mean and variance (two multiplies and a subtract). §VI-C puts this at about
        121 cycles for a row of 384 (GPT-2 1.5B on four boards)."""
        return (self._sweeps(rows, width, 1) + FP16_MUL_CYCLES + self._tree_cycles
                + 2 * FP16_MUL_CYCLES + FP16_ADD_CYCLES)

    def _apply(self, rows: int, width: int | np.ndarray) -> np.ndarray:
        """(x - mean) * rsqrt(var) * gamma + beta on the Scaling module."""
        return (self._sweeps(rows, width, 1) + FP16_RECIP_CYCLES + 2 * FP16_ADD_CYCLES
                + 2 * FP16_MUL_CYCLES)

    def _norm(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        width, rows = step.local_out, m * step.sequences
        stats, apply = self._stats(rows, width), self._apply(rows, width)
        return {"stats": stats, "apply": apply, "whole": stats + apply}[step.stage]

    def _softmax(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """A max sweep, an exp-and-sum sweep through the tree and a scaling sweep per row;
        every head's rows pipeline through the VFU (§IV-B-b: a matrix is split into rows
        processed independently), so the chain's latency shows once. FP16 in LORA-Q too
        (§VI-C)."""
        chain = (2 * self._tree_cycles + FP16_ADD_CYCLES + FP16_EXP_CYCLES
                 + FP16_RECIP_CYCLES + FP16_MUL_CYCLES)
        return self._sweeps(m * step.sequences * step.local_heads, t, 3) + chain

    def _elementwise(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """Residual add or piece-wise linear GELU (a multiply and an add per element)."""
        rows = m * step.sequences
        return self._sweeps(rows, step.local_out, 1) + FP16_MUL_CYCLES + FP16_ADD_CYCLES

    def _gated(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        rows = m * step.sequences
        return self._sweeps(rows, step.local_out, 2) + 2 * FP16_MUL_CYCLES + FP16_ADD_CYCLES

    def _embedding_row_bytes(self, step: ComputeStep) -> float:
        """A token's and a position's table rows (this device's columns)."""
        return 2 * step.local_out * self.format.weight_bytes

    def _embedding(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """Table rows from DDR, then one add sweep."""
        row, rows = self._embedding_row_bytes(step) / self.ddr_bytes_per_cycle, m * step.sequences
        return rows * row + self._sweeps(rows, step.local_out, 1) + FP16_ADD_CYCLES

    # --- MPU dispatch ------------------------------------------------------------------
    def _weight_tiles(self, step: ComputeStep, m: int) -> int:
        """Weight tiles a linear layer fetches: each once in decode, once per row tile of
        the activations in prefill (traversed column-major, Fig. 3b)."""
        c = self.config
        tiles = ceil_div(step.op.fan_in, c.t_m) * ceil_div(step.local_out, c.t_m)
        return tiles if m == 1 else ceil_div(m, c.t_m) * tiles

    def _matmul(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """Linear layers and the LM head: vector mode from HBM in decode, tiles from DDR in
        prefill (§V-C). A batch's decode vectors pass each loaded tile in turn, or, once
        that is slower, fill the rows of matrix-mode activation tiles, the weights still
        from HBM (see `one_sequence`)."""
        vectors = step.sequences
        step, meets = step.read(m * vectors, self.config.expert_skew)  # a mixture's experts
        if m == 1:
            vector = self._vector_matrix(self._weight_tiles(step, 1),
                                         1 / self.hbm_bytes_per_cycle, vectors * meets)
            if vectors > 1:
                vector = np.minimum(vector, self._matrix_matrix(
                    ceil(vectors * meets), step.op.fan_in, step.local_out,
                    self.hbm_bytes_per_cycle))
            return vector + rescale_cycles(self.format)
        return self._matrix_matrix(ceil(m * vectors * meets), step.op.fan_in, step.local_out,
                                   self.ddr_bytes_per_cycle) + rescale_cycles(self.format)

    @staticmethod
    def _attention_shape(step: ComputeStep, t: np.ndarray) -> tuple[int | np.ndarray, ...]:
        """(K, N) of one head: QmulKT is head_dim x t, SmulV t x head_dim."""
        return (step.op.fan_in, t) if step.op.kind == "attn_score" else (t, step.op.fan_in)

    def _kv_tiles(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        c = self.config
        k, n = self._attention_shape(step, t)
        per_head = ceil_div(k, c.t_m) * ceil_div(n, c.t_m)
        return ceil_div(m, c.t_m) * step.local_heads * per_head

    def _attention(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """Decode: every local head's K or V tiles in vector mode, read from the URAM KV
        cache or, past what it holds, HBM. Prefill: per head, tile pairs from on chip."""
        sequences = step.sequences
        if m == 1:
            return sequences * self._vector_matrix(
                self._kv_tiles(step, 1, t), self._kv_cycles_per_byte(t, sequences),
                tile_bytes=self._kv_tile_bytes) + kv_widen_cycles(self.format)
        k, n = self._attention_shape(step, t)
        return sequences * step.local_heads * self._matrix_matrix(m, k, n, None)

    def cycles(self, step: ComputeStep, phase: Phase) -> np.ndarray:
        return dispatch_cycles(self._cycles, "LORA", step, phase)

    # --- resources (Eq. 5-7) -----------------------------------------------------------
    def resources(self, spec: ModelSpec) -> dict[str, Resources]:
        return {unit: Resources(**{name: int(count) for name, count in counts.items()})
                for unit, counts in self.unit_counts(spec).items()}

    def unit_counts(self, spec: ModelSpec) -> dict[str, dict[str, Number]]:
        """Fabric resources by unit (MPU, VFU, buffers, dequantization), an array over
        variants where the config holds them (`resources` makes them `Resources` for one
        core): systolic_resources.py."""
        c = self.config
        return unit_counts(c, self.format, self.packed, c.d_sa ** 2 // DECODE_WAVEFRONT_PASSES,
                           spec, self.ranks, self.local_kv_values)
