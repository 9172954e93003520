"""Serving over real plans: the kinds' `serving` hooks against their own estimators, trace
files (ours and the Azure traces' columns), and `archi serve` through the CLI, its
refusals one line with exit status 2."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from archipelago import api
from archipelago.errors import ArchipelagoError
from archipelago.serving.requests import fitted
from archipelago.serving.trace import read_trace
from archipelago.strategies.registry import get_strategy
from tests.cli_here import archi_here


def archi(*args: str) -> subprocess.CompletedProcess:
    """`archi` in a fresh interpreter, for the refusals' exit code and lone line; the
    other serve tests run the command in process (tests/cli_here.py)."""
    return subprocess.run([sys.executable, "-m", "archipelago", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("strategy, cluster, staircase", [("gpu-graph", "1xh100", False),
                                                         ("lora-q", "2xu280", True)])
def test_table_is_the_kinds_own_estimate(strategy: str, cluster: str, staircase: bool
                                         ) -> None:
    """At a grid point, the workload's prompt among them, the table is the estimator's
    figure; between points within 2% of it (the grid's linear interpolation), but for a
    prefill that pads rows to a systolic array (a staircase), which the grid brackets."""
    kind = get_strategy(strategy).plan_kind
    work = api.parse_workload(strategy, {"tokens": "128:32"})
    plan = api.make_plan("gpt2-345m", cluster, strategy, None, {"tokens": "128:32"})
    table = kind.hook("serving")(plan, work, 4)
    estimator = kind.hook("estimator")

    def at(c: int) -> tuple[float, float]:
        est = estimator(plan, replace(work, input_tokens=c, output_tokens=2, batch=3))
        return est.prefill_s, est.decode_s_first

    assert 128 in table.contexts
    for c in (int(table.contexts[5]), 128):
        assert table.prefill(3, c) == pytest.approx(at(c)[0], rel=1e-12)
        assert table.decode(3, c + 1) == pytest.approx(at(c)[1], rel=1e-12)
    lo, hi = int(table.contexts[6]), int(table.contexts[7])
    mid = (lo + hi) // 2
    assert table.decode(3, mid + 1) == pytest.approx(at(mid)[1], rel=0.02)
    if staircase:
        assert at(lo)[0] <= table.prefill(3, mid) <= at(hi)[0]
        assert at(lo)[0] <= at(mid)[0] <= at(hi)[0]
    else:
        assert table.prefill(3, mid) == pytest.approx(at(mid)[0], rel=0.02)
    assert table.kv_tokens > 1000


def test_trace_files_in_both_spellings(tmp_path: Path) -> None:
    azure = tmp_path / "azure.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:48.6805900,300,20\n"
                     "2023-11-16 18:15:46.6805900,100,10\n"
                     "2023-11-16 18:15:50.6805900,5000,30\n")
    ours = tmp_path / "ours.jsonl"
    ours.write_text('{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 10}\n'
                    '{"arrival_s": 2, "prompt_tokens": 300, "output_tokens": 20}\n'
                    '{"arrival_s": 4, "prompt_tokens": 5000, "output_tokens": 30}\n')
    for path in (azure, ours):
        raw, rate = read_trace(path)
        reqs = fitted(raw.unit_arrivals, raw.prompt, raw.output, 4096)
        assert rate == pytest.approx(0.5)
        assert np.allclose(reqs.at(rate), [0, 2, 4])
        assert reqs.prompt.tolist() == [100, 300, 4095] and reqs.output.tolist() == [10, 20, 1]
        assert reqs.clipped == 1


@pytest.mark.parametrize("text, says", [
    ("arrival_s,prompt_tokens\n0,5\n", "output_tokens"),
    ("arrival_s,prompt_tokens,output_tokens\n0,5,0\n", "request 1"),
    ("arrival_s,prompt_tokens,output_tokens\nsoon,5,2\n", "request 1"),
    ("arrival_s,prompt_tokens,output_tokens\n", "no requests")])
def test_bad_traces_refused_in_one_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(ArchipelagoError, match=says) as err:
        read_trace(path)
    assert "\n" not in str(err.value)


def test_archi_serve_json_and_table() -> None:
    args = ("serve", "gpt2-345m", "--cluster", "1xh100", "--strategy", "gpu-graph",
            "--rate", "4", "--prompt", "lognormal:256,0.5", "--output", "32",
            "--requests", "200", "--tpot", "20ms")
    run = archi_here(*args, "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["requests"] == 200 and result["strategy"] == "gpu-graph"
    assert result["ttft_s"]["p50"] <= result["ttft_s"]["p90"] <= result["ttft_s"]["p99"]
    assert result["capacity"]["rate"] >= 4  # a small model on an H100: far from saturated
    table = archi_here(*args)
    assert table.returncode == 0 and "time to first token" in table.stdout


def test_archi_serve_replays_a_trace(tmp_path: Path) -> None:
    """An Azure-column trace of four requests a second apart, replayed at its own rate."""
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:15:{40 + k}.0000000,{100 * (k + 1)},{8 * (k + 1)}\n" for k in range(4)))
    run = archi_here("serve", "gpt2-345m", "--cluster", "1xh100", "--strategy",
                     "gpu-graph", "--trace", str(path), "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["arrivals"] == "trace" and result["rate"] == pytest.approx(1.0)
    assert result["requests"] == 4 and result["capacity"]["requests"] == 4


@pytest.mark.parametrize("extra, says", [
    (("--rate", "0"), "--rate"), (("--rate", "2", "--prompt", "lots"), "--prompt"),
    (("--rate", "2", "--policy", "fifo"), "--policy"),
    (("--rate", "2", "--router", "random"), "--router"),
    (("--rate", "2", "--arrivals", "bursty"), "--arrivals"),
    (("--trace", "/nonexistent.csv"), "not found"),
    (("--rate", "2", "--ttft", "1"), "--ttft"),
    (("--rate", "2", "--tokens", "8:8"), "--tokens"),
    (("--rate", "2", "--max-batch", "5000"), "--max-batch"),
    (("--rate", "2", "--replicas", "0"), "replicas"), ((), "--rate"),
    (("--rate", "2", "--engine", "fastest"), "--engine 'fastest'"),
    (("--rate", "2", "--strategy", "galapagos", "--cluster", "1xvck5000"), "serve")])
def test_archi_serve_refusals(extra: tuple[str, ...], says: str) -> None:
    base = ("serve", "gpt2-345m", "--cluster", "1xh100", "--strategy", "gpu-graph")
    if "--strategy" in extra:
        base = ("serve", "gpt2-345m")
    run = archi(*base, *extra)
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], run.stderr


def test_archi_serve_runs_the_engine_archi_plan_runs() -> None:
    """`--engine best` serves the engine `archi plan --engine best` searched (one study,
    read back), and says so; the default is the published engine, as plan's is."""
    where = ("gpt2-345m", "--cluster", "1xu280", "--strategy", "lora-q")
    plan = archi_here("plan", *where, "--tokens", "64:32", "--engine", "best", "--json")
    assert plan.returncode == 0, plan.stderr
    searched = json.loads(plan.stdout)["engine"]
    served = {}
    for choice in ("published", "best"):
        run = archi_here("serve", *where, "--rate", "1", "--prompt", "64", "--output",
                         "32", "--requests", "50", "--engine", choice, "--json")
        assert run.returncode == 0, run.stderr
        served[choice] = json.loads(run.stdout)
    assert served["best"]["engine"]["parameters"] == searched["parameters"]
    assert served["best"]["engine"]["from_store"]
    assert served["published"]["engine"] == {"engine": "published"}
    assert served["best"]["capacity"] != served["published"]["capacity"]
