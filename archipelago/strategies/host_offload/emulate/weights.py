"""Seeded FP32 weights for a recurrent spec: the emulator quantizes them for the cards, the
torch reference loads them unchanged."""

import numpy as np

from archipelago.models.recurrent import LSTMSpec, MatvecSpec, NMTSpec, RecurrentSpec

Arrays = dict[str, np.ndarray]


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], bound: float) -> np.ndarray:
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def make_weights(spec: RecurrentSpec, seed: int, steps: int) -> tuple[Arrays, Arrays, Arrays]:
    """(matrices, LSTM biases by gate matrix, host tensors). LSTM matrices follow PyTorch's
    initialisation, U(-1/sqrt(H), 1/sqrt(H)); other matrices U(-1/sqrt(cols), ...);
    embeddings N(0, 1)."""
    rng = np.random.default_rng(seed)
    weights, biases, host = {}, {}, {}
    for name, (rows, cols) in spec.matrices().items():
        if name.endswith(".wu"):
            hidden = rows // 4
            weights[name] = _uniform(rng, (rows, cols), hidden ** -0.5)
            biases[name] = _uniform(rng, (rows,), hidden ** -0.5)
        else:
            weights[name] = _uniform(rng, (rows, cols), cols ** -0.5)
    if isinstance(spec, MatvecSpec):
        host["x"] = rng.standard_normal(spec.cols).astype(np.float32)
    elif isinstance(spec, LSTMSpec):
        host["inputs"] = rng.standard_normal((steps, spec.input_size)).astype(np.float32)
    else:
        assert isinstance(spec, NMTSpec)
        host["src_embedding"] = rng.standard_normal((spec.src_vocab, spec.embedding)
                                                    ).astype(np.float32)
        host["tgt_embedding"] = rng.standard_normal((spec.tgt_vocab, spec.embedding)
                                                    ).astype(np.float32)
        host["att_v"] = _uniform(rng, (spec.hidden,), spec.hidden ** -0.5)
    return weights, biases, host
