"""Emulation failures: bad requests stop before any process starts; a rank that raises, dies
or hangs stops the whole run within 60 s, named with its reason, leaving no process behind."""

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from archipelago.api import emulate
from archipelago.emulate import launch
from archipelago.emulate.errors import EmulationError, RankFailure
from archipelago.emulate.watchdog import FAULT_ENV
from archipelago.errors import ArchipelagoError, PartitionError, UnknownNameError
from tests.test_emulate import GPT2, OPT, write_config


@pytest.fixture
def gpt2_config(tmp_path: Path) -> str:
    return write_config(tmp_path / "gpt2", GPT2)


CLEANUP_S = 10.0  # "within a few seconds", with slack for a loaded 2-core machine


def processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds `marker` (zombies have no readable one)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker.encode() in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


def stall_s(fault: str) -> float:
    """The watchdog's stall timeout for a run with `fault`: short where the test waits for
    it (a hang), long elsewhere, where a rank's exit is seen at once and a loaded machine's
    slow collective must not read as a hang."""
    return 5.0 if ":hang:" in fault else 300.0


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def rank_processes() -> list[int]:
    """Ranks are children of the fork server, itself a child of this test process."""
    servers = [pid for pid in _children(os.getpid())
               if b"forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    return [rank for server in servers for rank in _children(server)]


@pytest.mark.parametrize(("model", "cluster", "options", "error", "message"), [
    ("gpt2", "3xu280", {}, EmulationError, r"on 3 ranks: emulation runs even splits only"),
    ("gpt2", "5xu280", {}, PartitionError, r"5 devices exceed its 4 attention heads"),
    ("gpt2-vocab1", "2xu280", {}, PartitionError,
     r"vocabulary \(1 tokens\) is smaller than the device count \(2\)"),
    ("gpt9", "2xu280", {}, UnknownNameError, "unknown model 'gpt9'"),
    ("opt-proj", "2xu280", {}, EmulationError, "project_in/project_out"),
    ("gpt2", "2xu280", {"tokens": "60:10"}, EmulationError, "70 tokens exceed"),
    ("gpt2", "2xu280", {"precision": "bf16"}, UnknownNameError, "unknown precision 'bf16'"),
    ("gpt2", "2xu280", {"checkpoint": "/proc/no-such-dir"}, EmulationError, "not a directory"),
    ("gpt2", "2xu280", {"strategy": "magic"}, UnknownNameError, "unknown strategy 'magic'"),
    ("gpt2", "2xu280", {"timeout_s": 0}, ArchipelagoError, "must be a number of seconds"),
])
def test_bad_requests_are_rejected_before_any_process_starts(
        model, cluster, options, error, message, tmp_path, monkeypatch) -> None:
    def no_processes(*args: object) -> None:
        raise AssertionError("a rank process was about to start")

    monkeypatch.setattr(launch, "run_ranks", no_processes)
    paths = {"gpt2": write_config(tmp_path / "gpt2", GPT2),
             "gpt2-vocab1": write_config(tmp_path / "vocab1", {**GPT2, "vocab_size": 1}),
             "opt-proj": write_config(tmp_path / "opt", {**OPT, "word_embed_proj_dim": 16})}
    args = {"tokens": "4:4", "strategy": "dfx", **options}
    strategy = args.pop("strategy")
    kind = {k: args.pop(k) for k in ("tokens", "precision", "checkpoint") if k in args}
    with pytest.raises(error, match=message):
        emulate(paths.get(model, model), cluster, strategy, kind, **args)


@pytest.mark.parametrize(("fault", "reason"), [
    ("1:raise:7", "rank 1 (u280 'u280_1', tensor shard 2 of 2) failed: RuntimeError: "
                  "injected fault before collective 7"),
    ("1:kill:7", "rank 1 (u280 'u280_1', tensor shard 2 of 2) killed by signal SIGKILL "
                 "(the kernel's out-of-memory killer, or a kill -9)"),
    ("0:hang:7", "rank 0 (u280 'u280_0', tensor shard 1 of 2) hung: stopped after 6 "
                 "collectives while others reached 7"),
])
def test_a_failing_rank_stops_every_rank(fault, reason, gpt2_config, monkeypatch) -> None:
    monkeypatch.setenv(FAULT_ENV, fault)
    start = time.monotonic()
    with pytest.raises(RankFailure) as caught:
        emulate(gpt2_config, "2xu280", "dfx", {"tokens": "4:4"}, timeout_s=stall_s(fault))
    assert reason in str(caught.value)
    assert time.monotonic() - start < 60
    assert rank_processes() == []


def test_a_failing_pipeline_rank_is_named_by_its_stage_and_shard(gpt2_config,
                                                                monkeypatch) -> None:
    """Rank 3 of tp=2 x pp=2 emulates the second shard of the second stage."""
    fault = "3:raise:2"
    monkeypatch.setenv(FAULT_ENV, fault)
    with pytest.raises(RankFailure) as caught:
        emulate(gpt2_config, "2x2xu280", "dfx", {"tokens": "4:4", "split": "tp=2,pp=2"},
                timeout_s=stall_s(fault))
    assert str(caught.value) == ("rank 3 (u280 'u280_3', pipeline stage 2 of 2, tensor shard "
                                 "2 of 2) failed: RuntimeError: injected fault before "
                                 "collective 2")
    assert rank_processes() == []


def test_cli_names_the_killed_rank_on_one_line_and_leaves_no_orphans(gpt2_config) -> None:
    marker = f"archipelago-test-{uuid.uuid4()}"
    env = {**os.environ, FAULT_ENV: "1:kill:5", "ARCHIPELAGO_TEST_MARKER": marker}
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "archipelago", "emulate", gpt2_config,
                          "--cluster", "4xu280", "--tokens", "4:4", "--json"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert time.monotonic() - start < 60
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == ("error: rank 1 (u280 'u280_1', tensor shard 2 of 4) killed "
                                  "by signal SIGKILL (the kernel's out-of-memory killer, or "
                                  "a kill -9)")
    deadline = time.monotonic() + CLEANUP_S  # the fork server exits once the launcher is gone
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker) == []

