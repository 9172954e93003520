"""One summary per estimate: a kind's report hook lists its figures once, and the `--json`
object, the terminal tables and the report page's headline are all rendered from that list
here, so a figure cannot read one way in the table and another in the JSON.

A `Summary` holds ordered `Figure`s: each has a JSON key and value (a number, text, list or
nested object), a row in the head table, or both; the JSON object is the keyed figures in
order, the head table the labelled ones in order. `Section`s are the further tables (per
device, per part), `notes` the lines printed under them. By the convention the report page
shares, a figure keyed `reasons` (why the plan does not fit) is printed first. rich is
imported only when a table is printed.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from archipelago.table_fit import fitted

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


@dataclass(frozen=True)
class Unit:
    """How a number is shown: value x `scale` with `digits` after the point, then `name`."""

    name: str = ""
    scale: float = 1.0
    digits: int = 3

    def show(self, value: float) -> str:
        text = f"{value * self.scale:,.{self.digits}f}"
        return f"{text} {self.name}" if self.name else text


MS = Unit("ms", 1e3, 3)


@dataclass(frozen=True)
class Figure:
    """One figure. `key` names it in `--json` (None: a table row only, e.g. two figures on
    one line); `label` is its head-table row (None: `--json` only), whose cells are `cells`,
    else the value shown in `unit`; `headline` is its label among the report page's headline
    figures (shown in `unit`)."""

    key: str | None
    value: Any = None
    label: str | None = None
    cells: tuple[str, ...] = ()
    unit: Unit | None = None
    headline: str | None = None

    def row(self) -> tuple[str, ...]:
        """The head-table cells after the label."""
        if self.cells:
            return self.cells
        if self.unit is not None:
            return (self.unit.show(self.value),)
        return (f"{self.value:,}" if isinstance(self.value, int) else str(self.value),)


def row(label: str, *cells: str) -> Figure:
    """A head-table row that is no single JSON figure."""
    return Figure(None, label=label, cells=cells)


def verdict(feasible: bool, reasons: Sequence[str], label: str | None = "feasible"
            ) -> list[Figure]:
    """`feasible` (a head-table row unless `label` is None) and its `reasons`."""
    shown = "yes" if feasible else "[red]no[/red]"
    return [Figure("feasible", feasible, label, (shown,)), Figure("reasons", reasons)]


@dataclass(frozen=True)
class Column:
    """A table column; numbers align right, text left."""

    name: str
    right: bool = True


@dataclass(frozen=True)
class Section:
    """A further table, printed under the head table."""

    title: str
    columns: tuple[Column, ...]
    rows: Sequence[Sequence[str]]


@dataclass(frozen=True)
class Summary:
    """A kind's figures of one estimate. `title` and `columns` make the head table (no
    columns: none is printed); `dim` greys it (figures of a plan that does not fit)."""

    figures: list[Figure]
    title: str = ""
    columns: tuple[Column, ...] = ()
    sections: list[Section] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dim: bool = False

    def as_json(self) -> dict[str, Any]:
        """The `--json` object: every keyed figure, in order."""
        out: dict[str, Any] = {}
        for f in self.figures:
            if f.key is not None:
                if f.key in out:
                    raise ValueError(f"summary key '{f.key}' given twice")  # a kind's bug
                out[f.key] = f.value
        return out

    def headline(self) -> list[Figure]:
        """The report page's headline figures, in order."""
        return [f for f in self.figures if f.headline is not None]

    def tables(self) -> list["Table"]:
        """The head table (where there are columns) and the sections, as rich tables."""
        head = [rich_table(self.title, self.columns, head_rows(self.figures), self.dim)
                ] if self.columns else []
        return head + [rich_table(s.title, s.columns, s.rows) for s in self.sections]

    def print(self, console: "Console") -> None:
        """Why the plan does not fit, then the tables, then the notes."""
        print_reasons(self.as_json().get("reasons", ()), console)
        for table in self.tables():
            console.print(fitted(table, console))
        for note in self.notes:
            console.print(note)


def print_reasons(reasons: Iterable[str], console: "Console") -> None:
    """Why a plan does not fit, one line per device and memory or resource with how far
    over, printed before any figure."""
    for reason in reasons:
        console.print(f"[red]does not fit:[/red] {reason}", soft_wrap=True)


def head_rows(figures: Sequence[Figure]) -> list[tuple[str, ...]]:
    """The head-table rows of the labelled figures, label first."""
    return [(f.label, *f.row()) for f in figures if f.label is not None]


def rich_table(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]],
               dim: bool = False) -> "Table":
    """A titled rich table (greyed when `dim`)."""
    from rich.table import Table

    table = Table(title=title, style="dim" if dim else None)
    for c in columns:
        table.add_column(c.name, justify="right" if c.right else "left")
    for cells in rows:  # a short row's last cells stay blank
        if len(cells) > len(columns):  # a kind's bug, not input
            raise ValueError(f"table '{title}': row {cells!r} has {len(cells)} cells for "
                             f"{len(columns)} columns")
        table.add_row(*cells, *[""] * (len(columns) - len(cells)))
    return table
