"""What the `archi` process costs after its output is complete, with and without the
interpreter's module teardown (archipelago/quick_exit.py, issue 36). The command is a plan
of a transformers config read for the first time (a fresh cache directory each run), so
torch and transformers are loaded, as in `archi emulate` and `.pt2` imports. Each round runs
both ways, interleaved, in their own subprocess: `python -m archipelago` (the quick exit)
and the same CLI called as `app()` (click's `sys.exit`, the ordinary teardown). Prints the
median CPU (user + system) of each and whether their outputs are the same. Not a test.

    python -m benchmarks.bench_exit [ROUNDS]
"""

import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WAYS = {"ordinary teardown (app())": ["-c", "from archipelago.cli import app; app()"],
        "quick exit (python -m archipelago)": ["-m", "archipelago"]}


def cpu_and_output(way: list[str], args: list[str]) -> tuple[float, bytes]:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "ARCHIPELAGO_CACHE_DIR": cache}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run = subprocess.run([sys.executable, *way, *args], env=env, check=True,
                             capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), run.stdout


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    from transformers import AutoConfig

    with tempfile.TemporaryDirectory() as folder:
        AutoConfig.for_model("gpt2").save_pretrained(folder)
        args = ["plan", str(Path(folder) / "config.json"), "--cluster", "4xu280",
                "--strategy", "dfx", "--tokens", "64:64"]
        cpu: dict[str, list[float]] = {name: [] for name in WAYS}
        outputs: dict[str, bytes] = {}
        for _ in range(rounds):
            for name, way in WAYS.items():
                seconds, outputs[name] = cpu_and_output(way, args)
                cpu[name].append(seconds)
    print(f"archi plan <gpt2 config.json> (transformers read, torch loaded): CPU s, median "
          f"of {rounds}")
    for name, seconds in cpu.items():
        print(f"  {name}: {statistics.median(seconds):.2f}")
    print("  outputs " + ("identical" if len(set(outputs.values())) == 1 else "DIFFERENT"))


if __name__ == "__main__":
    main()
