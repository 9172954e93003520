"""Design-space search: limits respected, a killed search resumes, results feed `plan`."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from archipelago.api import make_plan
from archipelago.estimate.workload import Generation, Sequence
from archipelago.explore.search import SearchRequest, run_search
from archipelago.explore.stored import TrialRecord
from archipelago.hardware.catalog import get_device
from archipelago.strategies.tensor_parallel.estimate import estimate as estimate_plan
from tests.cli_here import archi_here

archi = archi_here  # what a search says and writes: in this process (tests/cli_here.py)


def journal_keys(storage: Path) -> list[str]:
    """The trial keys of every complete line of the one study journal in `storage`, read
    independently of the journal code (a missing directory or file holds none)."""
    files = list(storage.glob("*.journal")) if storage.is_dir() else []
    if not files:
        return []
    (path,) = files
    lines = path.read_bytes().split(b"\n")[1:-1]  # the header; a torn (unended) last line
    return [json.loads(line)["key"] for line in lines]


def complete_trials(storage: Path) -> int:
    return len(set(journal_keys(storage)))


def test_search_respects_every_limit(tmp_path) -> None:
    request = SearchRequest("gpt2-345m", "1xu280", "lora-f", Generation(8, 8), 60,
                            str(tmp_path / "s"), "limits")
    best = run_search(request)
    assert best.feasible_trials < best.trials_done  # FP16 arrays of 64 x 64 overflow DSPs
    # Check the winner independently of the search's own bookkeeping.
    plan = make_plan("gpt2-345m", "1xu280", "lora-f", best.engine)
    est = estimate_plan(plan, Generation(8, 8))
    u280 = get_device("u280")
    total = est.devices[0].total
    assert est.feasible and est.latency_s == pytest.approx(best.latency_s)
    assert total.dsp <= u280.resources.dsp and total.bram <= u280.resources.bram
    assert total.uram <= u280.resources.uram
    streamed = plan.engine.hbm_bytes_per_cycle * plan.engine.config.clock_hz
    assert streamed <= u280.memory("hbm").bandwidth_Bps


def test_every_trial_a_search_writes_reads_back_as_a_trial_record(tmp_path) -> None:
    """A run keeps its own trials unvalidated (it made them); each must still be what a
    later run validates on reading the journal back: a TrialRecord, its engine the key."""
    run_search(SearchRequest("gpt2-345m", "1xu280", "lora-q", Generation(8, 8), 70,
                             str(tmp_path / "s"), "records"))
    (path,) = (tmp_path / "s").glob("*.journal")
    lines = path.read_bytes().split(b"\n")[1:-1]
    assert len(lines) == 70
    for line in lines:
        record = json.loads(line)
        trial = TrialRecord.model_validate(record["value"])
        assert json.loads(record["key"]) == trial.engine


SLOW_EVALUATION = """
import sys, time
import archipelago.explore.search as search
delay_s, scored = float(sys.argv[1]), search.evaluate_chunk
search.evaluate_chunk = lambda task: (time.sleep(delay_s), scored(task))[1]
from archipelago.cli import app
sys.argv = ["archi", *sys.argv[2:]]
app()
"""


def slowed(delay_s: float, *args: str) -> list[str]:
    """A command line running `archi ARGS` whose every slice of trials takes `delay_s`
    longer (in this process: --workers 0), so a test can catch it mid-search."""
    return [sys.executable, "-c", SLOW_EVALUATION, str(delay_s), *args, "--workers", "0"]


def test_killed_search_resumes_without_losing_trials(tmp_path) -> None:
    storage = tmp_path / "st"
    args = ["explore", "gpt2-345m", "--cluster", "1xu280", "--strategy", "lora-q", "--tokens",
            "8:8", "--storage", str(storage), "--study", "s", "--out",
            str(tmp_path / "best.yaml")]
    proc = subprocess.Popen(slowed(0.05, *args, "--trials", "5000"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if complete_trials(storage) >= 200:
                break
            time.sleep(0.05)
    finally:  # never leave the search running, whatever happened above
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    kept = set(journal_keys(storage))
    before = len(kept)
    assert 200 <= before < 5000
    out = archi(*args, "--trials", str(before + 5), "--workers", "0", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["trials"] == before + 5 == complete_trials(storage)
    assert kept <= set(journal_keys(storage))


def test_best_config_feeds_plan(tmp_path) -> None:
    out_file = tmp_path / "best.yaml"
    out = archi("explore", "gpt2-345m", "--cluster", "1xu280", "--strategy", "lora-q",
                "--tokens", "8:8", "--trials", "12", "--storage", str(tmp_path / "b"),
                "--out", str(out_file), "--json")
    assert out.returncode == 0, out.stderr
    searched = json.loads(out.stdout)
    assert yaml.safe_load(out_file.read_text())["engine"] == searched["engine"]
    planned = archi("plan", "gpt2-345m", "--cluster", "1xu280", "--strategy", "lora-q",
                    "--tokens", "8:8", "--engine-config", str(out_file), "--json")
    assert json.loads(planned.stdout)["latency_s"] == pytest.approx(searched["latency_s"])


def test_bad_inputs_exit_2(tmp_path) -> None:
    out = archi("explore", "gpt2-345m", "--storage", "sqlite:///x.db", "--trials", "1",
                "--out", str(tmp_path / "b.yaml"))
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: --storage 'sqlite:///x.db' is a database URL; studies are journal files in a "
        "directory now: give a directory, e.g. --storage archi-explore")
    out = archi("explore", "gpt2-345m", "--strategy", "nope", "--trials", "1")
    assert out.returncode == 2 and "unknown strategy 'nope'" in out.stderr


def test_baseline_is_the_default_engine_and_is_tried_first(tmp_path) -> None:
    """The published design point decodes to the strategy's default engine and is in every
    study, so the search never reports worse."""
    from archipelago.explore.spaces import design_space, engine_key
    from archipelago.strategies.registry import strategies

    explorable = [name for name, s in strategies().items() if s.design_space]
    # the papers' engines, by hand
    assert {"dfx", "lora-f", "lora-q", "galapagos"} <= set(explorable)
    encoders = {"galapagos": ("ibert-base", "72xsidewinder", Sequence(128))}
    for strategy in explorable:
        model, cluster, work = encoders.get(strategy, ("gpt2-345m", "1xu280",
                                                       Generation(8, 8)))
        space = design_space(strategy, model, cluster, work)
        default = make_plan(model, cluster, strategy).engine.config
        published = space.decode(dict(space.baseline))
        assert make_plan(model, cluster, strategy, published).engine.config == default
        request = SearchRequest(model, cluster, strategy, work, 3, str(tmp_path / strategy),
                                "x")
        run_search(request)
        assert journal_keys(tmp_path / strategy)[0] == engine_key(published)
    default_latency = estimate_plan(make_plan("gpt2-345m", "1xu280", "lora-f"),
                                          Generation(8, 8)).latency_s
    assert run_search(SearchRequest("gpt2-345m", "1xu280", "lora-f", Generation(8, 8), 3,
                                    "", "x")).latency_s <= default_latency


def test_a_search_runs_on_a_running_scheduler(tmp_path) -> None:
    """--scheduler tcp://HOST:PORT: the batches go to that cluster's workers (here one
    thread in this process), the trials into the journal as on a local cluster."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=False, dashboard_address=None,
                      protocol="tcp://") as cluster:
        best = run_search(SearchRequest("gpt2-345m", "1xu280", "lora-q", Generation(8, 8), 70,
                                        str(tmp_path / "s"), "r",
                                        scheduler=cluster.scheduler_address))
    assert best.trials_done == 70 == complete_trials(tmp_path / "s") == best.trials_added
