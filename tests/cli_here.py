"""The `archi` command run in this process (typer's CliRunner), returned as the
CompletedProcess a `python -m archipelago` subprocess gives, so a test written against one
reads the other. For tests of what a command says and does, where a fresh interpreter (its
start-up, signals, a library's first warning) is not what they check: each start-up avoided
is Python's plus torch's or optuna's import, seconds apiece (issue 36 point 5)."""

import os
import subprocess
import traceback
from pathlib import Path

from typer.testing import CliRunner

from archipelago.cli import app


def archi_here(*args: str, cwd: Path | str | None = None) -> subprocess.CompletedProcess:
    """`archi ARGS` in `cwd`, with COLUMNS unset as cli_process.archi leaves it (so a
    table reads the same whatever width the runner set); an exception the CLI let through
    ends stderr as the traceback a subprocess would print, so tests that refuse tracebacks
    still see one."""
    before = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, list(args), env={"COLUMNS": None})
    finally:
        os.chdir(before)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "Traceback (most recent call last):\n" + "".join(
            traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["archi", *args], result.exit_code, result.stdout,
                                       stderr)
