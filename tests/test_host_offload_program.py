"""The Table I program model and the partitioning of seeds/003 §IV-1, checked against numpy."""

import numpy as np
import pytest

from archipelago.errors import ArchipelagoError, PartitionError
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.recurrent import MatvecSpec, build_recurrent
from archipelago.strategies.host_offload.apps import run_app
from archipelago.strategies.host_offload.emulate.card import LocalCard
from archipelago.strategies.host_offload.emulate.executor import Executor
from archipelago.strategies.host_offload.layout import make_layout
from archipelago.strategies.host_offload.partition import Grid, parse_grid, unit_blocks
from archipelago.strategies.host_offload.plan import make_host_plan
from archipelago.strategies.host_offload.program import Recorder, Sym


def _exact_int8_problem(rows: int, cols: int, grid: Grid, seed: int = 0):
    """Integer weights and input already on the INT8 grid: every row, and every column
    slice of x, holds a 127 so every scale is exactly 1 and the FPGA result is exact."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, (rows, cols)).astype(np.float32)
    w[:, :: cols // grid.col_blocks] = 127
    x = rng.integers(-127, 128, cols).astype(np.float32)
    x[:: cols // grid.col_blocks] = 127
    return w, x


@pytest.mark.parametrize("grid", ["1x1", "2x1", "1x2", "2x2", "4x1", "1x4", "3x2"])
def test_row_and_column_blocking_equals_numpy(grid: str) -> None:
    g = parse_grid(grid)
    spec = MatvecSpec(name="m", rows=12, cols=8)
    layout = make_layout(spec, g.cards, grid=g)
    w, x = _exact_int8_problem(12, 8, g)
    cards = [LocalCard(k) for k in range(g.cards)]
    executor = Executor(layout, cards, {"w": w}, {}, {"x": x})
    y = run_app(executor, spec, layout, steps=1)
    np.testing.assert_array_equal(y, w @ x)
    counts = executor.trace.program.counts()
    # an R x C split needs C - 1 CPU additions per row block, none for R x 1 (§IV-1)
    assert counts.get("cpu_add", 0) == g.row_blocks * (g.col_blocks - 1)
    assert counts["fpga_execute"] == g.cards
    held = [c.card.report()["weight_bytes"] for c in cards]
    assert held == [12 * 8 // g.cards] * g.cards  # each card holds only its block


def test_partition_that_does_not_divide_is_refused() -> None:
    spec = MatvecSpec(name="m", rows=12, cols=8)
    with pytest.raises(PartitionError, match="does not divide the 12 x 8 matrix"):
        make_layout(spec, 5, grid=parse_grid("5x1"))
    with pytest.raises(PartitionError, match="RxC"):
        parse_grid("4by2")
    with pytest.raises(PartitionError, match="uses 4 cards; the cluster has 8"):
        make_host_plan(spec, resolve_cluster("8xs10-2800"), 1, grid=parse_grid("2x2"))


def test_lstm_units_split_keeps_all_four_gates_of_a_unit_on_one_card() -> None:
    blocks = unit_blocks("c.wu", hidden=10, cols=7, cards=3)
    rows = [set(np.concatenate([np.arange(a, b) for a, b in blk.rows])) for blk in blocks]
    assert set().union(*rows) == set(range(40)) and sum(map(len, rows)) == 40
    for r in rows:
        units = {i % 10 for i in r}
        assert {i // 10 for i in r} == {0, 1, 2, 3}  # every gate ...
        assert all(g * 10 + u in r for g in range(4) for u in units)  # ... of its units


def test_recorded_nmt_program_has_the_paper_structure() -> None:
    spec = build_recurrent("nmt-luong", 64, vocab=40)
    plan = make_host_plan(spec, resolve_cluster("4xs10-2800"), steps=5)
    counts = plan.program.counts()
    setup = {c.name for c in plan.program.setup}
    assert setup == {"fpga_pgm", "fpga_ld_mrfs"}  # persistent: weights placed once
    assert "fpga_ld_mrfs" not in counts
    # every card's loads, executions and reads come in concurrent groups
    assert all(c.group is not None for c in plan.program.calls if c.device is not None)
    assert counts["fpga_ld_input"] == counts["fpga_execute"] == counts["fpga_get_out"]
    streamed = make_host_plan(spec, resolve_cluster("1xs10-2800"), 5, weights="pcie")
    assert streamed.program.counts()["fpga_ld_mrfs"] == streamed.program.counts()[
        "fpga_execute"]  # non-persistent: weights before every use (Fig. 5d)


def test_unknown_call_and_card_are_refused_in_a_user_program() -> None:
    rec = Recorder(2, {}, {})
    with pytest.raises(ArchipelagoError, match="unknown API call 'cpu_sort'"):
        rec.cpu("cpu_sort", Sym(4))
    with pytest.raises(ArchipelagoError, match="card 2 does not exist"):
        rec.fpga_ld_input(2, Sym(4))
    with pytest.raises(ArchipelagoError, match="before fpga_pgm"):
        rec.fpga_execute(0, "nothing")


def test_bad_model_sizes_are_one_line_errors() -> None:
    with pytest.raises(ArchipelagoError, match="beam width 0"):
        build_recurrent("nmt-li", 64, beam=0)
    with pytest.raises(ArchipelagoError, match="must be even"):
        build_recurrent("nmt-luong", 65)
    with pytest.raises(ArchipelagoError, match="unknown recurrent model"):
        build_recurrent("nmt-bahdanau", 64)


def test_a_program_past_the_call_budget_is_refused_naming_its_shape(monkeypatch) -> None:
    """One LSTM layer of 50 steps on one card with streamed weights issues 5 calls a step
    (concat, load weights, load input, execute, read back): 250 calls fit a budget of
    250, not one of 249."""
    import archipelago.strategies.host_offload.program as program

    spec, cluster = build_recurrent("lstm", 64), resolve_cluster("1xs10-2800")
    monkeypatch.setattr(program, "MAX_PROGRAM_CALLS", 250)
    assert len(make_host_plan(spec, cluster, 50, "pcie").program.calls) == 250
    monkeypatch.setattr(program, "MAX_PROGRAM_CALLS", 249)
    with pytest.raises(PartitionError, match=r"lstm-64 over 1 card\(s\) for 50 steps: .*249"):
        make_host_plan(spec, cluster, 50, "pcie")
