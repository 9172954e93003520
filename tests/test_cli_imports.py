"""An `archi` command imports what it runs and nothing else (issue 31): the strategy's own
kind, not every kind's code; no torch, dask, plotly, onnx, ortools or optuna for a plan; no
numpy to list the catalog or print help. Every script and sweep calling the CLI pays its
start-up (`benchmarks/bench_cli.py` measures it)."""

import json
import subprocess
import sys

import pytest

from archipelago.strategies.registry import builtin_kind_packages, commands

HEAVY = ("torch", "transformers", "dask", "distributed", "plotly", "onnx", "onnxruntime",
         "ortools", "optuna")
# Runs `archi ARGS` in this interpreter, then writes the top-level packages and the
# archipelago modules it imported to stderr as JSON (stdout is the command's).
RUN = """import json, runpy, sys
sys.argv = ["archi", *sys.argv[1:]]
try:
    runpy.run_module("archipelago", run_name="__main__")
except SystemExit as end:
    code = end.code
print(json.dumps([code, sorted(sys.modules)]), file=sys.stderr)
"""


def _imported(*args: str) -> set[str]:
    run = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True,
                         timeout=120)
    code, modules = json.loads(run.stderr.strip().splitlines()[-1])
    assert code in (0, None), run.stderr
    return set(modules)


def _kind_modules(modules: set[str]) -> set[str]:
    """The kinds whose code (anything below the package's registration) was imported."""
    return {p for p in builtin_kind_packages() for m in modules if m.startswith(p + ".")}


def test_a_plan_imports_its_own_kind_and_nothing_heavy() -> None:
    modules = _imported("plan", "gpt2-1.5b", "--json")
    assert {m.split(".")[0] for m in modules} & set(HEAVY) == set()
    assert _kind_modules(modules) == {"archipelago.strategies.tensor_parallel"}


@pytest.mark.parametrize("args", [("catalog",), ("compare", "--help")])
def test_listing_imports_no_kind_code_and_no_numpy(args: tuple[str, ...]) -> None:
    modules = _imported(*args)
    assert {m.split(".")[0] for m in modules} & {*HEAVY, "numpy"} == set()
    assert _kind_modules(modules) == set()


def test_the_command_list_imports_only_the_kinds_commands() -> None:
    """`archi --help` shows each kind's own commands' help, so it imports their modules
    (`PlanKind.commands`) and the subpackages of a kind holding them, nothing else of a
    kind."""
    modules = _imported("--help")
    assert {m.split(".")[0] for m in modules} & {*HEAVY, "numpy"} == set()
    declared = {path.partition(":")[0] for _, path in commands().values()}
    assert declared <= modules

    def of_a_kind(module: str) -> bool:
        return any(module.startswith(p + ".") for p in builtin_kind_packages())

    holding = {m.rsplit(".", n)[0] for m in declared for n in range(1, m.count("."))}
    assert {m for m in modules if of_a_kind(m)} == declared | {m for m in holding
                                                                 if of_a_kind(m)}
