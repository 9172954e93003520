"""The DFX tensor-parallel plan: shards cover the model exactly, sync points, bad splits."""

import itertools

import pytest

from archipelago.errors import PartitionError
from archipelago.models.weights import all_weights, parameter_count
from archipelago.strategies.tensor_parallel.plan import ComputeStep
from tests.rings import make_ring


@pytest.mark.parametrize("ranks", [1, 2, 4])
@pytest.mark.parametrize("model", ["gpt2-345m", "gpt2-1.5b", "llama2-7b"])
@pytest.mark.parametrize("strategy", ["dfx", "lora-f"])
def test_shards_sum_to_the_whole_model(model: str, ranks: int, strategy: str) -> None:
    plan = make_ring(model, f"{ranks}xu280", strategy)
    total = 0
    for tensor in all_weights(plan.spec):
        shards = [d.shard_for(tensor) for d in plan.devices]
        if all(s.axis is None for s in shards):
            total += tensor.numel  # replicated: one copy of the model's parameter
            continue
        covered = sorted((s.start, s.stop) for s in shards)
        assert covered[0][0] == 0 and covered[-1][1] == tensor.shape[shards[0].axis]
        assert all(a[1] == b[0] for a, b in itertools.pairwise(covered))
        total += sum(s.numel(tensor) for s in shards)
    assert total == parameter_count(plan.spec)


def test_each_rank_holds_a_quarter_of_the_block_matrices_and_the_whole_lm_head() -> None:
    """HBM: the block matrices split four ways, plus the whole (tied) LM head, which every
    core runs (seeds/001 §IV-B splits only attention and FC weights); LORA splits the head by
    vocabulary. DDR keeps the whole WTE for the embedding lookup (seeds/001 §IV-B)."""
    for strategy, split in (("dfx", False), ("lora-f", True)):
        plan = make_ring("gpt2-345m", "4xu280", strategy)
        matrices = sum(t.numel for t in all_weights(plan.spec) if t.layer is not None
                       and t.role.endswith("weight") and len(t.shape) == 2)
        rows = [d.vocab_slice[1] - d.vocab_slice[0] for d in plan.devices]
        assert sum(rows) == (50257 if split else 4 * 50257)
        hbm = [d.held_bytes(plan.spec, 2, "hbm") for d in plan.devices]
        assert hbm == [pytest.approx(2 * (matrices / 4 + r * 1024)) for r in rows]
        ddr = plan.devices[0].held_bytes(plan.spec, 2, "ddr")
        assert ddr > 2 * 50257 * 1024


def test_dfx_scheme_has_four_all_gathers_per_block() -> None:
    plan = make_ring("gpt2-345m", "4xu280", "dfx")
    comm = plan.comm_steps()
    assert [(c.kind, c.tensor) for c in comm] == [
        ("all_gather", "attn_context"), ("all_gather", "attn_out"),
        ("all_gather", "ffn_act"), ("all_gather", "ffn_down")]
    assert [c.width for c in comm] == [1024, 1024, 4096, 1024]
    q = next(s for s in plan.block_steps if isinstance(s, ComputeStep) and s.op.name == "q")
    score = next(s for s in plan.block_steps
                 if isinstance(s, ComputeStep) and s.op.name == "attn_score")
    assert (q.local_out, score.local_heads) == (256, 4)
    head = plan.output_steps[-1]  # whole on every core: no fifth sync for the LM head
    assert isinstance(head, ComputeStep) and head.local_out == 50257


def test_more_devices_than_heads_are_rejected_with_the_numbers() -> None:
    with pytest.raises(PartitionError, match=r"17 devices exceed its 16 attention heads"):
        make_ring("gpt2-345m", "17xu280", "dfx")


def test_dfx_refuses_encoders_and_non_hbm_devices() -> None:
    with pytest.raises(PartitionError, match="encoder"):
        make_ring("bert-base", "2xu280", "dfx")
    with pytest.raises(PartitionError, match="without HBM"):
        make_ring("gpt2-345m", "2xu250", "dfx")


def test_an_untied_head_is_held_whole_on_every_dfx_core() -> None:
    """LLaMA-2-7B's separate LM head (4096 x 32000) sits whole in every core's HBM beside a
    quarter of the block matrices."""
    plan = make_ring("llama2-7b", "4xu280", "dfx")
    matrices = sum(t.numel for t in all_weights(plan.spec) if t.layer is not None
                   and t.role.endswith("weight") and len(t.shape) == 2)
    for d in plan.devices:
        assert d.vocab_slice == (0, 32000)
        assert d.held_bytes(plan.spec, 2, "hbm") == 2 * (matrices / 4 + 4096 * 32000)
