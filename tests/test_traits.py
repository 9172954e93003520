"""The `traits` hook each compared kind declares: the split as `archi plan` chose it and the
binding resource from the estimate's own figures."""

import pytest

from archipelago import api
from archipelago.strategies.gpu.frameworks import GENERATE_TOKEN_S, PYTORCH_OP_S
from archipelago.strategies.registry import get_strategy


def _traits(model: str, cluster: str, strategy: str, workload: dict[str, str]):
    result = api.plan_and_estimate(model, cluster, strategy, workload)
    return result, get_strategy(strategy).plan_kind.hook("traits")(*result)


def test_a_single_fpga_decode_is_bound_by_hbm_and_matches_the_plan_roofline() -> None:
    result, traits = _traits("gpt2-1.5b", "1xu280", "lora-q", {"tokens": "64:64"})
    report = get_strategy("lora-q").plan_kind.hook("report").summarize(*result).as_json()
    assert traits.split == "tp=1" and traits.binding == "HBM bandwidth"
    assert traits.shares["HBM bandwidth"] == pytest.approx(report["bandwidth_efficiency"])
    assert traits.shares["compute"] == pytest.approx(report["compute_efficiency"])
    assert traits.shares["network"] == 0  # one board: no collective


def test_ring_collectives_count_as_network_time_of_the_decode_steps() -> None:
    result, traits = _traits("gpt2-1.5b", "4xu280", "dfx", {"tokens": "64:64"})
    est = result.estimate
    sync = est.breakdown_s["sync"] - est.prefill_breakdown_s["sync"]
    assert traits.shares["network"] == pytest.approx(sync / (est.latency_s - est.prefill_s))
    assert 0 < traits.shares["network"] < 1


def test_a_given_split_across_stages_is_shown_as_planned() -> None:
    _, traits = _traits("llama2-7b", "4xu280", "lora-q", {"tokens": "32:32",
                                                          "split": "tp=2,pp=2"})
    assert traits.split == "tp=2,pp=2"


def test_an_eager_framework_at_batch_1_is_launch_bound_and_a_graph_is_not() -> None:
    eager_result, eager = _traits("llama2-7b", "1xa100", "gpu-eager", {"tokens": "64:64"})
    _, graph = _traits("llama2-7b", "1xa100", "gpu-graph", {"tokens": "64:64"})
    assert eager.binding == "kernel launches" and graph.binding == "HBM bandwidth"
    # the host issues every kernel at PYTORCH_OP_S, then runs generate's loop: the step is
    # its issue time, a little more for the last kernel
    assert 0.95 < eager.shares["kernel launches"] <= 1.0
    kernels = (eager.shares["kernel launches"] * eager_result.estimate.decode_s_per_token
               - GENERATE_TOKEN_S) / PYTORCH_OP_S
    assert kernels == pytest.approx(round(kernels), abs=1e-6)  # a whole number of kernels
    assert graph.shares["kernel launches"] < eager.shares["kernel launches"]
    assert eager.shares["network"] == graph.shares["network"] == 0


def test_tensor_parallel_gpus_spend_decode_time_in_all_reduces() -> None:
    _, traits = _traits("gpt2-1.5b", "2xa100", "gpu-graph", {"tokens": "64:64"})
    assert traits.split == "tp=2" and traits.shares["network"] > 0.05
