"""Where every weight block lives, and the overlay program that uses it: the static half of
a host-offload plan, derived once from the model, the card count and the options."""

from dataclasses import dataclass, field
from typing import Literal

from archipelago.models.recurrent import LSTMSpec, MatvecSpec, NMTSpec, RecurrentSpec
from archipelago.strategies.host_offload.partition import (
    Block,
    Grid,
    grid_blocks,
    row_blocks,
    unit_blocks,
    units_of,
)
from archipelago.strategies.host_offload.program import Instr, OverlayProgram

WeightsMode = Literal["persistent", "pcie", "ddr4"]


@dataclass(frozen=True)
class Layout:
    """Blocks of each matrix by card; `cells` names the matrices that are LSTM gate blocks
    (hidden units per cell in `hidden`); `weights` how blocks reach the MRFs (Fig. 5d)."""

    cards: int
    blocks: dict[str, list[Block]]
    hidden: dict[str, int] = field(default_factory=dict)
    weights: WeightsMode = "persistent"
    grid: Grid | None = None

    def card_blocks(self, card: int) -> list[Block]:
        return [b for blocks in self.blocks.values() for b in blocks if b.card == card]

    def block_shapes(self) -> dict[str, tuple[int, int]]:
        return {b.name: b.shape for blocks in self.blocks.values() for b in blocks}

    def program(self, block: Block) -> OverlayProgram:
        """The overlay program that computes with `block` (one per block, loaded once)."""
        rows, cols = block.shape
        if block.matrix not in self.hidden:
            mv = Instr("fpga_matvec", rows, matrix=block.name, cols=cols)
            return OverlayProgram(block.name, "matvec", (mv,), cols, rows)
        u, hidden = units_of(block), self.hidden[block.matrix]
        # The Brainwave LSTM (seeds/003 §IV-2: 8 matvecs per step): W x and U h per gate as
        # two products over the card's gate rows, then bias, activations, cell update.
        chain = (Instr("fpga_matvec", rows, matrix=block.name, cols=cols - hidden),
                 Instr("fpga_matvec", rows, matrix=block.name, cols=hidden),
                 Instr("fpga_add", 4 * u), Instr("fpga_add", 4 * u),
                 Instr("fpga_sigmoid", 3 * u), Instr("fpga_tanh", u), Instr("fpga_mul", u),
                 Instr("fpga_mul", u), Instr("fpga_add", u), Instr("fpga_tanh", u),
                 Instr("fpga_mul", u))
        return OverlayProgram(block.name, "lstm_cell", chain, cols, u)


def _cell_layout(cells: list[tuple[str, int]], hidden: int, cards: int
                 ) -> tuple[dict[str, list[Block]], dict[str, int]]:
    blocks, hidden_of = {}, {}
    for name, size in cells:
        matrix = f"{name}.wu"
        blocks[matrix] = unit_blocks(matrix, hidden, size + hidden, cards)
        hidden_of[matrix] = hidden
    return blocks, hidden_of


def make_layout(spec: RecurrentSpec, cards: int, weights: WeightsMode = "persistent",
                grid: Grid | None = None) -> Layout:
    """Matvec: the given grid (default cards x 1). LSTM and NMT cells: units split over all
    cards; other NMT matrices: rows split over all cards."""
    if isinstance(spec, MatvecSpec):
        grid = grid or Grid(cards, 1)
        return Layout(grid.cards, {"w": grid_blocks("w", spec.rows, spec.cols, grid)},
                      weights=weights, grid=grid)
    if isinstance(spec, LSTMSpec):
        blocks, hidden = _cell_layout(spec.cells(), spec.hidden, cards)
        return Layout(cards, blocks, hidden, weights)
    assert isinstance(spec, NMTSpec)
    enc = spec.encoder_cells()
    blocks, hidden = _cell_layout(enc[:2], spec.hidden // 2, cards)
    for cells, h in ((enc[2:], spec.hidden), (spec.decoder_cells(), spec.hidden)):
        more_blocks, more_hidden = _cell_layout(cells, h, cards)
        blocks |= more_blocks
        hidden |= more_hidden
    for name, (rows, cols) in spec.matrices().items():
        if name not in blocks:
            blocks[name] = row_blocks(name, rows, cols, cards)
    return Layout(cards, blocks, hidden, weights)
