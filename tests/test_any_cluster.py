"""Any cluster can be handed to any strategy (issue 19): through `archi plan`, every built-in
strategy on every built-in cluster and a few shorthands either plans (exit 0, or 1 for a plan
that does not fit) or says in one line why the cluster's shape does not suit it (exit 2, no
traceback)."""

import json

import pytest
from typer.testing import CliRunner

from archipelago.cli import app
from archipelago.hardware.cluster_file import builtin_clusters
from archipelago.strategies.registry import strategies

# A small model of each plan kind's model family.
MODEL_OF_KIND = {"tensor-parallel": "gpt2-345m", "dataflow": "ibert-base",
                 "scheduled-dag": "cnn-lstm", "host-program": "nmt-luong",
                 "gpu": "gpt2-345m"}
SHORTHANDS = ["4xu280", "72xsidewinder", "8xs10-2800", "2xa100"]
CASES = [(s, c) for s in sorted(strategies()) for c in builtin_clusters() + SHORTHANDS]
# Pairings that must plan: each kind on the cluster its paper uses.
PLANS = {("dfx", "4xu280"), ("lora-q", "4xu280"), ("galapagos", "72xsidewinder"),
         ("persistent", "8xs10-2800"), ("chef", "hacc"), ("chef", "4xu280"),
         ("h2h", "chef-cluster1"), ("gpu-graph", "2xa100")}
# Pairings whose refusal names the shape: mixed devices, a device kind, its memory.
REFUSES = {("dfx", "hacc"): "needs identical devices; cluster 'hacc' mixes",
           ("galapagos", "chef-cluster1"): "needs identical devices",
           ("chef", "2xa100"): "is a gpu ('a100') without DSP slices",
           ("dfx", "72xsidewinder"): "runs on HBM FPGAs",
           ("persistent", "4xu280"): "u280 is not one",
           ("gpu-eager", "4xu280"): "runs on GPUs"}


def test_every_built_in_kind_has_a_model_here():
    assert {s.kind for s in strategies().values()} <= set(MODEL_OF_KIND)
    assert set(PLANS) | set(REFUSES) <= set(CASES)


@pytest.mark.parametrize(("strategy", "cluster"), CASES)
def test_plans_or_refuses_in_one_line(strategy: str, cluster: str) -> None:
    model = MODEL_OF_KIND[strategies()[strategy].kind]
    result = CliRunner().invoke(app, ["plan", model, "--cluster", cluster, "--strategy",
                                      strategy, "--json"])
    if result.exit_code in (0, 1):  # planned; 1: the plan does not fit, and says so
        assert (strategy, cluster) not in REFUSES
        report = json.loads(result.stdout)
        assert report.get("feasible", True) is (result.exit_code == 0)
        return
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.stderr[-500:]
    assert lines[0].startswith("error: ") and "Traceback" not in result.stderr
    assert (strategy, cluster) not in PLANS, lines[0]
    assert REFUSES.get((strategy, cluster), "") in lines[0]
