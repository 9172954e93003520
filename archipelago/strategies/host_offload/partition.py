"""Problem partitioning across the cards (seeds/003 §IV-1): which rows and columns of which
matrix each card keeps in its matrix register files.

- matrix-vector: R row blocks x C column blocks; an R x 1 split needs no CPU reduction, a
  1 x C split needs C - 1 CPU additions per row block;
- LSTM: every card holds all four gates of a subset of units (rows u of each gate), so its
  cell update is local and the CPU only concatenates the cards' h slices each step;
- every other matrix of an NMT (attention, output projection) is split by rows.
"""

import re
from dataclasses import dataclass

from archipelago.errors import PartitionError
from archipelago.models.recurrent import GATES
from archipelago.split import split_bounds

RowRanges = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Block:
    """Part of `matrix` persistent on `card`: rows (as ranges) x columns [c0, c1)."""

    matrix: str
    card: int
    rows: RowRanges
    cols: tuple[int, int]

    @property
    def name(self) -> str:
        return f"{self.matrix}@{self.card}"

    @property
    def shape(self) -> tuple[int, int]:
        return sum(b - a for a, b in self.rows), self.cols[1] - self.cols[0]


@dataclass(frozen=True)
class Grid:
    row_blocks: int
    col_blocks: int

    @property
    def cards(self) -> int:
        return self.row_blocks * self.col_blocks


_GRID = re.compile(r"^0*([0-9]{1,5})x0*([0-9]{1,5})$", re.IGNORECASE)  # no card has 10^5 blocks


def parse_grid(text: str) -> Grid:
    match = _GRID.match(text.strip())
    if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise PartitionError(f"--partition '{text}': expected RxC with R, C >= 1 (e.g. 8x1)")
    return Grid(int(match.group(1)), int(match.group(2)))


def grid_blocks(matrix: str, rows: int, cols: int, grid: Grid) -> list[Block]:
    """Card r * C + c holds row block r, column block c; both must divide the matrix."""
    if rows % grid.row_blocks or cols % grid.col_blocks:
        raise PartitionError(
            f"partition {grid.row_blocks}x{grid.col_blocks} does not divide the {rows} x "
            f"{cols} matrix (rows % {grid.row_blocks} = {rows % grid.row_blocks}, "
            f"cols % {grid.col_blocks} = {cols % grid.col_blocks})")
    rb, cb = rows // grid.row_blocks, cols // grid.col_blocks
    return [Block(matrix, r * grid.col_blocks + c, ((r * rb, (r + 1) * rb),),
                  (c * cb, (c + 1) * cb))
            for r in range(grid.row_blocks) for c in range(grid.col_blocks)]


def row_blocks(matrix: str, rows: int, cols: int, cards: int) -> list[Block]:
    """Near-equal contiguous row slices, one per card (cards beyond `rows` get none)."""
    used = min(cards, rows)
    return [Block(matrix, k, (split_bounds(rows, used, k),), (0, cols)) for k in range(used)]


def unit_blocks(matrix: str, hidden: int, cols: int, cards: int) -> list[Block]:
    """Units [u0, u1) of every gate on card k: rows g*H + u for each of the four gates."""
    used = min(cards, hidden)
    blocks = []
    for k in range(used):
        u0, u1 = split_bounds(hidden, used, k)
        rows = tuple((g * hidden + u0, g * hidden + u1) for g in range(GATES))
        blocks.append(Block(matrix, k, rows, (0, cols)))
    return blocks


def units_of(block: Block) -> int:
    """Units an LSTM block computes (its rows hold four gates)."""
    return block.shape[0] // GATES
