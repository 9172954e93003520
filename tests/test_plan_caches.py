"""The shortcuts that make one plan + estimate fast change no figure and serve no stale
result: the finiteness check finds what the path walk finds, a token-serial prompt costed
with the decode steps equals its passes costed alone, cached graphs follow the spec's
content, and every plan owns its step lists and shard tables."""

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from archipelago.api import make_plan, parse_workload
from archipelago.estimate.figures import _first_impossible, _impossible, numbers
from archipelago.models.graph import Phase, build_graph
from archipelago.models.zoo import resolve_model
from archipelago.strategies.tensor_parallel.costs import (
    CATEGORIES,
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
