"""The timing simulator running compiled programs and the analytical DFX engine agree within
5% per operation group and per token on a tiny GPT-2 (issue #23 point 4), the analytical
engine taken without its two fitted constants: the simulator has none, so what is compared
is the mechanisms both model. The groups compared are those both cost the same way; norms,
residuals and the embedding differ by chaining the analytical engine does not model (see
docs/strategies/dfx-simulator.md) and are checked for the direction of that difference."""

import numpy as np
import pytest

from archipelago.strategies.tensor_parallel.dfx_program.asm import format_instr
from archipelago.strategies.tensor_parallel.dfx_program.compile import compile_plan
from archipelago.strategies.tensor_parallel.dfx_program.versus import (
    estimated_groups,
    simulate_plan,
    simulated_groups,
)
from benchmarks.dfx_sim_vs_estimate import plan_for, unfitted

SHARED = ("qkv", "attention", "attn_out", "ffn", "sync", "lm_head")


@pytest.mark.parametrize("cores", [1, 2, 4])
@pytest.mark.parametrize("tokens", [(8, 8), (32, 32)])
def test_simulated_and_estimated_agree_within_5_percent(cores: int,
                                                        tokens: tuple[int, int]) -> None:
    plan = plan_for("tiny", f"{cores}xu280")
    with unfitted():
        est = estimated_groups(plan, *tokens)
    sim = simulated_groups(plan, simulate_plan(plan, *tokens))
    for row in SHARED:
        if est[row].sum() or sim[row].sum():
            assert sim[row].sum() == pytest.approx(est[row].sum(), rel=0.05), row
    n_in = tokens[0]
    per_token = [sum(v[n_in:] for v in d.values()) for d in (est, sim)]
    assert np.allclose(per_token[1], per_token[0], rtol=0.05)
    # chaining only takes cycles away from the vector sequences (§IV-C)
    assert sim["norms"].sum() <= est["norms"].sum()


def test_the_result_reports_layers_and_one_layers_timeline_per_core() -> None:
    plan = plan_for("tiny", "2xu280")
    result = simulate_plan(plan, 4, 4)
    layers, tokens = result.layer_cycles.shape
    assert (layers, tokens) == (plan.spec.layers, 7)  # 4 + 4 - 1 passes
    # layers run one after another inside each pass, after the embedding
    assert np.all(result.layer_cycles > 0)
    assert np.all(result.layer_cycles.sum(axis=0) < result.token_cycles)
    timeline = result.as_json()["timeline"]
    layers = [p.layer for p in compile_plan(plan, 4, 4)[0]]
    assert len(timeline) == 2 * len(layers[0].instrs)
    assert all(0 <= e["start"] <= e["end"] for e in timeline)
    # each core's entry lists its own instruction (its columns' addresses differ)
    for core, layer in enumerate(layers):
        assert [e["instr"] for e in timeline if e["core"] == core] == [
            format_instr(i) for i in layer.instrs]
    assert layers[0].instrs != layers[1].instrs
