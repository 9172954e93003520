"""Did a change move any figure? Runs the README's examples and the rack cases through the CLI
(`--json`), writes each command's output, and compares two such snapshots: the outputs of one
tree before a refactor against another's after it. Rings must come out byte-identical; a
figure that moved is printed with its JSON path. Not a test: a refactor's check.

    python -m benchmarks.cli_snapshot write OUT          # this tree's outputs into OUT
    python -m benchmarks.cli_snapshot compare BEFORE AFTER [--rel 1e-12]
"""

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

CASES = [
    "plan gpt2-1.5b --cluster 4xu280 --strategy dfx --tokens 64:64 --json",
    "plan gpt2-345m --cluster 1xu280 --strategy dfx --tokens 64:64 --json",
    "plan gpt2-345m --cluster 4xu280 --strategy lora-f --tokens 32:256 --json",
    "plan gpt2-345m --cluster 2xu280 --strategy lora-q --tokens 32:256 --batch 8 --json",
    "plan llama2-7b --cluster 8xu280 --strategy dfx --tokens 128:128 --json",
    "plan llama2-7b --cluster 4xu55c --strategy lora-q --tokens 128:128 --json",
    "plan gpt2-1.5b --cluster 8x4xu280 --strategy dfx --tokens 64:64 --json",
    "plan gpt2-1.5b --cluster 8x4xu280 --strategy lora-q --tokens 64:64 --split tp=4,pp=8 --json",
    "plan gpt2-345m --cluster 2x2xu280 --strategy dfx --tokens 16:16 --split tp=2,pp=2 --json",
    "plan llama2-7b --cluster 4x8xv80 --strategy lora-q --tokens 128:128 --batch 8 --json",
    "plan opt-6.7b --cluster 2x4xu280 --strategy lora-f --tokens 128:128 --json",
    "plan gpt2-345m --cluster 4xu280 --strategy dfx --tokens 64:64 --split tp=2,pp=2 --json",
    "plan llama2-7b --cluster 2xh100 --strategy gpu-graph --tokens 128:128 --json",
    "plan llama2-7b --cluster 1xa100 --strategy gpu-eager --tokens 128:128 --batch 8 --json",
    "plan ibert-base --cluster 72xsidewinder --strategy galapagos --json",
    "plan vlocnet --cluster hacc --strategy chef --json",
    "plan vlocnet --cluster chef-cluster1 --strategy h2h --json",
    "simulate gpt2-345m --cluster 4xu280 --strategy dfx --tokens 64:64 --json",
    "compare gpt2-1.5b --tokens 64:64 --devices u280,v80,h100 --counts 1,2,4 --batch 1,8 "
    "--json --workers 1 --store {out}/store.jsonl",
]
# Wall-clock and run-specific fields: never compared.
VOLATILE = frozenset({"search_s", "store", "evaluated_keys", "seconds"})


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for i, case in enumerate(CASES, 1):
        (out / "store.jsonl").unlink(missing_ok=True)
        args = case.format(out=out).split()
        run = subprocess.run([sys.executable, "-m", "archipelago", *args],
                             capture_output=True, text=True, timeout=600)
        (out / f"{i:02d}.cmd").write_text(case + "\n")
        (out / f"{i:02d}.json").write_text(run.stdout)
        (out / f"{i:02d}.rc").write_text(f"{run.returncode}\n")
        print(f"{i:02d} rc={run.returncode} {case}")


def differences(before: Any, after: Any, rel: float, path: str = "") -> list[str]:
    """Where `after` departs from `before`: keys `before` has and `after` lacks, numbers
    beyond `rel`, other values unequal. Keys only `after` has are additions, not
    differences."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [line for key, value in before.items() if key not in VOLATILE
                for line in (differences(value, after[key], rel, f"{path}.{key}")
                             if key in after else [f"{path}.{key}: missing after"])]
    if isinstance(before, list) and isinstance(after, list):
        head = [f"{path}: {len(before)} items -> {len(after)}"] if len(before) != len(after) \
            else []
        return head + [line for i, (b, a) in enumerate(zip(before, after, strict=False))
                       for line in differences(b, a, rel, f"{path}[{i}]")]
    numbers = (int, float)
    if isinstance(before, numbers) and isinstance(after, numbers) and not isinstance(
            before, bool):
        same = before == after or math.isclose(before, after, rel_tol=rel, abs_tol=0.0)
        return [] if same else [f"{path}: {before!r} -> {after!r}"]
    return [] if before == after else [f"{path}: {str(before)[:60]!r} -> {str(after)[:60]!r}"]


def compare(before: Path, after: Path, rel: float) -> None:
    for old in sorted(before.glob("*.json")):
        new = after / old.name
        if not new.exists():
            print(f"{old.stem}: missing after")
            continue
        text_old, text_new = old.read_text(), new.read_text()
        if text_old == text_new:
            print(f"{old.stem}: byte-identical")
            continue
        try:
            found = differences(json.loads(text_old), json.loads(text_new), rel)
        except json.JSONDecodeError:
            print(f"{old.stem}: not JSON on one side; differs")
            continue
        print(f"{old.stem}: " + ("same figures (keys added or volatile fields only)"
                                 if not found else f"{len(found)} differences"))
        for line in found[:10]:
            print(f"    {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    sub.add_parser("write").add_argument("out", type=Path)
    both = sub.add_parser("compare")
    both.add_argument("before", type=Path)
    both.add_argument("after", type=Path)
    both.add_argument("--rel", type=float, default=1e-12)
    args = parser.parse_args()
    if args.verb == "write":
        write(args.out)
    else:
        compare(args.before, args.after, args.rel)


if __name__ == "__main__":
    main()
