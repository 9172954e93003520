"""A study is its content: searches never borrow each other's trials, concurrent and killed
runs keep the trial budget and the published point exact, and the output file is safe."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from archipelago.api import make_plan
from archipelago.errors import ArchipelagoError
from archipelago.estimate.workload import Generation
from archipelago.explore.spaces import design_space, engine_key
from archipelago.output_file import write_atomically
from archipelago.strategies.tensor_parallel.estimate import estimate as estimate_plan
from tests.conftest import TINY_GPT2
from tests.test_explore import archi, complete_trials, journal_keys, slowed

OPTIONS = ["--cluster", "1xu280", "--tokens", "8:8"]  # after MODEL: kind options follow it


def write_model(directory: Path, **changes: int) -> str:
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({**TINY_GPT2, **changes}))
    return str(directory / "config.json")


def one_line_error(out: subprocess.CompletedProcess) -> str:
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    return lines[0]


def published_key(strategy: str) -> str:
    space = design_space(strategy, "gpt2-345m", "1xu280")
    return engine_key(space.decode(dict(space.baseline)))


def test_same_file_name_different_content_never_share_a_study(tmp_path) -> None:
    """The reported bug: a/config.json then b/config.json reported a's result for b."""
    a, b = write_model(tmp_path / "a"), write_model(tmp_path / "b", n_layer=4)
    storage = tmp_path / "s"
    runs = {}
    for model in (a, b):
        out = archi("explore", model, *OPTIONS, "--trials", "4", "--storage", str(storage),
                    "--out", str(tmp_path / f"{Path(model).parent.name}.yaml"), "--json",
                    "--workers", "0")
        assert out.returncode == 0, out.stderr
        runs[model] = json.loads(out.stdout)
    assert runs[a]["study"] != runs[b]["study"]
    assert len(list(storage.iterdir())) == 2
    # The same content elsewhere is the same model: it may resume a's study (no new trials).
    out = archi("explore", write_model(tmp_path / "copy-of-a"), *OPTIONS, "--trials", "4",
                "--storage", str(storage), "--study", runs[a]["study"], "--out",
                str(tmp_path / "c.yaml"), "--json", "--workers", "0")
    assert out.returncode == 0, out.stderr
    resumed = json.loads(out.stdout)
    assert resumed["engine"] == runs[a]["engine"] and resumed["trials_added"] == 0
    # b's reported latency is b's own: re-estimate its best engine independently.
    plan = make_plan(b, "1xu280", "lora-q", runs[b]["engine"])
    assert estimate_plan(plan, Generation(8, 8)).latency_s == pytest.approx(
        runs[b]["latency_s"])
    out = archi("explore", b, *OPTIONS, "--trials", "4", "--storage", str(storage), "--study",
                runs[a]["study"], "--out", str(tmp_path / "x.yaml"), "--workers", "0")
    line = one_line_error(out)
    assert re.fullmatch(rf"error: study '{runs[a]['study']}' in --storage '{storage}': journal "
                        r".* holds other results: field 'identity.model' is '\w{16}' there, "
                        r"'\w{16}' here; choose another --study \(or --storage\)", line), line
    assert not (tmp_path / "x.yaml").exists()


def test_a_study_name_reused_for_another_strategy_is_refused(tmp_path) -> None:
    args = ["explore", "gpt2-345m", *OPTIONS, "--trials", "3", "--storage",
            str(tmp_path / "s"), "--study", "mine", "--workers", "0"]
    assert archi(*args, "--strategy", "dfx", "--out", str(tmp_path / "d.yaml")).returncode == 0
    line = one_line_error(archi(*args, "--strategy", "lora-q", "--out", str(tmp_path / "q.yaml")))
    assert "field 'identity.engine' is 'DFXEngine' there, 'SystolicEngine' here" in line
    assert complete_trials(tmp_path / "s") == 3


def test_a_file_that_is_not_a_journal_is_refused_and_kept(tmp_path) -> None:
    storage = tmp_path / "s"
    storage.mkdir()
    (storage / "old.journal").write_text("SQLite format 3\x00...")
    line = one_line_error(archi("explore", "gpt2-345m", *OPTIONS, "--trials", "3", "--storage",
                                str(storage), "--study", "old", "--out",
                                str(tmp_path / "o.yaml")))
    assert "study 'old'" in line and "is not an Archipelago journal" in line
    assert (storage / "old.journal").read_text() == "SQLite format 3\x00..."


def test_concurrent_runs_stop_at_the_budget_in_total(tmp_path) -> None:
    storage = tmp_path / "c"
    args = ["explore", "gpt2-345m", *OPTIONS, "--strategy", "lora-q", "--trials", "400",
            "--storage", str(storage), "--study", "c"]
    runs = [subprocess.Popen(slowed(0.1, *args, "--out", str(tmp_path / f"{i}.yaml"), "--json"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(2)]
    added = []
    for run in runs:
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr
        result = json.loads(stdout)
        assert result["trials"] == 400  # each saw the other's trials
        added.append(result["trials_added"])
    keys = journal_keys(storage)
    assert len(set(keys)) == 400 and published_key("lora-q") in keys
    # The test only means something if both runs did add trials to the study. (A design
    # both scored at once counts in both runs' `trials_added` but, its records equal, is
    # written once: the journal deduplicates them, batch/journal.py.)
    assert min(added) > 0 and sum(added) >= len(keys) >= 400


HANG_IN_EVALUATE = """
import sys, time
from pathlib import Path
import archipelago.explore.search as search
started = Path(sys.argv[1])
search.evaluate_chunk = lambda task: (started.touch(), time.sleep(3600))
from archipelago.cli import app
sys.argv = ["archi", *sys.argv[2:]]
app()
"""


def test_a_run_killed_during_the_published_point_leaves_it_for_the_next(tmp_path) -> None:
    storage = tmp_path / "k"
    args = ["explore", "gpt2-345m", *OPTIONS, "--strategy", "lora-q", "--storage", str(storage),
            "--study", "k", "--out", str(tmp_path / "k.yaml"), "--workers", "0"]
    evaluating = tmp_path / "evaluating"  # the hung evaluation's own word that it began
    hung = subprocess.Popen([sys.executable, "-c", HANG_IN_EVALUATE, str(evaluating), *args,
                             "--trials", "5"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and hung.poll() is None and not evaluating.exists():
            time.sleep(0.05)
        assert evaluating.exists(), f"the search never began evaluating ({hung.poll()})"
    finally:
        hung.kill()
        hung.wait()
    assert hung.returncode == -signal.SIGKILL and journal_keys(storage) == []
    out = archi(*args, "--trials", "5", "--json")
    assert out.returncode == 0, out.stderr
    keys = journal_keys(storage)
    assert keys[0] == published_key("lora-q") and keys.count(keys[0]) == 1
    assert json.loads(out.stdout)["trials"] == 5 == complete_trials(storage) == len(keys)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("workers", ["0", "1"])
def test_a_signal_ends_the_search_with_one_line_and_the_count(tmp_path, signum,
                                                               workers) -> None:
    storage = tmp_path / "i"
    args = ["explore", "gpt2-345m", *OPTIONS, "--trials", "100000", "--storage", str(storage),
            "--study", "i", "--out", str(tmp_path / "i.yaml"), "--workers", workers]
    run = subprocess.Popen([sys.executable, "-m", "archipelago", *args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and complete_trials(storage) < 5:
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
    held = int(match.group(1)) if match else -1
    assert held == complete_trials(storage) >= 5
    assert not (tmp_path / "i.yaml").exists()
    args[args.index("--trials") + 1] = str(held + 5)  # resumes to an exact count
    out = archi(*args, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["trials"] == held + 5 == complete_trials(storage)


def test_the_output_file_is_checked_before_the_search(tmp_path) -> None:
    notes = tmp_path / "notes.yaml"
    notes.write_text("my notes\n")
    storage = tmp_path / "o"
    base = ["explore", "gpt2-345m", *OPTIONS, "--trials", "3", "--storage", str(storage),
            "--workers", "0"]
    assert "notes.yaml exists; pass --force" in one_line_error(archi(*base, "--out", str(notes)))
    assert "is a directory" in one_line_error(archi(*base, "--out", str(tmp_path)))
    assert "does not exist" in one_line_error(archi(*base, "--out", str(tmp_path / "no/x.yaml")))
    assert notes.read_text() == "my notes\n" and not storage.exists()  # no search ran
    assert archi(*base, "--out", str(notes), "--force").returncode == 0
    assert "engine" in yaml.safe_load(notes.read_text())
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_the_default_output_name_is_safe_for_a_cluster_path(tmp_path) -> None:
    (tmp_path / "clusters").mkdir()
    cluster = tmp_path / "clusters" / "pair.yaml"
    cluster.write_text(yaml.safe_dump({"devices": [{"device": "u280", "count": 2}]}))
    out = archi("explore", "gpt2-345m", "--cluster", str(cluster), "--strategy", "dfx",
                "--tokens", "8:8", "--trials", "3", "--workers", "0", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    written = Path(json.loads(out.stdout)["engine_config_file"])
    store = Path(os.environ["ARCHIPELAGO_CACHE_DIR"]) / "explore"  # the default, not the cwd
    assert written.parent == store and written.name.startswith("best-gpt2-345m-pair-dfx")
    assert yaml.safe_load(written.read_text())["cluster"] == str(cluster)
    study = written.name.removeprefix("best-").removesuffix(".yaml")
    assert (store / f"{study}.journal").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clusters"]


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


def test_a_space_exhausted_before_the_budget_says_so(tmp_path) -> None:
    """DFX's space on a U280 holds 160 engines: 5 depths d x 4 matrix-unit sizes (256 to
    2,048 values a cycle; 4,096 would take 3 x 4,096 = 12,288 multiplier and adder DSPs of
    the 9,024) x 4 windows x 2 HBM port widths (256 and 512 bits; 1,024 at 200 MHz is 25.6
    GB/s, over a channel's 460 / 32 = 14.375): a budget of 200 ends there."""
    storage = tmp_path / "x"
    args = ["explore", "gpt2-345m", *OPTIONS, "--strategy", "dfx", "--trials", "200",
            "--storage", str(storage), "--workers", "0", "--out", str(tmp_path / "x.yaml")]
    out = archi(*args, "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["trials"] == 160 == complete_trials(storage) and result["exhausted"]
    out = archi(*args, "--force")
    assert out.returncode == 0 and "the design space has no other designs: all 160" in out.stdout


def worker_processes(pid: int) -> list[int]:
    """The Dask worker processes a run started (children of any of its threads, spawned by
    multiprocessing, not its resource tracker), from /proc."""
    def read(path: Path) -> bytes:
        try:
            return path.read_bytes()
        except (FileNotFoundError, ProcessLookupError):  # a thread or child gone meanwhile
            return b""

    children = [c for task in Path(f"/proc/{pid}/task").iterdir()
                for c in read(task / "children").split()]
    return [int(c) for c in children
            if b"spawn_main" in read(Path(f"/proc/{c.decode()}/cmdline"))]


def test_a_worker_killed_mid_search_loses_nothing(tmp_path) -> None:
    storage = tmp_path / "w"
    args = ["explore", "gpt2-345m", *OPTIONS, "--strategy", "lora-q", "--trials", "2000",
            "--storage", str(storage), "--study", "w", "--out", str(tmp_path / "w.yaml"),
            "--json"]
    command = slowed(0.2, *args)
    command[command.index("--workers") + 1] = "2"  # on a local Dask cluster
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (complete_trials(storage) < 200
                                               or len(worker_processes(run.pid)) < 2):
            time.sleep(0.05)
        before = complete_trials(storage)
        os.kill(worker_processes(run.pid)[0], signal.SIGKILL)
        stdout, stderr = run.communicate(timeout=300)
    finally:
        run.kill()
    assert run.returncode == 0, stderr
    assert 200 <= before < 2000
    assert json.loads(stdout)["trials"] == 2000 == complete_trials(storage)


def test_a_writer_holds_its_trials_as_a_fresh_reader_reads_them(tmp_path) -> None:
    """A search's journal takes the trials it appends in as given, not parsed back: what
    it holds is what a reader opening the study afresh reads (floats to the bit, an
    infinite latency, nested values), and a repeated key is not written again."""
    import math

    from archipelago.batch.journal import Journal

    trials = [(f"k{i}", {"genes": {"d": 2 ** i, "clock_hz": 2e8}, "latency_s": 0.1 * i + 0.2,
                         "tokens_per_s": 1 / 3, "feasible": i % 2 == 0, "none": None,
                         "utilization": {"dsp": math.inf, "list": [1, 2.5e-300]}})
              for i in range(5)]
    path = tmp_path / "study.journal"
    writer = Journal.open(path, "explore", {"study": "s"})
    assert writer.append_within(trials[:3], 10) == 3
    assert writer.append_within(trials[2:], 4) == 2  # k2 again, then k3; k4 over budget
    fresh = Journal.open(path, "explore", {"study": "s"}).records()
    assert writer.records() == fresh == dict(trials[:4])
    assert path.read_bytes().count(b'"key":"k2"') == 1
