"""One FPGA card of the host-offload row, as the emulator runs it: it holds only the INT8
weight blocks placed on it (`fpga_ld_mrfs`), its overlay programs (`fpga_pgm`), an input
and an output buffer, and the LSTM cell registers that stay on the card between steps.

Numerics (seeds/003 Table II): INT8 matrix products with int32 accumulation, then the
per-row weight scale times the input vector's scale; the vector ops after them in FP32
(the NPU's INT27 vector unit is modelled as FP32 here).
"""

import zlib
from collections.abc import Hashable

import numpy as np

# A digest of every int32 accumulator, independent of how rows are spread over cards:
# the sum of acc x (a weight keyed by matrix, use count and global row) mod a prime.
CHECKSUM_MOD = (1 << 61) - 1
INT8_MAX = 127


def quantize_rows(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row INT8: the scale maps each row's largest magnitude to 127."""
    scale = np.abs(weights).max(axis=1) / INT8_MAX
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(weights / scale[:, None]), -INT8_MAX, INT8_MAX).astype(np.int8)
    return q, scale.astype(np.float32)


def quantize_vector(x: np.ndarray) -> tuple[np.ndarray, np.float32]:
    scale = np.float32(np.abs(x).max() / INT8_MAX) or np.float32(1.0)
    return np.clip(np.rint(x / scale), -INT8_MAX, INT8_MAX).astype(np.int32), scale


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


class Card:
    """The state and handlers of one card; `handle(message)` is its whole interface."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.programs: dict[str, str] = {}
        self.mrfs: dict[str, tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]] = {}
        self.biases: dict[str, np.ndarray] = {}
        self.cell_state: dict[str, np.ndarray] = {}
        self.uses: dict[str, int] = {}
        self.input: np.ndarray | None = None
        self.output: np.ndarray | None = None
        self.checksum = 0

    def handle(self, message: tuple) -> object:
        name, *args = message
        return getattr(self, name)(*args)

    def fpga_pgm(self, program: str, kind: str) -> None:
        self.programs[program] = kind

    def fpga_ld_mrfs(self, block: str, segments: list[tuple[np.ndarray, np.ndarray]],
                     rows: np.ndarray, bias: np.ndarray | None) -> None:
        """INT8 weights and per-row scales, one pair per matvec of the block's program;
        `rows` are the block's global row indices (for the checksum)."""
        self.mrfs[block] = (segments, rows)
        if bias is not None:
            self.biases[block] = bias

    def fpga_ld_input(self, vector: np.ndarray) -> None:
        self.input = np.asarray(vector, dtype=np.float32)

    def _matvec(self, block: str) -> np.ndarray:
        """Each segment: INT8 input slice (its own scale) times INT8 weights, int32 sums,
        then both scales; the segments' results are added (the chain's fpga_add)."""
        segments, rows = self.mrfs[block]
        assert self.input is not None
        use = self.uses.get(block, 0)
        self.uses[block] = use + 1
        out, start = None, 0
        for k, (q, scale) in enumerate(segments):
            qx, sx = quantize_vector(self.input[start:start + q.shape[1]])
            start += q.shape[1]
            acc = q.astype(np.int32) @ qx
            self._digest(f"{block.split('@')[0]}#{k}", use, rows, acc)
            y = (acc.astype(np.float32) * scale * sx).astype(np.float32)
            out = y if out is None else out + y
        assert out is not None
        return out

    def _digest(self, matrix: str, use: int, rows: np.ndarray, acc: np.ndarray) -> None:
        key = (zlib.crc32(matrix.encode()) << 20) ^ use
        weights = (rows.astype(np.int64) + 1) * 2_654_435_761 + key
        weights %= CHECKSUM_MOD
        total = sum(int(w) * int(a) for w, a in zip(weights, acc, strict=True))
        self.checksum = (self.checksum + total) % CHECKSUM_MOD

    def fpga_execute(self, program: str, state: tuple[Hashable, Hashable] | None) -> None:
        kind = self.programs[program]
        y = self._matvec(program)
        if kind == "matvec":
            self.output = y
            return
        assert state is not None
        gates = y + self.biases[program]
        i, f, g, o = np.split(gates, 4)   # PyTorch's gate order: input, forget, cell, output
        c = self.cell_state.get(state[0], np.zeros_like(i))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        self.cell_state[state[1]] = c.astype(np.float32)
        self.output = (_sigmoid(o) * np.tanh(c)).astype(np.float32)

    def fpga_get_out(self) -> np.ndarray:
        assert self.output is not None
        return self.output

    def report(self) -> dict[str, int]:
        weight_bytes = sum(q.nbytes for segments, _ in self.mrfs.values() for q, _ in segments)
        return {"checksum": self.checksum, "weight_bytes": weight_bytes,
                "blocks": len(self.mrfs)}


class LocalCard:
    """A card in this process (tests, and the blocking checks)."""

    def __init__(self, index: int) -> None:
        self.card = Card(index)

    def send(self, message: tuple) -> None:
        self.card.handle(message)

    def request(self, message: tuple) -> object:
        return self.card.handle(message)
