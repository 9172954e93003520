"""`archi serve --report` (serving/page.py, serving/sweep.py): the page is written only where
--report names, before any work refused where it cannot be; its three charts carry the
--json object's own figures (P50/P90/P99, targets, capacity, cost); the cost front's
replica counts are the fewest that meet the targets, re-simulated here; the throughput a
sweep point served against hand-computed cases. The page in a real browser:
tests/test_report_browser.py."""

import base64
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from archipelago.cli import app
from archipelago.hardware.catalog import get_device, get_host
from archipelago.serving.command import ServeCommand, _checked, _table
from archipelago.serving.cost import SECONDS_PER_YEAR
from archipelago.serving.metrics import judged_limit, meets
from archipelago.serving.replica import Records
from archipelago.serving.requests import generate
from archipelago.serving.simulate import Outcome, simulate
from archipelago.serving.sweep import CURVE_SHARES, served_rate

SERVE = ["serve", "llama2-7b", "--cluster", "1xh100", "--strategy", "gpu-graph", "--rate",
         "8", "--prompt", "512", "--output", "128", "--requests", "400"]


def charts(page: Path) -> list[dict]:
    """The figures the page hands plotly, one `draw('chart-N', {...});` line each."""
    return [json.loads(m.group(1)) for m in
            re.finditer(r"^draw\('chart-\d+', (.*)\);$", page.read_text(), re.MULTILINE)]


def trace(figure: dict, meta: str) -> dict:
    return next(t for t in figure["data"] if t.get("meta") == meta)


def values(data: list | dict) -> np.ndarray:
    """A trace's numbers: a list, or plotly's packed typed array (dtype, base64 bytes)."""
    if isinstance(data, dict):
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"])
    return np.asarray(data)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, list[Path]]:
    """One run with --report and --json from a working directory of its own."""
    where = tmp_path_factory.mktemp("serve")
    page = where / "out" / "page.html"
    page.parent.mkdir()
    run = CliRunner().invoke(app, [*SERVE, "--json", "--report", str(page)])
    assert run.exit_code == 0, run.output
    return page, json.loads(run.output), sorted(where.rglob("*"))


@pytest.fixture(scope="module")
def plan() -> tuple:
    """SERVE's iteration table, its 400 requests (seed 0), targets and policy, made here."""
    options = ServeCommand("llama2-7b", "1xh100", "gpu-graph", "8", "512", "128", "1s",
                           "50ms", 90.0, "poisson", None, 1, "round-robin", "continuous",
                           None, 512, 400, 1, 0, False, {})
    prompt, output, targets, policy = _checked(options)
    table = _table(options, prompt, output, policy.max_batch)[2]
    return table, generate("poisson", 400, prompt, output, 0, table.max_context), targets, policy


def test_page_is_written_only_where_report_names(served: tuple) -> None:
    page, result, files = served
    assert files == [page.parent, page]
    assert page.read_text().startswith("<!DOCTYPE html>") and page.stat().st_size < 5e6
    plain = CliRunner().invoke(app, [*SERVE, "--json"])  # --report changes no figure
    assert json.loads(plain.output) == result


def test_distributions_mark_the_json_percentiles(served: tuple) -> None:
    page, result, _ = served
    figures = charts(page)
    assert len(figures) == 3
    for key, scale in (("ttft_s", 1e3), ("tpot_s", 1e3), ("e2e_s", 1.0)):
        marks = trace(figures[0], f"{key}.percentiles")
        assert marks["y"] == [50, 90, 99]
        assert marks["x"] == [result[key][q] * scale for q in ("p50", "p90", "p99")]
        line = trace(figures[0], key)  # the CDF passes through every percentile it marks
        at = np.interp([50, 90, 99], values(line["y"]), values(line["x"]))
        assert at == pytest.approx(marks["x"], rel=1e-9)
        assert len(values(line["x"])) == result["requests"]  # one point per request
    text = json.dumps(figures[0]["layout"]["annotations"])
    assert "P90 target 1,000 ms" in text and "P90 target 50 ms" in text


def test_curve_marks_the_json_capacity_and_agrees_with_it(served: tuple, plan: tuple
                                                          ) -> None:
    """The vertical line is --json's capacity; the point at the capacity is the capacity
    search's own simulation, so it meets the targets; at the lowest rate the throughput
    served is the rate the requests arrived at in the window it counts."""
    page, result, _ = served
    figure = charts(page)[1]
    cap = result["capacity"]["rate"]
    assert [s["x0"] for s in figure["layout"]["shapes"] if s["line"]["dash"] == "dot"] == [
        cap, cap]
    ttft = trace(figure, "ttft_s")
    rates = ttft["customdata"]
    assert rates == pytest.approx([s * cap for s in CURVE_SHARES])
    at_capacity = CURVE_SHARES.index(1.0)
    assert ttft["marker"]["symbol"][at_capacity] == "circle"
    assert ttft["y"][at_capacity] <= 1e3  # P90 TTFT within the 1 s target, in ms
    assert ttft["marker"]["symbol"][-1] == "x"  # 1.5 x the capacity misses
    arrivals = plan[1].at(rates[0])
    start = np.quantile(arrivals, 0.1)
    arrived = np.count_nonzero((arrivals > start) & (arrivals <= arrivals.max()))
    assert ttft["x"][0] == pytest.approx(arrived / (arrivals.max() - start), rel=0.02)


def test_cost_front_needs_the_fewest_replicas_at_the_catalogs_prices(served: tuple,
                                                                    plan: tuple) -> None:
    """Each point's replicas meet the targets and one fewer do not (simulated again
    here) or serve a rate past what their run can judge (the capacity's criterion, from
    the --json service rate); its $ per million output tokens lies between the boards'
    and hosts' capital alone and that plus their full power, by hand from the catalog."""
    page, result, _ = served
    figure = charts(page)[2]
    line = trace(figure, "usd_per_million_output_tokens")
    star = trace(figure, "this run")
    assert star["x"] == [8.0] and star["y"] == [result["cost"]["usd_per_million_output_tokens"]]
    replicas = line["customdata"]
    assert replicas == sorted(replicas) and replicas[0] == 1 and replicas[-1] > 1
    table, requests, targets, policy = plan
    mu = result["capacity"]["service_rate"]  # of SERVE's one replica
    gpu, host = get_device("h100"), get_host(get_device("h100").host)
    for rate, n, usd in zip(line["x"], replicas, line["y"], strict=True):
        assert meets([simulate(table, requests, rate, policy, n)], targets)
        fewer = n - 1
        assert n == 1 or rate >= judged_limit(fewer * mu, min(400, 1000 * fewer)) or not meets(
            [simulate(table, requests, rate, policy, fewer)], targets)
        hosts = math.ceil(n / host.cards)
        capital_s = (n * gpu.price_usd + hosts * host.price_usd) / (3 * SECONDS_PER_YEAR)
        energy_s = (n * gpu.power_w + hosts * host.power_w) / 1000 * 0.10 / 3600
        tokens_s = rate * 128  # every request served: the targets are met
        assert capital_s / tokens_s * 1e6 <= usd <= (capital_s + energy_s) / tokens_s * 1e6


def test_served_rate_by_hand() -> None:
    """101 requests a second apart, each 11 tokens: the first 0.5 s after arriving, the
    rest one a second. Window [10, 100]: 90 first tokens and 900 decoded, 990 of 11-token
    requests over 90 s = 1 request/s (the arrival rate; the whole span, 110.5 s with the
    drain, would give 0.91). Saturated: one served every 2 s whatever the arrivals
    (first at 2i + 1, last at 2i + 2, 2 tokens): 45 + 45 tokens over 90 s = 0.5/s."""
    def outcome(first: np.ndarray, finish: np.ndarray, tokens: int) -> Outcome:
        arrivals = np.arange(101.0)
        return Outcome(arrivals, np.full(101, tokens), Records(arrivals, first, finish),
                       np.zeros(1), 0)

    i = np.arange(101.0)
    assert served_rate(outcome(i + 0.5, i + 10.5, 11)) == pytest.approx(1.0)
    assert served_rate(outcome(2 * i + 1, 2 * i + 2, 2)) == pytest.approx(0.5)


@pytest.mark.parametrize("name, extra, says", [
    ("page.txt", (), "--report"), ("missing/page.html", (), "--report"),
    ("exists.html", (), "exists")])
def test_bad_report_paths_refused_before_any_work(tmp_path: Path, name: str,
                                                  extra: tuple, says: str) -> None:
    (tmp_path / "exists.html").write_text("mine")
    run = CliRunner().invoke(app, [*SERVE, "--report", str(tmp_path / name), *extra])
    assert run.exit_code == 2, run.output
    lines = run.output.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], run.output
    assert (tmp_path / "exists.html").read_text() == "mine"


def test_one_token_answers_and_a_tiny_trace_draw(tmp_path: Path) -> None:
    """No TPOT at all (every answer one token), and a four-request trace: still a page."""
    one = tmp_path / "one.html"
    run = CliRunner().invoke(app, [*SERVE, "--output", "1", "--report", str(one)])
    assert run.exit_code == 0, run.output
    assert "tpot_s.percentiles" not in one.read_text() and len(charts(one)) == 3
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,8\n1,200,16\n2,300,24\n"
                    "3,400,32\n")
    page = tmp_path / "trace.html"
    run = CliRunner().invoke(app, [*SERVE[:6], "--trace", str(path), "--report", str(page)])
    assert run.exit_code == 0, run.output
    assert len(charts(page)) == 3
