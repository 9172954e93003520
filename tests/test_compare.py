"""`archi compare`: the ranking, Pareto front and latency target on hand-made rows (the front
against a brute-force dominance check), the cost and energy of a row by hand, refusals
grouped, one-line errors for bad options, a store that resumes, and the --json round trip
against the pipeline's own estimate."""

import itertools
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from archipelago import api
from archipelago.compare import rows as compare_rows
from archipelago.compare.rank import cheapest_meeting, pareto_front, ranked
from archipelago.compare.request import parse_request
from archipelago.compare.rows import Row, group_reasons, row_of
from archipelago.compare.run import compare
from archipelago.compare.summary import rows_from_dict
from archipelago.compare.table import binding as binding_cell
from archipelago.explore.best import best_engine
from archipelago.hardware.catalog import catalog, device_from_dict, raw_catalog
from archipelago.models.zoo import resolve_model
from archipelago.strategies.registry import strategies
from tests.cli_here import archi_here
from tests.cli_process import archi
from tests.dask_cluster import running_cluster
from tests.signals import default_sigint


def _row(name: str, latency: float, usd: float | None, jpt: float | None = 1.0,
         tps: float = 100.0) -> Row:
    """A row named by its strategy (hand-made: only the ranked figures matter)."""
    return Row(name, "u280", 1, 1, latency, tps, 0.0, 0.0, "tp=1", "compute", usd,
               None if usd is None else tps / (usd / 1e6), None if jpt is None else 100.0,
               0.0, 0.0, jpt)


def _dominated(r: Row, rows: list[Row]) -> bool:
    """Brute force: some other priced row is no worse on both and better on one."""
    return any(q is not r and q.upfront_usd is not None
               and q.latency_s <= r.latency_s and q.upfront_usd <= r.upfront_usd
               and (q.latency_s < r.latency_s or q.upfront_usd < r.upfront_usd) for q in rows)


@pytest.mark.parametrize("seed", range(40))
def test_pareto_front_equals_brute_force_dominance(seed: int) -> None:
    rng = random.Random(seed)
    rows = [_row(f"s{i}", rng.choice([1.0, 2.0, 3.0, 4.0, 5.0]),
                 rng.choice([None, 10.0, 20.0, 30.0, 40.0])) for i in range(rng.randint(1, 12))]
    front = pareto_front(rows)
    expected = {r.label for r in rows if r.upfront_usd is not None and not _dominated(r, rows)}
    assert {r.label for r in front} == expected
    assert [r.upfront_usd for r in front] == sorted(r.upfront_usd for r in front)


def test_front_of_a_hand_made_set() -> None:
    rows = [_row("a", 10, 100), _row("b", 5, 200), _row("c", 6, 300),  # c: beaten by b
            _row("d", 1, None), _row("e", 5, 200), _row("f", 20, 100)]  # e ties b
    assert [r.strategy for r in pareto_front(rows)] == ["a", "b", "e"]


def test_ranking_puts_unknown_figures_last_and_breaks_ties_by_latency() -> None:
    rows = [_row("a", 3, 100, jpt=None), _row("b", 1, None, jpt=2.0),
            _row("c", 2, 100, jpt=3.0), _row("d", 4, 50, jpt=1.0)]
    assert [r.strategy for r in ranked(rows, "latency")] == ["b", "c", "a", "d"]
    assert [r.strategy for r in ranked(rows, "cost")] == ["d", "c", "a", "b"]
    assert [r.strategy for r in ranked(rows, "joules-per-token")] == ["d", "b", "c", "a"]
    # tokens/s per M$: 100 / 50e-6 = 2e6 for d, 1e6 for a and c (c faster), b unknown
    assert [r.strategy for r in ranked(rows, "tokens-per-dollar")] == ["d", "c", "a", "b"]


def test_latency_target_names_the_cheapest_row_within_it() -> None:
    rows = [_row("a", 0.040, 300), _row("b", 0.049, 200), _row("c", 0.051, 100),
            _row("d", 0.010, None), _row("e", 0.030, 200)]
    best = cheapest_meeting(rows, 0.050)
    assert best is not None and best.strategy == "e"  # $200 like b, and faster
    assert cheapest_meeting(rows, 0.020) is None  # only d meets it, and d has no price
    assert cheapest_meeting(rows, 0.005) is None


def test_cost_and_energy_of_a_row_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """4 U280 ($7,795 each, seeds/001 Table II; 225 W, DS963): 0.1 s prefill, 0.4 s of
    decode, 2 sequences x 64 tokens: $31,180; 4 x 225 x 0.1 = 90 J and 4 x 225 x 0.4 =
    360 J; 450 J / 128 tokens = 3.515625 J per token; 256 tokens/s / $0.03118M."""
    record = {"strategy": "lora-q", "device": "u280", "count": 4, "batch": 2, "status": "ok",
              "latency_s": 0.5, "prefill_s": 0.1, "tokens_per_s": 256.0,
              "decode_s_per_token": 0.4 / 63, "split": "tp=4", "binding": "HBM bandwidth",
              "shares": {}}
    row = row_of(record, 64)
    assert row.upfront_usd == 31180
    assert (row.prefill_j, row.decode_j) == (pytest.approx(90.0), pytest.approx(360.0))
    assert row.joules_per_token == pytest.approx(3.515625)
    assert row.tokens_per_s_per_million_usd == pytest.approx(256 / 0.03118)
    entry = {k: v for k, v in raw_catalog()["u280"].items() if k not in ("price_usd", "power_w")}
    monkeypatch.setattr(compare_rows, "get_device",
                        lambda key: device_from_dict(key, entry, "test"))
    unknown = row_of(record, 64)  # a board with neither price nor power
    assert (unknown.upfront_usd, unknown.tokens_per_s_per_million_usd, unknown.prefill_j,
            unknown.joules_per_token) == (None, None, None, None)


def test_identical_reasons_are_grouped_with_names_made_general() -> None:
    def refused(device: str, count: int) -> tuple[dict, str]:
        return ({"strategy": "dfx", "device": device, "count": count, "batch": 1},
                f"strategy 'dfx' runs on HBM FPGAs; '{device}' is a gpu without HBM "
                f"(cluster '{count}x{device}')")

    groups = group_reasons([refused(d, n) for d, n in itertools.product(["h100", "a100"],
                                                                        [1, 2])]
                           + [refused("l4", 8)] + [({"strategy": "lora-q", "device": "u50",
                                                     "count": 2, "batch": 1}, "no ring")])
    assert len(groups) == 2
    dfx = groups[0]
    assert dfx.line() == ("dfx on h100, a100 x1,2; l4 x8: strategy 'dfx' runs on HBM FPGAs; "
                          "'<device>' is a gpu without HBM (cluster '<count>x<device>')")
    assert groups[1].line() == "lora-q on u50 x2: no ring"  # one member keeps its names
    one_device = group_reasons([refused("h100", n) for n in (1, 2)])[0]
    assert one_device.line() == ("dfx on h100 x1,2: strategy 'dfx' runs on HBM FPGAs; 'h100' "
                                 "is a gpu without HBM (cluster '<count>xh100')")




@pytest.mark.parametrize(("args", "message"), [
    (("--devices", "u280,u999"),  # the catalog's devices, sorted
     f"unknown device in --devices 'u999'; valid choices: {min(catalog())}, "),
    (("--strategies", "magic"), "unknown strategy in --strategies 'magic'; valid choices: all,"),
    (("--strategies", "galapagos"), "--strategies galapagos: not compared"),
    (("--counts", "1,0"), "--counts '0': each device count must be a whole number in 1..4096"),
    (("--tokens", "64"), "--tokens '64' must look like IN:OUT"),
    (("--latency-target", "50 m"), "--latency-target '50 m': give a positive number and a unit "
                                   "(s, ms, us, µs), e.g. 50ms"),
    (("--latency-target", "fast"), "--latency-target 'fast'"),
    (("--sort", "speed"), "--sort 'speed': valid choices: latency, cost, tokens-per-dollar"),
    (("--engine", "fast"), "--engine 'fast': valid choices are published, best"),
    (("--batch", "1,x"), "--batch 'x': each batch must be a whole number in 1..4096"),
    (("--scheduler", "localhost:8786"), "--scheduler 'localhost:8786' is not a scheduler"),
])
def test_bad_options_are_one_line_and_exit_2(args: tuple[str, ...], message: str,
                                             tmp_path: Path) -> None:
    base = {"--tokens": "8:8"}
    given = dict(zip(args[::2], args[1::2], strict=True))
    flat = [x for k, v in {**base, **given}.items() for x in (k, v)]
    out = archi_here("compare", "gpt2-345m", *flat, "--store", str(tmp_path / "s.jsonl"))
    assert out.returncode == 2, out.stdout
    assert message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not (tmp_path / "s.jsonl").exists()  # refused before any store is made


# In this process (compare's default, and archi_here where the interpreter's start-up is
# not what a test checks): where the tasks run is test_compare_inproc.py's and
# test_a_running_scheduler_estimates_the_same_rows's; a local Dask cluster's start-up would
# cost each run here seconds and check nothing more.
SMALL = ("compare", "gpt2-345m", "--tokens", "16:8", "--counts", "1,2", "--strategies",
         "lora-q,gpu-graph")


def test_a_rerun_with_one_more_device_estimates_only_its_combinations(tmp_path: Path) -> None:
    store = tmp_path / "s.jsonl"
    out = archi_here(*SMALL, "--devices", "u280,v100", "--store", str(store), "--json")
    assert out.returncode == 0, out.stderr
    before = json.loads(out.stdout)
    assert (before["evaluated"], before["reused"]) == (8, 0)  # 2 strategies x 2 x 2
    lines = store.read_text().count("\n")
    out = archi_here(*SMALL, "--devices", "u280,v100,u55c", "--store", str(store), "--json")
    assert out.returncode == 0, out.stderr
    after = json.loads(out.stdout)
    assert (after["evaluated"], after["reused"]) == (4, 8)
    assert {k.split()[1] for k in after["evaluated_keys"]} == {"1xu55c", "2xu55c"}
    assert store.read_text().count("\n") == lines + 4  # only the new records appended
    old = {r["label"]: r for r in before["rows"]}
    for row in after["rows"]:  # rows read back are the rows estimated before
        if row["label"] in old:
            assert row["latency_s"] == old[row["label"]]["latency_s"]
    out = archi(*SMALL, "--devices", "u280,v100,u55c", "--store", str(store))  # the table,
    # off a terminal at its own width (tests/cli_process.py)
    assert "latency ms" in out.stdout and "★" in out.stdout
    assert "0 combinations estimated now, 12 read back" in out.stdout


def test_json_round_trip_and_rows_equal_the_pipeline_estimate(tmp_path: Path) -> None:
    out = archi_here(*SMALL, "--devices", "u280,v100", "--store", str(tmp_path / "s.jsonl"),
                "--json", "--latency-target", "300ms", "--sort", "cost")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    rows = rows_from_dict(data)
    request = parse_request("gpt2-345m", "16:8", "u280,v100", "1,2", "lora-q,gpu-graph", "1",
                            "300ms", "cost", ["lora-q", "gpu-graph"], ["lora-q", "gpu-graph"])
    again = compare(request, resolve_model("gpt2-345m"), tmp_path / "s.jsonl")
    assert (again.evaluated, again.reused) == ([], 8)  # all read back: no Dask started
    assert again.rows == rows  # rows -> JSON -> rows
    assert {r.label for r in rows} == {"lora-q 1xu280", "lora-q 2xu280", "gpu-graph 1xv100",
                                      "gpu-graph 2xv100"}
    for row in rows:  # the same figures as `archi plan` gives, on the engine it names
        cluster, work = f"{row.count}x{row.device}", {"tokens": "16:8"}
        engine = None
        if row.strategy == "lora-q":  # searched (default --engine best), read back
            found = best_engine("gpt2-345m", cluster, row.strategy,
                                api.parse_workload(row.strategy, work))
            assert found.cached and row.engine.startswith("searched: ")
            engine = found.engine
        else:
            assert row.engine == "published"  # a GPU strategy has no design space
        est = api.plan_and_estimate("gpt2-345m", cluster, row.strategy, work,
                                    engine).estimate
        assert row.latency_s == est.latency_s and row.tokens_per_s == est.tokens_per_s
    assert data["front"] == [r.label for r in pareto_front(rows)]
    assert [r.upfront_usd for r in rows] == sorted(r.upfront_usd for r in rows)  # --sort cost
    target_rows = [r for r in rows if r.latency_s <= 0.3]
    cheapest = cheapest_meeting(rows, 0.3)
    assert data["latency_target"]["cheapest"] == (cheapest.label if cheapest else None)
    assert data["latency_target"]["meeting"] == [r.label for r in target_rows]
    assert data["power_model"]["devices"]["u280"]["watts"] == 225
    assert "boards x watts" in data["power_model"]["statement"]


def compared_strategies(model: str) -> set[str]:
    """The strategies `archi compare` must rank for `model`, from the registry's
    declarations: a plan kind that reports a generation's traits, a planner taking the
    model's spec. Named members are checked by hand where this is used."""
    spec = resolve_model(model)
    return {name for name, s in strategies().items()
            if s.plan_kind.traits is not None and isinstance(spec, s.models)}


def test_an_interrupted_comparison_resumes_where_it_stopped(tmp_path: Path) -> None:
    """SIGINT once the first records are in the store: the run stops (status 130) keeping
    them; the rerun estimates exactly the combinations the store lacks, and the two runs
    together cover every strategy x device x count x batch once. On the published engines:
    resuming is the store's, whatever engine a row runs (searching every FPGA row's engine
    first would take minutes)."""
    store = tmp_path / "s.jsonl"
    args = [sys.executable, "-m", "archipelago", "compare", "llama2-7b", "--tokens", "128:128",
            "--batch", "1,8", "--workers", "1", "--store", str(store), "--engine", "published"]
    run = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None:
        if store.exists() and store.read_text().count("\n") >= 2:  # header and a record
            break
        time.sleep(0.02)
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130 and "interrupted by SIGINT" in err, err
    kept = {json.loads(line)["key"] for line in store.read_text().splitlines()[1:]}
    out = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    compared = compared_strategies("llama2-7b")
    assert {"dfx", "lora-f", "lora-q", "gpu-eager", "gpu-graph"} <= compared
    assert not {"chef", "h2h", "galapagos", "persistent"} & compared  # no text generation
    assert set(data["not_applicable"]) == set(strategies()) - compared
    assert "u280" in data["devices"] and "h100" in data["devices"]
    assert data["counts"] == [1, 2, 4, 8] and data["batches"] == [1, 8]
    every = {f"{s} {n}x{d} batch {b}" for s, d, n, b in itertools.product(
        compared, data["devices"], data["counts"], data["batches"])}
    assert 0 < len(kept) < len(every)
    assert data["reused"] == len(kept) and data["evaluated"] == len(every) - len(kept)
    assert not kept & set(data["evaluated_keys"])
    done = [key.rsplit(" ", 1)[0] for key in [*kept, *data["evaluated_keys"]]]
    assert sorted(done) == sorted(every)  # each combination once, none left out


def test_a_running_scheduler_estimates_the_same_rows(tmp_path: Path) -> None:
    with running_cluster() as (address, _cluster):
        outs = []
        for name, where in (("remote", ["--scheduler", address]), ("local", [])):
            out = archi(*SMALL, *where, "--devices", "u280,v100", "--store",
                        str(tmp_path / f"{name}.jsonl"), "--json")
            assert out.returncode == 0, out.stderr
            outs.append(json.loads(out.stdout))
        assert outs[0]["evaluated"] == 8 and outs[0]["rows"] == outs[1]["rows"]


def test_the_binding_cell_shows_the_binding_share() -> None:
    row = _row("a", 1.0, 100.0)
    assert binding_cell(row) == "compute"  # no shares: the name alone
    shared = Row.from_dict({**row.to_dict(), "shares": {"compute": 0.215, "network": 0.1}})
    assert binding_cell(shared) == "compute 22%"


def test_strategies_kept_out_for_one_reason_share_a_line() -> None:
    from archipelago.compare.table import not_compared_lines

    lines = not_compared_lines({"chef": "no text", "h2h": "no text", "galapagos": "encoder"})
    assert lines == ["not compared: chef, h2h (no text)", "not compared: galapagos (encoder)"]
