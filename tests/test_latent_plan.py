"""Latent attention on the tensor-parallel rings: which part of each projection a board
holds, the syncs, the latent KV cache, and the absorbed decode form's FLOPs against the
expanded form's, each computed by hand (DeepSeek-V2, arXiv 2405.04434, §2.1.2-2.1.3)."""

import numpy as np
import pytest

from archipelago.errors import ArchipelagoError
from archipelago.estimate.workload import Generation
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.graph import absorbed_block, build_graph
from archipelago.models.graph_ops import Op, Phase, decode, prefill
from archipelago.models.hf_config import spec_from_hf_config
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import embedding_weights, layer_weights, output_weights
from archipelago.strategies.registry import get_strategy
from archipelago.strategies.tensor_parallel.costs import kv_cache_bytes, steps_seconds
from archipelago.strategies.tensor_parallel.estimate import estimate
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep, Plan
from tests.test_hf_families import config

WORK = Generation(8, 8)
# DeepSeek-V3's attention (configuration_deepseek_v3.py defaults).
H, NOPE, ROPE, V, KV_RANK = 128, 128, 64, 128, 512
# A tiny DeepSeek-V3 of MoE layers only (no dense layers first: the rings repeat one block).
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
            intermediate_size=128, vocab_size=128, max_position_embeddings=64,
            n_routed_experts=4, num_experts_per_tok=2, n_group=2, topk_group=1,
            first_k_dense_replace=0, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8,
            qk_nope_head_dim=8, v_head_dim=16, moe_intermediate_size=32)


def deepseek(**fields: object) -> ModelSpec:
    return spec_from_hf_config(config("DeepseekV3", **fields), "deepseek", "t")


def ring(strategy: str, ranks: int) -> Plan:
    return get_strategy(strategy).plan(deepseek(**TINY), resolve_cluster(f"{ranks}xu280"),
                                       None, WORK).program


def _attention_flops(ops: tuple[Op, ...], phase: Phase) -> int:
    """FLOPs of the ops between the attention norm and the attention's output projection."""
    names = [op.name for op in ops]
    inside = ops[names.index("attn_norm") + 1:names.index("attn_out")]
    return sum(int(op.flops(phase)) for op in inside)


@pytest.mark.parametrize("context", [1, 2, 100, 4096])
def test_absorbed_decode_by_hand_and_cheaper_than_re_expanding(context: int) -> None:
    """Cheaper at every decode step (a cached token before it); only a first token with
    nothing cached costs more absorbed: 2 x heads x (2 kv_rank + rope - qk - v) FLOPs."""
    spec = deepseek()
    absorbed = _attention_flops(absorbed_block(spec), decode(context))
    expanded = _attention_flops(build_graph(spec).block, decode(context))
    down = 2 * 7168 * 1536 + 8 * 1536 + 2 * 1536 * H * (NOPE + ROPE) \
        + 2 * 7168 * (KV_RANK + ROPE) + 8 * KV_RANK  # q_a, its norm, q_b, kv_a, its norm
    per_token = 2 * H * NOPE * KV_RANK + 2 * H * KV_RANK * V  # q_latent, v_up
    pairs = context * H * (2 * (KV_RANK + ROPE) + 5 + 2 * KV_RANK)  # score, softmax, context
    assert absorbed == down + per_token + pairs
    # The expanded form with only latents cached re-expands every earlier token by kv_b.
    re_expand = 2 * (context - 1) * KV_RANK * H * (NOPE + V)
    if context == 1:
        assert absorbed - expanded == 2 * H * (2 * KV_RANK + ROPE - (NOPE + ROPE) - V)
    else:
        assert absorbed < expanded + re_expand


@pytest.mark.parametrize("tokens", [64, 1024])
def test_a_prompt_runs_cheaper_expanded(tokens: int) -> None:
    spec = deepseek()
    expanded = _attention_flops(build_graph(spec).block, prefill(tokens))
    assert expanded < _attention_flops(absorbed_block(spec), prefill(tokens))


@pytest.mark.parametrize("strategy", ["dfx", "lora-f"])
def test_up_projections_split_by_heads_the_latent_path_whole(strategy: str) -> None:
    """4 heads on 2 boards: rank 1 holds heads 2-3 of q_b (16 columns each: nope 8 + rope 8)
    and of kv_b (8 key + 16 value columns each); q_a, kv_a and their norms whole (LORA
    splits the block's own norms with the residual, not these)."""
    plan = ring(strategy, 2)
    shards = plan.devices[1].layer_shards
    assert (shards["q_b.weight"].axis, shards["q_b.weight"].start,
            shards["q_b.weight"].stop) == (1, 2 * 16, 4 * 16)
    assert (shards["kv_b.weight"].start, shards["kv_b.weight"].stop) == (2 * 24, 4 * 24)
    for whole in ("q_a.weight", "kv_a.weight", "q_a_norm.weight", "kv_a_norm.weight"):
        assert shards[whole].axis is None, whole
    assert (shards["attn_norm.weight"].axis is None) == (strategy == "dfx")


@pytest.mark.parametrize("strategy", ["dfx", "lora-f"])
def test_decode_runs_absorbed_and_gathers_every_heads_values(strategy: str) -> None:
    plan = ring(strategy, 2)
    prompt = [s.op.name for s in plan.block_steps if isinstance(s, ComputeStep)]
    one = [s.op.name for s in plan.layer_steps(1) if isinstance(s, ComputeStep)]
    assert "kv_b" in prompt and "q_latent" not in prompt
    assert {"q_latent", "latent_context", "v_up"} <= set(one) and "kv_b" not in one
    for steps, after in ((plan.block_steps, "attn_context"), (plan.layer_steps(1), "v_up")):
        gathers = [s for s in steps if isinstance(s, CommStep) and s.tensor == after]
        assert [(g.width, g.local) for g in gathers] == [(4 * 16, 2 * 16)]
    step = next(s for s in plan.layer_steps(1)
                if isinstance(s, ComputeStep) and s.op.name == "q_latent")
    assert step.local_out == 2 * 16  # two heads' latent queries (kv_rank 16 each)
    reduced = {s.tensor for s in plan.layer_steps(1)
               if isinstance(s, CommStep) and s.kind == "all_reduce"}
    assert reduced == (set() if strategy == "dfx" else {"attn_norm", "ffn_norm"})


def test_every_board_caches_the_whole_latent() -> None:
    """2 layers x 10 tokens x (16 latent + 8 rotary key) values, fp16, on each board."""
    plan = ring("lora-f", 2)
    assert [kv_cache_bytes(plan, rank, 10) for rank in range(2)] == [2 * 10 * 24 * 2] * 2


def test_dense_layers_run_their_own_block_and_hold_their_own_weights() -> None:
    """Layer 0 dense (first_k_dense_replace 1), layer 1 MoE, in two stages of one board:
    each stage's decode step is its own layers' steps (the dense FFN's in stage 0, the
    router's and experts' in stage 1) and each board holds its own layers' weights."""
    spec = deepseek(**{**TINY, "first_k_dense_replace": 1})
    plan = get_strategy("dfx").plan(spec, resolve_cluster("2x1xu280"),
                                    {"split": "tp=1,pp=2,layers=1+1"}, WORK)
    ring = plan.program
    dense, moe = ring.layer_steps(1, 0), ring.layer_steps(1, 1)
    names = [{s.op.name for s in steps if isinstance(s, ComputeStep)} for steps in (dense, moe)]
    assert "router" in names[1] and "router" not in names[0]
    est = estimate(plan, WORK)
    for stage, steps, ends in ((0, dense, ring.embed_steps), (1, moe, ring.output_steps)):
        context = np.array([WORK.input_tokens + 1])
        own = [s for part in (steps, ends) for s in steps_seconds(ring, part, Phase(1, context))]
        assert est.stages[stage].decode_s_per_token == pytest.approx(float(sum(own)[0]))
    dense_weights = sum(t.numel for t in layer_weights(spec, 0))
    moe_weights = sum(t.numel for t in layer_weights(spec, 1))
    assert dense_weights != moe_weights
    held = [est.devices[k].hbm_bytes + est.devices[k].ddr_bytes for k in range(2)]
    tables = sum(t.numel for t in embedding_weights(spec))
    outputs = sum(t.numel for t in output_weights(spec))
    cache = 1 * WORK.total_tokens * (16 + 8) * 2  # one layer's latent and rotary key
    # DFX keeps the tables whole in DDR, the untied head also copied to HBM it streams.
    head = 128 * 64
    assert held == [2 * (dense_weights + tables) + cache,
                    2 * (moe_weights + outputs + head) + cache]


def test_whole_experts_are_refused_beside_dense_layers() -> None:
    spec = deepseek(**{**TINY, "first_k_dense_replace": 1})
    with pytest.raises(ArchipelagoError, match="has dense layers beside its MoE ones"):
        get_strategy("dfx").plan(spec, resolve_cluster("2xu280"),
                                 {"split": "tp=2,pp=1,ep=2"}, WORK)
