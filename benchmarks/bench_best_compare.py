"""How much CPU does the default `archi compare` cost from a cold store (issue 36: the
default is `--engine best`, one engine search per device, count and strategy, each ~2,000
trials)? Runs `archi compare llama2-7b --tokens 128:128 --latency-target 500ms --json`
with an empty cache directory, today's code beside commit BASE (before the search's
per-trial costs were cut), both in this run: each in its own subprocess, BASE importing
`archipelago` from a `git worktree` made for the run and removed after. Prints each one's
CPU (the subprocess's user + system) and whether the two `--json` outputs are the same
bytes (the store's path, which names the temporary cache directory, aside). Needs the
repository's history (a clone, not an export). Not a test.

    python -m benchmarks.bench_best_compare
"""

import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.base_commit import ROOT, checked_out

BASE = "62b58a6c117df5b2be5399106d529c2ef8fa2cd8"  # before the search's per-trial cuts
COMMAND = ("compare", "llama2-7b", "--tokens", "128:128", "--latency-target", "500ms",
           "--json")


def cold_run(source: Path) -> tuple[float, bytes]:
    """(CPU seconds, `--json` output with the cache directory's path blanked) of COMMAND
    importing `archipelago` from `source`, in a fresh cache directory."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": str(source), "XDG_CACHE_HOME": cache}
        env.pop("ARCHIPELAGO_CACHE_DIR", None)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run = subprocess.run([sys.executable, "-m", "archipelago", *COMMAND], env=env,
                             check=True, capture_output=True, cwd=source)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return cpu, run.stdout.replace(cache.encode(), b"<cache>")


def main() -> None:
    with checked_out(BASE) as base:
        before, old = cold_run(base)
    now, new = cold_run(ROOT)
    print(f"archi {' '.join(COMMAND)}, cold store: CPU s, before ({BASE[:9]}) -> now")
    print(f"{before:.2f} -> {now:.2f} s ({before / now:.1f}x); --json output "
          f"{'identical' if old == new else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
