"""Issue 36's speed figures in one run, each beside today's: the default comparison in
process and on Dask, and from a cold cache (its engine searches), when Dask pays for its
start-up, the automatic split from 8 to 256 boards, CHEF's VLocNet search, the emulation of
gpt2-345m on 2 and 4 ranks against one-process transformers, and the `archi` process's
exit. Each benchmark runs in its own interpreter, in turn (one at a time: they time the
CPU), and prints its own table; "before" figures are measured in the same run where the
benchmark can (Dask's path, a git worktree of the split search's base commit) and
otherwise are the constants its module cites. About 5 minutes on the project's 2-core
machine; figures are indicative on a shared one.

    python -m benchmarks.issue36
"""

import subprocess
import sys
import time

# (target of issue 36, "Speed targets"; what "before" is; the benchmark's command line)
SECTIONS = [
    ("default `archi compare` (200 combinations) under 1.0 s of CPU in process; --workers 2 "
     "gives the same rows",
     "before: Dask's path, the default until issue 36 (its row, same run)",
     ["benchmarks.bench_compare", "--workers", "2"]),
    ("the default `archi compare` from a cold cache (`--engine best`: an engine search per "
     "strategy, device and count before the rows), same target",
     "before: the searches at their base commits, same run, outputs compared byte for byte",
     ["benchmarks.bench_best_compare"]),
    ("point 1's threshold: when does --workers 2 pay for Dask's start-up",
     "in process and Dask, same run, from 200 to 3000 combinations",
     ["benchmarks.bench_dask_threshold", "--batches", "1,15"]),
    ("--split auto for Llama-2-70B on 256 boards under 50 ms, growth exponent 8-256 <= 1",
     "before: the search at its base commit, same run",
     ["benchmarks.bench_split_scale"]),
    ("CHEF full VLocNet search under 1 s of CPU",
     "before: CPU seconds at commit c25f408 (bench_chef.BEFORE_CPU_S)",
     ["benchmarks.bench_chef"]),
    ("emulation of gpt2-345m at most 2x one-process transformers on 4 ranks, 1.5x on 2",
     "before: the emulator at commit cccdce5, same run; judged on a process's first call",
     ["benchmarks.bench_emulate", "--tokens", "8:8", "--ranks", "2,4", "--repeats", "2",
      "--before", "cccdce5"]),
    ("point 5 and users' waits: what a torch-loading `archi` costs after its output",
     "before: the same CLI ending through the interpreter's teardown, same run",
     ["benchmarks.bench_exit"]),
]


def main() -> None:
    failed = []
    start = time.perf_counter()
    for target, before, command in SECTIONS:
        print(f"\n== {target}\n   ({before})\n   $ python -m {' '.join(command)}", flush=True)
        began = time.perf_counter()
        code = subprocess.run([sys.executable, "-m", *command], check=False).returncode
        print(f"   [{time.perf_counter() - began:.0f} s wall]", flush=True)
        if code:
            failed.append(f"{command[0]} (exit {code})")
    print(f"\nissue 36 benchmarks: {time.perf_counter() - start:.0f} s wall"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
