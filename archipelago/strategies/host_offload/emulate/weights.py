"""Seeded FP32 weights for a recurrent spec: the emulator quantizes them for the cards, the
torch reference loads them unchanged."""

import itertools

import numpy as np

from archipelago.models.recurrent import LSTMSpec, MatvecSpec, NMTSpec, RecurrentSpec
from archipelago.strategies.host_offload.emulate.card import quantize_rows
from archipelago.strategies.host_offload.layout import Layout
from archipelago.strategies.host_offload.partition import Block

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


def make_source(spec: RecurrentSpec, seed: int, steps: int) -> list[int]:
    """The source sentence an NMT translates in an emulation (words 2 .., after BOS);
    other models ignore it."""
    vocab = getattr(spec, "src_vocab", 2)
    return [int(t) for t in np.random.default_rng(seed + 1).integers(2, max(vocab, 3), steps)]


CardBlock = tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray, np.ndarray | None]


def card_block(layout: Layout, block: Block, weights: Arrays, biases: Arrays) -> CardBlock:
    """What `fpga_ld_mrfs` places on a card, as the host quantizes it: per matvec of the
    block's program, INT8 weights and per-row scales; the block's global rows; its bias
    rows (an LSTM cell's) or None. The emulator sends it, `archi build` writes it."""
    rows = np.concatenate([np.arange(a, z) for a, z in block.rows])
    part = weights[block.matrix][rows, block.cols[0]:block.cols[1]]
    bounds = np.cumsum((0, *layout.program(block).segments))
    segments = [quantize_rows(part[:, lo:hi]) for lo, hi in itertools.pairwise(bounds)]
    bias = biases[block.matrix][rows] if block.matrix in biases else None
    return segments, rows, bias
