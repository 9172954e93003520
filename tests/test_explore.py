"""Design-space search: limits respected, a killed search resumes, results feed `plan`."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import yaml

from archipelago.api import make_plan
from archipelago.estimate.workload import Generation
from archipelago.explore.search import SearchRequest, run_search
from archipelago.hardware.catalog import get_device
from archipelago.strategies.tensor_parallel.estimate import estimate_generation


def archi(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "archipelago", *args], capture_output=True,
                          text=True, timeout=300, **kwargs)


def trials_in_state(db, state: str) -> int:
    """Trials in `state` in the study file (0 while optuna has not created its tables)."""
    try:
        with sqlite3.connect(db) as con:
            query = "SELECT COUNT(*) FROM trials WHERE state = ?"
            return con.execute(query, (state,)).fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def complete_trials(db) -> int:
    return trials_in_state(db, "COMPLETE")


def test_search_respects_every_limit(tmp_path) -> None:
    request = SearchRequest("gpt2-345m", "1xu280", "lora-f", Generation(8, 8), 60,
                            f"sqlite:///{tmp_path / 's.db'}", "limits")
    best = run_search(request)
    assert best.feasible_trials < best.trials_done  # FP16 arrays of 64 x 64 overflow DSPs
    # Check the winner independently of the search's own bookkeeping.
    plan = make_plan("gpt2-345m", "1xu280", "lora-f", best.engine)
    est = estimate_generation(plan, Generation(8, 8))
    u280 = get_device("u280")
    total = est.devices[0].total
    assert est.feasible and est.latency_s == pytest.approx(best.latency_s)
    assert total.dsp <= u280.resources.dsp and total.bram <= u280.resources.bram
    assert total.uram <= u280.resources.uram
    streamed = plan.engine.hbm_bytes_per_cycle * plan.engine.config.clock_hz
    assert streamed <= u280.memory("hbm").bandwidth_Bps


def test_killed_search_resumes_without_losing_trials(tmp_path) -> None:
    db = tmp_path / "resume.db"
    args = ["explore", "gpt2-345m", "--cluster", "1xu280", "--strategy", "lora-q", "--tokens",
            "8:8", "--storage", f"sqlite:///{db}", "--study", "s", "--out",
            str(tmp_path / "best.yaml")]
    proc = subprocess.Popen([sys.executable, "-m", "archipelago", *args, "--trials", "5000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists() and complete_trials(db) >= 10:
                break
            time.sleep(0.2)
    finally:  # never leave the search running, whatever happened above
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    before = complete_trials(db)
    assert 10 <= before < 5000
    with sqlite3.connect(db) as con:
        kept = con.execute("SELECT trial_id FROM trials WHERE state = 'COMPLETE'").fetchall()
    out = archi(*args, "--trials", str(before + 5), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["trials"] == before + 5 == complete_trials(db)
    with sqlite3.connect(db) as con:
        after = set(con.execute("SELECT trial_id FROM trials WHERE state = 'COMPLETE'"))
    assert set(kept) <= after


def test_best_config_feeds_plan(tmp_path) -> None:
    out_file = tmp_path / "best.yaml"
    out = archi("explore", "gpt2-345m", "--cluster", "1xu280", "--strategy", "lora-q",
                "--tokens", "8:8", "--trials", "12", "--storage",
                f"sqlite:///{tmp_path / 'b.db'}", "--out", str(out_file), "--json")
    assert out.returncode == 0, out.stderr
    searched = json.loads(out.stdout)
    assert yaml.safe_load(out_file.read_text())["engine"] == searched["engine"]
    planned = archi("plan", "gpt2-345m", "--cluster", "1xu280", "--strategy", "lora-q",
                    "--tokens", "8:8", "--engine-config", str(out_file), "--json")
    assert json.loads(planned.stdout)["latency_s"] == pytest.approx(searched["latency_s"])


def test_bad_inputs_exit_2(tmp_path) -> None:
    out = archi("explore", "gpt2-345m", "--storage", "nosuchdb://x", "--trials", "1",
                "--out", str(tmp_path / "b.yaml"))
    assert out.returncode == 2 and "storage 'nosuchdb://x'" in out.stderr
    out = archi("explore", "gpt2-345m", "--strategy", "nope", "--trials", "1")
    assert out.returncode == 2 and "unknown strategy 'nope'" in out.stderr


def test_baseline_is_the_default_engine_and_is_tried_first(tmp_path) -> None:
    """The published design point is trial 0, so the search never reports worse."""
    from archipelago.explore.spaces import design_space
    from archipelago.strategies.registry import strategies

    class Replay:
        def __init__(self, values: dict) -> None:
            self.values = values

        def suggest_categorical(self, name: str, choices: list) -> object:
            assert self.values[name] in choices
            return self.values[name]

    explorable = [name for name, s in strategies().items() if s.design_space]
    assert explorable == ["dfx", "lora-f", "lora-q"]
    for strategy in explorable:
        space = design_space(strategy)
        default = make_plan("gpt2-345m", "1xu280", strategy).engine.config
        assert make_plan("gpt2-345m", "1xu280", strategy,
                         space.sample(Replay(space.baseline))).engine.config == default
    request = SearchRequest("gpt2-345m", "1xu280", "lora-f", Generation(8, 8), 3, "", "x")
    default_latency = estimate_generation(make_plan("gpt2-345m", "1xu280", "lora-f"),
                                          Generation(8, 8)).latency_s
    assert run_search(request).latency_s <= default_latency
