"""`archi compare --rate R --ttft T --tpot T`: every fitting combination served at the rate.
Checked against what is independent of compare's own code: the cost per million tokens by
hand from the catalog's prices and powers, the replicas confirmed by simulating the plan
afresh, the estimate's shortcut for plans that miss at any rate against the full search,
the ranking, both runners giving the same rows, a resume that recomputes nothing, records
carrying (and checked for) their serving figures, one-line errors, and the README's compare
examples finding rows."""

import json
import math
import re
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from archipelago import api
from archipelago.cli import app
from archipelago.compare.request import parse_request
from archipelago.compare.run import Comparison, compare
from archipelago.compare.service import (
    EXTRA_REPLICAS,
    MISSES,
    ServiceOptions,
    alone_misses,
    parse_service,
    served,
)
from archipelago.compare.summary import comparison_dict, rows_from_dict
from archipelago.compare.table import print_comparison
from archipelago.errors import Notice
from archipelago.hardware.catalog import get_device, get_host
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.zoo import resolve_model
from archipelago.serving.metrics import meets
from archipelago.serving.replica import Policy
from archipelago.serving.requests import Lengths, generate
from archipelago.serving.simulate import simulate
from archipelago.strategies.registry import get_strategy

NAMES = ["lora-q", "dfx", "gpu-graph"]
MODEL, TOKENS, RATE = "gpt2-345m", "64:16", 20.0
# Targets some rows meet (lora-q on U280, gpu-graph on H100) and dfx misses alone.
SERVICE = ServiceOptions(rate="20", ttft="100ms", tpot="5ms")
YEAR_S = 365.25 * 86400
VOLATILE = ("store", "evaluated_keys")


def _request(devices: str = "u280,h100", options: ServiceOptions = SERVICE) -> Any:
    tokens, service = parse_service(options, TOKENS)
    return parse_request(MODEL, tokens, devices, "1,2", ",".join(NAMES), "1", None, None,
                         NAMES, NAMES, engine="published", service=service)


@pytest.fixture(scope="module")
def served_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Comparison, Path]:
    store = tmp_path_factory.mktemp("rate") / "here.jsonl"
    return compare(_request(), resolve_model(MODEL), store), store


def test_rows_meeting_the_targets_come_first_cheapest_first(served_run: Any) -> None:
    result, _ = served_run
    flags = [r.serving["meets"] for r in result.rows]
    assert any(flags) and not all(flags)
    assert flags == sorted(flags, reverse=True)  # every meeting row before every other
    usd = [r.usd_per_million_tokens for r in result.rows if r.serving["meets"]]
    assert usd == sorted(usd) and all(u > 0 for u in usd)
    for row in result.rows:
        s = row.serving
        if s["meets"]:
            need = math.ceil(RATE / s["capacity_rps"]) if s["bounded"] else 1
            assert need <= s["replicas"] <= need + EXTRA_REPLICAS
            assert s["boards"] == s["replicas"] * row.count and s["reason"] is None
            assert s["ttft_s"] <= 0.1 and s["tpot_s"] <= 0.005
        else:
            assert s["replicas"] is None and s["usd_per_million_tokens"] is None
            assert s["reason"] == MISSES  # said in a column, not dropped
    assert {r.strategy for r in result.rows if not r.serving["meets"]} == {"dfx"}


def test_cost_per_million_tokens_by_hand_from_the_catalog(served_run: Any) -> None:
    result, _ = served_run
    for row in (r for r in result.rows if r.serving["meets"]):
        s, device = row.serving, get_device(row.device)
        host = get_host(device.host)
        boards = s["replicas"] * row.count
        hosts = -(-boards // host.cards)
        capital = boards * device.price_usd + hosts * host.price_usd
        watts = boards * device.power_w + hosts * host.power_w
        per_s = capital / (3 * YEAR_S) + watts * s["busy_share"] / 1000 * 0.10 / 3600
        tokens = s["output_tokens_per_s"] + s["prompt_tokens_per_s"]
        assert s["usd_per_million_tokens"] == pytest.approx(per_s / tokens * 1e6, rel=1e-9)
        # at the rate: every request's prompt and output, 20 a second (the span's edges
        # aside: the last requests finish after the last arrival)
        assert tokens == pytest.approx(RATE * (64 + 16), rel=0.15)


def _table(strategy: str, cluster: str) -> tuple[Any, Any, Any]:
    spec = resolve_model(MODEL)
    work = api.parse_workload(strategy, {"tokens": TOKENS, "batch": "1"})
    plan = api.plan_on(spec, resolve_cluster(cluster), strategy, None, work)
    est, _ = api.estimate_and_floors(strategy, plan, work, cluster)
    return plan, work, est


def test_the_replicas_found_meet_the_targets_simulated_afresh(served_run: Any) -> None:
    result, _ = served_run
    service = _request().service
    for row in (r for r in result.rows if r.serving["meets"]):
        plan, work, _ = _table(row.strategy, f"{row.count}x{row.device}")
        table = get_strategy(row.strategy).plan_kind.hook("serving")(plan, work, 64)
        requests = generate("poisson", 300, Lengths("fixed", 64), Lengths("fixed", 16), 0,
                            table.max_context)
        out = simulate(table, requests, RATE, Policy("continuous", 64, 512),
                       row.serving["replicas"], "least-outstanding")
        assert meets([out], service.targets)


@pytest.mark.parametrize(("strategy", "cluster"), [("dfx", "1xu280"), ("dfx", "2xu280")])
def test_the_estimate_settles_a_miss_at_any_rate_as_the_search_would(
        strategy: str, cluster: str) -> None:
    """A lognormal of sigma 0 draws the fixed lengths but is not taken by the shortcut, so
    the same service runs the full path: tabulated, simulated, and missing alone."""
    plan, work, est = _table(strategy, cluster)
    service = _request().service
    assert alone_misses(est, work, service)
    full = replace(service, prompt=Lengths("lognormal", 64, 0.0),
                   output=Lengths("lognormal", 16, 0.0))
    assert not alone_misses(est, work, full)
    got = served(strategy, plan, work, full, est)
    assert got["reason"] == MISSES and got["replicas"] is None and got["simulations"] == 1


def test_both_runners_give_the_same_rows_and_a_resume_recomputes_nothing(
        served_run: Any, tmp_path: Path) -> None:
    result, store = served_run
    spec = resolve_model(MODEL)
    dask = compare(_request(), spec, tmp_path / "dask.jsonl", workers=1)
    strip = lambda c: {k: v for k, v in comparison_dict(c).items() if k not in VOLATILE}  # noqa: E731
    assert strip(dask) == strip(result)
    again = compare(_request(), spec, store)
    assert again.evaluated == [] and again.reused == len(result.evaluated) == 12
    assert comparison_dict(again)["rows"] == comparison_dict(result)["rows"]
    records = [json.loads(line)["value"] for line in store.read_text().splitlines()[1:]]
    assert all(("serving" in r) == (r["status"] == "ok") for r in records)


def test_a_record_without_its_serving_figures_is_estimated_again(tmp_path: Path) -> None:
    spec, store = resolve_model(MODEL), tmp_path / "s.jsonl"
    request = _request("u280")
    first = compare(request, spec, store)
    lines = store.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"serving"' in line)
    entry = json.loads(lines[at])
    del entry["value"]["serving"]
    lines[at] = json.dumps(entry)
    store.write_text("\n".join(lines) + "\n")
    with pytest.warns(Notice, match="none where they were"):
        again = compare(request, spec, store)
    assert again.evaluated == [entry["key"]]
    assert comparison_dict(again)["rows"] == comparison_dict(first)["rows"]


def test_plain_and_served_records_share_a_store_under_their_own_keys(tmp_path: Path) -> None:
    spec, store = resolve_model(MODEL), tmp_path / "s.jsonl"
    plain = parse_request(MODEL, TOKENS, "u280", "1,2", ",".join(NAMES), "1", None, None,
                          NAMES, NAMES, engine="published")
    compare(plain, spec, store)
    rate = compare(_request("u280"), spec, store)
    assert len(rate.evaluated) == 6 and rate.reused == 0
    faster = compare(_request("u280", replace(SERVICE, rate="40")), spec, store)
    assert len(faster.evaluated) == 6  # another rate is another service
    again = compare(plain, spec, store)
    assert again.evaluated == [] and all(r.serving is None for r in again.rows)
    assert "serving" not in comparison_dict(again)["rows"][0]


def test_a_narrow_console_drops_the_serving_columns_of_lowest_priority(
        served_run: Any) -> None:
    """Wide, every column and the reason whole; at 80 columns (table_fit.fitted) the boards
    and one replica's capacity are dropped, named in the caption, while the price and the
    replicas stay."""
    summary = comparison_dict(served_run[0])
    for width, shown in ((400, True), (80, False)):
        console = Console(width=width, record=True)
        print_comparison(summary, rows_from_dict(summary), console)
        text = console.export_text()
        boards = re.search(r"┃\s*boards\s*┃", text) is not None
        words = " ".join(text.split())  # the caption folds at the table's width
        assert boards == shown
        assert ("req/s per replica, boards" in words and "left out at 80" in words) != shown
        assert "replic" in text and "0.2437" in text  # never dropped
        assert all(len(line) <= width for line in text.splitlines())
        if shown:
            assert MISSES in text  # the reason whole where the table fits


@pytest.mark.parametrize(("args", "message"), [
    (("--tokens", "16:8", "--ttft", "1s"), "--ttft: only with --rate"),
    ((), "--tokens: give IN:OUT"),
    (("--tokens", "16:8", "--sort", "usd-per-million-tokens"), "usd-per-million-tokens with "
                                                               "--rate"),
    (("--rate", "0"), "--rate '0'"),
    (("--rate", "5", "--prompt", "lognormal:5"), "--prompt 'lognormal:5'"),
    (("--rate", "5", "--tpot", "fast"), "--tpot 'fast'"),
    (("--rate", "5", "--percentile", "0"), "--percentile 0"),
])
def test_bad_serving_options_are_one_line_and_exit_2(args: tuple[str, ...], message: str
                                                     ) -> None:
    got = CliRunner().invoke(app, ["compare", MODEL, *args])
    assert got.exit_code == 2
    lines = got.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], got.output


def test_json_carries_the_service_and_every_rows_serving_figures(tmp_path: Path) -> None:
    got = CliRunner().invoke(app, [
        "compare", MODEL, "--tokens", TOKENS, "--rate", "20", "--ttft", "100ms", "--tpot",
        "5ms", "--devices", "h100", "--counts", "1", "--strategies", "gpu-graph",
        "--engine", "published", "--store", str(tmp_path / "s.jsonl"), "--json"])
    assert got.exit_code == 0, got.output
    data = json.loads(got.output)
    assert data["sort"] == "usd-per-million-tokens" and data["serving"]["rate"] == 20
    assert data["serving"]["cheapest"] == "gpu-graph 1xh100"
    (row,) = data["rows"]
    assert row["serving"]["replicas"] == 1 and row["serving"]["usd_per_million_tokens"] > 0


def _readme_compares() -> list[str]:
    text = (Path(__file__).parent.parent / "README.md").read_text()
    return re.findall(r"^archi compare [^\n]*", text, flags=re.M)


def test_the_readme_shows_a_latency_target_and_a_service() -> None:
    commands = _readme_compares()
    assert any("--latency-target" in c for c in commands)
    assert any("--rate" in c for c in commands)


@pytest.mark.parametrize("command", _readme_compares())
def test_each_readme_compare_example_finds_rows(command: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """As written (a page goes to this test's directory): a latency target some row
    meets, a service some row serves, and rows for the rest."""
    monkeypatch.chdir(tmp_path)
    args = [*shlex.split(command)[1:], "--json", "--store", str(tmp_path / "s.jsonl")]
    got = CliRunner().invoke(app, args)
    assert got.exit_code == 0, (command, got.output[-400:])
    data = json.loads(got.output[got.output.index("{"):])
    assert data["rows"]
    if "--latency-target" in command:
        assert data["latency_target"]["meeting"]
    if "--rate" in command:
        assert data["serving"]["cheapest"]
