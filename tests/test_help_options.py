"""Every option a command's --help lists is one it takes: each is given, alone, with a
valid value to a model that does not exist, and the command must get as far as looking the
model up (every option is checked before the model is: serve's and compare's own options in
their request, a kind's in `Strategy.workload`), so the one error is the unknown model, not
a refusal of the option. `archi build` looks the model up first, so its kinds' options are
checked where build checks them, in `Strategy.workload` for "build"."""

import re
from pathlib import Path

import pytest

from archipelago.strategies import registry
from tests.cli_here import archi_here as archi

MISSING = "no-such-model"
UNKNOWN = f"error: unknown model '{MISSING}'"
# A valid value for each option the commands declare themselves (flags take none); an
# option --help lists and this leaves out fails the test, naming it.
VALUES = {
    "cluster": "4xu280", "strategy": "dfx", "rate": "2", "prompt": "8", "output": "8",
    "ttft": "1s", "tpot": "50ms", "percentile": "90", "arrivals": "fixed",
    "replicas": "2", "router": "least-outstanding", "policy": "chunked", "max-batch": "4",
    "chunk": "64", "micro-batches": "2", "requests": "10", "seeds": "2", "seed": "3",
    "electricity": "0.2", "lifetime-years": "2", "utilization": "0.5",
    "prefill-cluster": "1xu280", "prefill-strategy": "dfx", "prefill-replicas": "2",
    "kv-link": "eth-100g", "tokens": "8:8", "devices": "u280", "counts": "1",
    "strategies": "dfx", "batch": "1,2", "latency-target": "50ms", "sort": "cost",
    "workers": "0", "precision": "fp16", "engine": "published",
}
# The value of each kind option that a default does not give (a flag: "true").
KIND_VALUES = {"bandwidth": "3", "gantt": "{tmp}/g.html", "precision": "fp16", "split": "auto",
               "largest": "true", "latency_target": "10ms", "checkpoint": "{tmp}",
               "layers": "2", "beam": "1", "cpu_profile": str(
                   Path(__file__).parents[1] / "archipelago/strategies/host_offload/profiles/"
                   "dev-host.json")}

# What a strategy's command needs beside the option tried: host programs' explore, one of
# its two modes (unless the option tried is the other).
REQUIRED = {("explore", "persistent"): ("--largest",)}
MODES = ("largest", "latency-target")


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def own_options(command: str) -> dict[str, tuple[bool, str | None]]:
    """{option: (is a flag, the option its help says it goes with: "with --X:")} of the
    Options box of `archi COMMAND --help`."""
    found = {}
    for line in archi(command, "--help").stdout.splitlines():
        m = re.match(r"│\s+(?:\*\s+)?--([a-z][a-z-]*)\b.*?<(\w+)>\s+(?:with --([a-z-]+):)?",
                     line)
        if m and m.group(1) != "help":
            found[m.group(1)] = (m.group(2) == "bool", m.group(3))
    return found


def kind_options(command: str) -> list[tuple[str, str]]:
    """(strategy, option) of each kind's line in `archi COMMAND --help`: its first
    strategy and every option the line lists."""
    text = _flat(archi(command, "--help").stdout)
    return [(users.split(", ")[0], flag[2:])
            for users, flags in re.findall(r"strategies \(([^)]*)\): (--[^.]*)\.", text)
            for flag in flags.split(", ")]


def _value(strategy: str, option: str, command: str, tmp: Path) -> str:
    name = option.replace("-", "_")
    if name in KIND_VALUES:
        return KIND_VALUES[name].format(tmp=tmp)
    declared = registry.get_strategy(strategy).plan_kind.workload.typed(command)
    chosen = next(o for o in declared if o.name == name)
    return chosen.command_defaults.get(command, chosen.default)


def _trace(tmp: Path) -> str:
    trace = tmp / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,8,8\n0.5,8,8\n")
    return str(trace)


def _run_alone(command: str, option: str, flag: bool, partner: str | None,
               base: tuple[str, ...], tmp: Path) -> None:
    """`archi COMMAND` given `option` (and the option its help says it goes with)."""
    values = {**VALUES, "trace": _trace(tmp), "report": str(tmp / "page.html"),
              "store": str(tmp / "store.jsonl")}
    assert option in values or flag, f"--{option} of `archi {command}`: add it to VALUES"
    given = [f"--{option}", *([] if flag else [values[option]])]
    if partner is not None:
        given += [f"--{partner}", values[partner]]
    out = archi(command, MISSING, *base, *given)
    assert out.returncode == 2 and out.stderr.startswith(UNKNOWN), (option, out.stderr)


@pytest.mark.parametrize(("command", "base"), [("serve", ("--rate", "1", "--strategy", "dfx")),
                                               ("compare", ("--rate", "1"))])
def test_every_own_option_listed_is_taken(command: str, base: tuple[str, ...],
                                          tmp_path: Path) -> None:
    listed = own_options(command)
    assert {"rate", "json"} <= set(listed)
    for option, (flag, partner) in listed.items():
        if option != "scheduler":  # a running Dask scheduler: none here
            _run_alone(command, option, flag, partner, base, tmp_path)


@pytest.mark.parametrize(("command", "base"), [
    ("plan", ()), ("report", ("--out", "r.html")), ("explore", ()),
    ("emulate", ()), ("serve", ("--rate", "1"))])
def test_every_kind_option_listed_is_taken(command: str, base: tuple[str, ...],
                                           tmp_path: Path) -> None:
    listed = kind_options(command)
    assert listed, command
    for strategy, option in listed:
        value = _value(strategy, option, command, tmp_path)
        needed = () if option in MODES else REQUIRED.get((command, strategy), ())
        args = [*base, *needed, "--strategy", strategy, f"--{option}", value]
        out = archi(command, MISSING, *args, cwd=tmp_path)
        assert out.returncode == 2 and out.stderr.startswith(UNKNOWN), (args, out.stderr)


def test_every_build_option_listed_is_taken(tmp_path: Path) -> None:
    listed = kind_options("build")
    assert ("chef", "hls-precision") in listed
    for strategy, option in listed:
        name = option.replace("-", "_")
        given = {name: _value(strategy, option, "build", tmp_path)}
        registry.get_strategy(strategy).workload(given, "build")  # raises if refused


def test_serve_help_leaves_out_what_serve_sets_itself() -> None:
    """--tokens and --batch are serve's to set (from --prompt/--output and --max-batch):
    its help lists neither, and given, each is one line naming what sets it."""
    listed = {option for _, option in kind_options("serve")}
    assert "split" in listed and not {"tokens", "batch"} & listed
    out = archi("serve", "gpt2", "--tokens", "8:8")
    assert out.returncode == 2
    assert out.stderr == "error: --tokens: `archi serve` sets it from --prompt and --output\n"
