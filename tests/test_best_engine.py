"""`plan --engine best`: the best engine of the device-bounded space, searched once per
model, cluster and workload and read back from the explore store; labelled; the published
engine stays `plan`'s default, unchanged."""

import json
import os
import subprocess
import sys

import pytest

from archipelago.api import parse_workload
from archipelago.explore.best import best_engine
from tests.cli_here import archi_here

PLAN = ("plan", "gpt2-345m", "--cluster", "1xu280", "--strategy", "lora-q", "--tokens", "8:8")


def archi(*args: str) -> subprocess.CompletedProcess:
    """The command with a table, in a fresh interpreter whose table is wide enough to keep
    the engine's label on one line. Runs printing JSON, a page or an error line use
    archi_here (this process, tests/cli_here.py): no start-up, the same typer app."""
    return subprocess.run([sys.executable, "-m", "archipelago", *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "COLUMNS": "240"})


def test_searched_once_then_read_back_and_labelled() -> None:
    first = archi_here(*PLAN, "--engine", "best", "--json")
    again = archi_here(*PLAN, "--engine", "best", "--json")
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    one, two = json.loads(first.stdout), json.loads(again.stdout)
    assert not one["engine"]["from_store"] and two["engine"]["from_store"]
    assert one["engine"]["parameters"] == two["engine"]["parameters"]
    assert one["latency_s"] == two["latency_s"]
    assert one["engine"]["engine"].startswith("searched: ")
    published = json.loads(archi_here(*PLAN, "--json").stdout)
    # the default: the published engine, labelled as such
    assert published["engine"] == {"engine": "published"}
    assert one["latency_s"] <= published["latency_s"]  # the published point is a candidate
    labelled = json.loads(archi_here(*PLAN, "--engine", "published", "--json").stdout)
    assert labelled == published
    table = archi(*PLAN, "--engine", "best").stdout
    assert "searched: " in table and "read back from the explore store" in table
    rows = [line.strip("│ ").split() for line in archi(*PLAN).stdout.splitlines()]
    assert ["engine", "│", "published"] in rows  # the table's row says so too


def test_the_published_figures_are_unchanged_by_the_label() -> None:
    """The label is the only addition: the figures are the published engine's, those of
    the pipeline without any engine given; a strategy without a design space has no
    label (nothing to choose)."""
    from archipelago import api

    plan = json.loads(archi_here(*PLAN, "--json").stdout)
    est = api.plan_and_estimate("gpt2-345m", "1xu280", "lora-q", {"tokens": "8:8"}).estimate
    assert plan["latency_s"] == est.latency_s and plan["tokens_per_s"] == est.tokens_per_s
    gpu = ("plan", "gpt2-345m", "--cluster", "1xh100", "--strategy", "gpu-graph", "--tokens",
           "8:8", "--json")
    assert "published" not in archi_here(*gpu).stdout


def test_report_takes_engine_and_names_it_under_the_title(tmp_path) -> None:
    page = tmp_path / "p.html"
    for choice, label in ((None, "engine published<"), ("best", "engine searched: ")):
        given = () if choice is None else ("--engine", choice)
        out = archi_here("report", *PLAN[1:], *given, "--out", str(page), "--force")
        assert out.returncode == 0, out.stderr
        assert label in page.read_text(), choice


def test_the_cache_is_keyed_by_the_whole_workload() -> None:
    """Another batch is another search; the same workload reads the study back."""
    one = best_engine("gpt2-345m", "1xu280", "dfx", parse_workload("dfx", {"tokens": "4:4"}))
    two = best_engine("gpt2-345m", "1xu280", "dfx",
                      parse_workload("dfx", {"tokens": "4:4", "batch": "2"}))
    again = best_engine("gpt2-345m", "1xu280", "dfx", parse_workload("dfx", {"tokens": "4:4"}))
    assert not one.cached and not two.cached and again.cached
    assert one.study != two.study and again.study == one.study
    assert again.engine == one.engine and one.exhausted  # DFX's 160 engines: all tried


@pytest.mark.parametrize(("args", "line"), [
    (("--engine", "fastest"), "error: --engine 'fastest': valid choices are published, best"),
    (("--engine", "best", "--engine-config", "x.yaml"), "leave --engine-config out"),
])
def test_bad_engine_options_are_one_line(args: tuple[str, ...], line: str, tmp_path) -> None:
    (tmp_path / "x.yaml").write_text("n_acc: 32\n")
    out = archi_here(*PLAN, *args, cwd=tmp_path)
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert out.returncode == 2 and len(lines) == 1 and line in lines[0], out.stderr


def test_a_strategy_without_a_space_is_refused_in_one_line() -> None:
    out = archi_here("plan", "gpt2-345m", "--cluster", "1xh100", "--strategy", "gpu-graph",
                     "--engine", "best")
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert "strategy 'gpu-graph' has no engine design space" in lines[0]
