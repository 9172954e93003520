"""The CLI names no strategy, plan kind or device (issue 19, point 4): its defaults, the
options a kind adds and the commands a kind adds come from the registry; an option of
another kind is refused once, in one line; and the pipeline (point 5) checks every kind's
estimate for impossible figures."""

import dataclasses
import json
import math
import re
import subprocess
import sys
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import archipelago
from archipelago.cli import app
from archipelago.errors import ArchipelagoError
from archipelago.hardware.catalog import catalog as devices
from archipelago.strategies import registry
from tests.cli_here import archi_here as archi  # what commands say: in this process
from tests.test_any_cluster import MODEL_OF_KIND

ROOT = Path(archipelago.__file__).parent
RUNNER = CliRunner()
# Today's defaults, written out here independently of the registry's declarations.
DEFAULTS = {"plan": ("dfx", "4xu280"), "report": ("dfx", "4xu280"),
            "emulate": ("dfx", "4xu280"), "build": ("galapagos", "72xsidewinder"),
            "explore": ("lora-q", "1xu280"), "simulate": ("dfx", "4xu280")}


def _names() -> set[str]:
    """Every name the CLI must leave to the registry: strategies, plan kinds and their
    workload names, device keys, built-in cluster files."""
    kinds = registry.kinds().values()
    clusters = {p.stem for p in (ROOT / "hardware" / "clusters").glob("*.yaml")}
    return {*registry.strategies(), *(k.name for k in kinds),
            *(k.workload.name for k in kinds), *devices(), *clusters}


@pytest.mark.parametrize("module", ["cli.py", "cli_group.py"])
def test_the_cli_source_names_no_strategy_kind_or_device(module: str) -> None:
    text = (ROOT / module).read_text()
    found = sorted(n for n in _names()
                   if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text))
    assert found == []


def test_importing_the_cli_imports_no_kind() -> None:
    code = ("import sys, archipelago.cli\n"
            "print([m for m in sys.modules if m.startswith('archipelago.strategies.')"
            " or m.split('.')[0] in ('torch', 'dask', 'distributed', 'plotly',"
            " 'transformers')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_every_command_has_one_declared_default() -> None:
    for command, (strategy, cluster) in DEFAULTS.items():
        chosen = registry.default_strategy(command)
        assert (chosen.name, chosen.cluster_for(command)) == (strategy, cluster)
        assert [s.name for s in registry.strategies().values()
                if command in s.default_for] == [strategy]


def test_a_second_default_for_a_command_is_refused_at_registration() -> None:
    with pytest.raises(ValueError, match=r"'twin' and 'dfx' are both the default of "
                                         r"`archi plan`"):
        registry.register("twin", "a second default", "tensor-parallel",
                          registry.get_strategy("dfx").engine_config,
                          default_for=("plan",))(lambda spec, cluster, config, workload: None)
    assert "twin" not in registry.strategies()


class Stop(ArchipelagoError):
    """Raised where the command would start working: the test has what it came for."""


@pytest.fixture
def chosen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The (strategy, cluster) each command hands the pipeline, recorded instead of run."""
    import archipelago.api as api
    import archipelago.explore.search  # noqa: F401  its own study_identity, bound unpatched
    import archipelago.explore.study as study

    seen: list[tuple[str, str]] = []

    def record(model: str, cluster: str, strategy: str, *args: Any, **kwargs: Any) -> None:
        seen.append((strategy, cluster))
        raise Stop("recorded")

    for name in ("plan_and_estimate", "emulate", "build", "explore_kind"):
        monkeypatch.setattr(api, name, record)
    monkeypatch.setattr(study, "study_identity",
                        lambda model, cluster, strategy, work: record(model, cluster, strategy))
    return seen


def _invoke(command: str, model: str, tmp_path: Path, *extra: str) -> Any:
    outs = {"report": ["--out", str(tmp_path / "r.html")], "build": ["--out",
                                                                      str(tmp_path / "b")],
            "explore": ["--storage", str(tmp_path / "s")]}
    return RUNNER.invoke(app, [command, model, *outs.get(command, []), *extra])


@pytest.mark.parametrize("command", list(DEFAULTS))
def test_each_command_runs_its_declared_default(command: str, chosen: list, tmp_path: Path
                                                ) -> None:
    model = "ibert-base" if command == "build" else "gpt2-1.5b"
    result = _invoke(command, model, tmp_path)
    assert result.exit_code == 2 and "recorded" in result.output, result.output
    assert chosen == [DEFAULTS[command]]


@pytest.mark.parametrize(("strategy", "model", "cluster"), [
    ("chef", "vfs", "hacc"), ("persistent", "nmt-luong", "8xs10-2800"),
    ("galapagos", "ibert-base", "72xsidewinder"), ("lora-q", "gpt2-345m", "4xu280")])
def test_a_strategy_named_alone_gets_its_own_cluster(strategy: str, model: str, cluster: str,
                                                     chosen: list, tmp_path: Path) -> None:
    _invoke("plan", model, tmp_path, "--strategy", strategy)
    assert chosen == [(strategy, cluster)]
    assert registry.get_strategy(strategy).cluster_for("plan") == cluster


def kin(strategy: str) -> str:
    """`strategy` and the others registered with its plan kind, as an error lists them:
    adding a strategy to a kind changes the line and this expectation alike."""
    kind = registry.get_strategy(strategy).kind
    return ", ".join(sorted(n for n, s in registry.strategies().items() if s.kind == kind))


@pytest.mark.parametrize(("args", "takers"), [
    (("emulate", "cnn-lstm", "--strategy", "chef", "--precision", "fp16"),
     f"--precision applies to GPU generation strategies ({kin('gpu-graph')}) and generation "
     f"strategies ({kin('dfx')}); strategy 'chef' takes --bandwidth in `archi emulate`"),
    (("plan", "gpt2-345m", "--gantt", "g.html"),
     f"--gantt applies to scheduled DAG strategies ({kin('chef')}); strategy 'dfx' "
     "takes --tokens, --precision, --batch, --split in `archi plan`"),
    (("emulate", "ibert-base", "--strategy", "galapagos", "--checkpoint", "ckpt"),
     f"--checkpoint applies to generation strategies ({kin('dfx')}); strategy "
     "'galapagos' takes --seq-len in `archi emulate`"),
    (("plan", "nmt-luong", "--strategy", "persistent", "--largest"),
     f"--largest applies to host program strategies ({kin('persistent')}) in `archi "
     "explore`"),
])
def test_an_option_of_another_kind_is_one_line_naming_its_strategies(args: tuple,
                                                                     takers: str) -> None:
    out = archi(*args)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and takers in out.stderr, out.stderr


def test_help_lists_every_command_and_what_each_kind_adds() -> None:
    out = archi("--help")
    for command in [*DEFAULTS, "catalog", *registry.commands()]:
        assert re.search(rf"│ {command} ", out.stdout), command
    emulate = archi("emulate", "--help").stdout
    for option in ("--precision", "--checkpoint", "--seq-len", "--tokens"):
        assert option in emulate
    assert "--gantt" not in emulate and "--gantt" in archi("plan", "--help").stdout
    build = " ".join(archi("build", "--help").stdout.replace("│", " ").split())
    assert "(default: galapagos)" in build and "72xsidewinder for galapagos" in build


def test_a_kind_command_lives_in_its_kind_package() -> None:
    for name, (kind, path) in registry.commands().items():
        owners = {s.planner.__module__ for s in registry.strategies().values()
                  if s.kind == kind}
        package = next(p for p in registry.builtin_kind_packages()
                       if any(o == p or o.startswith(p + ".") for o in owners))
        assert path.startswith(package + "."), (name, path)
        assert callable(registry.resolve(path)), name


def _poisoned(estimator: Any) -> Any:
    """The estimator, its first float figure made NaN."""

    def run(plan: Any, workload: Any) -> Any:
        est = estimator(plan, workload)
        if isinstance(est, dict):
            return {**est, "latency_s": math.nan}
        first = next(f.name for f in dataclasses.fields(est)
                     if isinstance(getattr(est, f.name), float))
        return dataclasses.replace(est, **{first: math.nan})

    return run


def test_known_strategies_share_their_kind() -> None:
    """What the lists above are made of, by hand: the generation and DAG kinds' members."""
    assert {"dfx", "lora-f", "lora-q"} <= set(kin("dfx").split(", "))
    assert {"chef", "chef-exact", "h2h"} <= set(kin("chef").split(", "))
    assert "dfx" not in kin("chef") and "persistent" not in kin("dfx")


def first_of_each_kind() -> list[str]:
    """One strategy per registered plan kind (the first registered), so every kind's
    estimator is poisoned once, a kind added later included."""
    firsts: dict[str, str] = {}
    for name, strategy in registry.strategies().items():
        firsts.setdefault(strategy.kind, name)
    return list(firsts.values())


@pytest.mark.parametrize("strategy", first_of_each_kind())
def test_the_pipeline_refuses_a_nan_from_any_kinds_estimator(
        strategy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = registry.get_strategy(strategy)
    args = (MODEL_OF_KIND[chosen.kind], "--cluster", chosen.cluster_for("plan"))
    kind = chosen.plan_kind
    module, _, attribute = kind.estimator.partition(":")
    monkeypatch.setattr(import_module(module), attribute,
                        _poisoned(getattr(import_module(module), attribute)))
    result = RUNNER.invoke(app, ["plan", *args, "--strategy", strategy, "--json"])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and " is nan" in lines[0], lines
    assert "a bug in the estimate" in lines[0]


def test_gantt_is_written_by_the_pipeline_not_by_rendering(tmp_path: Path) -> None:
    """`--gantt` is an output the kind declares; rendering the report writes nothing."""
    from archipelago.api import plan_and_estimate

    target = tmp_path / "g.html"
    result = plan_and_estimate("cnn-lstm", "hacc", "h2h", {"gantt": str(target)})
    assert target.exists()
    target.unlink()
    report = registry.get_strategy("h2h").plan_kind.hook("report")
    assert report.summarize(*result).as_json()["gantt"] == str(target)
    assert not target.exists()
    out = archi("plan", "cnn-lstm", "--strategy", "h2h", "--gantt", str(target), "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["gantt"] == str(target)
    assert target.exists()
