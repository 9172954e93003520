"""The weights a step of a mixture of experts reads (issue 32 point 2): the expected distinct
experts of a batch against every routing enumerated, uniform and skewed; each engine's bytes
by hand; Mixtral-8x7B and Qwen2-MoE's default config at batch 1, 8 and 64 on GPUs and LORA
rings against weight bytes counted by hand."""

import itertools
import json
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from archipelago.api import make_plan, plan_and_estimate
from archipelago.hardware.catalog import get_device
from archipelago.models.expert_routing import (
    MAX_SKEW,
    expected_distinct_experts,
    inclusion_probabilities,
)
from archipelago.models.graph import build_graph
from archipelago.models.graph_ops import Phase, decode
from archipelago.models.zoo import resolve_model
from archipelago.strategies.gpu.plan import MEMORY_EFFICIENCY
from archipelago.strategies.gpu.roofline import op_cost
from archipelago.strategies.tensor_parallel.efficiency import decode_efficiency
from archipelago.strategies.tensor_parallel.engines.systolic import SystolicEngine
from archipelago.strategies.tensor_parallel.engines.systolic_config import SystolicConfig
from archipelago.strategies.tensor_parallel.plan import ComputeStep

DATA = Path(__file__).parent / "data"
MIXTRAL = str(DATA / "mixtral-8x7b" / "config.json")
QWEN2_MOE = str(DATA / "qwen2-moe" / "config.json")  # transformers' Qwen2MoeConfig()
CONTEXT = Phase(1, np.array([64]))


# ---- the expected distinct experts, against every routing ----------------------------------
def _mean_distinct(routings: list[tuple[Fraction, frozenset[int]]], tokens: int) -> float:
    """E[distinct experts] of `tokens` independent tokens, each routed as `routings` says
    (probability, experts picked), over every combination of their picks."""
    total = Fraction(0)
    for picks in itertools.product(routings, repeat=tokens):
        chance = np.prod([p for p, _ in picks], dtype=object)
        total += chance * len(frozenset().union(*(e for _, e in picks)))
    return float(total)


@pytest.mark.parametrize(("experts", "k", "tokens"), [
    (4, 2, 1), (4, 2, 2), (4, 2, 3), (5, 2, 3), (6, 3, 2), (8, 2, 3), (4, 4, 2)])
def test_uniform_distinct_experts_by_enumerating_every_routing(experts: int, k: int,
                                                               tokens: int) -> None:
    subsets = list(itertools.combinations(range(experts), k))
    uniform = [(Fraction(1, len(subsets)), frozenset(s)) for s in subsets]
    assert expected_distinct_experts(experts, k, tokens) == pytest.approx(
        _mean_distinct(uniform, tokens), rel=1e-12)


def test_distinct_experts_by_hand() -> None:
    """E = 4, k = 2: two tokens pick the same pair in 6 of 36 cases (2 experts), disjoint
    pairs in 6 (4), else share one (3): 108 / 36 = 3 = 4 x (1 - 1/4); three tokens 3.5."""
    assert expected_distinct_experts(4, 2, 2) == 3.0
    assert expected_distinct_experts(4, 2, 3) == 3.5
    assert expected_distinct_experts(8, 2, 1) == 2.0
    assert expected_distinct_experts(8, 2, 8) == pytest.approx(8 * (1 - 0.75 ** 8))  # 7.2


def test_skewed_inclusion_probabilities_by_hand() -> None:
    """Zipf weights 1, 1/2, 1/3, 1/4 scaled to add up to k = 2: 24, 12, 8, 6 / 25. At s = 2
    the first would be 288/205 > 1: capped, the one left spread as 1/4 : 1/9 : 1/16."""
    assert inclusion_probabilities(4, 2, 1.0) == pytest.approx([24 / 25, 12 / 25, 8 / 25,
                                                                6 / 25])
    assert inclusion_probabilities(4, 2, 2.0) == pytest.approx([1, 36 / 61, 16 / 61, 9 / 61])
    assert inclusion_probabilities(4, 2, 0.0) == pytest.approx([0.5] * 4)


def _systematic_router(p: list[Fraction]) -> list[tuple[Fraction, frozenset[int]]]:
    """A router whose inclusion probabilities are `p` (adding up to k): systematic sampling,
    u uniform in [0, 1), expert i picked when u + j falls in its stretch [c_{i-1}, c_i) of
    the running sum for some whole j; enumerated exactly between the breakpoints of u."""
    ends = list(itertools.accumulate(p))
    starts = [Fraction(0), *ends[:-1]]
    cuts = sorted({Fraction(0), Fraction(1), *(c - int(c) for c in ends)})
    routings = []
    for lo, hi in itertools.pairwise(cuts):
        u = (lo + hi) / 2
        picked = frozenset(i for i, (a, b) in enumerate(zip(starts, ends, strict=True))
                           if any(a <= u + j < b for j in range(len(p))))
        routings.append((hi - lo, picked))
    return routings


@pytest.mark.parametrize("tokens", [2, 3])
def test_skewed_distinct_experts_by_enumerating_a_router(tokens: int) -> None:
    """Any router with those inclusion probabilities reads the same distinct experts in
    expectation (tokens independent); one built by systematic sampling, enumerated."""
    p = [Fraction(24, 25), Fraction(12, 25), Fraction(8, 25), Fraction(6, 25)]
    router = _systematic_router(p)
    assert all(len(e) == 2 for _, e in router) and sum(q for q, _ in router) == 1
    assert expected_distinct_experts(4, 2, tokens, skew=1.0) == pytest.approx(
        _mean_distinct(router, tokens), rel=1e-12)


def test_skew_reads_fewer_experts_down_to_k() -> None:
    reads = [expected_distinct_experts(8, 2, 8, s) for s in (0.0, 0.5, 1.0, 2.0, MAX_SKEW)]
    assert reads == sorted(reads, reverse=True)
    assert reads[-1] == pytest.approx(2.0, abs=0.02)


# ---- the graph's routed ops ------------------------------------------------------------------
def _ffn(model: str) -> dict[str, object]:
    return {op.name: op for op in build_graph(resolve_model(model)).block}


def test_routed_ops_read_the_distinct_experts_and_run_a_tokens() -> None:
    ops = _ffn(MIXTRAL)
    gate, down = ops["ffn_gate"], ops["ffn_down"]
    assert (gate.routed.axis, down.routed.axis, ops["router"].routed) == ("out", "in", None)
    assert gate.fan_out == down.fan_in == 2 * 14336  # a token's compute: its two experts
    assert gate.flops(decode(10)) == 2 * 4096 * 2 * 14336
    assert gate.read_scale(1) == down.read_scale(1) == ops["q"].read_scale(64) == 1.0
    assert gate.read_scale(8) == pytest.approx(8 * (1 - 0.75 ** 8) / 2)
    shared = _ffn(QWEN2_MOE)["ffn_up"]  # 4 of 60 experts of 1408, a shared one of 5632
    assert shared.fan_out == 4 * 1408 + 5632
    assert shared.read_scale(8) == pytest.approx(
        (60 * (1 - (56 / 60) ** 8) * 1408 + 5632) / (4 * 1408 + 5632))


# ---- each engine's bytes by hand -------------------------------------------------------------
def test_gpu_op_reads_the_batchs_distinct_experts() -> None:
    """ffn_gate of Mixtral on one of 2 GPUs at batch 8: half of the columns of the 7.2
    experts read, the activations in and out of 8 tokens; the FLOPs of 8 tokens' 2."""
    spec = resolve_model(MIXTRAL)
    gate = _ffn(MIXTRAL)["ffn_gate"]
    cost = op_cost(gate, spec, decode(100), batch=8, ranks=2)
    read = 8 * (1 - 0.75 ** 8)
    assert cost.bytes == pytest.approx(2 * (4096 * read * 14336 / 2
                                            + 8 * (4096 + 2 * 14336 / 2)), rel=1e-12)
    assert cost.flops == 8 * 2 * 4096 * 2 * 14336 / 2
    skewed = op_cost(gate, spec, decode(100), batch=8, ranks=2, skew=1.0)
    assert skewed.bytes < cost.bytes and skewed.flops == cost.flops


def test_lora_streams_the_distinct_experts_tiles() -> None:
    """One U280, LORA-F defaults (T_m = 32): Mixtral's ffn_up at batch 8 streams the 7.2
    experts' columns, ceil(7.2 x 14336) = 103,202 of them, in 32 x 32 FP16 tiles; its
    vectors meet 2 / 7.2 of them each, so the array's passes stay the tokens'."""
    spec = resolve_model(MIXTRAL)
    engine = SystolicEngine(SystolicConfig(), get_device("u280"), spec, 1)
    up = _ffn(MIXTRAL)["ffn_up"]
    step = ComputeStep(up, up.fan_out, sequences=8)
    read = 8 * (1 - 0.75 ** 8)
    columns = int(np.ceil(2 * 14336 * read / 2))
    tiles = 4096 // 32 * -(-columns // 32)
    assert engine.streamed_bytes(step, CONTEXT)[0] == tiles * 32 * 32 * 2
    wide, meets = step.read(8, 0.0)
    assert (wide.local_out, wide.op.routed, meets) == (columns, None, pytest.approx(2 / read))
    # Eq. 8 in vector mode: 32 tiles an iteration, each read while 8 x 2 / 7.2 vectors pass
    # the last 32 (2 x 32 cycles each); in matrix mode, ceil(8 x 2 / 7.2) = 3 rows a tile.
    bpc, iterations = engine.hbm_bytes_per_cycle, -(-tiles // 32)
    l_axi, l_cal = tiles / iterations * 2048 / bpc, 8 * 2 / read * 2 * 32
    vector = l_axi + max(l_axi, l_cal) * (iterations - 1) + l_cal
    matrix = 2048 / bpc + 32 * (tiles - 1) + 32 + 2 * 32
    assert engine.cycles(step, CONTEXT)[0] == pytest.approx(min(vector, matrix), rel=1e-12)
    dense = ComputeStep(up, up.fan_out, sequences=1)
    assert engine.streamed_bytes(dense, CONTEXT)[0] == 4096 // 32 * 2 * 14336 // 32 * 2048


def test_whole_experts_read_at_worst_their_board_s(tmp_path: Path) -> None:
    """8 experts, top-2, on 2 boards of whole experts: the busiest board holds 4, a token
    runs at worst 2 of them there, and a step of 8 tokens reads at worst all 4."""
    fields = {"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 128,
              "max_position_embeddings": 512, "hidden_act": "silu", "intermediate_size": 32,
              "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": None,
              "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(fields))
    plan = make_plan(str(tmp_path / "config.json"), "2xu280", "lora-q",
                     {"split": "tp=2,pp=1,ep=2"}).program
    gate = next(s.op for s in plan.block_steps if getattr(s, "op", None)
                and s.op.name == "ffn_gate")
    assert (gate.routed.experts, gate.routed.per_token, gate.routed.bound) == (4, 2, True)
    assert (gate.read_scale(1), gate.read_scale(2), gate.read_scale(8)) == (1.0, 2.0, 2.0)


# ---- Mixtral-8x7B and Qwen2-MoE on 2xH100 and 8xU280, by hand ----------------------------
# (layers, hidden, attention matrices' elements, router, shared scale, shared expert,
# experts, per token, expert width, LM head) of each model's config.
SHAPES = {
    MIXTRAL: (32, 4096, 2 * 4096 * 4096 + 2 * 4096 * 1024, 4096 * 8, 0, 0, 8, 2, 14336,
              4096 * 32000),
    QWEN2_MOE: (24, 2048, 4 * 2048 * 2048, 2048 * 60, 2048, 3 * 2048 * 5632, 60, 4, 1408,
                2048 * 151936),
}
BATCHES = (1, 8, 64)
CASES = [(model, cluster, strategy) for model in SHAPES
         for cluster, strategy in (("2xh100", "gpu-graph"), ("8xu280", "lora-q"))]


def weight_elements(model: str, batch: int, replicas: int) -> float:
    """Weights a decode step of `batch` tokens multiplies, by hand: attention, the router
    and shared scale (on each of `replicas` GPUs: whole on every one), the shared expert,
    the expected distinct experts' three matrices in every layer, and the LM head."""
    layers, h, attn, router, scale, shared, experts, k, width, head = SHAPES[model]
    read = experts * (1 - (1 - k / experts) ** batch)
    return layers * (attn + replicas * (router + scale) + shared + read * 3 * h * width) + head


def _runs(model: str, cluster: str, strategy: str) -> Iterator[tuple[int, float, float]]:
    """(batch, bytes of a decode step, seconds per step) at each batch."""
    for batch in BATCHES:
        plan, work, est = plan_and_estimate(model, cluster, strategy, {"batch": str(batch)})
        nbytes = (est.decode_bytes_per_token if strategy.startswith("gpu")
                  else decode_efficiency(plan, work, est).bytes_per_token)
        yield batch, nbytes, est.decode_s_per_token


@pytest.mark.parametrize(("model", "cluster", "strategy"), CASES)
def test_decode_bytes_by_hand_and_time_with_the_experts(model: str, cluster: str,
                                                        strategy: str) -> None:
    """The tool's bytes per decode step are the weights counted by hand plus what every
    sequence reads and writes for itself (its KV cache, its activations): a part
    proportional to the batch, the same per sequence at every batch. The time grows with
    the batch: on the GPUs (memory-bound), by at least the extra weights' streaming."""
    gpu = strategy.startswith("gpu")
    value = 2 if gpu else 1  # FP16 on the GPUs, LORA-Q's int8 (seeds/002 §V-A)
    runs = list(_runs(model, cluster, strategy))
    weights = {b: value * weight_elements(model, b, 2 if gpu else 1) for b, _, _ in runs}
    per_sequence = [(nbytes - weights[b]) / b for b, nbytes, _ in runs]
    assert per_sequence == pytest.approx([per_sequence[0]] * len(runs), rel=1e-9)
    assert 0 < per_sequence[0] < 0.01 * weights[1]
    seconds = [s for _, _, s in runs]
    assert seconds == sorted(seconds)
    if gpu:
        bandwidth = 2 * get_device("h100").memory("hbm").bandwidth_Bps * MEMORY_EFFICIENCY
        for b in BATCHES[1:]:
            extra = (weights[b] - weights[1]) / bandwidth
            assert seconds[BATCHES.index(b)] - seconds[0] >= extra
