"""Generation estimates: definitions, calibration, scaling and feasibility."""

import numpy as np
import pytest

from archipelago.api import make_plan, plan_and_estimate
from archipelago.estimate.generation import decode_seconds


def test_calibration_point_is_reproduced() -> None:
    """Issue #2: gpt2-345m, one U280, 64:64 -> 93.1 tokens/s (the fitted constant)."""
    _, _, est = plan_and_estimate("gpt2-345m", "1xu280", "dfx", "64:64")
    assert est.tokens_per_s == pytest.approx(93.1, rel=2e-3)


def test_latency_definitions_hold_together() -> None:
    plan, _work, est = plan_and_estimate("gpt2-774m", "2xu280", "dfx", "32:40")
    contexts = 32 + np.arange(1, 40)
    assert est.latency_s == pytest.approx(est.prefill_s + decode_seconds(plan, contexts).sum())
    assert est.tokens_per_s == pytest.approx(40 / est.latency_s)
    assert sum(est.breakdown_s.values()) == pytest.approx(est.latency_s)
    assert est.decode_s_first < est.decode_s_last  # the KV cache grows past 16-key tiles


def test_decode_time_rises_with_context() -> None:
    plan = make_plan("gpt2-345m", "1xu280", "dfx")
    times = decode_seconds(plan, np.array([16, 256, 1024]))
    assert np.all(np.diff(times) > 0)


def test_more_fpgas_are_faster_but_not_linearly() -> None:
    rates = [plan_and_estimate("gpt2-345m", f"{n}xu280", "dfx", "64:64")[2].tokens_per_s
             for n in (1, 2, 4)]
    assert rates[0] < rates[1] < rates[2] < 4 * rates[0]


def test_single_device_has_no_sync_time() -> None:
    est = plan_and_estimate("gpt2-345m", "1xu280", "dfx", "8:8")[2]
    assert est.breakdown_s["sync"] == 0
    assert plan_and_estimate("gpt2-345m", "4xu280", "dfx", "8:8")[2].breakdown_s["sync"] > 0


def test_model_too_big_for_hbm_is_infeasible_with_bytes() -> None:
    est = plan_and_estimate("opt-6.7b", "1xu280", "dfx", "64:64")[2]
    assert not est.feasible
    assert "HBM needs" in est.reasons[0] and "has 8.59e+09" in est.reasons[0]
    assert plan_and_estimate("opt-6.7b", "2xu280", "dfx", "64:64")[2].feasible


def test_too_many_tokens_for_the_model() -> None:
    est = plan_and_estimate("gpt2-345m", "1xu280", "dfx", "1000:100")[2]
    assert not est.feasible and "1024 positions" in est.reasons[0]
