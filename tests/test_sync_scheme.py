"""A synchronization scheme registered from outside the kind (this module): Megatron-LM's
split, two all-reduces per block (the attention projection and FFN2 split by input rows,
their partial sums all-reduced; the residual stream and norms whole on every board), run by
LORA's FP16 systolic core. It plans, estimates, reports and emulates like a built-in one."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from archipelago.api import emulate, make_plan, plan_and_estimate
from archipelago.errors import PartitionError
from archipelago.strategies import registry
from archipelago.strategies.tensor_parallel.plan import CommStep, ComputeStep
from archipelago.strategies.tensor_parallel.planner import (
    SystolicSplitConfig,
    staged,
    systolic_ring,
)
from archipelago.strategies.tensor_parallel.planning.sync import Scheme, register_scheme
from archipelago.strategies.tensor_parallel.report import summarize
from tests.test_emulate import (
    FP32_REL_TOL,
    LLAMA,
    NEW,
    SEED,
    TOKENS,
    hf_greedy,
    hf_model,
    write_config,
)

TWO_SYNCS = Scheme("two-syncs", gather_after=(), reduce_after=("attn_out", "ffn_down"))


@pytest.fixture
def toy() -> Iterator[str]:
    register_scheme(TWO_SYNCS)
    registry.register("toy-sync", "Megatron-LM's two all-reduces per block (a test's toy)",
                      "tensor-parallel", SystolicSplitConfig,
                      {"precision": "fp16", "clock_hz": 200e6})(
        staged("toy-sync", "two-syncs", systolic_ring))
    yield "toy-sync"
    registry.unregister("toy-sync")


def _syncs(steps: list) -> list[tuple[str, str]]:
    return [(s.kind, s.tensor) for s in steps if isinstance(s, CommStep)]


def test_the_scheme_plans_two_all_reduces_per_block(toy: str, tmp_path: Path) -> None:
    ring = make_plan(write_config(tmp_path, LLAMA), "2xu280", toy).program
    assert _syncs(ring.block_steps) == [("all_reduce", "attn_out"), ("all_reduce", "ffn_down")]
    assert _syncs(ring.embed_steps) == _syncs(ring.output_steps) == []
    # each board's rows of the projection are its own heads' context: q_dim 32 over 2
    rows = [d.layer_shards["attn_out.weight"] for d in ring.devices]
    assert [(s.axis, s.start, s.stop) for s in rows] == [(0, 0, 16), (0, 16, 32)]
    down = next(s for s in ring.block_steps
                if isinstance(s, ComputeStep) and s.op.name == "ffn_down")
    assert down.local_out == LLAMA["hidden_size"]  # a partial sum of the whole output


def test_the_scheme_is_estimated_and_reported_as_any_ring(toy: str, tmp_path: Path) -> None:
    config = write_config(tmp_path, LLAMA)
    plan, work, est = plan_and_estimate(config, "2xu280", toy, {"tokens": TOKENS})
    ring = plan_and_estimate(config, "2xu280", "lora-f", {"tokens": TOKENS})
    assert est.breakdown_s["sync"] > 0 and est.feasible
    ours, theirs = summarize(plan, work, est).as_json(), summarize(*ring).as_json()
    assert list(ours) == list(theirs) and ours["strategy"] == toy
    # LORA syncs six times a block (four gathers, two norm all-reduces), this scheme twice
    assert est.breakdown_s["sync"] < ring.estimate.breakdown_s["sync"]


def test_the_scheme_refuses_biases_it_would_add_twice(toy: str) -> None:
    with pytest.raises(PartitionError, match=r"has biases \(attn_out\.bias"):
        make_plan("gpt2-345m", "2xu280", toy)


def test_the_scheme_emulates_what_transformers_generates(toy: str, tmp_path: Path) -> None:
    report = emulate(write_config(tmp_path, LLAMA), "2xu280", toy, {"tokens": TOKENS},
                     seed=SEED)
    layers = LLAMA["num_hidden_layers"]
    assert report["collectives"] == {"all_reduce": 2 * layers * NEW}
    expected, scale = hf_greedy(hf_model(LLAMA, SEED), report["prompt"])
    assert report["generated"] == expected and report["tokens_match"]
    assert report["max_abs_logit_diff"] <= FP32_REL_TOL * scale
