"""Operator graph FLOPs and KV-cache bytes against hand-computed small cases."""

from archipelago.models.graph import build_graph
from archipelago.models.graph_ops import Phase, decode, prefill
from archipelago.models.hf_config import spec_from_hf_config
from tests.conftest import TINY_GPT2


def test_attended_pairs_by_hand() -> None:
    assert prefill(4).attended_pairs == 1 + 2 + 3 + 4
    assert decode(7).attended_pairs == 7
    assert Phase(5, 5, causal=False).attended_pairs == 25  # an encoder sees every key
    assert Phase(2, 5).attended_pairs == 4 + 5


def test_decode_flops_by_hand() -> None:
    spec = spec_from_hf_config(TINY_GPT2, "tiny", "test")  # h=64, heads 4, ffn 256, 2 layers
    graph = build_graph(spec)
    h, f, t, vocab = 64, 256, 10, 97
    linears = 2 * (3 * h * h + h * h + 2 * h * f)  # q, k, v, attn_out, ffn up and down
    attention = 2 * 2 * h * t  # score and context: 2 flops x head_dim x heads x t keys
    softmax = 5 * 4 * t
    vector = 8 * h * 2 + h * 2 + f  # two norms, two residuals, the activation
    per_block = linears + attention + softmax + vector
    expected = h + 2 * per_block + 8 * h + 2 * h * vocab  # embed, blocks, final norm, head
    assert graph.flops(decode(t)) == expected


def test_kv_cache_bytes() -> None:
    spec = spec_from_hf_config(TINY_GPT2, "tiny", "test")
    assert build_graph(spec).kv_cache_bytes(10, 2) == 2 * 2 * 10 * 64 * 2
