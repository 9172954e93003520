"""Tables fit the terminal (issue 38 point 3): a narrow one loses whole columns, the least
needed first, and never cuts an identifier or any cell; `--json` is the same at any width."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

from archipelago.compare.table import COLUMNS, drop_order
from archipelago.table_fit import fitted

# A comparison with a two-digit rank, Pareto marks and long and short cluster names.
COMPARE = ("compare", "gpt2-1.5b", "--tokens", "64:64", "--devices", "u280,v100,l4",
           "--counts", "1,2,8", "--batch", "1,4", "--engine", "published")


def _table(width: int) -> str:
    """A table of 4 columns of known widths printed at `width`: 'name' (12 characters),
    'a' (5), 'b' (10) and 'c' (3), each padded by 1 each side and 5 borders in all."""
    table = Table(title="t")
    for header in ("name", "a", "b", "c"):
        table.add_column(header, no_wrap=True)
    table.add_row("cluster-8xu2", "aaaaa", "bbbbbbbbbb", "ccc")
    console = Console(width=width, record=True, color_system=None)
    console.print(fitted(table, console, drop=("b", "a")))
    return console.export_text()


@pytest.mark.parametrize(("width", "kept", "left_out"), [
    # name+a+b+c = 12+5+10+3 = 30, +2 padding x4, +5 borders = 43
    (43, ["name", "a", "b", "c"], ""),
    (42, ["name", "a", "c"], "b"),       # 43 - (10 + 2 + 1) = 30
    (30, ["name", "a", "c"], "b"),
    (29, ["name", "c"], "b, a"),         # 30 - (5 + 2 + 1) = 22
    (10, ["name", "c"], "b, a"),         # nothing more to drop: the name still whole
])
def test_columns_are_dropped_in_order_until_the_table_fits(width: int, kept: list[str],
                                                           left_out: str) -> None:
    text = _table(width)
    assert "…" not in text
    if left_out:
        assert f"{left_out}: left out at {width} columns" in " ".join(text.split())
    body = [line.split("│")[1:-1] for line in text.splitlines() if line.startswith("│")]
    columns = ["".join(cells[i].strip() for cells in body) for i in range(len(kept))]
    assert columns == [{"name": "cluster-8xu2", "a": "aaaaa", "b": "bbbbbbbbbb",
                        "c": "ccc"}[h] for h in kept]  # every cell whole, if folded
    if width >= 22:  # room for the kept columns on one line each
        header = next(line for line in text.splitlines() if "name" in line)
        assert re.findall(r"\b(name|a|b|c)\b", header) == kept and len(body) == 1
        assert max(len(line) for line in text.splitlines()) <= width


def _archi(*args: str, columns: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "archipelago", *args], env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    store = tmp_path_factory.mktemp("fit") / "store.jsonl"
    out = _archi(*COMPARE, "--store", str(store), "--json", columns=80)
    assert out.returncode == 0, out.stderr
    return store, json.loads(out.stdout)


@pytest.mark.parametrize("columns", [80, 100, 200])
def test_compare_keeps_rank_pareto_mark_and_whole_cluster_names(
        comparison: tuple[Path, dict], columns: int) -> None:
    store, data = comparison
    out = _archi(*COMPARE, "--store", str(store), columns=columns)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns and "…" not in out.stdout
    header = next(line for line in lines if "cluster" in line and "#" in line)
    assert [h.strip() for h in header.split("┃")[1:3]] == ["#", "★"]
    body = [line.split("│") for line in lines if line.startswith("│")]
    shown = [(int(cells[1]), cells[2].strip() == "★", cells[3].split()[0]) for cells in body]
    assert len(data["rows"]) > 9  # two-digit ranks
    assert shown == [(row["rank"], row["front"], f"{row['count']}x{row['device']}")
                     for row in data["rows"]]
    if columns == 200:  # room for every column: none left out
        assert all(c in header for c in COLUMNS) and ": left out at" not in out.stdout
    else:
        caption = " ".join(out.stdout.split())
        hidden = [c for c in drop_order("latency") if c in COLUMNS and f" {c} " not in header]
        assert hidden and f"{', '.join(hidden)}: left out at {columns} columns" in caption


def test_json_is_the_same_at_any_width(comparison: tuple[Path, dict]) -> None:
    store, data = comparison
    wide = _archi(*COMPARE, "--store", str(store), "--json", columns=200)
    run = {"evaluated": 0, "reused": 0, "evaluated_keys": []}  # this run's, not the width's
    assert json.loads(wide.stdout) | run == data | run


@pytest.mark.parametrize("args", [["catalog"],
                                  ["plan", "gpt2-1.5b", "--cluster", "8x4xu280", "--strategy",
                                   "dfx"]])
def test_other_tables_cut_no_cell_at_80_columns(args: list[str]) -> None:
    out = _archi(*args, columns=80)
    assert out.returncode == 0, out.stderr
    assert "…" not in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 80
