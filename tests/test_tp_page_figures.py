"""The tensor-parallel page's roofline and context sweep read the estimate's own figures at
the plan's batch (issue 38): each point's seconds are the estimator's for the batch's
step, its bytes the engine's streamed bytes, and it sits on or under the slope of the
memory it reads (LORA's decode K and V come from URAM, faster than the HBM slope they
were drawn under); the context sweep passes through the estimate's mean decode step."""

import numpy as np
import pytest

from archipelago.api import plan_and_estimate
from archipelago.models.graph_ops import Phase
from archipelago.strategies.tensor_parallel.costs import batched, steps_seconds
from archipelago.strategies.tensor_parallel.page_roofline import (
    mean_decode_context,
    plan_roof_points,
)
from archipelago.strategies.tensor_parallel.page_sweeps import decode_step_seconds

URAM_PORT_BYTES = 9  # a URAM288 read port: 72 bits a cycle (UG573)


def _under_roofs(plan, work) -> list:
    engine = plan.program.engine
    points = plan_roof_points(plan.program, work)
    for p in points:
        intensity, attained = p.point.ops / p.point.nbytes, p.point.ops / p.point.seconds
        assert attained <= min(engine.peak_ops_per_s, intensity * p.rate_Bps) * (1 + 1e-9), p
    return points


def test_lora_attention_streams_int8_tiles_from_uram() -> None:
    """The mechanism of the issue's 1.5x: the old page counted each head's keys as FP16
    values, context x head_dim x 2 bytes; LORA-Q (W8A8) keeps them INT8, fetched as whole
    T_m x T_m tiles, and streams them from URAM, not HBM."""
    plan, work, _ = plan_and_estimate("gpt2-1.5b", "1xu280", "lora-q", {})
    engine = plan.program.engine
    config = engine.config
    # 48 layers x K and V of 1536 INT8 values a token: 147,456 bytes; the URAMs hold
    # kv_uram x 36,864 bytes, more than the 96 tokens of the mean decode step
    assert engine.format.kv_bytes == 1 and config.t_m == 64
    assert config.kv_uram * 36_864 // (48 * 2 * 1536) >= mean_decode_context(work) == 96
    points = _under_roofs(plan, work)
    kv = {p.point.name: p for p in points
          if p.point.group == "decode" and p.memory == "KV cache"}
    assert set(kv) == {"attn_score", "attn_context"}
    hbm = engine.hbm_bytes_per_cycle * config.clock_hz
    for p in kv.values():
        # 24 heads x 2 tiles (64 x 96 keys, or 96 x 64 values, in 64 x 64 tiles) x 4,096
        assert p.point.nbytes == 24 * 2 * 64 * 64 * 1
        assert p.rate_Bps == pytest.approx(config.kv_uram * URAM_PORT_BYTES * config.clock_hz)
        fp16_bytes = 24 * 64 * 96 * 2  # the old page's count
        assert p.point.ops / p.point.seconds > 1.4 * hbm * p.point.ops / fp16_bytes


def test_points_are_the_batch_s_step_as_the_estimator_costs_it() -> None:
    plan, work, _ = plan_and_estimate("gpt2-1.5b", "1xu280", "lora-q", {"batch": "8"})
    program = plan.program
    phase = Phase(1, np.array([mean_decode_context(work)]))
    steps = program.layer_steps(1)
    seconds = steps_seconds(program, steps, phase, 8)  # the estimator's, 8 together
    by_name = {s.op.name: (s, float(t[0])) for s, t in zip(batched(steps, 8), seconds,
                                                           strict=True)
               if hasattr(s, "op") and s.stage == "whole"}
    one = {p.point.name: p.point for p in plan_roof_points(
        program, work.__class__(work.input_tokens, work.output_tokens, 1))
        if p.point.group == "decode"}
    points = [p for p in _under_roofs(plan, work) if p.point.group == "decode"]
    assert {p.point.name for p in points} == {"q", "k", "v", "attn_score", "attn_context",
                                              "attn_out", "ffn_up", "ffn_down"}
    for p in points:
        step, t = by_name[p.point.name]
        assert p.point.seconds == t
        assert p.point.nbytes == float(program.engine.streamed_bytes(step, phase)[0])
        assert p.point.ops == pytest.approx(8 * one[p.point.name].ops, rel=1e-12)


@pytest.mark.parametrize(("cluster", "strategy"), [("1xu280", "lora-q"), ("4xu280", "dfx")])
def test_the_context_sweep_passes_through_the_mean_decode_step(cluster, strategy) -> None:
    plan, work, est = plan_and_estimate("gpt2-1.5b", cluster, strategy, {"batch": "8"})
    at = decode_step_seconds(plan, work, est, np.array([mean_decode_context(work)]))
    # the mean of the steps at contexts 65..127 against the step at their midpoint, 96:
    # equal but for the tiles' rounding
    assert float(at[0]) == pytest.approx(est.decode_s_per_token, rel=0.005)
    one = decode_step_seconds(plan, work.__class__(64, 64, 1), est,
                              np.array([mean_decode_context(work)]))
    assert float(at[0]) > 2 * float(one[0])  # the batch's step, not one sequence's


def test_dfx_runs_a_batch_in_turn_so_its_points_are_one_sequence_s() -> None:
    plan, work, _ = plan_and_estimate("gpt2-1.5b", "4xu280", "dfx", {"batch": "8"})
    eight = plan_roof_points(plan.program, work)
    one = plan_roof_points(plan.program, work.__class__(64, 64, 1))
    assert [p.point for p in eight] == [p.point for p in one]
    _under_roofs(plan, work)
