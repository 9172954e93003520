"""`archi` commands each in a process as fresh as `python -m archipelago` for what the command
itself does (its loggers, Python's warning registries and torch's warn-once flags untouched),
forked from one interpreter that imported the CLI and the modules the commands will import
(`preload`) once: a fresh interpreter per command paid those imports (torch and what reading
a .pt2 imports: 1.5-2 s of CPU apiece, issue 36 point 5). What that interpreter printed while
importing, a fresh command would have printed too: `FreshCli.imports_said` keeps it for the
tests to refuse.

Run as `python -m tests.fresh_cli MODULE...`, it is that interpreter: one request a line on
stdin (JSON: cwd, stdout file, stderr file, arguments), one exit status a line on stdout."""

import json
import os
import select
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 300  # a hang guard, as subprocess.run's timeout was


class FreshCli:
    """The forking interpreter, started once; `run` answers as `subprocess.run` would."""

    def __init__(self, folder: Path, preload: list[str]) -> None:
        self.folder, self.count = folder, 0
        said = folder / "imports.err"
        with said.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.fresh_cli", *preload],
                                         cwd=ROOT,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, text=True)
        assert self.proc.stdout.readline() == "ready\n", said.read_text()
        self.imports_said = said.read_text()

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess:
        self.count += 1
        out, err = (self.folder / f"{self.count}.{name}" for name in ("out", "err"))
        self.proc.stdin.write(json.dumps([str(cwd), str(out), str(err), list(args)]) + "\n")
        self.proc.stdin.flush()
        if not select.select([self.proc.stdout], [], [], TIMEOUT_S)[0]:
            raise subprocess.TimeoutExpired(["archi", *args], TIMEOUT_S)
        code = int(self.proc.stdout.readline())
        return subprocess.CompletedProcess(["archi", *args], code, out.read_text(),
                                           err.read_text())

    def close(self) -> None:
        """Killed: it has nothing left to say, and its exit would tear torch down (seconds)."""
        self.proc.kill()
        self.proc.wait(timeout=60)
        self.proc.stdin.close()
        self.proc.stdout.close()


def _serve(preload: list[str]) -> None:
    import importlib

    from archipelago.cli import app

    for module in preload:
        importlib.import_module(module)

    print("ready", flush=True)
    sys.stderr.flush()
    for line in sys.stdin:
        cwd, out, err, args = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the command: its exit (SystemExit, or a traceback) ends this child
            os.chdir(cwd)
            for fd, path in ((1, out), (2, err)):
                file = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(file, fd)
                os.close(file)
            sys.argv = ["archi", *args]
            app()
            raise SystemExit(0)  # not reached: typer exits itself
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)


if __name__ == "__main__":
    _serve(sys.argv[1:])
