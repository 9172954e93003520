"""The API of seeds/003 Table I as a program model: an application calls CPU, FPGA and
communication routines; recording those calls gives the Program this strategy plans with.

Apps are written once against `HostAPI` (as a user of the paper's C/C++ framework writes
theirs). Run against a `Recorder` they yield the Program (shapes only, no values) that the
modelling tool costs; run against the emulator's executor they compute for real, and the
executor's trace must equal the recorded Program call for call.
"""

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from archipelago.errors import ArchipelagoError

Category = Literal["cpu", "fpga", "comm"]

# Table I, plus the extensions an NMT needs (§III: "Our APIs are extensible"); the paper runs
# embeddings and beam bookkeeping on the CPU (§IV NMT-1) but lists no call for them.
CPU_CALLS = ("cpu_add", "cpu_mul", "cpu_reduce", "cpu_dot", "cpu_axpy", "cpu_tanh", "cpu_exp",
             "cpu_softmax", "cpu_matvec", "cpu_pickTop")
CPU_EXTENSIONS = ("cpu_embed", "cpu_concat", "cpu_log")
FPGA_CALLS = ("fpga_matvec", "fpga_add", "fpga_mul", "fpga_tanh", "fpga_sigmoid", "fpga_relu")
COMM_CALLS = ("fpga_pgm", "fpga_ld_input", "fpga_ld_mrfs", "fpga_execute", "fpga_get_out")
HOST_CALLS = CPU_CALLS + CPU_EXTENSIONS + COMM_CALLS


def check_call(name: str, allowed: Sequence[str] = HOST_CALLS) -> None:
    if name not in allowed:
        raise ArchipelagoError(f"unknown API call '{name}'; valid: {', '.join(allowed)}")


@dataclass(frozen=True)
class Instr:
    """One overlay instruction (an FPGA API of Table I) on `length` elements; a matvec
    names its matrix block and has `length` = rows, `cols` = its input width."""

    op: str
    length: int
    matrix: str | None = None
    cols: int = 0

    def __post_init__(self) -> None:
        check_call(self.op, FPGA_CALLS)


@dataclass(frozen=True)
class OverlayProgram:
    """What `fpga_pgm` loads (Fig. 3b): a named chain of overlay instructions. `kind` says
    which semantics the card executes (a plain matvec or a fused LSTM cell)."""

    name: str
    kind: Literal["matvec", "lstm_cell"]
    instrs: tuple[Instr, ...]
    in_len: int
    out_len: int

    @property
    def segments(self) -> tuple[int, ...]:
        """Column widths of the chain's matvecs: each reads its own slice of the input
        (x and h of an LSTM cell), quantized with its own scale."""
        return tuple(i.cols for i in self.instrs if i.op == "fpga_matvec")


@dataclass(frozen=True, slots=True)
class Call:
    """One API call. `device` is None on the CPU, else the card index. `elements` is the
    vector length (rows x cols for a matvec); `nbytes` what crosses PCIe for a transfer;
    `group` marks calls issued concurrently (one per card), None when issued alone."""

    name: str
    device: int | None
    elements: int = 0
    nbytes: int = 0
    target: str = ""
    group: int | None = None
    source: str = "host"

    @property
    def category(self) -> Category:
        if self.name.startswith("cpu_"):
            return "cpu"
        return "fpga" if self.name == "fpga_execute" else "comm"


@dataclass
class Program:
    """The recorded application: setup calls (programs and persistent weights, once) and
    the per-inference calls whose latency the modelling tool predicts."""

    setup: list[Call] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    overlays: dict[str, OverlayProgram] = field(default_factory=dict)
    cards: int = 1

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for call in self.calls:
            out[call.name] = out.get(call.name, 0) + 1
        return out


class HostAPI(Protocol):
    """What an application may call. Vectors are opaque handles (numpy arrays when run
    for real, shapes when recorded)."""

    cards: int

    def cpu(self, name: str, *args: Any) -> Any: ...
    def fpga_pgm(self, card: int, program: OverlayProgram) -> None: ...
    def fpga_ld_mrfs(self, card: int, block: str, source: str = "host") -> None: ...
    def fpga_ld_input(self, card: int, vector: Any) -> None: ...
    def fpga_execute(self, card: int, program: str, state: tuple[Any, Any] | None = None
                     ) -> None: ...
    def fpga_get_out(self, card: int) -> Any: ...
    def parallel(self) -> Any: ...
    def begin_inference(self) -> None: ...
    # Host memory (no API call, no cost): named inputs, views, and values read back for
    # the application's own control flow (beam bookkeeping).
    def host(self, name: str) -> Any: ...
    def row(self, matrix: Any, index: int) -> Any: ...
    def slice(self, vector: Any, start: int, stop: int) -> Any: ...
    def zeros(self, length: int) -> Any: ...
    def stack(self, vectors: list[Any], rows: bool) -> Any: ...
    def indices(self, vector: Any) -> list[int]: ...
    def read(self, vector: Any, indices: list[int]) -> list[float]: ...
    # A beam step's bookkeeping, decided by values: the k best (score, hypothesis, word),
    # and one of several hypotheses' values by an index that may be known only at run time
    # (a written C++ program decides both when it runs).
    def best(self, candidates: list[tuple[Any, Any, Any]], k: int) -> list[tuple[Any, Any, Any]]:
        ...
    def pick(self, options: list[Any], index: Any) -> Any: ...


def keep_best(candidates: list[tuple[float, int, int]], k: int) -> list[tuple[float, int, int]]:
    """The k best (score, hypothesis, word) of a beam step: highest score first, ties to the
    lower hypothesis, then the lower word."""
    return sorted(candidates, key=lambda c: (-c[0], c[1], c[2]))[:k]


@dataclass(frozen=True)
class Sym:
    """A recorded vector: only its length (and, for a matrix, its columns) is known."""

    length: int
    cols: int = 0


FP32_BYTES = 4


# The longest program one plan records: about 4 us per call to record and cost, so a plan
# stays within about 2 s and 60 MB. The built-ins at their published sizes need under
# 100,000 calls (nmt-luong on 64 cards for 200 steps: 415,000).
MAX_PROGRAM_CALLS = 500_000


class ProgramTooLarge(ArchipelagoError):
    """The application issues more calls than one plan records (steps x layers x cards)."""


class Recorder:
    """A HostAPI that records calls instead of running them; vectors are `Sym` lengths.
    It stops at MAX_PROGRAM_CALLS: a host program grows with steps x layers x cards, and a
    user's `--steps` or cluster size must not turn a plan into minutes and gigabytes."""

    def __init__(self, cards: int, block_shapes: dict[str, tuple[int, int]],
                 host_shapes: dict[str, Sym]) -> None:
        self.cards = cards
        self.program = Program(cards=cards)
        self.block_shapes = block_shapes
        self.host_shapes = host_shapes
        self._group: int | None = None
        self._groups = 0
        self._log = self.program.setup
        self._loaded: set[tuple[int, str]] = set()

    def begin_inference(self) -> None:
        self._log = self.program.calls

    @contextmanager
    def parallel(self) -> Iterator[None]:
        """Calls issued inside go to different cards at once (each card has its own link)."""
        self._group, self._groups = self._groups, self._groups + 1
        try:
            yield
        finally:
            self._group = None

    def _add(self, call: Call) -> None:
        self._log.append(call)
        if len(self._log) > MAX_PROGRAM_CALLS:
            raise ProgramTooLarge(f"the host program passes {MAX_PROGRAM_CALLS:,} calls")

    def host(self, name: str) -> Sym:
        return self.host_shapes[name]

    def row(self, matrix: Sym, index: int) -> Sym:
        return Sym(matrix.cols)

    def slice(self, vector: Sym, start: int, stop: int) -> Sym:
        return Sym(stop - start)

    def zeros(self, length: int) -> Sym:
        return Sym(length)

    def stack(self, vectors: list[Sym], rows: bool) -> Sym:
        n, width = len(vectors), vectors[0].length
        return Sym(n, width) if rows else Sym(width, n)

    def indices(self, vector: Sym) -> list[int]:
        """Recorded control flow never depends on values: any indices of the right count."""
        return list(range(vector.length))

    def read(self, vector: Sym, indices: list[int]) -> list[float]:
        return [0.0] * len(indices)

    def best(self, candidates: list[tuple[float, int, int]], k: int
             ) -> list[tuple[float, int, int]]:
        return keep_best(candidates, k)

    def pick(self, options: list[Any], index: int) -> Any:
        return options[index]

    def cpu(self, name: str, *args: Any) -> Any:
        check_call(name, CPU_CALLS + CPU_EXTENSIONS)
        out, elements = cpu_shape(name, args)
        self._add(Call(name, None, elements=elements))
        return out

    def _card(self, card: int) -> int:
        if not 0 <= card < self.cards:
            raise ArchipelagoError(f"card {card} does not exist; the host has {self.cards}")
        return card

    def fpga_pgm(self, card: int, program: OverlayProgram) -> None:
        self.program.overlays[program.name] = program
        self._loaded.add((self._card(card), program.name))
        self._add(Call("fpga_pgm", self._card(card), target=program.name, group=self._group))

    def fpga_ld_mrfs(self, card: int, block: str, source: str = "host") -> None:
        rows, cols = self.block_shapes[block]
        self._add(Call("fpga_ld_mrfs", self._card(card), elements=rows * cols,
                       nbytes=rows * cols, target=block, group=self._group, source=source))

    def fpga_ld_input(self, card: int, vector: Sym) -> None:
        self._add(Call("fpga_ld_input", self._card(card), elements=vector.length,
                       nbytes=vector.length * FP32_BYTES, group=self._group))

    def fpga_execute(self, card: int, program: str, state: tuple[Any, Any] | None = None
                     ) -> None:
        if (self._card(card), program) not in self._loaded:
            raise ArchipelagoError(f"fpga_execute of '{program}' on card {card} before "
                                   "fpga_pgm loaded it there")
        self._add(Call("fpga_execute", self._card(card), target=program, group=self._group))

    def fpga_get_out(self, card: int) -> Sym:
        out = self._last_program(card).out_len
        self._add(Call("fpga_get_out", self._card(card), elements=out,
                       nbytes=out * FP32_BYTES, group=self._group))
        return Sym(out)

    def _last_program(self, card: int) -> OverlayProgram:
        for call in reversed(self._log):
            if call.name == "fpga_execute" and call.device == card:
                return self.program.overlays[call.target]
        raise ArchipelagoError(f"fpga_get_out on card {card} before any fpga_execute")


def _same(args: Sequence[Any]) -> tuple[Sym, int]:
    return Sym(args[0].length), args[0].length


def _reduce(args: Sequence[Any]) -> tuple[Sym, int]:
    return Sym(1), args[0].length


def _matvec(args: Sequence[Any]) -> tuple[Sym, int]:
    """Table I's vector-matrix product: v (length R) times m (R x C) gives C."""
    matrix = args[1]
    return Sym(matrix.cols), matrix.length * matrix.cols


def _concat(args: Sequence[Any]) -> tuple[Sym, int]:
    total = sum(a.length for a in args)
    return Sym(total), total


# Result shape and the element count a CPU call's proxy is looked up at.
_CPU_SHAPES: dict[str, Callable[[Sequence[Any]], tuple[Sym, int]]] = {
    "cpu_add": _same, "cpu_mul": _same, "cpu_tanh": _same, "cpu_exp": _same,
    "cpu_softmax": _same, "cpu_log": _same, "cpu_reduce": _reduce, "cpu_dot": _reduce,
    "cpu_axpy": lambda a: (Sym(a[1].length), a[1].length),
    "cpu_matvec": _matvec,
    "cpu_pickTop": lambda a: (Sym(int(a[1])), a[0].length),
    "cpu_embed": lambda a: (Sym(a[0].cols), a[0].cols),  # (table rows x cols, index)
    "cpu_concat": _concat,
}


def cpu_shape(name: str, args: Sequence[Any]) -> tuple[Sym, int]:
    return _CPU_SHAPES[name](args)
