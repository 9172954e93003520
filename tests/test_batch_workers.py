"""Tasks on Dask: every result reaches the caller exactly once even when a worker process is
killed mid-task, a signal stops a run keeping what finished (a rerun over the missing keys
completes it), and a bad scheduler address is one line naming --scheduler."""

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dask
import pytest

from archipelago.batch.journal import Journal
from archipelago.batch.workers import WORKERS_PER_CORE, _chunk_size, dask_client, stream
from archipelago.errors import ArchipelagoError, Interrupted
from tests.dask_cluster import running_cluster
from tests.fuzz.schedulers import local_server

ROOT = Path(__file__).resolve().parents[1]
COUNT = 10  # tasks in the interrupted run


def _die_once(task: tuple[str, int]) -> dict:
    """Kill the worker process running task 3 the first time it runs (a marker file says
    whether it has), after the others have had time to start."""
    marker, value = task
    time.sleep(0.1)
    if value == 3 and not os.path.exists(marker):
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return {"square": value * value, "pid": os.getpid()}


@pytest.mark.parametrize("chunk", [1, 3])
def test_a_worker_killed_mid_task_loses_no_result_and_none_twice(tmp_path, chunk) -> None:
    marker = str(tmp_path / "killed")
    tasks = {f"t{value}": (marker, value) for value in range(8)}
    handed: list[tuple[str, int]] = []
    with dask_client(None, 2) as client:
        stream(client, _die_once, tasks, lambda key, result: handed.append(
            (key, result["square"])), progress="killing", chunk=chunk)
    assert os.path.exists(marker)  # the kill did happen
    assert sorted(handed) == sorted((f"t{value}", value * value) for value in range(8))


@pytest.mark.parametrize("tasks, threads, size", [
    (10, 2, 2),  # 4 chunks per thread: ceil(10 / 8)
    (3, 4, 1),  # fewer tasks than threads
    (10_000, 2, 48),  # capped, so a chunk stays short
    (5, 0, 2),  # a cluster with no worker yet counts as one thread
])
def test_chunk_size_spreads_the_tasks_and_stays_short(tasks, threads, size) -> None:
    assert _chunk_size(tasks, threads) == size


def test_chunks_hand_every_key_its_own_result_once() -> None:
    handed: dict[str, str] = {}

    def keep(key: str, result: str) -> None:
        assert key not in handed
        handed[key] = result

    tasks = {f"k{value}": value for value in range(500)}
    with dask_client(None, 2) as client:
        stream(client, str, tasks, keep)
        stream(client, str, {"alone": 7}, keep, chunk=5)
    assert handed == {key: str(value) for key, value in tasks.items()} | {"alone": "7"}


def _fails(value: int) -> int:
    if value == 2:
        raise ValueError("task two is broken")
    return value


def test_a_failing_task_raises_its_own_error(tmp_path) -> None:
    with dask_client(None, 1) as client, pytest.raises(ValueError, match="task two"):
        stream(client, _fails, {str(v): v for v in range(4)}, lambda key, result: None)


def _slow(key: str) -> dict:
    time.sleep(0.25)
    return {"square": int(key) ** 2}


# A run that resumes from its journal: only the keys missing there are computed; results
# are buffered, and what is held when a signal stops the run is appended on the way out.
RUN = """
import os, sys
from archipelago.batch.journal import Journal
from archipelago.batch.workers import WORKERS_PER_CORE, _chunk_size, dask_client, stream
from archipelago.errors import Interrupted
from tests.test_batch_workers import COUNT, _slow

journal = Journal.open(sys.argv[1], "test", {"what": "squares"})
missing = {str(k): str(k) for k in range(COUNT) if str(k) not in journal.records()}

try:
    with dask_client(None, 2) as client, journal.buffered() as add:
        print("workers", *client.run(os.getpid).values(), flush=True)

        def keep(key, result):
            add(key, result)
            print("done", key, flush=True)

        stream(client, _slow, missing, keep)
except Interrupted as stop:
    print(stop, file=sys.stderr)
    sys.exit(stop.exit_code)
"""


def run_squares(journal: Path, stop_after: int | None = None,
                signum: int = signal.SIGINT) -> tuple[int, list[str], str]:
    """Run RUN in a session of its own; with `stop_after`, send `signum` once that many
    results are in: SIGINT to the whole process group, as a terminal's Ctrl-C does, SIGTERM
    to the run alone, as `kill` does. Returns the exit status, the keys it computed and
    its stderr, once its worker processes are gone too."""
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    run = subprocess.Popen([sys.executable, "-c", RUN, str(journal)], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    assert run.stdout is not None
    done, workers = [], []
    for line in run.stdout:
        word, *rest = line.split()
        if word == "workers":
            workers = [int(pid) for pid in rest]
        elif word == "done":
            done += rest
            if len(done) == stop_after and signum == signal.SIGINT:
                os.killpg(run.pid, signum)
            elif len(done) == stop_after:
                run.send_signal(signum)
    _, stderr = run.communicate(timeout=60)
    assert len(workers) == 2 and all(gone(pid) for pid in workers)
    return run.returncode, done, stderr


def gone(pid: int, wait_s: float = 10.0) -> bool:
    """Whether process `pid` has ended, waiting up to `wait_s` for it."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z":
                return True  # ended, not yet reaped (orphans go to a pid 1 that may not reap)
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def test_signals_stop_cleanly_and_a_rerun_completes_the_set(tmp_path) -> None:
    """A SIGINT, then a SIGTERM in the resumed run, then a run to the end: each stopped run
    kept exactly what it finished, and no key is ever computed twice."""
    journal = tmp_path / "squares.jsonl"
    computed: list[str] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        code, done, stderr = run_squares(journal, stop_after=2, signum=signum)
        assert code == 128 + signum, stderr
        assert f"interrupted by {signal.Signals(signum).name} with " in stderr
        assert "Traceback" not in stderr
        computed += done
        kept = Journal.open(journal, "test", {"what": "squares"}).records()
        assert set(kept) == set(computed) and len(done) >= 2 and len(kept) < COUNT
    code, done, stderr = run_squares(journal)
    assert code == 0, stderr
    assert set(done) == {str(k) for k in range(COUNT)} - set(computed)  # only the missing
    records = Journal.open(journal, "test", {"what": "squares"}).records()
    assert records == {str(k): {"square": k * k} for k in range(COUNT)}
    assert len(journal.read_text().splitlines()) == COUNT + 1  # header + one line per key


def test_an_unreachable_scheduler_is_one_line_naming_the_option() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    with pytest.raises(ArchipelagoError) as caught, dask_client(address, None,
                                                                connect_timeout_s=0.5):
        pass
    assert str(caught.value).startswith(f"--scheduler {address}: no Dask scheduler answered "
                                        "within 0.5 s (waited ")


@contextmanager
def listening(first: bytes) -> Iterator[str]:
    """A TCP server that accepts one connection, writes `first` (nothing: silent) and then
    holds it open, never speaking Dask, until the test is done; its address (the fuzz
    kind's server, which listens before the address is handed out)."""
    with local_server("speaks" if first else "silent", first) as address:
        yield address


@pytest.mark.parametrize("first, says", [
    (b"", "no Dask scheduler answered within 1 s (waited 1."),  # silent
    (struct.pack("<Q", 64) + b"abc", "no Dask scheduler answered within 1 s (waited 1."),
    (b"HTTP/1.1 400 Bad Request\r\n\r\n", "what answered there is not a Dask scheduler"),
    (b"\xff" * 64, "what answered there is not a Dask scheduler"),
])
def test_a_port_that_does_not_speak_dask_is_one_line_within_the_timeout(first, says) -> None:
    """Silent, a frame begun and never finished, garbage: the handshake (connect and the
    first reply) is bounded by the timeout, where Dask's own covers only the connect."""
    with listening(first) as address, pytest.raises(ArchipelagoError) as caught, \
            dask_client(address, None, connect_timeout_s=1.0):
        pass
    assert str(caught.value).startswith(f"--scheduler {address}: {says}")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("count", [0, WORKERS_PER_CORE * len(os.sched_getaffinity(0)) + 1,
                                   1000])
def test_local_workers_are_bounded_by_the_machine(count) -> None:
    cores = len(os.sched_getaffinity(0))
    with pytest.raises(ArchipelagoError) as caught, dask_client(None, count):
        pass
    assert str(caught.value) == (
        f"--workers {count}: give 1 to {WORKERS_PER_CORE * cores} ({WORKERS_PER_CORE} per "
        f"core this process may use, {cores} here; more processes only contend for the "
        "cores)")


@pytest.mark.parametrize("address", ["localhost:8786", "tcp://host", "http://h:1",
                                     "tcp://h:99999", "tcp://h:8786/x"])
def test_a_malformed_scheduler_address_is_refused_before_connecting(address) -> None:
    with pytest.raises(ArchipelagoError, match=r"--scheduler .* is not a scheduler address"), \
            dask_client(address, None):
        pass


def test_importing_archipelago_does_not_import_dask() -> None:
    code = ("import sys, archipelago, archipelago.batch.journal, archipelago.batch.workers; "
            "print([m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=os.environ | {"PYTHONPATH": str(ROOT)}, check=True).stdout
    assert out.strip() == "[]"


def _always_dies(value: int) -> int:
    if value == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return value


def test_a_task_that_keeps_killing_its_workers_is_one_line() -> None:
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}), \
            dask_client(None, 1) as client, pytest.raises(ArchipelagoError) as caught:
        stream(client, _always_dies, {"one": 1}, lambda key, result: None)
    assert str(caught.value) == ("the worker processes running task 'one' died 2 times; "
                                 "stopped with 0 of 1 tasks finished")


def test_a_running_cluster_serves_and_losing_it_is_one_line() -> None:
    with running_cluster() as (address, cluster):
        handed = []

        def lose_it(key: str, result: dict) -> None:
            handed.append(key)
            if len(handed) == 2:
                os.killpg(cluster.pid, signal.SIGKILL)

        with dask_client(address, None) as client:
            stream(client, _slow, {"0": "0", "1": "1"}, lambda key, result: handed.append(key))
            assert sorted(handed) == ["0", "1"]
            handed.clear()
            with pytest.raises(ArchipelagoError) as caught:
                stream(client, _slow, {str(k): str(k) for k in range(6)}, lose_it)
        assert "(scheduler-connection-lost); stopped with 2 of 6 tasks finished" in str(
            caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("signals, says, kept", [
    (1, "interrupted by SIGINT with 1 of 4 tasks finished", 1),
    (2, "interrupted by SIGINT again; stopped at once", 0),
])
def test_a_signal_during_on_done_waits_for_it_a_second_stops_at_once(signals: int, says: str,
                                                                     kept: int) -> None:
    """`on_done` signals its own process: one SIGINT lets it finish (the result is kept) and
    stops before the next; a second raises at once, inside it."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    handed: list[str] = []

    def on_done(key: str, result: str) -> None:
        for _ in range(signals):
            signal.raise_signal(signal.SIGINT)  # its handler has run when this returns
        handed.append(key)

    with dask_client(None, 1) as client, pytest.raises(Interrupted) as caught:
        stream(client, str, {str(k): k for k in range(4)}, on_done)
    assert str(caught.value) == says and caught.value.exit_code == 130
    assert len(handed) == kept
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
