"""Child processes of the signal tests start with SIGINT at its default: a shell starts
background jobs (CI steps, `make test &`) with SIGINT ignored, Python then installs no
KeyboardInterrupt handler, and a test that sends SIGINT would test the shell instead.

A test that signals a command waits until the command catches that signal, which the
kernel reports in /proc/PID/status (proc(5), SigCgt): a fixed sleep before the signal
raced the handler's installation on a loaded machine, and the command died of it."""

import signal
import subprocess
import time
from pathlib import Path


def default_sigint() -> None:
    """A `preexec_fn`: SIGINT back to its default in the child before it runs."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler installed for `signum` (Linux's SigCgt mask)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signum - 1)))
    return False


def wait_until_caught(proc: subprocess.Popen, signum: int, deadline_s: float = 120) -> None:
    """Return once `proc` catches `signum`; fail if it exits or never does within
    `deadline_s` (a bound on a stuck run, not a guess at how long starting takes)."""
    deadline = time.monotonic() + deadline_s
    while proc.poll() is None and time.monotonic() < deadline:
        if catches(proc.pid, signum):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {proc.pid} never caught signal {signum} "
                         f"(exit status {proc.poll()})")
