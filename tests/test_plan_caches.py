"""The shortcuts that make one plan + estimate fast change no figure and serve no stale
result: the finiteness check finds what the path walk finds, a token-serial prompt costed
with the decode steps equals its passes costed alone, cached graphs follow the spec's
content, every plan owns its step lists and shard tables, and what a split's planner costed
(kept on the plan for the estimator) gives the figures an estimate computed afresh gives."""

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from archipelago.api import make_plan, parse_workload
from archipelago.estimate.figures import _first_impossible, _impossible, numbers
from archipelago.models.graph import build_graph
from archipelago.models.graph_ops import Phase
from archipelago.models.zoo import resolve_model
from archipelago.strategies.tensor_parallel.costs import (
    CATEGORIES,
    Costed,
    phase_seconds,
    seconds_by_category,
    whole,
)
from archipelago.strategies.tensor_parallel.estimate import estimate as estimate_plan


@dataclass
class _Part:
    seconds: float
    extra: dict[str, float] = field(default_factory=dict)


@dataclass
class _Raising:
    """An impossible field before a property that raises: the walk stops at the field."""

    first: float

    @property
    def later(self) -> float:
        raise ZeroDivisionError("never reached")


def _brute(value: object) -> tuple[str, float] | None:
    return next(((p, n) for p, n in numbers(value) if _impossible(n)), None)


SHARED = _Part(1.0)
CASES = [
    {"a": 1.0, "b": [2, 3.5], "c": np.arange(4.0)},
    {"a": 1.0, "b": [2, -3.5]},
    {"parts": [_Part(1.0), _Part(2.0, {"x": math.nan})]},
    {"arr": np.array([[1.0, 2.0], [3.0, math.inf]])},
    {"ints": np.array([3, -1])},
    {"seen": [SHARED, SHARED, _Part(-0.5)]},
    (np.float64(2.0), np.int64(-7)),
    _Raising(math.nan),
]


@pytest.mark.parametrize("value", CASES)
def test_the_fast_check_finds_what_the_path_walk_finds(value: object) -> None:
    assert _first_impossible(value) == _brute(value)


def test_a_token_serial_prompt_equals_its_passes_costed_alone() -> None:
    """DFX's prompt: n_in single-token passes without the output ops, then the output ops
    once, costed here as the estimator did before it joined them to the decode steps."""
    staged = make_plan("gpt2-345m", "2xu280", "dfx")
    plan = staged.program
    n_in, n_out = 24, 9
    body = phase_seconds(plan, 1, np.arange(1, n_in + 1), whole(plan), False)
    last = np.array([n_in])
    head = seconds_by_category(plan, [(plan.output_steps, Phase(1, last), 1)], last.shape)
    prompt = {c: float(body[c].sum() + head[c][0]) for c in CATEGORIES}
    decode = phase_seconds(plan, 1, n_in + np.arange(1, n_out), whole(plan))
    est = estimate_plan(staged, parse_workload("dfx", {"tokens": f"{n_in}:{n_out}"}))
    assert est.prefill_breakdown_s == prompt
    assert est.decode_s_first == float(sum(decode.values())[0])
    assert est.decode_s_last == float(sum(decode.values())[-1])


def test_a_cached_graph_follows_the_specs_content() -> None:
    spec = resolve_model("gpt2-345m")
    equal = spec.model_validate(spec.model_dump())
    wider = spec.model_copy(update={"hidden": spec.hidden * 2, "ffn": spec.ffn * 2})
    assert build_graph(equal) is build_graph(spec)
    assert build_graph(wider).block[0].fan_out == 2 * spec.hidden


def test_each_plan_owns_its_steps_and_shards() -> None:
    first = make_plan("gpt2-345m", "2xu280", "lora-q").program
    steps, shards = list(first.block_steps), dict(first.devices[1].layer_shards)
    first.block_steps.clear()
    first.devices[1].layer_shards.clear()
    second = make_plan("gpt2-345m", "2xu280", "lora-q").program
    assert second.block_steps == steps and second.devices[1].layer_shards == shards


# (model, cluster, strategy, workload): given and chosen splits, a token-serial engine
# (DFX) and a batched one, one stage and several.
SPLITS = [("gpt2-345m", "4xu280", "dfx", {"tokens": "16:8", "split": "tp=2,pp=2"}),
          ("gpt2-345m", "2x2xu280", "lora-q", {"tokens": "32:16", "batch": "4"}),
          ("gpt2-345m", "8xu280", "lora-f", {"tokens": "8:4", "split": "tp=2,pp=4"}),
          ("gpt2-345m", "2x4xu280", "dfx", {"tokens": "8:8", "split": "auto"})]


@pytest.mark.parametrize(("model", "cluster", "strategy", "workload"), SPLITS)
def test_the_planners_kept_costs_give_the_figures_computed_afresh(
        model: str, cluster: str, strategy: str, workload: dict[str, str]) -> None:
    plan = make_plan(model, cluster, strategy, None, workload)
    work = parse_workload(strategy, workload)
    assert plan.costed.workload == work and plan.costed.uses  # the planner kept them
    kept = estimate_plan(plan, work)
    afresh = estimate_plan(replace(plan, costed=Costed()), work)
    assert list(numbers(kept)) == list(numbers(afresh))
    assert kept.reasons == afresh.reasons


@pytest.mark.parametrize("other", [{"tokens": "1020:8"},  # as many steps, past 1024
                                   {"tokens": "8:8", "batch": "8"}])
def test_a_plan_estimated_for_another_workload_costs_it_afresh(other: dict[str, str]
                                                               ) -> None:
    """The kept device use and refusals are the planner's workload's, and the kept step
    seconds its phases' and batch's: another workload (longer contexts, more tokens than
    the model has positions; or a batch) is costed as a plan made for it is."""
    split = {"split": "tp=2,pp=2,layers=12+12"}
    short = make_plan("gpt2-345m", "4xu280", "lora-q", None, {"tokens": "8:8", **split})
    work = parse_workload("lora-q", {**other, **split})
    made_for_it = estimate_plan(make_plan("gpt2-345m", "4xu280", "lora-q", None,
                                          {**other, **split}), work)
    reused = estimate_plan(short, work)
    assert reused.reasons == made_for_it.reasons
    assert list(numbers(reused)) == list(numbers(made_for_it))
    assert reused.latency_s != estimate_plan(short, short.costed.workload).latency_s


def test_a_plan_given_other_stages_costs_them_afresh() -> None:
    """The kept use and refusals are its stages': a plan whose stages are replaced (as a
    test or a tool may) is costed as the plan those stages came from."""
    work = {"tokens": "16:8"}
    split = "tp=2,pp=2,layers="
    even = make_plan("gpt2-345m", "4xu280", "lora-q", None, {**work, "split": split + "12+12"})
    uneven = make_plan("gpt2-345m", "4xu280", "lora-q", None, {**work, "split": split + "20+4"})
    moved = replace(even, stages=uneven.stages, split=uneven.split)
    parsed = parse_workload("lora-q", work)
    assert list(numbers(estimate_plan(moved, parsed))) == \
        list(numbers(estimate_plan(uneven, parsed)))
