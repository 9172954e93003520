"""Impossible figures: hostile engine and cluster inputs never print a negative latency as
feasible or a bare NaN/Infinity as JSON; the error names the input that caused it."""

import json
import math

import pytest
import yaml

from archipelago.api import make_plan
from archipelago.estimate.figures import ImpossibleFigure, finite_estimate
from tests.test_explore import archi


def strict_json(text: str) -> dict:
    """json.loads, refusing NaN and Infinity, which Python writes but JSON does not allow."""
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def finite_non_negative(value: object) -> bool:
    if isinstance(value, dict):
        return all(finite_non_negative(v) for v in value.values())
    if isinstance(value, list):
        return all(finite_non_negative(v) for v in value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return math.isfinite(value) and value >= 0
    return True


HOSTILE = [  # strategy, model, cluster, engine config, (the input the error must name, value)
    ("dfx", "gpt2-345m", "1xu280", {"hbm_channels": -32}, ("hbm_channels", "-32")),
    ("dfx", "gpt2-345m", "1xu280", {"channel_bits": -512}, ("channel_bits", "-512")),
    ("dfx", "gpt2-345m", "1xu280", {"clock_hz": math.inf}, ("clock_hz", "inf")),
    ("dfx", "gpt2-345m", "1xu280", {"ddr_Bps": 0.0}, ("ddr_Bps", "0")),
    ("lora-q", "gpt2-345m", "1xu280", {"hbm_channels": -32}, ("hbm_channels", "-32")),
    ("lora-q", "gpt2-345m", "1xu280", {"clock_hz": math.inf}, ("clock_hz", "inf")),
    ("galapagos", "ibert-base", "72xsidewinder", {"clock_hz": math.inf}, ("clock_hz", "inf")),
]


@pytest.mark.parametrize(("strategy", "model", "cluster", "engine", "named"), HOSTILE)
def test_hostile_engine_configs_are_one_line_naming_the_input(
        tmp_path, strategy, model, cluster, engine, named) -> None:
    config = tmp_path / "engine.yaml"
    config.write_text(yaml.safe_dump(engine))
    tokens = [] if strategy == "galapagos" else ["--tokens", "8:8"]
    out = archi("plan", model, "--cluster", cluster, "--strategy", strategy, *tokens,
                "--engine-config", str(config), "--json")
    assert out.returncode == 2 and out.stdout == "", out.stdout
    # Refused by the typed engine config at the edge, or else by the figure check: either
    # way one line naming the parameter and its value.
    field, value = named
    assert out.stderr.count("\n") == 1 and field in out.stderr and value in out.stderr, (
        out.stderr)


def test_an_infinite_link_latency_names_the_cluster_file(tmp_path) -> None:
    cluster = tmp_path / "slow.yaml"
    cluster.write_text(yaml.safe_dump({"devices": [{"device": "u280", "count": 2}],
                                       "link": {"latency_ns": math.inf, "bandwidth_gbps": 100}}))
    out = archi("plan", "gpt2-345m", "--cluster", str(cluster), "--tokens", "8:8", "--json")
    assert out.returncode == 2 and out.stdout == ""
    # Refused at the validated edge (issue 14), before any figure is computed: one line
    # naming the file, the field and the value.
    assert out.stderr.count("\n") == 1, out.stderr
    assert str(cluster) in out.stderr and "link.latency_ns" in out.stderr
    assert "inf" in out.stderr


@pytest.mark.parametrize("strategy", ["dfx", "lora-f", "lora-q", "galapagos"])
def test_json_of_sound_plans_is_strict_json_with_sound_figures(strategy) -> None:
    model, cluster = ("ibert-base", "72xsidewinder") if strategy == "galapagos" else (
        "gpt2-345m", "2xu280")
    tokens = [] if strategy == "galapagos" else ["--tokens", "8:8"]
    out = archi("plan", model, "--cluster", cluster, "--strategy", strategy, *tokens, "--json")
    assert out.returncode == 0, out.stderr
    assert finite_non_negative(strict_json(out.stdout))


def test_a_bad_figure_from_sound_inputs_is_reported_as_a_bug() -> None:
    plan = make_plan("gpt2-345m", "1xu280", "dfx")

    def broken(plan: object, workload: object) -> dict:
        return {"latency_s": 1e-3, "breakdown_s": {"sync": float("nan")}}

    with pytest.raises(ImpossibleFigure, match=r"breakdown_s.sync is nan, from no impossible "
                                               r"input: a bug in the estimate"):
        finite_estimate(broken, plan, None, "dfx plan of gpt2-345m on 1xu280")
