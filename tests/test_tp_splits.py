"""Tensor-parallel splits real systems run: key/value heads replicated past their count,
uneven head splits costed by the busiest device, boards without DDR, and buffers sized by a
board's share. Every expected figure is computed by hand from the published configs."""

import json
from pathlib import Path

import pytest

from archipelago.api import plan_and_estimate
from archipelago.errors import PartitionError
from archipelago.models.weights import all_weights
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep, Plan
from tests.rings import make_ring

# Published configs (Hugging Face config.json fields).
LLAMA2_70B = {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
              "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80,
              "vocab_size": 32000, "max_position_embeddings": 4096}
LLAMA2_13B = {"model_type": "llama", "hidden_size": 5120, "intermediate_size": 13824,
              "num_attention_heads": 40, "num_key_value_heads": 40, "num_hidden_layers": 40,
              "vocab_size": 32000, "max_position_embeddings": 4096}
# Qwen2-7B's shape (28 heads, 4 key/value heads) written as a llama config.
QWEN2_7B = {"model_type": "llama", "hidden_size": 3584, "intermediate_size": 18944,
            "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28,
            "vocab_size": 152064, "max_position_embeddings": 32768}
CODELLAMA_34B = {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 22016,
                 "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 48,
                 "vocab_size": 32000, "max_position_embeddings": 16384}


def config(tmp_path: Path, fields: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    return str(path)


def columns(plan: Plan, role: str) -> list[tuple[int, int]]:
    tensor = next(t for t in all_weights(plan.spec) if t.role == role)
    return [(d.shard_for(tensor).start, d.shard_for(tensor).stop) for d in plan.devices]


def step(plan: Plan, name: str) -> ComputeStep:
    return next(s for s in plan.block_steps if isinstance(s, ComputeStep) and s.op.name == name)


def test_llama2_70b_on_32_boards_replicates_each_kv_head_on_4(tmp_path) -> None:
    plan = make_ring(config(tmp_path, LLAMA2_70B), "32xu280", "dfx")
    # 64 query heads / 32 = 2 per board, all in one group of 8: board r reads KV head r // 4.
    assert columns(plan, "k.weight") == [(r // 4 * 128, r // 4 * 128 + 128) for r in range(32)]
    assert columns(plan, "q.weight") == [(r * 256, r * 256 + 256) for r in range(32)]
    assert (step(plan, "k").local_out, step(plan, "q").local_out) == (128, 256)
    assert step(plan, "attn_score").local_heads == 2


def test_llama2_70b_memory_counts_the_replicated_kv(tmp_path) -> None:
    _, _, est = plan_and_estimate(config(tmp_path, LLAMA2_70B), "32xu280", "dfx",
                                  {"tokens": "128:128"})
    # Per layer in HBM: q 8192x256, k and v 8192x128 (one whole KV head), attn_out 8192x256,
    # gate and up 8192x896, down 28672x256; then the whole LM head (DFX runs it on every
    # core: 32000 x 8192).
    layer = 8192 * (256 + 128 + 128 + 256 + 896 + 896) + 28672 * 256
    weights = (80 * layer + 32000 * 8192) * 2
    kv = 2 * 80 * 256 * 128 * 2  # K and V, 80 layers, 256 tokens, one 128-wide head, FP16
    assert [d.hbm_bytes for d in est.devices] == [weights + kv] * 32
    assert est.feasible


def test_llama2_70b_on_16_boards_is_planned(tmp_path) -> None:
    plan = make_ring(config(tmp_path, LLAMA2_70B), "16xu280", "lora-q")
    assert columns(plan, "v.weight") == [(r // 2 * 128, r // 2 * 128 + 128) for r in range(16)]


def test_llama2_13b_on_32_boards_is_costed_by_the_busiest_board(tmp_path) -> None:
    plan = make_ring(config(tmp_path, LLAMA2_13B), "32xu280", "dfx")
    # 40 heads over 32: boards 0-7 hold 2, boards 8-31 hold 1; every board waits for 2.
    heads = [(b - a) // 128 for a, b in columns(plan, "q.weight")]
    assert heads == [2] * 8 + [1] * 24
    assert step(plan, "attn_score").local_heads == 2 and step(plan, "q").local_out == 256
    gather = next(s for s in plan.block_steps
                  if isinstance(s, CommStep) and s.tensor == "attn_context")
    assert gather.share(32) == 256  # two heads' context, not 5120 / 32 = 160
    assert step(plan, "ffn_up").local_out == 432  # 13824 / 32


def test_qwen2_7b_beyond_4_boards_holds_the_kv_heads_its_queries_read(tmp_path) -> None:
    plan = make_ring(config(tmp_path, QWEN2_7B), "8xu280", "lora-q")
    # 28 heads over 8: 4,4,4,4,3,3,3,3; groups of 7 query heads per KV head.
    q = [(a // 128, b // 128) for a, b in columns(plan, "q.weight")]
    assert q == [(0, 4), (4, 8), (8, 12), (12, 16), (16, 19), (19, 22), (22, 25), (25, 28)]
    kv = [(a // 128, b // 128) for a, b in columns(plan, "k.weight")]
    assert kv == [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (2, 4), (3, 4), (3, 4)]
    assert step(plan, "k").local_out == 2 * 128 and step(plan, "attn_score").local_heads == 4


def test_a_board_needs_at_least_one_head() -> None:
    with pytest.raises(PartitionError, match="17 devices exceed its 16 attention heads"):
        make_ring("gpt2-345m", "17xu280", "lora-q")


@pytest.mark.parametrize("strategy", ["dfx", "lora-f", "lora-q"])
def test_u55c_without_ddr_keeps_everything_in_hbm(strategy: str) -> None:
    _, _, u280 = plan_and_estimate("gpt2-345m", "1xu280", strategy, {"tokens": "32:32"})
    plan, _, u55c = plan_and_estimate("gpt2-345m", "1xu55c", strategy, {"tokens": "32:32"})
    assert u55c.feasible and u55c.devices[0].ddr_bytes == 0
    # What the U280 keeps in DDR moves to HBM, where one copy serves both uses: DFX drops the
    # LM head's HBM copy of the tied embedding table, LORA its HBM copy of every matrix
    # (the DDR prefill mirror becomes the one copy). The KV cache stays: 24 layers x 64
    # tokens x 1024 values, K and V.
    value = plan.program.bytes_per_param
    kv = 2 * 24 * 64 * 1024 * value
    u280_hbm, u280_ddr = u280.devices[0].hbm_bytes, u280.devices[0].ddr_bytes
    expected = (u280_hbm + u280_ddr - 50257 * 1024 * value if strategy == "dfx"
                else u280_ddr + kv)
    assert u55c.devices[0].hbm_bytes == expected


def test_dfx_reads_table_rows_from_an_hbm_pseudo_channel_on_u55c() -> None:
    plan = make_ring("gpt2-345m", "1xu55c", "dfx")
    # 460 GB/s over 32 pseudo-channels = 14.375 GB/s, 35.9 FP16 values per 200 MHz cycle,
    # above the 512-bit DMA port's 32 values: the port sets the pace, as with DDR.
    assert plan.engine.table_values_per_cycle == 32


def test_codellama_34b_buffers_are_sized_by_the_boards_share(tmp_path) -> None:
    _, _, est = plan_and_estimate(config(tmp_path, CODELLAMA_34B), "8xu280", "lora-q",
                                  {"tokens": "32:32"})
    # Eq. 5 (int8, T_m 64, P_w 64): 64 BRAM36; Eq. 6 AXI: 32 x ceil(512/36) = 480; router
    # TX/RX: 2 x ceil(256/36) x ceil(64 x 2752 / 32 / 512) = 176 (2752 = 22016 / 8);
    # intermediate: 64 x (6 x 1024 + 2 x 2752) bytes / 4.5 KiB = 162. The full FFN width
    # would make the router 1376 and the total 2082.
    assert est.devices[0].units["buffers"].bram == 64 + 480 + 176 + 162
    assert est.feasible


def test_dfx_router_buffers_hold_one_cores_share() -> None:
    one_plan, four_plan = (make_ring("gpt2-345m", f"{n}xu280", "dfx") for n in (1, 4))
    one = one_plan.engine.resources(one_plan.spec)["buffers"]
    four = four_plan.engine.resources(four_plan.spec)["buffers"]
    # TX and RX each hold 64 tokens x 4096 / N FP16 values in 1024-bit words: 4096 deep on
    # one board (URAM, 4096 x 72: 15 blocks each), 1024 deep on four (BRAM36 512 x 72:
    # 15 x 2 = 30 blocks each).
    assert one.uram - four.uram == 2 * 15
    assert four.bram - one.bram == 2 * 30


@pytest.mark.parametrize("strategy", ["dfx", "lora-q"])
def test_moe_buffers_hold_a_tokens_routed_experts(strategy: str) -> None:
    """Mixtral-8x7B routes each token through 2 experts of 14,336 columns: the router and
    intermediate buffers hold 28,672 columns' share per board, as much as the dense model
    whose FFN is that wide (and more than one expert's 14,336)."""
    from archipelago.models.zoo import resolve_model

    moe = resolve_model(str(Path(__file__).parent / "data" / "mixtral-8x7b" / "config.json"))
    assert moe.widest_ffn == 2 * 14336
    wide = moe.model_copy(update={"moe": None, "ffn": 2 * 14336})
    narrow = moe.model_copy(update={"moe": None, "ffn": 14336})
    cluster = "8xu280"
    engine = make_ring("llama2-7b", cluster, strategy).engine
    buffers = {name: engine.resources(spec)["buffers"]
               for name, spec in (("moe", moe), ("wide", wide), ("narrow", narrow))}
    assert buffers["moe"] == buffers["wide"]
    assert buffers["moe"].bram > buffers["narrow"].bram
