"""Ownership of an emulation's processes and files, however the launcher ends.

The launcher starts ranks through multiprocessing's fork server, which, with its resource
tracker, outlives a launcher killed by a signal (a rank keeps the server's liveness pipe
open), and no code in a SIGKILLed launcher can clean up. So each launcher starts one small
reaper process (no torch; its own session, so a terminal's Ctrl-C reaches only the
launcher) and holds the only write end of its stdin. Through it the launcher says, a line
each:

    dir PATH    a run directory exists         done PATH   the launcher removed it
    scan        record my helper processes now (answered `ok`)
    also PATH   remove PATH at the end too (multiprocessing's own temporary directory,
                told before it exists, and the command's scratch directory: only a
                launcher that exits normally removes them)

End of file means the launcher is gone (exit, exception, signal, SIGKILL): the reaper
SIGKILLs the helpers it recorded (the fork server, the resource tracker and every rank
forked from them), removes the directories still listed, and exits. A rank forked after
the last scan dies with its fork server, and a rank forked from the launcher itself
(launch._forked_here) with the launcher (watchdog.die_with_parent).
"""

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from archipelago.errors import ArchipelagoError, signals_as_errors
from archipelago.processes import all_pids, command_line, parent_of, start_time
from archipelago.scratch import current_scratch

HELPER_MARK = "multiprocessing"  # in the fork server's and the resource tracker's command line
POLL_S = 0.25  # how often the reaper looks for new helpers while a run is in progress
EXIT_WAIT_S = 3.0  # how long it waits for killed processes to go before removing files


def helpers_of(launcher: int) -> dict[int, str | None]:
    """The launcher's multiprocessing helpers and all their descendants, with start times."""
    parents = {pid: parent_of(pid) for pid in all_pids()}
    todo = [pid for pid, ppid in parents.items()
            if ppid == launcher and HELPER_MARK in command_line(pid)]
    owned: dict[int, str | None] = {}
    while todo:
        pid = todo.pop()
        if pid not in owned:
            owned[pid] = start_time(pid)
            todo.extend(child for child, ppid in parents.items() if ppid == pid)
    return owned


def _end(owned: dict[int, str | None], dirs: set[str]) -> None:
    alive = {pid: t for pid, t in owned.items() if t is not None and start_time(pid) == t}
    for pid in alive:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + EXIT_WAIT_S
    while time.monotonic() < deadline and any(
            start_time(p) == t and Path(f"/proc/{p}/exe").exists() for p, t in alive.items()):
        time.sleep(0.02)  # a zombie has no exe link: it runs no more code
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)


def serve(launcher: int) -> None:
    """The reaper's loop: follow the launcher's messages until its end, then clean up."""
    owned: dict[int, str | None] = {}
    dirs: set[str] = set()
    leftovers: set[str] = set()
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], POLL_S if dirs else None)
        if ready:
            chunk = os.read(0, 4096)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                verb, _, arg = line.decode().partition(" ")
                if verb == "dir":
                    dirs.add(arg)
                elif verb == "done":
                    dirs.discard(arg)
                elif verb == "also":
                    leftovers.add(arg)
                elif verb == "scan":
                    owned.update(helpers_of(launcher))
                    os.write(1, b"ok\n")
        if dirs:
            owned.update(helpers_of(launcher))
    _end(owned, dirs | leftovers)


_reaper: subprocess.Popen | None = None
_lock = threading.Lock()


def _start_reaper() -> subprocess.Popen:
    """Holding neither the launcher's output pipes (a reader waiting for their end would
    wait for it too) nor its working directory; finding this package wherever it is."""
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    return subprocess.Popen(
        [sys.executable, "-m", "archipelago.emulate.reaper", str(os.getpid())],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/",
        env={**os.environ, "PYTHONPATH": path}, start_new_session=True)


def _running() -> subprocess.Popen:
    """The reaper, started first if needed (call with `_lock` held). Its interpreter starts
    while the launcher goes on: what it is told meanwhile waits in its pipe, read once it
    runs, end of file included."""
    global _reaper
    if _reaper is None or _reaper.poll() is not None:
        _reaper = _start_reaper()
    return _reaper


def _tell(line: str) -> None:
    """Send the reaper a line (starting it first if needed); `scan` waits for its answer."""
    with _lock:
        reaper = _running()
        assert reaper.stdin is not None and reaper.stdout is not None
        reaper.stdin.write(f"{line}\n".encode())
        reaper.stdin.flush()
        if line == "scan":
            reaper.stdout.readline()


def _announced_mp_temp_dir() -> None:
    """Make multiprocessing's per-process temporary directory (which holds the fork
    server's socket) ourselves, once, after telling the reaper its name: made by
    multiprocessing it existed before the reaper could hear of it. The name has
    multiprocessing's own length (AF_UNIX socket paths are short)."""
    from multiprocessing import process, util

    config = getattr(process.current_process(), "_config", None)  # where util looks
    if config is None or config.get("tempdir") is not None:
        return
    # Beside the command's scratch directory, not inside it: the server's socket path in
    # it must stay within AF_UNIX's 107 bytes under a long TMPDIR.
    scratch = current_scratch()
    base = scratch.parent if scratch is not None else Path(tempfile.gettempdir())
    path = base / f"pymp-{os.urandom(4).hex()}"
    _check_socket_room(path)
    _tell(f"also {path}")
    path.mkdir(mode=0o700)
    util.Finalize(None, shutil.rmtree, args=(str(path), True), exitpriority=-100)
    config["tempdir"] = str(path)


# A Unix socket's path holds 107 bytes and a NUL (unix(7), sun_path); the fork server's
# listener is `listener-` and 8 random characters in its directory (multiprocessing's
# forkserver, `tempfile.mktemp(prefix="listener-")`).
SOCKET_PATH_MAX = 107
LISTENER_NAME = len("/listener-") + 8


def _check_socket_room(directory: Path) -> None:
    """Refuse in one line a temporary directory too deep for the fork server's socket,
    which multiprocessing would report as a traceback once the ranks start."""
    length = len(os.fsencode(directory)) + LISTENER_NAME
    if length > SOCKET_PATH_MAX:
        room = SOCKET_PATH_MAX - LISTENER_NAME - len("/pymp-") - 8
        raise ArchipelagoError(f"TMPDIR '{directory.parent}' is too long for the emulation's "
                               f"fork server socket ({length} bytes, AF_UNIX takes "
                               f"{SOCKET_PATH_MAX}); set TMPDIR to a directory of at most "
                               f"{room} bytes")


def start_fork_server(preload: list[str]) -> bool:
    """Start multiprocessing's fork server (and resource tracker) so that this launcher
    owns what they leave: their temporary directory is announced to the reaper before it
    exists, so a SIGKILL before `record_helpers` cannot leave it behind; and SIGINT is
    ignored by them and the ranks they fork, so a Ctrl-C, which reaches the whole process
    group, leaves the run to the launcher to stop (the server, still importing torch,
    printed a KeyboardInterrupt traceback). True when a server started now: it is still
    importing `preload` (torch's import: 1.3-3 s of one core), while a server an earlier
    run of this process started is reused as it is."""
    from multiprocessing import forkserver

    _announced_mp_temp_dir()
    forkserver.set_forkserver_preload(preload)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    server = forkserver._forkserver  # multiprocessing's one server; its pid says if it is new
    running = server._forkserver_pid
    try:
        forkserver.ensure_running()
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return server._forkserver_pid != running


def _fork_server_running() -> bool:
    from multiprocessing import forkserver

    return forkserver._forkserver._forkserver_pid is not None


def record_helpers() -> None:
    """Have the reaper record this process's helpers now (call once ranks have started).
    Ranks forked from this process (launch._forked_here) start no fork server, but
    multiprocessing's temporary directory is made here then, announced as the server's is."""
    from multiprocessing import util

    _announced_mp_temp_dir()
    _tell(f"also {util.get_temp_dir()}")
    _tell("scan")


@contextmanager
def owned_run_dir() -> Iterator[Path]:
    """A temporary directory for one run, removed with every process of the run when the run
    ends or this process does, however. SIGINT and SIGTERM end the run as an error (exit
    130 or 143) saying every rank was stopped."""
    with _lock:  # the reaper started before there is anything to lose, not waited for
        fresh = _reaper is None or _reaper.poll() is not None  # (its interpreter's start:
        _running()  # 40-60 ms of a first call, issue 36)
    if fresh and _fork_server_running():  # an earlier run's server, recorded by a new reaper
        _tell("scan")
    scratch = current_scratch()
    if scratch is not None:  # the command's own, which holds this run's directory
        _tell(f"also {scratch}")
    path = tempfile.mkdtemp(prefix="archipelago-emulate-")
    try:
        _tell(f"dir {path}")
        with signals_as_errors("; every rank was stopped"):
            yield Path(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)
        with suppress(OSError):
            _tell(f"done {path}")


if __name__ == "__main__":
    serve(int(sys.argv[1]))
