"""Issue 38's page fixes, checked in a real headless Chromium against `--json`: the
tensor-parallel page at batch 8 (the context sweep and roofline at the plan's batch, every
roofline point on or under its own roof, time per token on a log axis, labelled points),
the GPU page of a model read from a file (its display name as a one-line title, the batch
curve inside the chart) and a rack's page (its stages' step and bubble). Screenshots go to
$ARCHI_SCREENSHOTS when set."""

import json
import math
import os
from pathlib import Path

import pytest
import yaml

from tests.browser import find_chromium, report_and_plan

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                                reason="no Chromium: run `make browser`")
ZOO = Path(__file__).parents[1] / "archipelago" / "models" / "zoo.yaml"

TP8 = ("gpt2-1.5b", "--cluster", "1xu280", "--strategy", "lora-q", "--batch", "8")
RACK = ("gpt2-345m", "--cluster", "2x2xu280", "--strategy", "dfx", "--tokens", "16:16",
        "--split", "tp=2,pp=2", "--batch", "2")
GPU = ("--cluster", "4xh100", "--strategy", "gpu-graph", "--batch", "128")


def _trace(chart: dict, name: str) -> dict:
    return next(t for t in chart["data"] if t["name"] == name)


def _inside(values: list[float], axis: dict) -> bool:
    low, high = axis["range"]
    if axis["type"] == "log":
        values = [math.log10(v) for v in values]
    return all(low <= v <= high for v in values)


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("ARCHI_SCREENSHOTS", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_tensor_parallel_page_at_batch_8(tmp_path: Path, browser, shots: Path) -> None:
    page, data = report_and_plan(tmp_path, "tensor-parallel-b8", *TP8)
    state = browser.open(page)
    assert state.errors == [] and state.exceptions == [] and state.rendered
    browser.screenshot(shots / "tensor-parallel-b8.png")
    step_ms = data["decode_s_per_token"] * 1e3
    # the context sweep is the batch's step: the plan's star sits on its curve
    sweep = browser.chart("decode time per token against context length")
    star, curve = _trace(sweep, "this plan"), _trace(sweep, "lora-q")
    assert star["y"] == [pytest.approx(step_ms, rel=1e-12)]
    at = curve["x"].index(star["x"][0])
    assert curve["y"][at] == pytest.approx(step_ms, rel=0.01)
    assert _inside(curve["y"] + star["y"], sweep["yaxis"])
    # time per output token on a log axis, its batch-8 point the estimate's
    latency = browser.chart("time to first token and per output token against batch size")
    assert latency["yaxis"]["type"] == "log"
    per_token = _trace(latency, "time per output token")
    assert per_token["y"][per_token["x"].index(8)] == pytest.approx(step_ms, rel=1e-12)
    first = _trace(latency, "time to first token")
    assert first["y"][first["x"].index(8)] == pytest.approx(data["prefill_s"] * 1e3,
                                                            rel=1e-12)
    # every point on or under the roof of the memory it names, the busiest labelled
    roof = browser.chart("roofline of one device")
    roofs = {t["name"]: t for t in roof["data"] if t["name"].startswith("roof:")}
    assert any("KV cache" in name for name in roofs)  # the URAM-held cache's own slope
    points = [t for t in roof["data"] if t["name"] in ("decode", "prefill")]
    assert {t["name"] for t in points} == {"decode", "prefill"}
    for trace in points:
        for x, y, (name, memory) in zip(trace["x"], trace["y"], trace["customdata"],
                                        strict=True):
            line = next(t for n, t in roofs.items() if memory in n)
            rate, peak = line["y"][0] / line["x"][0], max(line["y"])
            assert y <= min(peak, x * rate) * (1 + 1e-9), (name, memory)
    assert sum(bool(text) for t in points for text in t["text"]) >= 3


def test_gpu_page_title_and_batch_curve(tmp_path: Path, browser, shots: Path) -> None:
    model = tmp_path / "models" / "my-llama"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(yaml.safe_load(ZOO.read_text())["llama2-7b"]))
    page, data = report_and_plan(tmp_path, "gpu", str(model), *GPU)
    state = browser.open(page)
    assert state.errors == [] and state.exceptions == [] and state.rendered == 3
    browser.screenshot(shots / "gpu.png")
    title = json.loads(browser.evaluate(
        "(() => { const h = document.querySelector('h1'); const s = getComputedStyle(h);"
        " return JSON.stringify([h.textContent, h.getBoundingClientRect().height,"
        " parseFloat(s.lineHeight) || parseFloat(s.fontSize) * 1.3]); })()"))
    assert title[0] == "my-llama on 4xh100 · strategy gpu-graph"
    assert str(model) not in title[0] and title[1] <= title[2] * 1.2  # one line
    sweep = browser.chart("tokens/s as the batch grows")
    curve, star = _trace(sweep, "gpu-graph"), _trace(sweep, "this plan")
    assert star["y"] == [data["tokens_per_s"]]
    assert curve["y"][curve["x"].index(128)] == pytest.approx(data["tokens_per_s"], rel=1e-12)
    assert _inside(curve["x"] + star["x"], sweep["xaxis"])
    assert _inside(curve["y"] + star["y"], sweep["yaxis"])


def test_rack_page_shows_its_stages(tmp_path: Path, browser, shots: Path) -> None:
    page, data = report_and_plan(tmp_path, "rack", *RACK)
    state = browser.open(page)
    assert state.errors == [] and state.exceptions == [] and state.rendered
    browser.screenshot(shots / "rack.png")
    chart = browser.chart("one decode step through the pipeline stages")
    bars = [t for t in chart["data"] if t["name"] in ("compute", "transfer")]
    # the bars of one step add up to the estimate's mean decode step, and each stage's
    # compute to its row's decode time
    total = sum(w for t in bars for w in t["x"])
    assert total == pytest.approx(data["decode_s_per_token"] * 1e3, rel=1e-9)
    compute = _trace(chart, "compute")
    for stage in data["stages"]:
        mine = [w for row, w in zip(compute["y"], compute["x"], strict=True)
                if row.startswith(f"stage {stage['stage']}:")]
        assert sum(mine) == pytest.approx(stage["decode_s_per_token"] * 1e3, rel=1e-9)
    rows = browser.evaluate("[...document.querySelectorAll('section.table tbody tr')]"
                            ".map(r => [...r.children].map(c => c.textContent))")
    assert [r[:3] for r in rows] == [["0", "0-12", "2"], ["1", "13-23", "2"]]
    for row, stage in zip(rows, data["stages"], strict=True):
        assert row[4] == f"{stage['decode_s_per_token'] * 1e3:,.3f}"
        idle = 1 - stage["decode_s_per_token"] / data["decode_s_per_token"]
        assert row[6] == f"{100 * idle:.0f}"
