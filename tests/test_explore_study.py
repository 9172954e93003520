"""A study is its content: searches never borrow each other's trials, concurrent and killed
runs keep the trial budget and the published point exact, and the output file is safe."""

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
import yaml

from archipelago.api import make_plan
from archipelago.errors import ArchipelagoError
from archipelago.estimate.workload import Generation
from archipelago.explore.search import SearchRequest, run_search
from archipelago.explore.spaces import design_space
from archipelago.explore.trials import PUBLISHED, WORKER, this_run
from archipelago.output_file import write_atomically
from archipelago.strategies.tensor_parallel.estimate import estimate_generation
from tests.conftest import TINY_GPT2
from tests.test_explore import archi, complete_trials

OPTIONS = ["--cluster", "1xu280", "--tokens", "8:8"]  # after MODEL: kind options follow it


def write_model(directory: Path, **changes: int) -> str:
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({**TINY_GPT2, **changes}))
    return str(directory / "config.json")


def trials_of(db: Path, study: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=study, storage=f"sqlite:///{db}").get_trials()


def one_line_error(out: subprocess.CompletedProcess) -> str:
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    return lines[0]


def test_same_file_name_different_content_never_share_a_study(tmp_path) -> None:
    """The reported bug: a/config.json then b/config.json reported a's result for b."""
    a, b = write_model(tmp_path / "a"), write_model(tmp_path / "b", n_layer=4)
    storage = f"sqlite:///{tmp_path / 's.db'}"
    runs = {}
    for model in (a, b):
        out = archi("explore", model, *OPTIONS, "--trials", "4", "--storage", storage, "--out",
                    str(tmp_path / f"{Path(model).parent.name}.yaml"), "--json")
        assert out.returncode == 0, out.stderr
        runs[model] = json.loads(out.stdout)
    assert runs[a]["study"] != runs[b]["study"]
    # The same content elsewhere is the same model: it may resume a's study (no new trials).
    out = archi("explore", write_model(tmp_path / "copy-of-a"), *OPTIONS, "--trials", "4",
                "--storage", storage, "--study", runs[a]["study"], "--out",
                str(tmp_path / "c.yaml"), "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["engine"] == runs[a]["engine"]
    assert complete_trials(tmp_path / "s.db") == 8
    # b's reported latency is b's own: re-estimate its best engine independently.
    plan = make_plan(b, "1xu280", "lora-q", runs[b]["engine"])
    assert estimate_generation(plan, Generation(8, 8)).latency_s == pytest.approx(
        runs[b]["latency_s"])
    out = archi("explore", b, *OPTIONS, "--trials", "4", "--storage", storage, "--study",
                runs[a]["study"], "--out", str(tmp_path / "x.yaml"))
    line = one_line_error(out)
    assert re.search(r"made for model a \(config \w{8}\); this run is for model b \(config", line)
    assert not (tmp_path / "x.yaml").exists()


def test_a_study_name_reused_for_another_strategy_is_refused(tmp_path) -> None:
    args = ["explore", "gpt2-345m", *OPTIONS, "--trials", "3", "--storage",
            f"sqlite:///{tmp_path / 's.db'}", "--study", "mine"]
    assert archi(*args, "--strategy", "dfx", "--out", str(tmp_path / "d.yaml")).returncode == 0
    line = one_line_error(archi(*args, "--strategy", "lora-q", "--out", str(tmp_path / "q.yaml")))
    assert "made for strategy dfx, engine DFXEngine" in line
    assert "this run is for strategy lora-q, engine SystolicEngine" in line
    assert complete_trials(tmp_path / "s.db") == 3


def test_a_foreign_single_objective_study_is_refused_not_crashed_on(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 's.db'}"
    study = optuna.create_study(study_name="old", storage=storage)
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=2)
    line = one_line_error(archi("explore", "gpt2-345m", *OPTIONS, "--trials", "3", "--storage",
                                storage, "--study", "old", "--out", str(tmp_path / "o.yaml")))
    assert "study 'old'" in line and "no recorded identity" in line


def published_complete(trials: list) -> list:
    return [t for t in trials if t.user_attrs.get(PUBLISHED)
            and t.state == optuna.trial.TrialState.COMPLETE]


def test_concurrent_runs_stop_at_the_budget_in_total(tmp_path) -> None:
    db = tmp_path / "c.db"
    args = [sys.executable, "-m", "archipelago", "explore", "gpt2-345m", *OPTIONS, "--strategy",
            "lora-q", "--trials", "400", "--storage", f"sqlite:///{db}", "--study", "c"]
    runs = [subprocess.Popen([*args, "--out", str(tmp_path / f"{i}.yaml"), "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(2)]
    for run in runs:
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr
        assert json.loads(stdout)["trials"] == 400  # each waited for the other's last trial
    trials = trials_of(db, "c")
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 400
    # The test only means something if both runs did add trials to the study.
    assert {t.user_attrs[WORKER]["pid"] for t in complete} == {run.pid for run in runs}
    assert len(published_complete(trials)) == 1


def claimed_running(db: Path) -> int:
    """Trials in flight that their run has claimed (0 before optuna made its tables)."""
    try:
        with sqlite3.connect(db) as con:
            return con.execute("SELECT COUNT(*) FROM trials JOIN trial_user_attributes USING "
                               "(trial_id) WHERE state = 'RUNNING' AND key = ?",
                               (WORKER,)).fetchone()[0]
    except sqlite3.OperationalError:
        return 0


HANG_IN_EVALUATE = """
import sys, time
import archipelago.explore.search as search
search.evaluate = lambda request, engine: time.sleep(3600)
from archipelago.cli import app
sys.argv = ["archi", *sys.argv[1:]]
app()
"""


def test_a_run_killed_during_the_published_point_leaves_it_for_the_next(tmp_path) -> None:
    db = tmp_path / "k.db"
    args = ["explore", "gpt2-345m", *OPTIONS, "--strategy", "lora-q", "--storage", f"sqlite:///{db}",
            "--study", "k", "--out", str(tmp_path / "k.yaml")]
    hung = subprocess.Popen([sys.executable, "-c", HANG_IN_EVALUATE, *args, "--trials", "5"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and hung.poll() is None:
            if db.exists() and claimed_running(db):  # evaluating, not between steps
                break
            time.sleep(0.2)
    finally:
        hung.kill()
        hung.wait()
    (first,) = trials_of(db, "k")
    assert first.user_attrs[PUBLISHED] and first.state == optuna.trial.TrialState.RUNNING
    out = archi(*args, "--trials", "5", "--json")
    assert out.returncode == 0, out.stderr
    trials = trials_of(db, "k")
    assert trials[0].state == optuna.trial.TrialState.FAIL  # stale: its run is gone
    (published,) = published_complete(trials)
    baseline = design_space("lora-q").baseline
    assert {k: published.params[k] for k in baseline} == baseline
    assert json.loads(out.stdout)["trials"] == 5 == complete_trials(db)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_search_with_one_line_and_the_count(tmp_path, signum) -> None:
    db = tmp_path / "i.db"
    run = subprocess.Popen([sys.executable, "-m", "archipelago", "explore", "gpt2-345m", *OPTIONS,
                            "--trials", "100000", "--storage", f"sqlite:///{db}", "--study",
                            "i", "--out", str(tmp_path / "i.yaml")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and complete_trials(db) < 5:
            time.sleep(0.1)
        run.send_signal(signum)
        _, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert run.returncode == 128 + signum and len(lines) == 1, stderr
    name = signal.Signals(signum).name
    match = re.fullmatch(rf"error: interrupted by {name}: study 'i' holds (\d+) finished "
                         r"trials; rerun the same command to resume", lines[0])
    assert match and int(match.group(1)) == complete_trials(db) >= 5
    assert not any(t.state == optuna.trial.TrialState.RUNNING for t in trials_of(db, "i"))
    assert not (tmp_path / "i.yaml").exists()


def test_the_output_file_is_checked_before_the_search(tmp_path) -> None:
    notes = tmp_path / "notes.yaml"
    notes.write_text("my notes\n")
    db = tmp_path / "o.db"
    base = ["explore", "gpt2-345m", *OPTIONS, "--trials", "3", "--storage", f"sqlite:///{db}"]
    assert "notes.yaml exists; pass --force" in one_line_error(archi(*base, "--out", str(notes)))
    assert "is a directory" in one_line_error(archi(*base, "--out", str(tmp_path)))
    assert "does not exist" in one_line_error(archi(*base, "--out", str(tmp_path / "no/x.yaml")))
    assert notes.read_text() == "my notes\n" and complete_trials(db) == 0  # no search ran
    assert archi(*base, "--out", str(notes), "--force").returncode == 0
    assert "engine" in yaml.safe_load(notes.read_text())
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_the_default_output_name_is_safe_for_a_cluster_path(tmp_path) -> None:
    (tmp_path / "clusters").mkdir()
    cluster = tmp_path / "clusters" / "pair.yaml"
    cluster.write_text(yaml.safe_dump({"devices": [{"device": "u280", "count": 2}]}))
    out = archi("explore", "gpt2-345m", "--cluster", str(cluster), "--strategy", "dfx",
                "--tokens", "8:8", "--trials", "3", "--storage",
                f"sqlite:///{tmp_path / 'p.db'}", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    written = Path(tmp_path / json.loads(out.stdout)["engine_config_file"])
    assert written.parent == tmp_path and written.name.startswith("best-gpt2-345m-pair-dfx")
    assert yaml.safe_load(written.read_text())["cluster"] == str(cluster)


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch) -> None:
    target = tmp_path / "best.yaml"
    target.write_text("old\n")

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_atomically(target, "new\n", "--out", force=True)
    monkeypatch.undo()
    assert target.read_text() == "old\n" and sorted(tmp_path.iterdir()) == [target]
    with pytest.raises(ArchipelagoError, match="appeared while working; kept it"):
        write_atomically(target, "new\n", "--out", force=False)
    write_atomically(target, "new\n", "--out", force=True)
    assert target.read_text() == "new\n" and sorted(tmp_path.iterdir()) == [target]


def test_runs_of_two_searches_racing_for_one_new_study_are_stopped(tmp_path) -> None:
    """Both passed the identity check at the same instant; the trials still tell them apart."""
    storage = f"sqlite:///{tmp_path / 'r.db'}"
    request = SearchRequest("gpt2-345m", "1xu280", "dfx", Generation(8, 8), 3, storage, "r")
    run_search(request)
    study = optuna.load_study(study_name="r", storage=storage)
    racer = study.ask()  # a live run of another search, in flight
    racer.set_user_attr(WORKER, {**this_run(), "search": "another-search"})
    with pytest.raises(ArchipelagoError, match="also holds trials of another search"):
        run_search(replace(request, trials=4))
