"""The emulation launcher owns its processes and files: stopped while a rank hangs (SIGKILL,
which it cannot react to, SIGTERM or SIGINT), it leaves no rank, fork server, resource
tracker or temporary directory behind within a few seconds; a failed run removes its
directory too."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from archipelago.api import emulate
from archipelago.emulate.errors import RankFailure
from archipelago.emulate.watchdog import FAULT_ENV
from archipelago.emulate.worker import rank_threads
from tests.signals import default_sigint
from tests.test_emulate import GPT2, write_config
from tests.test_emulate_failures import CLEANUP_S, processes_with, rank_processes, stall_s


def wait_for_hang(tmp: Path, launcher: subprocess.Popen, deadline_s: float = 120,
                  ranks: int = 2) -> Path:
    """The run directory once rank 0 hangs before its 3rd collective and every other rank
    waits at its 3rd."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and launcher.poll() is None:
        for run_dir in tmp.glob("archipelago-*/archipelago-emulate-*"):  # in the command's
            board = run_dir / "progress"
            if board.exists() and board.stat().st_size == 8 * ranks:
                counts = np.fromfile(board, np.int64)
                if counts[0] == 2 and all(counts[1:] == 3):
                    return run_dir
        time.sleep(0.2)
    raise AssertionError(f"the run never hung; launcher status {launcher.poll()}")


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """An empty TMPDIR in which the fork server's socket path fits AF_UNIX's 108 bytes: a
    pytest-xdist worker's tmp_path (.../popen-gw0/test_.../tmp) is too long for it."""
    path = Path(tempfile.mkdtemp(prefix="own-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _launch_processes(ranks: int) -> int:
    """The launcher, its reaper and the ranks, and where the ranks fork from the fork
    server (a rank of several torch threads: launch._forked_here) that server and the
    resource tracker."""
    return 2 + ranks + (2 * (rank_threads(ranks) > 1))


# Each signal on two ranks, which fork from the launcher on up to three cores (one torch
# thread each), and SIGKILL on one rank (every core's threads: forked from the fork server).
@pytest.mark.parametrize(("signum", "ranks"), [
    (signal.SIGKILL, 2), (signal.SIGTERM, 2), (signal.SIGINT, 2), (signal.SIGKILL, 1)])
def test_a_killed_launcher_leaves_no_process_and_no_directory(tmp_path, short_tmp,
                                                              signum, ranks) -> None:
    config = write_config(tmp_path / "gpt2", GPT2)
    tmp = short_tmp
    marker = f"archipelago-test-{uuid.uuid4()}"
    env = {**os.environ, FAULT_ENV: "0:hang:3", "TMPDIR": str(tmp),
           "ARCHIPELAGO_TEST_MARKER": marker}
    launcher = subprocess.Popen([sys.executable, "-m", "archipelago", "emulate", config,
                                 "--cluster", f"{ranks}xu280", "--tokens", "4:4",
                                 "--timeout", "300"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=default_sigint)
    try:
        wait_for_hang(tmp, launcher, ranks=ranks)
        time.sleep(0.5)  # let the reaper's periodic scan run too, not only the first one
        # a test that sees fewer would prove nothing about them
        assert len(processes_with(marker)) >= _launch_processes(ranks)
        launcher.send_signal(signum)
        _, stderr = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
    deadline = time.monotonic() + CLEANUP_S
    while time.monotonic() < deadline and (processes_with(marker) or any(tmp.iterdir())):
        time.sleep(0.1)
    assert processes_with(marker) == [] and list(tmp.iterdir()) == []
    if signum != signal.SIGKILL:
        assert launcher.returncode == 128 + signum
        assert stderr == f"error: interrupted by {signum.name}; every rank was stopped\n"


def test_a_failed_run_removes_its_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    fault = "1:raise:3"
    monkeypatch.setenv(FAULT_ENV, fault)
    with pytest.raises(RankFailure,
                       match=r"rank 1 \(u280 'u280_1', tensor shard 2 of 2\) failed"):
        emulate(write_config(tmp_path / "gpt2", GPT2), "2xu280", "dfx", {"tokens": "4:4"},
                timeout_s=stall_s(fault))
    assert list(tmp_path.glob("archipelago-emulate-*")) == []  # pymp-*: the launcher's own
    assert rank_processes() == []
