"""The unsplit FP32 reference: the same NMT built from torch.nn.LSTM modules with the same
weights, translating with its own greedy / beam search, independent of the API program."""

from typing import Any

import numpy as np
import torch
from torch import nn

from archipelago.models.recurrent import LSTMSpec, NMTSpec


def _lstm(weights: np.ndarray, bias: np.ndarray, input_size: int, hidden: int,
          reverse: np.ndarray | None = None, reverse_bias: np.ndarray | None = None
          ) -> nn.LSTM:
    """nn.LSTM from fused [W_ih | W_hh] blocks (PyTorch gate order), biases as b_ih."""
    lstm = nn.LSTM(input_size, hidden, bidirectional=reverse is not None)
    with torch.no_grad():
        for suffix, w, b in (("", weights, bias), ("_reverse", reverse, reverse_bias)):
            if w is None:
                continue
            getattr(lstm, f"weight_ih_l0{suffix}").copy_(torch.from_numpy(w[:, :input_size]))
            getattr(lstm, f"weight_hh_l0{suffix}").copy_(torch.from_numpy(w[:, input_size:]))
            getattr(lstm, f"bias_ih_l0{suffix}").copy_(torch.from_numpy(b))
            getattr(lstm, f"bias_hh_l0{suffix}").zero_()
    return lstm


@torch.no_grad()
def reference_lstm(spec: LSTMSpec, weights: dict[str, np.ndarray], biases: dict[str, np.ndarray],
                   inputs: np.ndarray) -> np.ndarray:
    """The stack's top-layer outputs (steps x width) through nn.LSTM layers."""
    x = torch.from_numpy(inputs).unsqueeze(1)
    for layer in range(spec.layers):
        names = [f"l{layer}.{d}.wu" for d in spec.directions(layer)]
        back = names[1] if len(names) > 1 else None
        lstm = _lstm(weights[names[0]], biases[names[0]], spec.layer_input(layer), spec.hidden,
                     weights[back] if back else None, biases[back] if back else None)
        x, _ = lstm(x)
    return x.squeeze(1).numpy()


class ReferenceNMT:
    def __init__(self, spec: NMTSpec, weights: dict[str, np.ndarray],
                 biases: dict[str, np.ndarray], host: dict[str, np.ndarray]) -> None:
        self.spec = spec
        self.t = {k: torch.from_numpy(v) for k, v in {**weights, **host}.items()}
        enc = spec.encoder_cells()
        h = spec.hidden
        (f_name, f_in), (b_name, _) = enc[0], enc[1]
        self.encoder = [_lstm(weights[f"{f_name}.wu"], biases[f"{f_name}.wu"], f_in, h // 2,
                              weights[f"{b_name}.wu"], biases[f"{b_name}.wu"])]
        self.encoder += [_lstm(weights[f"{n}.wu"], biases[f"{n}.wu"], size, h)
                         for n, size in enc[2:]]
        self.decoder = [_lstm(weights[f"{n}.wu"], biases[f"{n}.wu"], size, h)
                        for n, size in spec.decoder_cells()]

    def encode(self, source: list[int]) -> torch.Tensor:
        x = self.t["src_embedding"][torch.tensor(source)].unsqueeze(1)  # (S, 1, E)
        for lstm in self.encoder:
            x, _ = lstm(x)
        return x.squeeze(1)  # (S, H)

    def scores(self, memory: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        if self.spec.variant == "luong":  # general: (W_a^T h_t) . h_s, W_a^T stored
            return memory @ (self.t["att.wa"] @ h)
        keys = memory @ self.t["att.w2"].T  # concat: v . tanh(W_1 h_t + W_2 h_s)
        return torch.tanh(keys + self.t["att.w1"] @ h) @ self.t["att_v"]

    def step(self, memory: torch.Tensor, token: int, state: dict[str, Any]
             ) -> tuple[torch.Tensor, dict[str, Any]]:
        x = torch.cat([self.t["tgt_embedding"][token], state["feed"]])
        new_hc = []
        for lstm, hc in zip(self.decoder, state["hc"], strict=True):
            out, hc = lstm(x.view(1, 1, -1), hc)
            x = out.view(-1)
            new_hc.append(hc)
        context = torch.softmax(self.scores(memory, x), 0) @ memory
        feed = torch.tanh(self.t["att.wc"] @ torch.cat([context, x]))
        logp = torch.log_softmax(self.t["proj"] @ feed, 0)
        return logp, {"hc": new_hc, "feed": feed}

    @torch.no_grad()
    def translate(self, source: list[int], steps: int, bos: int) -> dict[str, Any]:
        """Beam search of width spec.beam (1: greedy) for exactly `steps` tokens."""
        memory = self.encode(source)
        h = self.spec.hidden
        zero = (torch.zeros(1, 1, h), torch.zeros(1, 1, h))
        beams = [([], 0.0, bos, {"hc": [zero] * len(self.decoder), "feed": torch.zeros(h)})]
        k, margin = self.spec.beam, float("inf")
        for _ in range(steps):
            candidates, states = [], []
            for j, (_, score, token, state) in enumerate(beams):
                logp, new = self.step(memory, token, state)
                values, indices = torch.topk(logp, min(k + 1, logp.numel()))
                candidates += [(score + float(v), j, int(i)) for v, i in zip(values, indices,
                                                                             strict=True)]
                states.append(new)
            candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
            if len(candidates) > k:  # how far the last kept candidate is from the first out
                margin = min(margin, candidates[k - 1][0] - candidates[k][0])
            beams = [([*beams[j][0], tok], score, tok, states[j])
                     for score, j, tok in candidates[:k]]
        return {"tokens": beams[0][0], "encoder": memory.numpy(),
                "feed": beams[0][3]["feed"].numpy(), "min_margin": margin}
