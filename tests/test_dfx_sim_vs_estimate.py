"""The timing simulator running compiled programs and the analytical DFX engine agree within
5% per operation group and per token on a tiny GPT-2 (issue #23 point 4), both taken without
their two calibrated figures (`unfitted`): what is compared is the mechanisms both model. The
groups compared are those both cost the same way; norms, residuals and the embedding differ
by chaining the analytical engine does not model (see docs/strategies/dfx-simulator.md) and
are checked for the direction of that difference. With the calibrated figures, the two agree
within 5% end to end on gpt2-345m on 1, 2 and 4 boards (issue #34 point 3), and the
simulated sync time is the one counted by hand from Algorithm 1's four syncs."""

import numpy as np
import pytest

from archipelago.strategies.tensor_parallel.dfx_program.asm import format_instr
from archipelago.strategies.tensor_parallel.dfx_program.compile import compile_plan
from archipelago.strategies.tensor_parallel.dfx_program.versus import (
    estimated_groups,
    simulate_plan,
    simulated_groups,
)
from archipelago.strategies.tensor_parallel.engines.router import (
    DFX_SYNC_OVERHEAD_S,
    dfx_hop_s,
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


@pytest.mark.parametrize("cores", [1, 2, 4])
def test_calibrated_simulator_and_estimate_agree_on_gpt2_345m(cores: int) -> None:
    """gpt2-345m at 32:32 (issue #34: 9.5% apart on one board, 27% on four, the sync time
    4.6x): end to end within 5%, and the sync time both ways equal to Algorithm 1's four
    syncs a layer, each the router's per-sync cost and N - 1 hops of a core's slice
    (attention context 1024, out-projection 1024, FFN 4096, FFN out 1024 values, split N
    ways), in each of 24 layers x 63 token passes. About 0.4 s a case."""
    plan = plan_for("gpt2-345m", f"{cores}xu280")
    est = estimated_groups(plan, 32, 32)
    sim = simulated_groups(plan, simulate_plan(plan, 32, 32))
    total = [sum(float(v.sum()) for v in d.values()) for d in (est, sim)]
    assert total[1] == pytest.approx(total[0], rel=0.05)
    per_layer = 0.0 if cores == 1 else sum(
        DFX_SYNC_OVERHEAD_S
        + (cores - 1) * dfx_hop_s(width // cores, plan.cluster.link(0, 1), 200e6)
        for width in (1024, 1024, 4096, 1024))
    for side in (est, sim):
        assert side["sync"].sum() == pytest.approx(63 * 24 * per_layer, rel=1e-6)


def test_the_simulated_sync_share_is_the_one_seeds_002_quotes_for_dfx() -> None:
    """seeds/002 §II-C: in DFX "computation is completely stalled during synchronization",
    which "accounts for approximately 17% of the total latency" in one of DFX's cases (its
    §VII-A breaks down gpt2-1.5b on 4 FPGAs). Not a fitted point (the per-sync cost is
    fitted to gpt2-345m's throughput); the simulator's hops alone gave 5%."""
    plan = plan_for("gpt2-1.5b", "4xu280")
    sim = simulated_groups(plan, simulate_plan(plan, 8, 8))
    share = sim["sync"].sum() / sum(v.sum() for v in sim.values())
    assert share == pytest.approx(0.17, abs=0.02)


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
