"""The API of seeds/003 Table I run for real: CPU calls in FP32 numpy on the host, FPGA
calls sent to the cards. Every call also goes through a Recorder, so the trace of what ran
can be compared call for call with the Program the plan was estimated from."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

from archipelago.strategies.host_offload.emulate.weights import card_block
from archipelago.strategies.host_offload.layout import Layout
from archipelago.strategies.host_offload.program import OverlayProgram, Recorder, Sym, keep_best
from archipelago.strategies.host_offload.proxies import KERNELS


class CardLink(Protocol):
    """How the host reaches a card: `send` for calls without a result, `request` for
    calls that return one (the card may be in this process or another)."""

    def send(self, message: tuple) -> None: ...
    def request(self, message: tuple) -> Any: ...


def _sym(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return Sym(value.shape[0], value.shape[1] if value.ndim == 2 else 0)
    return value


def _cpu_kernel(name: str) -> Any:
    if name == "cpu_concat":  # any number of parts (the proxy times two)
        return lambda *parts: np.concatenate(parts)
    return KERNELS[name][1]


class Executor:
    """A HostAPI whose calls compute; `trace` is the Recorder that saw the same calls."""

    def __init__(self, layout: Layout, cards: list[CardLink], weights: dict[str, np.ndarray],
                 biases: dict[str, np.ndarray], host: dict[str, np.ndarray]) -> None:
        self.cards = len(cards)
        self.layout, self.links = layout, cards
        self.weights, self.biases, self.host_tensors = weights, biases, host
        self.blocks = {b.name: b for blocks in layout.blocks.values() for b in blocks}
        self.trace = Recorder(self.cards, layout.block_shapes(),
                              {k: _sym(v) for k, v in host.items()})

    def begin_inference(self) -> None:
        self.trace.begin_inference()

    @contextmanager
    def parallel(self) -> Iterator[None]:
        with self.trace.parallel():
            yield

    def cpu(self, name: str, *args: Any) -> Any:
        self.trace.cpu(name, *(_sym(a) for a in args))
        out = np.atleast_1d(_cpu_kernel(name)(*args))  # a reduction gives a 1-vector
        return out.astype(np.int64 if name == "cpu_pickTop" else np.float32, copy=False)

    def fpga_pgm(self, card: int, program: OverlayProgram) -> None:
        self.trace.fpga_pgm(card, program)
        self.links[card].send(("fpga_pgm", program.name, program.kind))

    def fpga_ld_mrfs(self, card: int, block: str, source: str = "host") -> None:
        """The host quantizes the block to INT8 (per-row scales) and places it."""
        self.trace.fpga_ld_mrfs(card, block, source)
        mrfs = card_block(self.layout, self.blocks[block], self.weights, self.biases)
        self.links[card].send(("fpga_ld_mrfs", block, *mrfs))

    def fpga_ld_input(self, card: int, vector: np.ndarray) -> None:
        self.trace.fpga_ld_input(card, _sym(vector))
        self.links[card].send(("fpga_ld_input", np.ascontiguousarray(vector)))

    def fpga_execute(self, card: int, program: str, state: tuple[Any, Any] | None = None
                     ) -> None:
        self.trace.fpga_execute(card, program, state)
        self.links[card].send(("fpga_execute", program, state))

    def fpga_get_out(self, card: int) -> np.ndarray:
        self.trace.fpga_get_out(card)
        return self.links[card].request(("fpga_get_out",))

    # Host memory: views and values the application reads for its own control flow.
    def host(self, name: str) -> np.ndarray:
        return self.host_tensors[name]

    def row(self, matrix: np.ndarray, index: int) -> np.ndarray:
        return matrix[index]

    def slice(self, vector: np.ndarray, start: int, stop: int) -> np.ndarray:
        return vector[start:stop]

    def zeros(self, length: int) -> np.ndarray:
        return np.zeros(length, dtype=np.float32)

    def stack(self, vectors: list[np.ndarray], rows: bool) -> np.ndarray:
        m = np.stack(vectors)
        return m if rows else np.ascontiguousarray(m.T)

    def indices(self, vector: np.ndarray) -> list[int]:
        return [int(i) for i in vector]

    def read(self, vector: np.ndarray, indices: list[int]) -> list[float]:
        return [float(vector[i]) for i in indices]

    def best(self, candidates: list[tuple[float, int, int]], k: int
             ) -> list[tuple[float, int, int]]:
        return keep_best(candidates, k)

    def pick(self, options: list[Any], index: int) -> Any:
        return options[index]
