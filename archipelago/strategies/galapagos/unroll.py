"""Unroll an encoder into I-BERT streaming kernels and the transfers between them
(seeds/000 §7, Fig. 10 and 14).

Per encoder: Linear+Quant kernels for Q, K and V; per head an attention dot-product with
Softmax and a softmax matrix multiply with Quant; the attention output Linear with the
residual Quant; LayerNorm; the FFN Linear with GELU; the second FFN Linear; LayerNorm. A
Linear too large for one FPGA is split by weight column (its input broadcast to the parts,
their outputs gathered); the second FFN Linear is split by row, matching the first one's
columns so each part feeds its partner directly, and the partial sums are reduced (§7.1.1).
"""

from collections.abc import Callable
from dataclasses import dataclass

from archipelago.errors import PartitionError
from archipelago.hardware.device import Device
from archipelago.models.spec import ModelSpec
from archipelago.split import split_bounds
from archipelago.strategies.galapagos.gmi import HOST, Transfer
from archipelago.strategies.galapagos.hls_stream import HLSStreamEngine
from archipelago.strategies.galapagos.kernel_design import KernelDesign, KernelJob
from archipelago.strategies.galapagos.plan import ComputeKernel

INT8, INT16, INT32 = 1, 2, 4  # bytes per streamed element: activations, probabilities,
#                               accumulators (I-BERT: INT8 in, INT32 out, seeds/000 §2.4)


@dataclass
class LayerKernels:
    """One encoder's compute kernels in stream order and the transfers between them."""

    kernels: list[ComputeKernel]
    transfers: list[Transfer]
    groups: list[tuple[str, ...]]  # kernels that must share an FPGA


class Unroller:
    """Builds each encoder's kernels with the engine's parallelism for `row_interval`,
    splitting a Linear into as few parts as fit one `device` under the utilization cap."""

    def __init__(self, spec: ModelSpec, engine: HLSStreamEngine, device: Device,
                 row_interval: int) -> None:
        self.spec, self.engine, self.device, self.ii = spec, engine, device, row_interval
        self._designs: dict[KernelJob, KernelDesign] = {}
        m = engine.config.max_seq_len
        h, d, f = spec.hidden, spec.head_dim, spec.ffn
        self.qkv_parts = self._parts("Q/K/V", spec.heads,
                                     lambda width: self._qkv_job(d * width), divide=True)
        self.out_parts = self._parts("attention output", h, self._attn_out_job)
        up = self._parts("FFN", f, self._ffn_up_job)
        down = self._parts("FFN output", f,
                           lambda width: self._ffn_down_job(width, row_split=True))
        self.ffn_parts = max(up, down)
        g = self.group = engine.heads_per_kernel(spec)
        if (spec.heads // self.qkv_parts) % g:
            raise PartitionError(f"{spec.name}: attention kernels of {g} heads straddle the "
                                 f"{self.qkv_parts} parts of Q, K and V")
        self.score_job = KernelJob("score", d, m, (g * d, g * d), INT16 * m * g, ("softmax",),
                                   heads=g)
        self.context_job = KernelJob("context", d, d, (INT16 * m * g, g * d), g * d,
                                     ("quant8",), heads=g)

    # -- jobs ------------------------------------------------------------------------------
    def _qkv_job(self, width: int) -> KernelJob:
        return KernelJob("linear", self.spec.hidden, width, (self.spec.hidden,), width,
                         ("quant8",))

    def _attn_out_job(self, width: int) -> KernelJob:
        h = self.spec.hidden
        return KernelJob("linear", h, width, (h, h), INT32 * width, ("residual_quant",))

    def _ffn_up_job(self, width: int) -> KernelJob:
        return KernelJob("linear", self.spec.hidden, width, (self.spec.hidden,), width,
                         ("gelu", "quant8", "quant8"))

    def _ffn_down_job(self, rows: int, row_split: bool) -> KernelJob:
        h = self.spec.hidden
        if row_split:  # partial sums; the residual Quant moves behind the reduce
            return KernelJob("linear", rows, h, (rows,), INT32 * h)
        return KernelJob("linear", rows, h, (rows, h), INT32 * h, ("residual_quant",))

    def _norm_job(self, residual: bool, quants: int) -> KernelJob:
        h = self.spec.hidden
        inputs = (INT32 * h, h) if residual else (INT32 * h,)
        stages = ("residual_quant",) * residual + ("quant8",) * quants
        return KernelJob("layernorm", h, h, inputs, h, stages)

    def design(self, job: KernelJob) -> KernelDesign:
        if job not in self._designs:
            self._designs[job] = self.engine.design(job, self.ii)
        return self._designs[job]

    def _parts(self, what: str, total: int, job: Callable[[int], KernelJob],
               divide: bool = False) -> int:
        """Fewest balanced parts of `total` (columns, or heads with `divide`, so a head never
        straddles two parts) whose largest part fits one FPGA under the utilization cap."""
        for parts in range(1, total + 1):
            if divide and total % parts:
                continue
            lo, hi = split_bounds(total, parts, 0)
            if self.engine.fits(self.design(job(hi - lo)).resources, self.device):
                return parts
        need = self.design(job(1)).resources
        cap = self.engine.config.utilization
        have = self.device.resources
        raise PartitionError(
            f"{self.spec.name}: the smallest slice of the {what} Linear needs {need.dsp} DSP, "
            f"{need.bram} BRAM, {need.uram} URAM (its FIFOs hold "
            f"{self.engine.config.max_seq_len}-row matrices); a {self.device.key} gives "
            f"{cap:.0%} of {have.dsp}/{have.bram}/{have.uram}: lower max_seq_len or use a "
            f"larger FPGA")

    def heads_suffix(self, lo: int, hi: int) -> str:
        return f".h{lo}" if hi - lo == 1 else f".h{lo}-{hi - 1}"

    # -- one encoder -----------------------------------------------------------------------
    def layer(self, layer: int, source: str) -> LayerKernels:
        """Encoder `layer` fed by kernel `source` (the previous LayerNorm, or the host)."""
        s, p = self.spec, f"L{layer}"
        h, d, f = s.hidden, s.head_dim, s.ffn
        kernels: list[ComputeKernel] = []
        names: dict[str, list[str]] = {}

        def add(role: str, job: KernelJob, lo: int = 0, hi: int = 0, split: str = "none",
                residual: bool = False, suffix: str = "") -> str:
            name = f"{p}.{role}{suffix}"
            kernels.append(ComputeKernel(name, layer, role, self.design(job), lo, hi, split,
                                         residual))
            names.setdefault(role, []).append(name)
            return name

        n = self.qkv_parts
        for role in ("q", "k", "v"):
            for i in range(n):
                lo, hi = split_bounds(s.heads, n, i)
                add(role, self._qkv_job(d * (hi - lo)), d * lo, d * hi,
                    "column" if n > 1 else "none", suffix=f".{i}" if n > 1 else "")
        groups = []
        for lo in range(0, s.heads, self.group):
            hi = lo + self.group
            suffix = self.heads_suffix(lo, hi)
            sc = add("score", self.score_job, lo, hi, "head", suffix=suffix)
            cx = add("context", self.context_job, lo, hi, "head", suffix=suffix)
            groups.append((sc, cx))
        n = self.out_parts
        for i in range(n):
            lo, hi = split_bounds(h, n, i)
            add("attn_out", self._attn_out_job(hi - lo), lo, hi, "column" if n > 1 else "none",
                residual=True, suffix=f".{i}" if n > 1 else "")
        add("ln1", self._norm_job(residual=False, quants=2))
        n = self.ffn_parts
        for i in range(n):
            lo, hi = split_bounds(f, n, i)
            add("ffn_up", self._ffn_up_job(hi - lo), lo, hi, "column" if n > 1 else "none",
                suffix=f".{i}" if n > 1 else "")
        for i in range(n):
            lo, hi = split_bounds(f, n, i)
            add("ffn_down", self._ffn_down_job(hi - lo, row_split=n > 1), lo, hi,
                "row" if n > 1 else "none", residual=n == 1, suffix=f".{i}" if n > 1 else "")
        add("ln2", self._norm_job(residual=n > 1, quants=1), residual=n > 1)
        groups = [(k.name,) for k in kernels if k.role not in {"score", "context"}] + groups
        order = {k.name: i for i, k in enumerate(kernels)}
        groups.sort(key=lambda g: order[g[0]])
        return LayerKernels(kernels, self._transfers(p, source, kernels, names), groups)

    def _transfers(self, p: str, source: str, kernels: list[ComputeKernel],
                   names: dict[str, list[str]]) -> list[Transfer]:
        s = self.spec
        h, d = s.hidden, s.head_dim
        by_name = {k.name: k for k in kernels}
        width = {k.name: k.hi - k.lo for k in kernels}
        out: list[Transfer] = [Transfer(
            "broadcast", (source,), (*names["q"], *names["k"], *names["v"], *names["attn_out"]),
            (h,), f"{p}.input", origin="input")]
        for role, target in (("q", "score"), ("k", "score"), ("v", "context")):
            for part in names[role]:
                k = by_name[part]
                heads = [f"{p}.{target}{self.heads_suffix(i, i + self.group)}"
                         for i in range(k.lo // d, k.hi // d, self.group)]
                out.append(Transfer("scatter", (part,), tuple(heads),
                                    (d * self.group,) * len(heads), f"{part}.heads",
                                    whole=role != "q", origin=role))
        out += [Transfer("p2p", (sc,), (cx,), (INT16 * self.group,), f"{sc}.probs",
                         per_key=True,
                         origin="score")
                for sc, cx in zip(names["score"], names["context"], strict=True)]
        out.append(Transfer("allgather" if len(names["attn_out"]) > 1 else "gather",
                            tuple(names["context"]), tuple(names["attn_out"]),
                            (d * self.group,) * len(names["context"]), f"{p}.context",
                            origin="context"))
        out.append(Transfer("gather", tuple(names["attn_out"]), (names["ln1"][0],),
                            tuple(INT32 * width[n] for n in names["attn_out"]),
                            f"{p}.attn_out", origin="attn_out"))
        residual = names["ffn_down"] if len(names["ffn_down"]) == 1 else names["ln2"]
        out.append(Transfer("broadcast", (names["ln1"][0],), (*names["ffn_up"], *residual),
                            (h,), f"{p}.ln1", origin="ln1"))
        out += [Transfer("p2p", (up,), (down,), (width[up],), f"{up}.out", origin="ffn_up")
                for up, down in zip(names["ffn_up"], names["ffn_down"], strict=True)]
        out.append(Transfer("reduce" if len(names["ffn_down"]) > 1 else "p2p",
                            tuple(names["ffn_down"]), (names["ln2"][0],),
                            (INT32 * h,) * len(names["ffn_down"]), f"{p}.ffn_down",
                            origin="ffn_down"))
        return out


def output_transfer(last_norm: str, hidden: int) -> Transfer:
    """The last encoder's output rows back to the host."""
    return Transfer("p2p", (last_norm,), (HOST,), (hidden,), "output", origin="ln2")
