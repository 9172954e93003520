"""report/dense.py's charts and the CHEF page's model and idle-FPGA reading, on small cases
worked by hand (the browser test checks the real pages)."""

from types import SimpleNamespace

import pytest

from archipelago.report.charts import Node, Span
from archipelago.report.dense import binned_gantt, grouped_graph, resource_chart
from archipelago.strategies.chef.layer_groups import models
from archipelago.strategies.chef.page import idle_accelerators


def _bars(fig) -> dict[tuple[str, str], list[tuple[float, float]]]:
    return {(t.name, row): [(b, x) for r, b, x in zip(t.y, t.base, t.x, strict=True) if r == row]
            for t in fig.data for row in set(t.y)}


def test_few_spans_are_drawn_one_bar_each() -> None:
    spans = [Span("cpu", 0.0, 1.0, "a", "x"), Span("cpu", 1.0, 3.0, "b", "x")]
    fig = binned_gantt(spans, 1.0, "s", "row")
    assert list(fig.data[0].x) == [1.0, 2.0] and not fig.layout.annotations


def test_many_spans_add_up_to_each_rows_busy_time_per_bin() -> None:
    """Run 0..4 s in 4 bins of 1 s. Row A busy 0-2.5 s (kind x), row B 2.5-4 s (kind y):
    A draws 1, 1, 0.5 s in bins 0-2, B 0.5 s from 2 s (left-aligned in bin 2) and 1 s in
    bin 3; A is 62.5% busy, B 37.5%."""
    spans = [Span("A", 0.0, 1.0, "a1", "x"), Span("A", 1.0, 2.5, "a2", "x"),
             Span("B", 2.5, 4.0, "b1", "y")]
    fig = binned_gantt(spans, 1.0, "s", "row", most=1, bins=4)
    bars = _bars(fig)
    assert bars["x", "A (62.5% busy)"] == [(0.0, 1.0), (1.0, 1.0), (2.0, 0.5)]
    assert bars["y", "B (37.5% busy)"] == [(2.0, 0.5), (3.0, 1.0)]
    assert "3 calls aggregated into 4 bins of 1.00 s" in fig.layout.annotations[0].text


def test_kinds_sharing_a_bin_stack_without_overlap() -> None:
    """One bin of 2 s: kind x busy 0.5 s, kind y 1 s; y's bar starts where x's ends."""
    spans = [Span("A", 0.0, 0.5, "a", "x"), Span("A", 1.0, 2.0, "b", "y")]
    bars = _bars(binned_gantt(spans, 1.0, "s", "row", most=1, bins=1))
    assert bars["x", "A (75.0% busy)"] == [(0.0, 0.5)]
    assert bars["y", "A (75.0% busy)"] == [(0.5, 1.0)]


def test_overlapping_spans_of_one_row_are_refused() -> None:
    spans = [Span("A", 0.0, 2.0, "a", "x"), Span("A", 1.0, 3.0, "b", "x")]
    with pytest.raises(ValueError, match="row 'A' has overlapping spans"):
        binned_gantt(spans, 1.0, "s", "row", most=1)


def test_resources_are_bars_up_to_16_devices_and_a_heat_map_above() -> None:
    def chart(n: int):
        names = [f"d{i}" for i in range(n)]
        return resource_chart(names, {"DSP": [i / n for i in range(n)]},
                              {"DSP": [f"{i} of {n}" for i in range(n)]})
    assert chart(16).data[0].type == "bar"
    heat = chart(17).data[0]
    assert heat.type == "heatmap" and list(heat.y) == ["DSP"]
    assert list(heat.z[0]) == pytest.approx([100 * i / 17 for i in range(17)])


def test_links_between_groups_are_summed_and_each_group_has_a_box() -> None:
    nodes = [Node(f"n{i}", 0, 0, 0.5, "DSP") for i in range(3)]
    fig = grouped_graph({"g0": nodes[:2], "g1": nodes[2:]}, {(0, 1): 5, (1, 2): 3, (0, 2): 4},
                        "token", ("x", "y"))
    assert [s.name for s in fig.layout.shapes] == ["g0", "g1"]
    between = [t for t in fig.data if t.name == "between groups"]
    assert [t.text[0] for t in between] == ["g0 ↔ g1: 7 bytes per token"]
    points = next(t for t in fig.data if t.mode == "markers+text")
    box = fig.layout.shapes[0]
    assert all(box.x0 < x < box.x1 for x in points.x[:2])
    assert not box.x0 < points.x[2] < box.x1


def _layer(name: str, *deps: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, deps=deps)


def test_models_are_the_parts_no_data_flows_between() -> None:
    two = [_layer("cam_a"), _layer("kws_a"), _layer("cam_b", "cam_a"), _layer("kws_b", "kws_a")]
    assert models(two) == {"cam_a": "cam", "cam_b": "cam", "kws_a": "kws", "kws_b": "kws"}
    joined = [*two, _layer("fuse", "cam_b", "kws_b")]
    assert set(models(joined).values()) == {"model 1"}
    # one-letter prefixes do not name a model
    unnamed = [_layer("a1"), _layer("a2", "a1"), _layer("b1"), _layer("b2", "b1")]
    assert models(unnamed) == {"a1": "model 1", "a2": "model 1", "b1": "model 2",
                               "b2": "model 2"}


def test_idle_fpgas_have_ips_and_no_layer() -> None:
    est = {"mapping": [{"fpga": "f0"}],
           "deployment": [{"fpga": "f0", "accelerators": [{"acc": "a0", "ip": "conv"}]},
                          {"fpga": "f1", "accelerators": [{"acc": "a1", "ip": "fc"}]},
                          {"fpga": "f2", "accelerators": []}]}
    assert idle_accelerators(est) == {"f1": ["a1 (fc)"]}
