"""Decode roofline figures of a tensor-parallel estimate, against a hand count."""

import pytest

from archipelago.api import make_plan
from archipelago.estimate.workload import Generation
from archipelago.strategies.tensor_parallel.efficiency import decode_efficiency
from archipelago.strategies.tensor_parallel.estimate import estimate as estimate_plan
from archipelago.strategies.tensor_parallel.report import summarize

# gpt2-345m: 24 layers, hidden 1024, FFN 4096, 16 heads, vocabulary 50257, tied LM head.
H, L, F, V, HEADS = 1024, 24, 4096, 50257, 16


def test_bytes_flops_and_bandwidth_of_gpt2_345m_on_two_u280() -> None:
    plan = make_plan("gpt2-345m", "2xu280", "dfx")
    work = Generation(32, 33)
    est = estimate_plan(plan, work)
    eff = decode_efficiency(plan, work, est)
    assert eff is not None
    context = 32 + 33 / 2  # decode steps attend 33 .. 64 keys
    matrices = L * (4 * H * H + 2 * H * F) + V * H  # q, k, v, out, FFN up, down; LM head
    kv = 2 * L * context * H * 2  # FP16 keys and values
    assert eff.bytes_per_token == 2 * matrices + kv
    assert eff.memory_Bps == 2 * 460e9  # two U280s' HBM2 (catalog)
    keys = round(context)
    per_layer = (2 * (4 * H * H + 2 * H * F)  # linears
                 + 2 * 2 * H * keys + 5 * HEADS * keys  # score, context, softmax
                 + 2 * 8 * H + 2 * H + F)  # two LayerNorms, two residuals, GELU
    assert eff.flops_per_token == L * per_layer + H + 8 * H + 2 * V * H
    assert eff.bandwidth == pytest.approx(eff.bytes_per_token / est.decode_s_per_token
                                          / (2 * 460e9))
    assert eff.compute == pytest.approx(eff.flops_per_token / est.decode_s_per_token
                                        / (2 * plan.engine.peak_ops_per_s))
    assert 0 < eff.bandwidth < 1 and 0 < eff.compute < 1


def test_w8a8_reads_one_byte_per_weight() -> None:
    fp16, w8a8 = (make_plan("gpt2-345m", "1xu280", s) for s in ("lora-f", "lora-q"))
    work = Generation(8, 9)
    f, q = (decode_efficiency(p, work, estimate_plan(p, work)) for p in (fp16, w8a8))
    assert f is not None and q is not None
    assert q.bytes_per_token == pytest.approx(f.bytes_per_token / 2)


def test_json_carries_the_efficiencies_and_none_without_decode() -> None:
    plan = make_plan("gpt2-345m", "1xu280", "dfx")
    one = Generation(16, 1)
    out = summarize(plan, one, estimate_plan(plan, one)).as_json()
    assert out["bandwidth_efficiency"] is None and out["decode_roofline"] is None
    two = Generation(16, 16)
    out = summarize(plan, two, estimate_plan(plan, two)).as_json()
    assert 0 < out["bandwidth_efficiency"] < 1 and 0 < out["compute_efficiency"] < 1
