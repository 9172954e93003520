"""What each compute kernel of the plan computes (seeds/000 Fig. 14), on integer rows: it
receives whole operand matrices (its FIFOs hold one, §8.2.1), dequantizes them exactly as
the reference holds them, runs its I-BERT modules and returns integer rows.

Operands are named by where they came from: `x` the main stream, `residual` the branch a
residual Quant adds, `q`/`k`/`v` and `p` (probabilities) for the attention kernels.
"""

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from archipelago.strategies.galapagos.emulate.ibert import (
    attention_context,
    attention_scores,
    int_gelu,
    int_layernorm,
    int_softmax,
    requantize,
)
from archipelago.strategies.galapagos.emulate.params import LayerParams, LinearParams
from archipelago.strategies.galapagos.plan import ComputeKernel

Operands = dict[str, torch.Tensor]  # name -> integers (M, width) in float32
PROB_BITS = 8  # Softmax output: integers of scale 2^-8 (I-BERT's 8-bit output)

# (consumer role, producing role) -> operand name
OPERAND: dict[tuple[str, str], str] = {
    ("q", "input"): "x", ("k", "input"): "x", ("v", "input"): "x",
    ("score", "q"): "q", ("score", "k"): "k",
    ("context", "score"): "p", ("context", "v"): "v",
    ("attn_out", "context"): "x", ("attn_out", "input"): "residual",
    ("ln1", "attn_out"): "x",
    ("ffn_up", "ln1"): "x",
    ("ffn_down", "ffn_up"): "x", ("ffn_down", "ln1"): "residual",
    ("ln2", "ffn_down"): "x", ("ln2", "ln1"): "residual",
}


def _batch(rows: torch.Tensor) -> torch.Tensor:
    return rows.unsqueeze(0)  # the reference's (batch 1, M, width) layout


def _linear(x: torch.Tensor, x_scale: torch.Tensor, w: LinearParams) -> torch.Tensor:
    """QuantLinear on the real input `x` (rows of integers times their scale): divided by
    `x_scale`, multiplied by the integer weights, scaled back."""
    x_int = _batch(x) / x_scale.view(1, -1)
    return F.linear(x_int, weight=w.weight, bias=w.bias) * w.scale


class KernelCompute:
    """The compute function of one kernel of encoder `params`."""

    def __init__(self, kernel: ComputeKernel, params: LayerParams, head_dim: int) -> None:
        self.kernel, self.p, self.d = kernel, params, head_dim
        handlers: dict[str, Callable[[Operands], torch.Tensor]] = {
            "q": self._qkv, "k": self._qkv, "v": self._qkv, "score": self._score,
            "context": self._context, "attn_out": self._attn_out, "ln1": self._ln1,
            "ffn_up": self._ffn_up, "ffn_down": self._ffn_down, "ln2": self._ln2,
        }
        self.run = handlers[kernel.role]

    def _cols(self, w: LinearParams) -> LinearParams:
        k = self.kernel
        return w.rows(k.lo, k.hi) if k.split == "column" else w

    def _qkv(self, ops: Operands) -> torch.Tensor:
        p, role = self.p, self.kernel.role
        w = self._cols({"q": p.q, "k": p.k, "v": p.v}[role])
        out_scale = {"q": p.q_scale, "k": p.k_scale, "v": p.v_scale}[role]
        y = _linear(ops["x"] * p.in_scale, p.arith_scale, w)
        return requantize(y, w.scale, out_scale, 8)[0]

    def _heads(self, operand: torch.Tensor, width: int) -> list[torch.Tensor]:
        """The kernel's heads' column blocks of `width` each."""
        return list(operand.split(width, dim=1))

    def _score(self, ops: Operands) -> torch.Tensor:
        """Per head: Q K^T / sqrt(d), then integer Softmax; probability rows side by side."""
        p, d = self.p, self.d
        scale = p.q_scale * p.k_scale / math.sqrt(d)
        probs = [int_softmax(attention_scores(q * p.q_scale, k * p.k_scale, d), scale,
                             p.exp_low, p.exp_high, PROB_BITS)[0, 0]
                 for q, k in zip(self._heads(ops["q"], d), self._heads(ops["k"], d),
                                 strict=True)]
        return torch.cat(probs, dim=1)

    def _context(self, ops: Operands) -> torch.Tensor:
        p = self.p
        prob_scale = 1 / 2**PROB_BITS
        seq = ops["p"].shape[0]
        ctx = torch.cat([attention_context(probs * prob_scale, v * p.v_scale)
                         for probs, v in zip(self._heads(ops["p"], seq),
                                             self._heads(ops["v"], self.d), strict=True)],
                        dim=1)
        return requantize(_batch(ctx), prob_scale * p.v_scale, p.context_scale, 8)[0]

    def _attn_out(self, ops: Operands) -> torch.Tensor:
        p, k = self.p, self.kernel
        w = self._cols(p.attn_out)
        y = _linear(ops["x"] * p.context_scale, p.context_scale, w)
        residual = _batch(ops["residual"] * p.in_scale)
        if k.split == "column":
            residual = residual[..., k.lo:k.hi]
        return requantize(y, w.scale, p.ln1_in_scale, 22, (residual, p.arith_scale))[0]

    def _ln1(self, ops: Operands) -> torch.Tensor:
        p = self.p
        y, y_scale = int_layernorm(_batch(ops["x"] * p.ln1_in_scale), p.ln1_in_scale,
                                   p.ln1.weight, p.ln1.bias, p.ln1.shift)
        a = requantize(y, y_scale, p.ln1_out_scale, 8) * p.ln1_out_scale
        return requantize(a, p.ln1_out_scale, p.ffn_in_scale, 8)[0]

    def _ffn_up(self, ops: Operands) -> torch.Tensor:
        p = self.p
        w = self._cols(p.ffn_up)
        g, g_scale = int_gelu(_linear(ops["x"] * p.ffn_in_scale, p.ffn_in_scale, w), w.scale)
        f = requantize(g, g_scale, p.gelu_out_scale, 8) * p.gelu_out_scale
        return requantize(f, p.gelu_out_scale, p.ffn_down_in_scale, 8)[0]

    def _ffn_down(self, ops: Operands) -> torch.Tensor:
        """Unsplit: Linear + residual Quant. Row-split: this part's int32 partial sums
        (the bias with part 0), added by the GMI reduce; its LayerNorm kernel quantizes."""
        p, k = self.p, self.kernel
        if k.split == "row":
            partial = ops["x"].double() @ p.ffn_down.weight[:, k.lo:k.hi].double().T
            return partial + (p.ffn_down.bias.double() if k.lo == 0 else 0.0)
        y = _linear(ops["x"] * p.ffn_down_in_scale, p.ffn_down_in_scale, p.ffn_down)
        return self._ffn_residual(y, ops)

    def _ffn_residual(self, y: torch.Tensor, ops: Operands) -> torch.Tensor:
        p = self.p
        residual = (_batch(ops["residual"] * p.ffn_in_scale), p.ffn_in_scale)
        return requantize(y, p.ffn_down.scale, p.ln2_in_scale, 22, residual)[0]

    def _ln2(self, ops: Operands) -> torch.Tensor:
        p = self.p
        x = ops["x"]
        if self.kernel.residual:  # the reduced partial sums of a row-split FFN Linear
            x = self._ffn_residual(_batch(x.float()) * p.ffn_down.scale, ops)
        y, y_scale = int_layernorm(_batch(x * p.ln2_in_scale), p.ln2_in_scale,
                                   p.ln2.weight, p.ln2.bias, p.ln2.shift)
        return requantize(y, y_scale, p.out_scale, 8)[0]
