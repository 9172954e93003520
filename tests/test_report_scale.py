"""A report's size-dependent parts stay bounded on a ring of hundreds of boards (issue 39
point 5): devices alike share one bar group, links of one width one trace, the block
timeline a few rows, and the timing simulator's layer is left out with a note. Timed
figures live in benchmarks/bench_report_scale.py, not here."""

import json

import pytest

from archipelago.api import plan_and_estimate
from archipelago.report.charts import Node, alike_runs, cluster_graph, resource_bars
from archipelago.strategies.registry import get_strategy
from archipelago.strategies.tensor_parallel.page import SIMULATED_CORES_MAX, page
from benchmarks.bench_report_scale import config


def test_alike_runs_by_hand() -> None:
    devices = ["d0", "d1", "d2", "d3", "d4"]
    columns = [(1,), (1,), (2,), (1,), (1,)]
    assert alike_runs(devices, columns) == [("d0 … d1 (2 alike)", 0), ("d2", 2),
                                            ("d3 … d4 (2 alike)", 3)]


def test_many_devices_alike_share_a_bar_and_few_keep_their_own() -> None:
    many = [f"device {i}" for i in range(40)]
    shares = [0.5] * 39 + [0.75]
    fig = resource_bars(many, {"DSP": shares}, {"DSP": [f"{s}" for s in shares]})
    assert list(fig.data[0].x) == ["device 0 … device 38 (39 alike)", "device 39"]
    assert list(fig.data[0].y) == [50.0, 75.0]
    few = resource_bars(many[:3], {"DSP": [0.5] * 3}, {"DSP": ["0.5"] * 3})
    assert list(few.data[0].x) == many[:3]  # a small cluster keeps a bar per device


def test_links_of_one_width_are_one_trace() -> None:
    nodes = [Node(f"n{i}", float(i), 0.0, 0.1, "DSP") for i in range(6)]
    links = {(i, (i + 1) % 6): 100.0 for i in range(5)} | {(5, 0): 50.0}
    fig = cluster_graph(nodes, links, "token", ("x", "y"))
    lines = [t for t in fig.data if t.mode == "lines"]
    assert sorted(len(t.x) for t in lines) == [3, 15]  # 5 segments + 1, each ending in None
    assert [t.line.width for t in lines] == [12.0, 6.5]  # 1 + 11 x bytes / the most


@pytest.fixture(scope="module")
def ring_page(tmp_path_factory):
    """The page of a 64-board ring of a model with 64 heads."""
    model = tmp_path_factory.mktemp("ring") / "config.json"
    model.write_text(json.dumps(config(64)))
    plan, work, est = plan_and_estimate(str(model), "64xu280", "dfx", {"tokens": "8:8"})
    summary = get_strategy("dfx").plan_kind.hook("report").summarize(plan, work, est)
    return plan, page(plan, work, est, summary.as_json())


def test_a_large_ring_page_is_bounded(ring_page) -> None:
    plan, kind_page = ring_page
    assert plan.ranks == 64 > SIMULATED_CORES_MAX
    titles = [c.title for c in kind_page.charts]
    assert not any("timing simulator" in t for t in titles)
    assert any(f"at most {SIMULATED_CORES_MAX} cores, not 64" in n for n in kind_page.notes)
    resources = next(c for c in kind_page.charts if c.title.startswith("per-device"))
    assert len(resources.figure.data[0].x) < 64
    block = next(c for c in kind_page.charts if c.title.startswith("one decoder block"))
    rows = {y for trace in block.figure.data for y in trace.y}
    assert rows <= {f"device {r}{link}" for r in range(4) for link in ("", " link")}
    assert "Devices 0-3 of 64 shown" in block.caption

