"""What does one `archi` call cost before it does any work? Every script, sweep and progress
bar that calls the CLI pays its start-up (issue 31 target: `archi plan gpt2-1.5b --json`
under 0.35 s of CPU and under 5x a bare interpreter). Prints, side by side, the CPU time
(user + sys of the child process, so other jobs on a shared machine do not count) of each
command, the median and best of several runs, and each median's ratio to the bare
interpreter's. Each command runs once untimed first, with bytecode caching on (an
environment's PYTHONDONTWRITEBYTECODE is dropped for the children), so the figures are an
installed package's, not a first run's that compiles every module. Not a pass/fail test.

    python -m benchmarks.bench_cli [--repeats N]
"""

import argparse
import os
import statistics
import subprocess
import sys

ARCHI = [sys.executable, "-m", "archipelago"]
CASES = [("python -c pass", [sys.executable, "-c", "pass"]),
         ("import archipelago", [sys.executable, "-c", "import archipelago"]),
         # What `archi plan` cannot do without: the CLI, its tables, the typed models and
         # the estimator's arrays, imported and nothing run (the floor of the next line).
         ("import its libraries", [sys.executable, "-c", "import numpy, pydantic, typer, "
                                   "yaml, rich.console, rich.table"]),
         ("archi plan gpt2-1.5b --json", [*ARCHI, "plan", "gpt2-1.5b", "--json"]),
         ("archi catalog", [*ARCHI, "catalog"]),
         ("archi compare --help", [*ARCHI, "compare", "--help"])]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def child_cpu_s(command: list[str]) -> float:
    """User + sys seconds of one run of `command` (its output discarded), from the kernel's
    accounting of the child itself (os.wait4), not the wall clock."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=ENV)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    errors = process.stderr.read().decode() if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {process.returncode}: {errors}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="runs of each command")
    repeats = parser.parse_args().repeats
    times: dict[str, list[float]] = {name: [] for name, _ in CASES}
    for _, command in CASES:  # writes the bytecode caches
        child_cpu_s(command)
    for _ in range(repeats):  # interleaved, so a burst of load hits every command alike
        for name, command in CASES:
            times[name].append(child_cpu_s(command))
    bare = statistics.median(times[CASES[0][0]])
    print(f"{'command':30} {'median CPU':>11} {'best CPU':>10} {'x bare':>7}  ({repeats} runs)")
    for name, _ in CASES:
        median = statistics.median(times[name])
        print(f"{name:30} {median * 1e3:8.0f} ms {min(times[name]) * 1e3:7.0f} ms "
              f"{median / bare:7.1f}")


if __name__ == "__main__":
    main()
