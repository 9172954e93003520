"""The `archi` process ends without the interpreter's teardown once a heavy library is loaded
(quick_exit.py), and loses nothing a user would see: the status, every byte written to a
pipe, exit handlers; and it ends the ordinary way where that matters (a running non-daemon
thread, a message as the exit)."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# A command in a fresh process, with onnx (one of quick_exit's heavy modules) loaded. The
# object at module level says so when the interpreter's teardown collects it: it speaks only
# on the ordinary exit.
SCRIPT = textwrap.dedent("""
    import atexit, sys, threading
    import onnx
    from archipelago.quick_exit import run_then_exit

    class Torn:
        def __del__(self):
            sys.stderr.write("torn down\\n")

    torn = Torn()
    atexit.register(lambda: open(sys.argv[1], "w").write("handler ran"))

    def command():
        sys.stdout.write("x" * 1_000_000)  # more than a pipe holds: flushed at exit
        {body}

    run_then_exit(command)
""")


def run(tmp_path: Path, body: str) -> tuple[subprocess.CompletedProcess, Path]:
    marker = tmp_path / "handler"
    script = SCRIPT.format(body=body)
    return subprocess.run([sys.executable, "-c", script, str(marker)], capture_output=True,
                          text=True, timeout=120), marker


@pytest.mark.parametrize(("body", "status"), [("pass", 0), ("raise SystemExit(2)", 2),
                                              ("raise SystemExit(None)", 0)])
def test_a_plain_status_skips_the_teardown_and_keeps_output_and_handlers(tmp_path, body,
                                                                          status):
    done, marker = run(tmp_path, body)
    assert done.returncode == status
    assert done.stdout == "x" * 1_000_000
    assert marker.read_text() == "handler ran"
    assert "torn down" not in done.stderr


def test_a_message_as_the_exit_ends_the_ordinary_way(tmp_path):
    done, marker = run(tmp_path, "raise SystemExit('stopped: a reason')")
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == "stopped: a reason"
    assert "torn down" in done.stderr
    assert marker.read_text() == "handler ran"


def test_a_running_non_daemon_thread_is_waited_for(tmp_path):
    """The thread ends only once the main thread has (the ordinary exit marks it so before
    joining the others), so it is still running when the command returns."""
    late = tmp_path / "late"
    body = ("threading.Thread(target=lambda: (threading.main_thread().join(), "
            f"open({str(late)!r}, 'w').write('finished'))).start()")
    done, marker = run(tmp_path, body)
    assert done.returncode == 0
    assert late.read_text() == "finished"
    assert "torn down" in done.stderr
    assert marker.read_text() == "handler ran"
