"""The plan's application written out as C++: a HostAPI that, like the Recorder, walks the
same app code (apps.py), and for every call writes one line of C++ calling seeds/003
Table I's API (declared in archi_api.h). Its own Recorder sees the calls, so the program
written is checked call for call against the plan's Program.

Vectors are C++ variables; values the application reads for its control flow (the words a
beam search keeps, which hypothesis each extends) are C++ expressions evaluated when the
program runs, so a beam search is decided by the compiled program, not at build time.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from archipelago.strategies.host_offload.layout import Layout
from archipelago.strategies.host_offload.program import OverlayProgram, Recorder, Sym


@dataclass(frozen=True)
class Var:
    """A C++ variable holding a vector (`Vec`), a matrix (`Mat`, `cols` > 0) or indices."""

    name: str
    length: int
    cols: int = 0

    @property
    def sym(self) -> Sym:
        return Sym(self.length, self.cols)


@dataclass(frozen=True)
class Expr:
    """A C++ scalar expression (a score, a word, a hypothesis index) known at run time."""

    code: str

    def __add__(self, other: object) -> "Expr":
        return Expr(f"{cpp(self)} + {cpp(other)}")

    __radd__ = __add__


def cpp(value: object) -> str:
    """C++ source of an argument: a variable, an expression, a literal."""
    if isinstance(value, Var):
        return value.name
    if isinstance(value, Expr):
        return value.code
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool | int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    raise TypeError(f"no C++ form for {value!r}")


def state_key(key: str | tuple) -> str:
    """A cell register's key: a name, or (cell, step parity, hypothesis), which the program
    turns into a string when it runs (the hypothesis is a run-time index)."""
    if isinstance(key, str):
        return cpp(key)
    return f"state_key({', '.join(cpp(part) for part in key)})"


class CppWriter:
    """A HostAPI writing C++ lines; `lines` is the body of `main`, `trace` the calls."""

    def __init__(self, layout: Layout, host_shapes: dict[str, Sym]) -> None:
        self.cards = layout.cards
        self.layout = layout
        self.host_shapes = host_shapes
        self.trace = Recorder(self.cards, layout.block_shapes(), host_shapes)
        self.lines: list[str] = []
        self.blocks = {b.name: b for blocks in layout.blocks.values() for b in blocks}
        self._count = 0
        self._host: dict[str, Var] = {}

    def _new(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def _emit(self, line: str) -> None:
        self.lines.append(line)

    def _assign(self, kind: str, stem: str, call: str, length: int, cols: int = 0) -> Var:
        var = Var(self._new(stem), length, cols)
        self._emit(f"{kind} {var.name} = {call};")
        return var

    def begin_inference(self) -> None:
        self.trace.begin_inference()
        self._emit("")
        self._emit("// ---- one inference: every call below is priced by the modelling tool ----")

    @contextmanager
    def parallel(self) -> Iterator[None]:
        self._emit("// concurrent: each card over its own PCIe link")
        with self.trace.parallel():
            yield

    # Table I: CPU compute (and the extensions an NMT needs)
    def cpu(self, name: str, *args: Any) -> Any:
        out = self.trace.cpu(name, *(a.sym if isinstance(a, Var) else a for a in args))
        stem = name.removeprefix("cpu_").lower()
        if name == "cpu_concat":
            call = f"cpu_concat({{{', '.join(cpp(a) for a in args)}}})"
        else:
            call = f"{name}({', '.join(cpp(a) for a in args)})"
        kind = "Idx" if name == "cpu_pickTop" else "Vec"
        return self._assign(kind, stem, call, out.length)

    # Table I: communication and control (the cards compute in fpga_execute)
    def fpga_pgm(self, card: int, program: OverlayProgram) -> None:
        self.trace.fpga_pgm(card, program)
        self._emit(f"fpga_pgm({card}, {cpp(program.name)});")

    def fpga_ld_mrfs(self, card: int, block: str, source: str = "host") -> None:
        self.trace.fpga_ld_mrfs(card, block, source)
        rows, cols = self.blocks[block].shape
        self._emit(f"fpga_ld_mrfs({card}, {cpp(block)});  // {rows} x {cols} INT8, {source}")

    def fpga_ld_input(self, card: int, vector: Var) -> None:
        self.trace.fpga_ld_input(card, vector.sym)
        self._emit(f"fpga_ld_input({card}, {vector.name});")

    def fpga_execute(self, card: int, program: str, state: tuple | None = None) -> None:
        self.trace.fpga_execute(card, program, state)
        block = self.blocks[program]
        if state is None:
            rows = ", ".join(f"{a}-{z - 1}" for a, z in block.rows)
            self._emit(f"fpga_execute({card}, {cpp(program)});  // {block.matrix}: rows {rows}")
            return
        read, write = state_key(state[0]), state_key(state[1])
        self._emit(f"fpga_execute({card}, {cpp(program)}, {read}, {write});  // LSTM cell "
                   f"{block.matrix.removesuffix('.wu')}")

    def fpga_get_out(self, card: int) -> Var:
        out = self.trace.fpga_get_out(card)
        return self._assign("Vec", "out", f"fpga_get_out({card})", out.length)

    # Host memory: no API call
    def host(self, name: str) -> Var:
        """A host tensor, read from its file the first time the application names it."""
        if name not in self._host:
            shape = self.host_shapes[name]
            kind, read = ("Mat", "host_tensor") if shape.cols else ("Vec", "host_vector")
            self._host[name] = Var(name, shape.length, shape.cols)
            self._emit(f"{kind} {name} = {read}({cpp(name)});")
        return self._host[name]

    def row(self, matrix: Var, index: int) -> Var:
        return self._assign("Vec", "row", f"host_row({matrix.name}, {index})", matrix.cols)

    def slice(self, vector: Var, start: int, stop: int) -> Var:
        if (start, stop) == (0, vector.length):
            return vector
        return self._assign("Vec", "part", f"host_slice({vector.name}, {start}, {stop})",
                            stop - start)

    def zeros(self, length: int) -> Var:
        return self._assign("Vec", "zeros", f"host_zeros({length})", length)

    def stack(self, vectors: list[Var], rows: bool) -> Var:
        shape = self.trace.stack([v.sym for v in vectors], rows)
        names = ", ".join(v.name for v in vectors)
        return self._assign("Mat", "stacked", f"host_stack({{{names}}}, {cpp(rows)})",
                            shape.length, shape.cols)

    def indices(self, vector: Var) -> list[Expr]:
        return [Expr(f"{vector.name}[{i}]") for i in range(vector.length)]

    def read(self, vector: Var, indices: list[Expr]) -> list[Expr]:
        return [Expr(f"{vector.name}[{cpp(i)}]") for i in indices]

    def best(self, candidates: list[tuple[Any, Any, Any]], k: int) -> list[tuple[Expr, ...]]:
        name = self._new("kept")
        listed = ", ".join(f"{{{', '.join(cpp(part) for part in c)}}}" for c in candidates)
        self._emit(f"Kept {name} = host_best({{{listed}}}, {k});")
        return [(Expr(f"{name}[{i}].score"), Expr(f"{name}[{i}].from"),
                 Expr(f"{name}[{i}].token")) for i in range(min(k, len(candidates)))]

    def pick(self, options: list[Any], index: Any) -> Any:
        """options[index] for an index known only at run time: one C++ line per value."""
        first = options[0]
        if len(options) == 1 or not isinstance(index, Expr):
            return options[index if isinstance(index, int) else 0]
        if isinstance(first, dict):
            return {key: self.pick([o[key] for o in options], index) for key in first}
        if isinstance(first, list):
            return [self.pick(list(column), index) for column in zip(*options, strict=True)]
        if all(o is first for o in options):
            return first
        listed = ", ".join(cpp(o) for o in options)
        if isinstance(first, Var):
            return self._assign("Vec", "picked", f"host_pick({cpp(index)}, {{{listed}}})",
                                first.length)
        name = self._new("word")
        self._emit(f"int {name} = host_pick({cpp(index)}, {{{listed}}});")
        return Expr(name)

    def output(self, name: str, value: Any) -> None:
        """The program's result, printed for whoever runs it (the build's test reads it)."""
        if isinstance(value, Var):
            self._emit(f"print_output({cpp(name)}, {value.name});")
        elif value and isinstance(value[0], Var):
            listed = ", ".join(v.name for v in value)
            self._emit(f"print_output({cpp(name)}, host_stack({{{listed}}}, true));")
        else:
            self._emit(f"print_tokens({cpp(name)}, {{{', '.join(cpp(v) for v in value)}}});")
