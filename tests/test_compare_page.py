"""`archi compare --report` in a real headless Chromium (as tests/test_report_browser.py opens
the plan pages): no JavaScript error, the Pareto chart drawn with its axis titles, every
strategy and the front as traces, the headline equal to --json's, the table one line per
row; a screenshot into $ARCHI_SCREENSHOTS when set."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import Chromium, find_chromium

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                                reason="no Chromium: run `make browser`")


def test_the_comparison_page_opens_and_shows_the_json_numbers(tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    out = subprocess.run([sys.executable, "-m", "archipelago", "compare", "gpt2-345m",
                          "--tokens", "16:8", "--devices", "u280,v80,v100", "--counts", "1,2",
                          "--strategies", "lora-q,lora-f,gpu-graph", "--workers", "1",
                          "--store", str(tmp_path / "s.jsonl"), "--json",
                          "--latency-target", "30ms",
                          "--report", str(page)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    shots = Path(os.environ.get("ARCHI_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with Chromium(CHROMIUM) as browser:
        state = browser.open(page)
        rows = browser.evaluate("document.querySelectorAll('section.table tbody tr').length")
        traces = browser.evaluate("document.getElementById('chart-0').data.map(t => t.name)")
        ticks = browser.evaluate("[...document.querySelectorAll('section.table tbody tr')]"
                                 ".map(r => r.children[2].textContent)")
        assert browser.screenshot(shots / "compare.png").stat().st_size > 10_000
    assert state.errors == [] and state.exceptions == []
    assert state.rendered == 1 and len(state.charts) == 1
    chart = state.charts[0]
    assert chart["marks"] > 0 and chart["height"] > 100
    assert chart["xtitle"].startswith("upfront cost") and chart["ytitle"] == "latency (ms)"
    assert sorted(traces) == ["Pareto front", "gpu-graph", "lora-f", "lora-q"]
    assert rows == len(summary["rows"]) == 10  # 2 FPGA strategies x 2 boards x 2 counts + 2 GPU
    assert ticks == ["✓" if r["latency_s"] <= 0.030 else "" for r in summary["rows"]]
    assert "✓" in ticks and "" in ticks
    assert {f["key"] for f in state.headline} >= {"headline.fastest_latency_s",
                                                  "headline.front_size"}
    for figure in state.headline:
        value = summary
        for part in figure["key"].split("."):
            value = value[part]
        assert figure["value"] == value
        shown = float(figure["shown"].replace(",", ""))
        assert shown == pytest.approx(value * figure["scale"], rel=1e-2, abs=1e-2), figure
