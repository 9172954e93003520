"""How much CPU does the default `archi compare` cost from a cold store (issue 36: the
default is `--engine best`, one engine search per device, count and strategy, each ~2,000
trials)? Runs the default command `archi compare gpt2-1.5b --tokens 64:64 --json` and
`archi compare llama2-7b --tokens 128:128 --latency-target 500ms --json`, each with an empty
cache directory, today's code beside each of BASES, all in this run and interleaved (a
round runs every tree once, so a shared machine's load falls on all alike; the figure is
each tree's median over the rounds): each in its own subprocess, a base importing
`archipelago` from a `git worktree` made for the run and removed after. Prints each one's
CPU (the subprocess's user + system) and whether each base's `--json` output (the store's
path, which names the temporary cache directory, aside) and explore store (every study
journal, byte for byte) are the same as today's. Needs the repository's history (a clone,
not an export). Not a test.

    python -m benchmarks.bench_best_compare [ROUNDS]
"""

import os
import resource
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from benchmarks.base_commit import ROOT, checked_out

BASES = {  # commit: what it is before
    "62b58a6c117df5b2be5399106d529c2ef8fa2cd8": "the search's per-trial cuts",
    "cccdce5deafc0ed19b4f692dadafee1bf0ce3b17": "batched DFX scoring and fewer journal costs",
    "8fee7f12a552661310c630a6ce7540e2068885a7": "the search's bookkeeping in bulk",
}
COMMANDS = (("compare", "gpt2-1.5b", "--tokens", "64:64", "--json"),
            ("compare", "llama2-7b", "--tokens", "128:128", "--latency-target", "500ms",
             "--json"))


def cold_run(source: Path, command: tuple[str, ...]) -> tuple[float, bytes, dict[str, bytes]]:
    """(CPU seconds, `--json` output with the cache directory's path blanked, the explore
    store's journals by name) of `command` importing `archipelago` from `source`, in a
    fresh cache directory."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": str(source), "XDG_CACHE_HOME": cache}
        env.pop("ARCHIPELAGO_CACHE_DIR", None)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run = subprocess.run([sys.executable, "-m", "archipelago", *command], env=env,
                             check=True, capture_output=True, cwd=source)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        store = {p.name: p.read_bytes() for p in Path(cache).rglob("*.journal")}
        return cpu, run.stdout.replace(cache.encode(), b"<cache>"), store


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    with ExitStack() as stack:
        trees = {commit[:9]: stack.enter_context(checked_out(commit)) for commit in BASES}
        trees["now"] = ROOT
        for command in COMMANDS:
            cpu: dict[str, list[float]] = {name: [] for name in trees}
            found: dict[str, tuple[bytes, dict[str, bytes]]] = {}
            for _ in range(rounds):
                for name, source in trees.items():
                    seconds, out, store = cold_run(source, command)
                    cpu[name].append(seconds)
                    found[name] = (out, store)
            print(f"archi {' '.join(command)}, cold store: CPU s (median of {rounds})")
            now = statistics.median(cpu["now"])
            for (name, seconds), why in zip(cpu.items(), [*BASES.values(), ""], strict=True):
                if name == "now":
                    continue
                before = statistics.median(seconds)
                out, store = found[name]
                same = ("identical" if out == found["now"][0] else "DIFFERENT",
                        "identical" if store == found["now"][1] else "DIFFERENT")
                print(f"  before {why} ({name}): {before:.2f} -> now {now:.2f} s "
                      f"({before / now:.1f}x); --json {same[0]}, explore store {same[1]} "
                      f"({len(store)} journals)")


if __name__ == "__main__":
    main()
