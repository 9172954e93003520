"""The host-offload row from names to reports, and `archi proxies`."""

import json
import os
import re
import subprocess
import sys

import pytest

from archipelago.errors import ArchipelagoError, ConfigError
from archipelago.strategies.host_offload.explore import explore, largest_report, sizing_report
from archipelago.strategies.host_offload.service import host_request, plan_report


def test_plan_report_has_the_documented_keys() -> None:
    r = plan_report(host_request(model="nmt-luong", cluster="8xs10-2800", hidden=256,
                                 vocab=1000, steps=5))
    for key in ("latency_s", "params", "breakdown_s", "per_call", "onchip_bytes", "feasible",
                "reasons"):
        assert key in r
    assert set(r["breakdown_s"]) == {"cpu", "fpga", "comm"}
    assert sum(r["breakdown_s"].values()) == pytest.approx(r["latency_s"])
    assert len(r["onchip_bytes"]) == 8 and r["feasible"]
    assert all({"count", "time_s"} == set(v) for v in r["per_call"].values())


def test_largest_persistent_is_the_edge_of_fitting() -> None:
    request = host_request(model="lstm", cluster="4xs10-2800", steps=2)
    r = largest_report(request)
    assert r["feasible"]
    bigger = request.with_options(hidden=r["hidden"] + 16)
    with pytest.raises(ArchipelagoError, match=r"does not fit 4xs10-2800: card 0 .* needs \d+ "
                                                r"bytes of persistent weights but holds \d+"):
        plan_report(bigger)


def test_latency_target_sizing_lists_every_card_type() -> None:
    r = sizing_report(host_request(model="lstm", cluster="1xs10-2800", hidden=1024, steps=2),
                      1e-3)
    assert set(r["devices"]) == {"a10-1150", "s10-2800", "s10-2100-tr"}
    s10 = r["devices"]["s10-2800"]
    assert s10["cards"] >= 1 and s10["latency_s"] <= 1e-3


@pytest.mark.parametrize(("fields", "message"), [
    ({"beam": 0}, "beam width 0"),
    ({"steps": 0}, "'steps' = 0"),
    ({"partition": "3x1", "model": "matvec", "hidden": 100}, "does not divide"),
    ({"lanes": 0}, "'lanes' = 0"),
    ({"weights": "flash"}, "'weights' = 'flash'"),
    ({"cluster": "2xu280"}, "PCIe FPGA cards"),
])
def test_bad_requests_are_one_line(fields: dict, message: str) -> None:
    base = {"model": "nmt-li", "cluster": "3xs10-2800", "hidden": 64, "vocab": 50, "steps": 2}
    with pytest.raises((ArchipelagoError, ConfigError), match=message):
        plan_report(host_request(**{**base, **fields}))


@pytest.mark.parametrize(("text", "message"), [
    ("fast", "--latency-target 'fast': give a positive number and a unit"),
    ("0.2", "--latency-target '0.2': give a positive number and a unit"),  # as --ttft
    ("0ms", "--latency-target '0ms'")])
def test_a_latency_target_is_a_typed_duration_checked_before_the_model(text: str,
                                                                      message: str) -> None:
    """The one parser of durations (durations.py), as compare's --latency-target and
    serve's --ttft: a bare number is refused, and before the (unknown) model is looked up."""
    with pytest.raises(ArchipelagoError, match=re.escape(message)):
        explore("no-such-model", "1xs10-2800", "persistent", {"latency_target": text})


def test_archi_proxies_measures_the_program_sizes_and_stores_them(tmp_path) -> None:
    out = tmp_path / "host.json"
    env = {**os.environ, "ARCHIPELAGO_HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "archipelago", "proxies", "lstm", "--hidden",
                          "64", "--steps", "2", "--out", str(out), "--json"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    concat = [n for n, _ in report["measured_s"]["cpu_concat"]]
    assert 128 in concat and concat[-1] == 65536  # [x; h] of a 64-wide LSTM, and the grid
    fit = report["fits"]["cpu_concat"]
    assert fit["sizes"] == [64, 65536] and fit["numpy_call_s"] >= 0 < fit["per_element_s"]
    stored = json.loads(out.read_text())
    assert all(t > 0 for pts in stored["calls"].values() for _, t in pts)


def test_a_cluster_file_names_the_host_and_its_cards(tmp_path) -> None:
    from archipelago.strategies.host_offload.proxies import KERNELS, CPUProfile, save_profile

    slow = CPUProfile("a slow host", {k: ((1000, 1e-3), (2000, 2e-3)) for k in KERNELS})
    save_profile(slow, tmp_path / "slow-host.json")
    (tmp_path / "server.yaml").write_text(
        "devices:\n  - {device: s10-2800, count: 4}\ntopology: host_star\n"
        "host_profile: slow-host.json\n")
    base = {"model": "lstm", "hidden": 512, "steps": 2}
    named = plan_report(host_request(cluster=str(tmp_path / "server.yaml"), **base))
    local = plan_report(host_request(cluster="4xs10-2800", **base))
    assert named["cards"] == local["cards"] == 4
    assert named["cpu_profile"] == "a slow host"
    assert named["breakdown_s"]["cpu"] > 100 * local["breakdown_s"]["cpu"]
    assert named["breakdown_s"]["comm"] == pytest.approx(local["breakdown_s"]["comm"])
