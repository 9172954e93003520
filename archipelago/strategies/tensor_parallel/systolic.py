"""LORA compute core (seeds/002 §IV-V): a D_sa x D_sa systolic MPU reused for matrix-matrix
(T_m x T_m tiles, Fig. 3b) and vector-matrix work (a T_m vector against T_v adjacent tiles,
Fig. 8), and a VFU of N_acc accumulators for LayerNorm, Softmax, GELU and scaling.

Latency follows Eq. 8 (double-buffered tiles: L_buf + max(L_buf, L_cal) x CNT + L_cal);
the hybrid memory of §V-C streams prefill weights from DDR and decode weights from HBM; the
KV cache sits in URAM and spills to HBM. A decode iteration takes 2 T_m cycles: the vector
crosses the T_m-long 1D arrays and the last column drains (§V-C: a 32 x 32 array "demands
around 190 GB/s" in decode at 200 MHz, i.e. T_v T_m^2 FP16 weights per 2 T_m cycles =
205 GB/s; one T_m would demand 410). W8A8 halves the bytes per iteration and packs two
int8 products per DSP (§V-A), so its array can grow until HBM, not DSPs, bounds decode
(§V-D). Resources follow Eq. 5-7. No constant here is fitted: no issue names a
calibration point, so every figure is a prediction. Synchronization runs on LORA's own
router (`comm.router`, §IV-C, §V-B).
"""

from math import ceil, log2
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from archipelago.engines.base import (
    FP16_ADD_CYCLES,
    FP16_EXP_CYCLES,
    FP16_MUL_CYCLES,
    FP16_RECIP_CYCLES,
    MAX_BITS,
    MAX_CHANNELS,
    MAX_CLOCK_HZ,
    MAX_DIM,
    MAX_TOKENS,
    MIN_CLOCK_HZ,
    CycleHandler,
    EngineConfig,
    ceil_div,
    dispatch_cycles,
)
from archipelago.engines.dsp_packing import PRODUCTS_PER_DSP
from archipelago.hardware.cluster import Cluster
from archipelago.hardware.device import Device, Resources
from archipelago.models.graph import Phase
from archipelago.models.spec import ModelSpec
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep
from archipelago.strategies.tensor_parallel.router import (
    lora_all_gather_s,
    lora_all_reduce_s,
    lora_link,
)

Precision = Literal["fp16", "w8a8"]

# DSP cost of one operator (Table II's Psi), from the FP16 operator mapping of the same
# board's DFX core (seeds/001 §V-C: multiplier 1 DSP, adder 2 DSPs, exponential 2 DSPs).
PSI_FP16 = {"mul": 1.0, "add": 2.0, "exp": 2.0, "square": 1.0}
# W8A8: two int8 products share one DSP48E2 (seeds/002 §V-A); int32 accumulation in LUTs.
PSI_INT8_MAC = 1 / PRODUCTS_PER_DSP
# UltraScale+ memory primitives (UG573): BRAM18 = 1024 x 18 (Eq. 5), BRAM36 = 512 x 72 in
# the reshape mode Eq. 6 uses with 36-bit words; URAM288 = 288 Kb.
URAM_BYTES = 288 * 1024 // 8
# Read latency of an on-chip buffer access (L_buf for on-chip operands): two cycles for a
# registered BRAM read (UG573).
ONCHIP_READ_CYCLES = 2
# Aurora stream port width that packs d rows per transfer (seeds/002 §VI-C: "Given the
# 256-bit data width of the communication IP, up to 16 input rows can be packed").
LINK_PORT_BITS = 256
# A decode iteration: the T_m vector crosses each 1D array, then its last column drains
# (seeds/002 §V-C's 190 GB/s decode demand for 32 x 32 at 200 MHz; see the module doc).
DECODE_WAVEFRONT_PASSES = 2


class SystolicConfig(EngineConfig):
    """Design parameters of one LORA core (the variables the §V-D search explores)."""

    precision: Precision = "fp16"
    # LORA-F 200 MHz, LORA-Q 250 MHz (seeds/002 Table IV)
    clock_hz: float = Field(200e6, ge=MIN_CLOCK_HZ, le=MAX_CLOCK_HZ)
    d_sa: int = Field(32, ge=1, le=MAX_DIM)  # systolic array side (seeds/002 §V-C example: 32 x 32)
    t_m: int = Field(32, ge=1, le=MAX_DIM)  # matrix tile side (Fig. 3b)
    t_v: int = Field(32, ge=1, le=MAX_DIM)  # tiles per vector-matrix iteration (Fig. 8)
    n_acc: int = Field(64, ge=1, le=MAX_DIM)  # VFU accumulators (Eq. 2, 7)
    hbm_axi_bits: int = Field(512, ge=8, le=MAX_BITS)  # per-channel AXI width at the kernel clock
    # U280 HBM pseudo-channels (seeds/001 §V-B)
    hbm_channels: int = Field(32, ge=1, le=MAX_CHANNELS)
    # URAMs for the KV cache (seeds/002 §VI-A-d: "All 864")
    kv_uram: int = Field(864, ge=0, le=MAX_DIM)
    # rows of activations buffered on chip for prefill
    token_window: int = Field(64, ge=1, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _tiles_fit_the_array(self) -> "SystolicConfig":
        if self.t_m < self.d_sa or self.t_m % self.d_sa:
            raise ValueError(f"t_m must be a positive multiple of d_sa (t_m {self.t_m}, "
                             f"d_sa {self.d_sa})")
        if self.t_v * self.t_m > self.d_sa ** 2:
            raise ValueError(f"t_v x t_m ({self.t_v} x {self.t_m}) must not exceed the "
                             f"d_sa^2 = {self.d_sa ** 2} processing elements")
        return self

    @property
    def weight_bytes(self) -> float:
        return 1.0 if self.precision == "w8a8" else 2.0

    @property
    def pack_rows(self) -> int:
        """Rows packed per transfer: the link port width over the activation width (§III-B)."""
        return LINK_PORT_BITS // (8 * int(self.weight_bytes))


class SystolicEngine:
    """Cycles per plan step and resources of one LORA core."""

    name = "systolic"
    # The prompt runs as T_m x T_m matrix tiles (Fig. 3b), not token by token.
    token_serial_prefill = False

    def __init__(self, config: SystolicConfig, device: Device, spec: ModelSpec,
                 ranks: int) -> None:
        self.config, self.device, self.ranks = config, device, ranks
        hbm, ddr = device.memory("hbm"), device.memory("ddr")
        assert hbm is not None and ddr is not None, "LORA uses HBM and DDR (seeds/002 §V-C)"
        channel_peak = hbm.bandwidth_Bps / hbm.channels
        per_channel = min(config.hbm_axi_bits / 8 * config.clock_hz, channel_peak)
        self.hbm_bytes_per_cycle = config.hbm_channels * per_channel / config.clock_hz
        self.ddr_bytes_per_cycle = ddr.bandwidth_Bps / config.clock_hz
        kv_bytes_per_token = 2 * spec.layers * spec.kv_dim / ranks * 2  # FP16 K and V
        self.kv_tokens_onchip = config.kv_uram * URAM_BYTES // kv_bytes_per_token
        self._cycles: dict[str, CycleHandler] = {
            "linear": self._matmul, "lm_head": self._matmul,
            "attn_score": self._attention, "attn_context": self._attention,
            "softmax": self._softmax, "norm": self._norm, "residual": self._elementwise,
            "activation": self._elementwise, "gated_activation": self._gated,
            "embedding": self._embedding,
        }

    @property
    def peak_ops_per_s(self) -> float:
        """The array's roof: D_sa^2 PEs, one multiply-accumulate each per cycle (Fig. 3b's
        T_m^3 / D_sa^2 cycles per tile pair, seeds/002)."""
        return 2 * self.config.d_sa ** 2 * self.config.clock_hz

    def seconds(self, step: ComputeStep, phase: Phase) -> np.ndarray:
        return self.cycles(step, phase) / self.config.clock_hz

    def collective_seconds(self, step: CommStep, rows: int, cluster: Cluster) -> float:
        """LORA's router: all-gathers both ways round the ring with merged one-way cycles,
        all-reduces accumulated hop by hop in its ACC unit (seeds/002 §IV-C)."""
        ranks = cluster.size
        if ranks == 1:
            return 0.0
        assert cluster.link is not None
        link = lora_link(cluster.link.latency_s)
        if step.kind == "all_reduce":  # every rank holds the full partial-sum vector
            return lora_all_reduce_s(rows * step.width * step.value_bytes, ranks, link,
                                     self.config.clock_hz)
        per_rank = rows * -(-step.width // ranks) * step.value_bytes
        return lora_all_gather_s(per_rank, ranks, link)

    # --- MPU ---------------------------------------------------------------------------
    def _fill(self) -> int:
        """Systolic fill and drain: a wavefront crosses the array twice."""
        return 2 * self.config.d_sa

    def _vector_matrix(self, k: int | np.ndarray, n: int | np.ndarray,
                       stream_bytes_per_cycle: float | np.ndarray) -> np.ndarray:
        """Fig. 8: per iteration one T_m vector meets T_v tiles in 2 T_m cycles (L_cal), while
        the next T_v tiles stream in (L_axi; zero for on-chip operands); Eq. 8."""
        c = self.config
        column_tiles = ceil_div(n, c.t_m)
        per_row = ceil_div(column_tiles, c.t_v)  # iterations across the columns
        count = ceil_div(k, c.t_m) * per_row
        stream = np.asarray(stream_bytes_per_cycle, dtype=float)
        # Only the tiles the matrix has are fetched: a narrow matrix leaves arrays idle.
        tile_bytes = column_tiles / per_row * c.t_m ** 2 * c.weight_bytes
        l_axi = np.divide(tile_bytes, stream, out=np.zeros_like(stream), where=stream > 0)
        l_cal = DECODE_WAVEFRONT_PASSES * c.t_m
        return l_axi + np.maximum(l_axi, l_cal) * count + l_cal

    def _matrix_matrix(self, m: int, k: int | np.ndarray, n: int | np.ndarray,
                       stream_bytes_per_cycle: float) -> np.ndarray | float:
        """Fig. 3b: T_m x T_m tile pairs, T_m^3 / D_sa^2 cycles each; Eq. 8."""
        c = self.config
        count = ceil_div(m, c.t_m) * ceil_div(k, c.t_m) * ceil_div(n, c.t_m)
        l_cal = c.t_m ** 3 / c.d_sa ** 2
        l_buf = (c.t_m ** 2 * c.weight_bytes / stream_bytes_per_cycle
                 if stream_bytes_per_cycle else ONCHIP_READ_CYCLES)
        return l_buf + np.maximum(l_buf, l_cal) * count + l_cal + self._fill()

    def _kv_stream(self, context: np.ndarray) -> np.ndarray:
        """Bytes/cycle feeding attention: on-chip URAM (unbounded here) until the cache
        spills, then HBM for the whole read (the spilled rows set the pace)."""
        return np.where(context <= self.kv_tokens_onchip, 0.0, self.hbm_bytes_per_cycle)

    # --- VFU ---------------------------------------------------------------------------
    def _sweeps(self, rows: int, width: int | np.ndarray, sweeps: int) -> np.ndarray:
        """`sweeps` passes of N_acc lanes over each of `rows` rows (rows pipeline)."""
        return rows * sweeps * ceil_div(width, self.config.n_acc)

    @property
    def _tree_cycles(self) -> int:
        """The ACC module's binary tree over N_acc partial sums, an FP16 adder per level."""
        return ceil(log2(max(self.config.n_acc, 2))) * FP16_ADD_CYCLES

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
        width = step.local_out
        stats, apply = self._stats(m, width), self._apply(m, width)
        return {"stats": stats, "apply": apply, "whole": stats + apply}[step.stage]

    def _softmax(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """Per head: a max sweep, an exp-and-sum sweep through the tree, a scaling sweep;
        it stays FP16 in LORA-Q (§VI-C)."""
        chain = (self._sweeps(m, t, 3) + 2 * self._tree_cycles + FP16_ADD_CYCLES
                 + FP16_EXP_CYCLES + FP16_RECIP_CYCLES + FP16_MUL_CYCLES)
        return step.local_heads * chain

    def _elementwise(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """Residual add or piece-wise linear GELU (a multiply and an add per element)."""
        return self._sweeps(m, step.local_out, 1) + FP16_MUL_CYCLES + FP16_ADD_CYCLES

    def _gated(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        return self._sweeps(m, step.local_out, 2) + 2 * FP16_MUL_CYCLES + FP16_ADD_CYCLES

    def _embedding(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """Table rows from DDR, then one add sweep."""
        row = 2 * step.local_out * self.config.weight_bytes / self.ddr_bytes_per_cycle
        return m * row + self._sweeps(m, step.local_out, 1) + FP16_ADD_CYCLES

    # --- MPU dispatch ------------------------------------------------------------------
    def _matmul(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """Linear layers and the LM head: vector mode from HBM in decode, tiles from DDR in
        prefill (§V-C)."""
        if m == 1:
            return self._vector_matrix(step.op.fan_in, step.local_out, self.hbm_bytes_per_cycle)
        return self._matrix_matrix(m, step.op.fan_in, step.local_out, self.ddr_bytes_per_cycle)

    def _attention(self, step: ComputeStep, m: int, t: np.ndarray) -> np.ndarray:
        """QmulKT (head_dim x t) or SmulV (t x head_dim) per head, KV from URAM or HBM."""
        k, n = (step.op.fan_in, t) if step.op.kind == "attn_score" else (t, step.op.fan_in)
        if m == 1:
            per_head = self._vector_matrix(k, n, self._kv_stream(t))
        else:
            per_head = self._matrix_matrix(m, k, n, 0.0)
        return step.local_heads * per_head

    def cycles(self, step: ComputeStep, phase: Phase) -> np.ndarray:
        return dispatch_cycles(self._cycles, "LORA", step, phase)

    # --- resources (Eq. 5-7) -----------------------------------------------------------
    def resources(self, spec: ModelSpec) -> dict[str, Resources]:
        c = self.config
        if c.precision == "w8a8":
            mpu_dsp = ceil(c.d_sa ** 2 * PSI_INT8_MAC)
        else:
            mpu_dsp = c.d_sa ** 2 * int(PSI_FP16["mul"] + PSI_FP16["add"])
        # Eq. 7 for the ACC units, plus the Scaling module's mul and add on N_acc lanes and
        # the GELU piece-wise linear unit (one mul, one add per lane).
        acc = ((PSI_FP16["exp"] + PSI_FP16["square"]) * c.n_acc
               + PSI_FP16["add"] * (3 * c.n_acc - 1))
        scaling = 2 * (PSI_FP16["mul"] + PSI_FP16["add"]) * c.n_acc
        vfu = Resources(dsp=int(acc + scaling))
        return {"mpu": Resources(dsp=mpu_dsp), "vfu": vfu, "buffers": self._buffers(spec)}

    def _buffers(self, spec: ModelSpec) -> Resources:
        c = self.config
        bits = 8 * int(c.weight_bytes)
        local = spec.hidden // self.ranks
        # Eq. 5: double-buffered weight tile, partitioned P_w = D_sa ways (one weight per
        # systolic column per cycle), BRAM18 units of 1024 x 18 -> counted as BRAM36 halves.
        p_w = c.d_sa
        weight18 = ceil(bits / 18) * ceil(c.t_m ** 2 / (1024 * p_w)) * p_w * 2
        # Eq. 6: AXI read buffers of every HBM channel and the router's TX/RX buffers.
        axi = c.hbm_channels * ceil(c.hbm_axi_bits / 36)  # N_tran = 512: one block deep
        router = 2 * ceil(LINK_PORT_BITS / 36) * ceil(c.token_window * spec.ffn
                                                      // (LINK_PORT_BITS // bits) / 512)
        # Intermediate activations of the local columns (LayerNorm, residual, FFN) for the
        # token window: the buffer §II-C says dominates BRAM use.
        inter_values = c.token_window * (6 * local + 2 * spec.ffn // self.ranks)
        inter = ceil(inter_values * bits / (36 * 1024))
        bram = ceil(weight18 / 2) + axi + router + inter
        kv_need = ceil(2 * spec.layers * spec.max_positions * spec.kv_dim / self.ranks * 2
                       / URAM_BYTES)
        return Resources(bram=bram, uram=min(c.kv_uram, kv_need))

