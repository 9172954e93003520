"""ONNX's LSTM and GRU in torch (see onnx_torch.py): forward, reverse and bidirectional,
layouts 0 and 1, initial states, ONNX's gate orders (i o f c; z r h) and
linear_before_reset."""

import torch

from archipelago.emulate.errors import EmulationError
from archipelago.strategies.chef.emulate.onnx_common import Attrs, Inputs, Op, Tensor


def _recurrent_inputs(a: Inputs, attrs: Attrs, gates: int, cell: str) -> tuple:
    """X as (T, N, E), the weights, and per-direction initial states, after refusing the
    options the cells below do not compute."""
    if any(k in attrs for k in ("clip", "activations", "activation_alpha")) or \
            attrs.get("input_forget", 0):
        raise EmulationError(f"{cell} with clip, custom activations or input_forget is not "
                             "emulated")
    if len(a) > 7 and a[7] is not None:
        raise EmulationError("LSTM peephole weights (input P) are not emulated")
    layout = attrs.get("layout", 0)
    x = a[0].transpose(0, 1) if layout else a[0]
    steps = x.shape[0]
    if len(a) > 4 and a[4] is not None and bool((a[4] != steps).any()):
        raise EmulationError(f"{cell} sequence_lens shorter than the {steps} steps is not "
                             "emulated")
    w, r = a[1], a[2]
    hidden = attrs.get("hidden_size", w.shape[1] // gates)
    directions, batch = w.shape[0], x.shape[1]
    b = a[3] if len(a) > 3 and a[3] is not None else torch.zeros(directions,
                                                                  2 * gates * hidden)

    def state(i: int) -> Tensor:
        given = a[i] if len(a) > i and a[i] is not None else None
        if given is None:
            return torch.zeros(directions, batch, hidden)
        return given.transpose(0, 1) if layout else given
    return x, w, r, b, state(5), state(6), layout


def _recurrent_outputs(ys: list[Tensor], finals: list[list[Tensor]],
                       layout: int) -> list[Tensor]:
    """Y (T, D, N, H) and the final states (D, N, H), or their layout-1 forms
    (N, T, D, H) and (N, D, H)."""
    y = torch.stack(ys, 1)
    states = [torch.stack(f, 0) for f in finals]
    if layout:
        return [y.permute(2, 0, 1, 3), *(s.transpose(0, 1) for s in states)]
    return [y, *states]


def _directions(attrs: Attrs, count: int) -> list[bool]:
    """Per direction of the weights: whether it runs backwards over the steps."""
    kind = attrs.get("direction", "forward")
    return [False, True] if kind == "bidirectional" else [kind == "reverse"] * count


def _lstm(a: Inputs, attrs: Attrs, opset: int) -> list[Tensor]:
    """Gates in ONNX's order i, o, f, c; c' = f*c + i*g, h' = o*tanh(c')."""
    x, w, r, b, h0, c0, layout = _recurrent_inputs(a, attrs, 4, "LSTM")
    hidden = w.shape[1] // 4
    ys, hs, cs = [], [], []
    for d, backwards in enumerate(_directions(attrs, w.shape[0])):
        h, c = h0[d], c0[d]
        bias = b[d, :4 * hidden] + b[d, 4 * hidden:]
        out: list[Tensor] = [torch.empty(0)] * x.shape[0]
        steps = range(x.shape[0] - 1, -1, -1) if backwards else range(x.shape[0])
        for t in steps:
            i, o, f, g = (x[t] @ w[d].T + h @ r[d].T + bias).chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            out[t] = h
        ys.append(torch.stack(out))
        hs.append(h)
        cs.append(c)
    return _recurrent_outputs(ys, [hs, cs], layout)


def _gru(a: Inputs, attrs: Attrs, opset: int) -> list[Tensor]:
    """Gates in ONNX's order z, r, h; linear_before_reset applies r after the recurrent
    product (as torch.nn.GRU does) instead of before it."""
    x, w, r, b, h0, _, layout = _recurrent_inputs(a, attrs, 3, "GRU")
    before = attrs.get("linear_before_reset", 0)
    ys, hs = [], []
    for d, backwards in enumerate(_directions(attrs, w.shape[0])):
        h = h0[d]
        wz, wr, wh = w[d].chunk(3)
        rz, rr, rh = r[d].chunk(3)
        bwz, bwr, bwh, brz, brr, brh = b[d].chunk(6)
        out: list[Tensor] = [torch.empty(0)] * x.shape[0]
        steps = range(x.shape[0] - 1, -1, -1) if backwards else range(x.shape[0])
        for t in steps:
            z = torch.sigmoid(x[t] @ wz.T + h @ rz.T + bwz + brz)
            reset = torch.sigmoid(x[t] @ wr.T + h @ rr.T + bwr + brr)
            recurrent = reset * (h @ rh.T + brh) if before else (reset * h) @ rh.T + brh
            h = (1 - z) * torch.tanh(x[t] @ wh.T + bwh + recurrent) + z * h
            out[t] = h
        ys.append(torch.stack(out))
        hs.append(h)
    return _recurrent_outputs(ys, [hs], layout)


RECURRENT_OPS: dict[str, Op] = {"LSTM": _lstm, "GRU": _gru}
