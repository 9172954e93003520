"""The GPU kind: one op's roofline and one all-reduce by hand, the eager and graph issue
models on a three-kernel step, and published measurements (source beside each)."""

import numpy as np
import pytest

from archipelago.api import make_plan, plan_and_estimate
from archipelago.errors import ArchipelagoError
from archipelago.hardware.catalog import get_device
from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.graph import build_graph
from archipelago.models.graph_ops import Phase, decode, prefill
from archipelago.models.zoo import zoo_model
from archipelago.strategies.gpu.eager import cache_copy_bytes, launches
from archipelago.strategies.gpu.estimate import step_s
from archipelago.strategies.gpu.plan import (
    MEMORY_EFFICIENCY,
    GPUConfig,
    ring_s,
)
from archipelago.strategies.gpu.roofline import op_cost
from archipelago.strategies.gpu.steps import Step, layout, step_kernels

A100 = get_device("a100")


def _q_op():
    graph = build_graph(zoo_model("llama2-7b"))
    return graph.spec, next(op for op in graph.block if op.name == "q")


def test_a_decode_matrix_is_its_weights_over_bandwidth() -> None:
    spec, q = _q_op()  # 4096 x 4096, no bias
    cost = op_cost(q, spec, decode(100), batch=1, ranks=1)
    by_hand = (4096 * 4096 + 4096 + 4096) * 2  # weights, input and output rows, FP16
    assert cost.bytes == by_hand
    assert cost.flops == 2 * 4096 * 4096
    seconds = cost.seconds(A100.peak_fp16_flops, 2039e9 * MEMORY_EFFICIENCY)
    assert seconds == pytest.approx(by_hand / (2039e9 * MEMORY_EFFICIENCY))  # ~19.6 us


def test_a_prefill_matrix_is_compute_bound_and_split_over_ranks() -> None:
    spec, q = _q_op()
    cost = op_cost(q, spec, prefill(2048), batch=1, ranks=4)
    assert cost.flops == 2 * 2048 * 4096 * 1024  # a quarter of the columns
    seconds = cost.seconds(A100.peak_fp16_flops, 2039e9)
    assert seconds == pytest.approx(2 * 2048 * 4096 * 1024 / 312e12)  # 55 us > 10 us of bytes


def test_ring_allreduce_by_hand() -> None:
    link = resolve_cluster("4xh100").link(0, 1)  # 18 NVLinks x 25 GB/s per direction
    assert (link.kind, link.bandwidth_Bps, link.latency_s) == ("nvlink", 450e9, 0.4e-6)
    assert ring_s(link, 4, 8192) == pytest.approx(3.6e-6 + 6 * 0.4e-6 + 6 / 4 * 8192 / 450e9)
    assert ring_s(link, 4, 8192, gather=True) == pytest.approx(3.6e-6 + 3 * 0.4e-6
                                                               + 3 / 4 * 8192 / 450e9)
    assert resolve_cluster("2xl4").link(0, 1).kind == "pcie"  # no NVLink: the hosts' PCIe


def _step(graph: bool, host: float, times: list[float]) -> float:
    config = GPUConfig(graph=graph, host_op_s=host, kernel_floor_s=0)
    n = len(times)
    end, parts = step_s(config, Step(np.array(times)[:, None], np.ones(n, int),
                                     {"k": np.arange(n)}), graph)
    assert parts["k"][0] == pytest.approx(end[0])  # the parts add up to the step
    return float(end[0])


def test_eager_kernels_wait_for_their_issue_and_a_graph_does_not() -> None:
    # Host 2 us per op; kernels of 1 us: eager ends at 3, 5, 7; a graph at 2 + 3.
    assert _step(False, 2e-6, [1e-6, 1e-6, 1e-6]) == pytest.approx(7e-6)
    assert _step(True, 2e-6, [1e-6, 1e-6, 1e-6]) == pytest.approx(5e-6)
    # A long first kernel hides the later issues: 2 + 5, then 1 and 1 back to back.
    assert _step(False, 2e-6, [5e-6, 1e-6, 1e-6]) == pytest.approx(9e-6)


def test_eager_kernels_are_counted_from_transformers_modules() -> None:
    llama, gpt2 = build_graph(zoo_model("llama2-7b")), build_graph(zoo_model("gpt2-1.5b"))
    per_layer = {op.name: launches(op, llama.spec, True) for op in llama.block}
    # 2 RMSNorms x 8, q and k with rotary (5 each), k and v cache appends, SDPA and its
    # output made contiguous (the softmax and context inside it), SiLU and mul
    assert per_layer == {"attn_norm": 8, "v": 2, "k": 7, "q": 6, "attn_score": 2,
                         "softmax": 0, "attn_context": 0, "attn_out": 1, "attn_residual": 1,
                         "ffn_norm": 8, "ffn_gate": 1, "ffn_up": 1, "ffn_act": 2,
                         "ffn_down": 1, "ffn_residual": 1}
    # GPT-2: 14 ops, SDPA's 2 for its 3, the Python GELU's 8 for 1, the 2 cache appends
    assert sum(launches(op, gpt2.spec, True) for op in gpt2.block) == 14 - 1 + 7 + 2
    # a captured graph: one kernel per op, SDPA's one for three, the static cache's writes
    assert sum(launches(op, llama.spec, False) for op in llama.block) == 15 - 2 + 2
    k = next(op for op in llama.block if op.name == "k")
    # torch.cat reads 99 cached rows and writes 100, each 4096 FP16 values, over 2 GPUs
    assert cache_copy_bytes(k, llama.spec, decode(100), 1, 2) == (99 + 100) * 2048 * 2


def test_a_step_issues_every_layer_in_order_with_its_collectives() -> None:
    """The layout costs each distinct op once and gathers it into place: its kernels must be
    the graph's ops layer by layer (here windowed and full layers are mixed: two block
    templates), with Megatron's all-reduces and the logits' gather where the split has them."""
    spec = zoo_model("llama2-7b").model_copy(update={"layers": 5, "sliding_window": 64,
                                                     "sliding_layers": (0, 1, 3)})
    graph = build_graph(spec)
    assert len(graph.variants) == 2
    by_layer = {layer: ops for ops, ids in graph.variants for layer in ids}
    expected: list[tuple[str, int | None]] = []
    for op in [*graph.embed, *(op for layer in range(5) for op in by_layer[layer]),
               *graph.output]:
        expected.append((op.name, op.window))
        if op.kind == "embedding" or op.name in ("attn_out", "ffn_down"):
            expected.append(("all-reduce", None))
        elif op.kind == "lm_head":
            expected.append(("gather", None))
    lay = layout(spec, True, True)  # eager, on several GPUs
    names = {lay.all_reduce: ("all-reduce", None), lay.gather: ("gather", None)}
    issued = [names.get(int(r)) or (lay.ops[r][0].name, lay.ops[r][0].window)
              for r in lay.rows]
    assert issued == expected
    # the embedding and its all-reduce; per layer 41 launches (counted in the test above)
    # and 2 all-reduces; the final RMSNorm's 8, the LM head and the gather
    assert lay.issued.sum() == 1 + 1 + 5 * (41 + 2) + 8 + 1 + 1
    assert sum(len(k) for k in lay.parts.values()) == len(expected)


def test_a_step_over_many_contexts_is_each_context_on_its_own() -> None:
    """A decode run costs every context at once: each column must be, bit for bit, the step
    of that context alone."""
    for strategy in ("gpu-eager", "gpu-graph"):
        plan = make_plan("llama2-7b", "2xa100", strategy)
        contexts = np.array([9, 10, 300, 4000])
        graph = plan.config.graph
        ends, parts = step_s(plan.config, step_kernels(plan, Phase(1, contexts), 8), graph)
        for i, context in enumerate(contexts.tolist()):
            end, part = step_s(plan.config, step_kernels(plan, Phase(1, context), 8), graph)
            assert ends[i] == end[0]
            assert {k: v[i] for k, v in parts.items()} == {k: v[0] for k, v in part.items()}


def _est(model: str, cluster: str, strategy: str, tokens: str, batch: str = "1"):
    return plan_and_estimate(model, cluster, strategy, {"tokens": tokens,
                                                        "batch": batch}).estimate


def test_llama2_7b_on_an_a100_graph_captured_matches_gpt_fast() -> None:
    # pytorch-labs/gpt-fast README and PyTorch blog "Accelerating Generative AI with PyTorch
    # II: GPT, Fast" (Nov 2023): Llama-2-7B, FP16/BF16, batch 1, torch.compile
    # mode="reduce-overhead" (CUDA graphs, static KV cache), A100 80GB: 104.9 tokens/s.
    est = _est("llama2-7b", "1xa100", "gpu-graph", "8:200")
    assert 1 / est.decode_s_per_token == pytest.approx(104.9, rel=0.20)


def test_gpt2_on_four_v100s_behaves_as_dfx_measured() -> None:
    # seeds/001 §III-A (Fig. 3, GPT-2 1.5B on the 4 x V100 appliance, Megatron-LM): each
    # further output token adds 75.45 ms, each further input token 0.02 ms; Fig. 4: norms
    # and residuals take 22.8% of the time for 0.11% of the operations.
    base = _est("gpt2-1.5b", "4xv100", "gpu-eager", "64:64")
    more_out = _est("gpt2-1.5b", "4xv100", "gpu-eager", "64:128")
    more_in = _est("gpt2-1.5b", "4xv100", "gpu-eager", "128:64")
    per_out = (more_out.latency_s - base.latency_s) / 64
    per_in = (more_in.latency_s - base.latency_s) / 64
    assert per_out > 100 * max(per_in, 1e-9)  # measured 3,772x
    share = base.breakdown_s["norms and residuals"] / base.latency_s
    graph_ops = build_graph(zoo_model("gpt2-1.5b")).block
    flops = {op.name: op.flops(decode(96)) for op in graph_ops}
    flop_share = sum(f for n, f in flops.items() if n.endswith(("norm", "residual"))) \
        / sum(flops.values())
    assert share > 50 * flop_share  # launch-bound: a share of the kernels, not the FLOPs
    graph = _est("gpt2-1.5b", "4xv100", "gpu-graph", "64:64")
    assert base.decode_s_per_token > 2 * graph.decode_s_per_token


def test_batching_and_tensor_parallel_raise_throughput() -> None:
    one = _est("llama2-7b", "1xh100", "gpu-graph", "128:128")
    batched = _est("llama2-7b", "1xh100", "gpu-graph", "128:128", "16")
    four = _est("llama2-7b", "4xh100", "gpu-graph", "128:128")
    assert batched.tokens_per_s > 8 * one.tokens_per_s  # weights read once for 16
    assert one.tokens_per_s < four.tokens_per_s < 4 * one.tokens_per_s  # all-reduces cost
    assert one.feasible and 0.5 < one.bandwidth_efficiency <= MEMORY_EFFICIENCY


def test_what_does_not_fit_or_split_is_refused() -> None:
    big = _est("llama2-7b", "1xt4", "gpu-graph", "128:128", "64")
    assert not big.feasible and "GB" in big.reasons[0]
    with pytest.raises(ArchipelagoError, match="do not split evenly"):
        plan_and_estimate("gpt2-1.5b", "5xa100", "gpu-eager", {"tokens": "8:8"})
    with pytest.raises(ArchipelagoError, match="2 groups"):
        plan_and_estimate("gpt2-1.5b", "2x4xa100", "gpu-eager", {"tokens": "8:8"})
    with pytest.raises(ArchipelagoError, match="runs on GPUs"):
        plan_and_estimate("gpt2-1.5b", "1xu280", "gpu-eager", {"tokens": "8:8"})
