"""`archi compare --report` in a real headless Chromium (as tests/test_report_browser.py opens
the plan pages): no JavaScript error, the Pareto chart drawn with its axis titles, every
strategy, the front and the latency target as traces, the first-token and per-dollar views
with the rows' figures, the headline equal to --json's, the table one line per row with
its within-target column filled and sorted by a click on a heading; a screenshot into
$ARCHI_SCREENSHOTS when set."""

import json
import math
import os
from pathlib import Path

import pytest

from tests.browser import Chromium, find_chromium
from tests.cli_here import archi_here

CHROMIUM = find_chromium()
_HEADINGS = "[...document.querySelectorAll('section.table th')].map(h => h.textContent)"
_COLUMN = ("[...document.querySelectorAll('section.table tbody tr')]"
           ".map(r => r.children[%d].textContent)")
pytestmark = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                                reason="no Chromium: run `make browser`")


def test_the_comparison_page_opens_and_shows_the_json_numbers(tmp_path: Path,
                                                               browser: Chromium) -> None:
    page = tmp_path / "compare.html"
    out = archi_here("compare", "gpt2-345m", "--tokens", "16:8", "--devices", "u280,v80,v100",
                     "--counts", "1,2", "--strategies", "lora-q,lora-f,gpu-graph",
                     "--store", str(tmp_path / "s.jsonl"), "--json", "--latency-target", "30ms",
                     "--report", str(page))
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    shots = Path(os.environ.get("ARCHI_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    state = browser.open(page)
    rows = browser.evaluate("document.querySelectorAll('section.table tbody tr').length")
    pareto = browser.chart("Latency against upfront cost")
    first = browser.chart("Time to first token against time per output token")
    per_dollar = browser.chart("Throughput per dollar")
    ticks = browser.evaluate(_COLUMN % 2)
    assert browser.screenshot(shots / "compare.png").stat().st_size > 10_000
    sorted_by = {}
    for heading, clicks in (("latency ms", 1), ("latency ms", 2), ("tokens/s", 1),
                            ("cluster", 1), ("≤ target", 1)):  # one click each
        at = browser.evaluate(_HEADINGS).index(heading)
        browser.click("section.table th", at)
        sorted_by[heading, clicks] = browser.evaluate(_COLUMN % at)
    assert state.errors == [] and state.exceptions == []
    assert state.rendered == 3 and len(state.charts) == 3
    for chart in state.charts:
        assert chart["marks"] > 0 and chart["height"] > 100
    chart = state.charts[0]
    assert chart["xtitle"].startswith("upfront cost") and chart["ytitle"] == "latency (ms)"
    assert sorted(t["name"] for t in pareto["data"]) == ["Pareto front", "gpu-graph",
                                                          "latency target", "lora-f", "lora-q"]
    # the target's line at --latency-target's 30 ms, on both latency views, inside the axes
    for view in (pareto, first):
        line = next(t for t in view["data"] if t["name"] == "latency target")
        assert line["y"] == [pytest.approx(30.0, rel=1e-12)] * 2
        low, high = view["yaxis"]["range"]
        assert low < math.log10(30.0) < high
    assert rows == len(summary["rows"]) == 10  # 2 FPGA strategies x 2 boards x 2 counts + 2 GPU
    # within target: ✓ or ✗ on every row, with how far under or over 30 ms it is
    assert [t[0] for t in ticks] == ["✓" if r["latency_s"] <= 0.030 else "✗"
                                     for r in summary["rows"]]
    assert "✓" in ticks[0] and "✗" in ticks[-1]
    for tick, r in zip(ticks, summary["rows"], strict=True):
        assert float(tick[1:].split()[0]) == pytest.approx((r["latency_s"] - 0.030) * 1e3,
                                                           rel=5e-3)  # 3 digits
    # time to first token and per token: the rows' figures
    points = {(x, y) for t in first["data"] if t["name"] != "latency target"
              for x, y in zip(t["x"], t["y"], strict=True)}
    assert points == {(r["decode_s_per_token"] * 1e3, r["prefill_s"] * 1e3)
                      for r in summary["rows"]}
    # throughput per dollar: one bar per priced row, its figure, most first
    bars = {x: y for t in per_dollar["data"] for x, y in zip(t["x"], t["y"], strict=True)}
    assert bars == {r["label"]: r["tokens_per_s_per_million_usd"] for r in summary["rows"]}
    # clicking a heading sorts by it, clicking again reverses
    latencies = [f"{r['latency_s'] * 1e3:,.2f}" for r in summary["rows"]]
    assert sorted_by["latency ms", 1] == sorted(latencies, key=float)
    assert sorted_by["latency ms", 2] == sorted(latencies, key=float, reverse=True)
    rates = sorted(r["tokens_per_s"] for r in summary["rows"])
    assert sorted_by["tokens/s", 1] == [f"{v:,.1f}" for v in rates] != sorted_by["latency ms", 1]
    assert sorted_by["cluster", 1] == sorted(sorted_by["cluster", 1])  # as text
    spare = [float(t[1:].split()[0]) for t in sorted_by["≤ target", 1]]
    assert spare == sorted(spare) and sorted_by["≤ target", 1][0].startswith("✓")
    assert {f["key"] for f in state.headline} >= {"headline.fastest_latency_s",
                                                  "headline.front_size"}
    for figure in state.headline:
        value = summary
        for part in figure["key"].split("."):
            value = value[part]
        assert figure["value"] == value
        shown = float(figure["shown"].replace(",", ""))
        assert shown == pytest.approx(value * figure["scale"], rel=1e-2, abs=1e-2), figure
