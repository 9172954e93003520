"""Tables that fit the terminal they print on (issue 38 point 3): a table wider than the
console loses whole columns, the least needed first, rather than having rich cut every
cell short ("8xu280" shown as "1x…"), and its identifiers (a cluster's, a device's or a
parameter's name) are never cut: they stay on one line, or at worst fold onto the next,
every character kept. A caption names the columns left out. `--json` is never a table,
so it always holds every field.

Every rich table a command prints goes through `fitted`; a table names the columns it may
lose (`drop`, least needed first) and those it must keep whole (`identifiers`, by default
its first column). Prose columns (a strategy's description) wrap as rich wraps them."""

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is the caller's import: this module is imported with it
    from rich.console import Console
    from rich.table import Table

# Wider than any table: the width a table is measured at to learn its own minimum.
_UNBOUNDED = 1_000_000


def _minimum(table: "Table", console: "Console") -> int:
    """The fewest terminal columns `table` prints in without cutting a no-wrap cell: a
    no-wrap column's widest cell (rich's own measure counts its longest word), a wrapping
    column's longest word, their padding and the borders."""
    options = console.options.update_width(_UNBOUNDED)
    widths = [table._measure_column(console, options, column) for column in table.columns]
    return table._extra_width + sum(w.maximum if c.no_wrap else w.minimum
                                    for w, c in zip(widths, table.columns, strict=True))


def _header(column: object) -> str:
    return str(getattr(column, "header", ""))


def fitted(table: "Table", console: "Console", drop: Sequence[str] = (),
           identifiers: Sequence[str] | None = None) -> "Table":
    """`table` within `console`'s width: the columns headed `drop` removed in that order
    while it is wider, and the `identifiers` columns (default: the first) kept on one line
    whole; no cell is cut: a word longer than its column folds onto the next line (rich
would end it in "…"), and where dropping is not enough every column folds. Returns `table`,
    changed in place, its caption naming any column left out."""
    keep = identifiers if identifiers is not None else [_header(c) for c in table.columns[:1]]
    for column in table.columns:
        column.overflow = "fold"  # a word too long for its column breaks, never loses text
        if _header(column) in keep:
            column.no_wrap = True
    width = console.width
    hidden = []
    for header in drop:
        if _minimum(table, console) <= width:
            break
        index = next((i for i, c in enumerate(table.columns) if _header(c) == header), None)
        if index is not None:
            del table.columns[index]
            hidden.append(header)
            for at, column in enumerate(table.columns):
                column._index = at  # rich pads a table's first and last column by index
    if _minimum(table, console) > width:  # nothing left to drop: fold cells, cut none
        for column in table.columns:
            column.no_wrap = False
    if hidden:
        note = (f"{', '.join(hidden)}: left out at {width} columns (a wider terminal "
                "shows them)")
        table.caption = f"{table.caption}; {note}" if table.caption else note
    return table
