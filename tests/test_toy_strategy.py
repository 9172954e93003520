"""A strategy with a plan kind of its own, registered from this module alone, runs through
the real CLI (`plan`, `plan --json`, `build`): adding a strategy touches only its package.

The toy kind: one device runs everything, each step costs every parameter's multiply-add
(two operations) at `ops_per_cycle` per clock; its writer records the plan in one file.
"""

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field
from rich.console import Console
from typer.testing import CliRunner

from archipelago.cli import app
from archipelago.emit.output_dir import OutputDir
from archipelago.engines.base import EngineConfig
from archipelago.errors import ArchipelagoError
from archipelago.estimate.summary import MS, Column, Figure, Summary
from archipelago.hardware.cluster import Cluster
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import parameter_count
from archipelago.models.zoo import resolve_model
from archipelago.strategies import options, registry
from tests.conftest import TINY_GPT2

HERE = __name__


class OneDeviceConfig(EngineConfig):
    clock_hz: float = Field(100e6, gt=0)
    ops_per_cycle: int = Field(64, ge=1)


@dataclass(frozen=True)
class OneDevicePlan:
    strategy: str
    spec: ModelSpec
    device: str
    config: OneDeviceConfig


@dataclass(frozen=True)
class Steps:
    steps: int


def parse_steps(steps: str) -> Steps:
    if not steps.isdigit() or int(steps) < 1:
        raise ArchipelagoError(f"--steps '{steps}' must be a positive whole number")
    return Steps(int(steps))


def estimate(plan: OneDevicePlan, workload: Steps) -> dict[str, float]:
    ops = 2 * parameter_count(plan.spec) * workload.steps
    return {"latency_s": ops / (plan.config.ops_per_cycle * plan.config.clock_hz)}


# The kind's report: this module's own functions, found by the registry through its path.
def summarize(plan: OneDevicePlan, workload: Steps, est: dict) -> Summary:
    return Summary([Figure("model", plan.spec.name), Figure("device", plan.device),
                    Figure("steps", workload.steps),
                    Figure("latency_s", est["latency_s"], f"for {workload.steps} steps",
                           unit=MS, headline="latency")],
                   title=f"{plan.spec.name} on one {plan.device}",
                   columns=(Column("figure", right=False), Column("value")))


def print_build(summary: dict[str, Any], console: Console) -> None:
    console.print(f"wrote {', '.join(summary['files'])} in {summary['out']}")


def write(plan: OneDevicePlan, out: str, force: bool) -> dict[str, Any]:
    with OutputDir(out, force) as target:
        target.write_json("plan.json", {"model": plan.spec.name, "device": plan.device,
                                        "engine": plan.config.model_dump()})
    return {"files": target.written, "out": str(target.root)}


def page(plan: OneDevicePlan, workload: Steps, est: dict, summary: dict) -> Any:
    """The kind's report page: one chart, in the shared layout (the headline is the
    summary's)."""
    from archipelago.report.charts import sweep_lines
    from archipelago.report.page import Chart, KindPage

    steps = list(range(1, workload.steps + 1))
    per_step = est["latency_s"] / workload.steps
    return KindPage([Chart("latency against steps", "Grows linearly: every step costs the same.",
                           sweep_lines(steps, {"toy": [per_step * 1e3 * n for n in steps]},
                                       "steps", "latency (ms)"))])


@pytest.fixture(scope="module", autouse=True)
def one_device() -> Any:
    registry.register_kind(registry.PlanKind(
        "single-device",
        options.WorkloadType("steps", (options.WorkloadOption("steps", "steps to run", "2"),),
                              parse_steps),
        estimator=f"{HERE}:estimate", report=HERE, writers=f"{HERE}:write",
        page=f"{HERE}:page"))

    @registry.register("one-device", "one device runs everything (a test's toy)",
                       "single-device", OneDeviceConfig)
    def plan_one_device(spec: ModelSpec, cluster: Cluster, config: OneDeviceConfig,
                        workload: Steps) -> OneDevicePlan:
        return OneDevicePlan("one-device", spec, cluster.devices[0].key, config)

    yield
    registry.unregister("one-device")


@pytest.fixture
def model(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_GPT2))
    return str(path)


def archi(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_plan_json_and_table_come_from_the_kind(model: str, tmp_path: Path) -> None:
    params = parameter_count(resolve_model(model))
    out = archi("plan", model, "--cluster", "1xu280", "--strategy", "one-device",
                "--steps", "3", "--json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["steps"] == 3 and data["device"] == "u280"
    assert data["latency_s"] == pytest.approx(3 * 2 * params / (64 * 100e6))
    engine = tmp_path / "engine.yaml"
    engine.write_text("ops_per_cycle: 128\n")
    out = archi("plan", model, "--cluster", "1xu280", "--strategy", "one-device",
                "--engine-config", str(engine), "--json")  # default --steps 2
    assert json.loads(out.output)["latency_s"] == pytest.approx(2 * 2 * params / (128 * 100e6))
    out = archi("plan", model, "--cluster", "1xu280", "--strategy", "one-device")
    assert out.exit_code == 0 and "for 2 steps" in out.output


def test_build_writes_inside_out(model: str, tmp_path: Path) -> None:
    out_dir = tmp_path / "build"
    out = archi("build", model, "--cluster", "1xu280", "--strategy", "one-device",
                "--out", str(out_dir), "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["files"] == ["plan.json"]
    written = json.loads((out_dir / "plan.json").read_text())
    assert written["device"] == "u280" and written["engine"]["ops_per_cycle"] == 64
    again = archi("build", model, "--cluster", "1xu280", "--strategy", "one-device",
                  "--out", str(out_dir))  # not empty, no --force: refused
    assert again.exit_code == 2 and "not empty" in again.output


@pytest.mark.parametrize(("args", "message"), [
    (("--steps", "0"), "--steps '0' must be a positive whole number"),
    (("--tokens", "4:4"), "--tokens applies to GPU generation strategies (gpu-eager, "
                          "gpu-graph) and generation strategies (dfx, lora-f, lora-q); "
                          "strategy 'one-device' takes --steps"),
])
def test_kind_options_are_checked_by_the_kind(model: str, args: tuple, message: str) -> None:
    out = archi("plan", model, "--cluster", "1xu280", "--strategy", "one-device", *args)
    assert out.exit_code == 2 and message in out.output


def test_other_kinds_do_not_take_the_toy_option() -> None:
    out = archi("plan", "gpt2-345m", "--cluster", "1xu280", "--steps", "3")
    assert out.exit_code == 2
    assert "--steps applies to" in out.output  # every kind taking it, the toy's among them
    assert "steps strategies (one-device)" in out.output


def test_the_kind_adds_its_report_page(model: str, tmp_path: Path) -> None:
    """A page from the kind's own hook, laid out by the shared report page, with the
    headline number that --json prints."""
    target = tmp_path / "toy.html"
    out = archi("report", model, "--cluster", "1xu280", "--strategy", "one-device",
                "--steps", "3", "--out", str(target))
    assert out.exit_code == 0, out.output
    latency = json.loads(archi("plan", model, "--cluster", "1xu280", "--strategy",
                               "one-device", "--steps", "3", "--json").output)["latency_s"]
    text = target.read_text()
    assert f'data-key="latency_s" data-value="{json.dumps(latency)}"' in text
    assert "latency against steps" in text and text.count('class="plot"') == 1


def test_a_kind_without_an_emulator_says_so(model: str) -> None:
    out = archi("emulate", model, "--cluster", "1xu280", "--strategy", "one-device")
    assert out.exit_code == 2 and "plan kind 'single-device' has no emulator" in out.output


def test_an_installed_package_registers_through_the_entry_point(tmp_path: Path) -> None:
    """A distribution on the path whose `archipelago.strategies` entry names a module: the
    module registers a strategy (of an existing kind) when the registry loads."""
    (tmp_path / "toyplug.py").write_text(textwrap.dedent("""
        from archipelago.strategies.tensor_parallel.engines.dfx import DFXConfig
        from archipelago.strategies.registry import register
        from archipelago.strategies.tensor_parallel.planner import plan_dfx

        @register("dfx-plugin", "DFX, registered from outside", "tensor-parallel", DFXConfig)
        def plan(spec, cluster, config, workload):
            return plan_dfx(spec, cluster, config, workload)
    """))
    info = tmp_path / "toyplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[archipelago.strategies]\ntoy = toyplug\n")
    env_path = f"{tmp_path}:{Path(__file__).resolve().parents[1]}"
    run = subprocess.run([sys.executable, "-m", "archipelago", "plan", "gpt2-345m",
                          "--cluster", "1xu280", "--strategy", "dfx-plugin", "--json"],
                         capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    direct = archi("plan", "gpt2-345m", "--cluster", "1xu280", "--strategy", "dfx", "--json")
    assert json.loads(run.stdout)["latency_s"] == json.loads(direct.output)["latency_s"]
