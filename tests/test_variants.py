"""The tensor-parallel kind's batch evaluator (variants.py): every engine design of a batch
gets the figures `archi plan` and the utilization hook give it one at a time, refused
designs the error the plan raises."""

import random
from typing import Any

import numpy as np
import pytest

from archipelago.api import estimate, make_plan, parse_workload
from archipelago.errors import ArchipelagoError
from archipelago.explore.spaces import design_space
from archipelago.strategies.registry import get_kind, get_strategy
from archipelago.strategies.tensor_parallel.engines.dfx_config import DFXConfig
from archipelago.strategies.tensor_parallel.variants import evaluate_variants

RELATIVE = 1e-12


def _sampled(strategy: str, count: int, seed: int, cluster: str = "1xu280"
             ) -> list[dict[str, Any]]:
    """Designs with each gene drawn uniformly from its choices (on `cluster`'s boards),
    seeded."""
    rng, space = random.Random(seed), design_space(strategy, "gpt2-345m", cluster)
    return [space.decode({name: rng.choice(choices) for name, choices in space.genes.items()})
            for _ in range(count)]


def _scalar(model: str, cluster: str, strategy: str, workload: Any, engine: dict[str, Any]
            ) -> tuple[Any, dict[str, float]] | str:
    """One design as `archi explore` costs a trial today, or the error it raises."""
    try:
        plan = make_plan(model, cluster, strategy, engine)
        est = estimate(strategy, plan, workload, f"{strategy} plan of {model} on {cluster}")
        return est, get_strategy(strategy).plan_kind.hook("utilization")(plan, workload, est)
    except ArchipelagoError as err:
        return str(err)


def _check_against_scalar(model: str, cluster: str, strategy: str, tokens: str,
                          engines: list[dict[str, Any]], batch: str = "1",
                          relative: float = RELATIVE) -> np.ndarray:
    workload = parse_workload(strategy, {"tokens": tokens, "batch": batch}, "explore")
    got = get_kind("tensor-parallel").hook("batch_evaluator")(model, cluster, strategy,
                                                               workload, engines)
    assert len(got.latency_s) == len(got.errors) == len(engines)
    assert [list(used.items()) for used in got.utilizations()] == [  # in the journal's order
        list(got.utilization(row).items()) for row in range(len(engines))]
    for row, engine in enumerate(engines):
        want = _scalar(model, cluster, strategy, workload, engine)
        if isinstance(want, str):
            assert got.errors[row] == want, engine
            assert not got.feasible[row] and got.latency_s[row] == np.inf
            continue
        est, used = want
        assert got.errors[row] is None, (engine, got.errors[row])
        assert got.feasible[row] == est.feasible, engine
        assert got.latency_s[row] == pytest.approx(est.latency_s, rel=relative, abs=0)
        assert got.tokens_per_s[row] == pytest.approx(est.tokens_per_s, rel=relative, abs=0)
        assert got.utilization(row) == pytest.approx(used, rel=relative, abs=0)
        assert list(got.utilization(row)) == list(used)
        assert got.aie[row] == 0.0  # no AI Engines in these cores
    return got.feasible


# (model, cluster, tokens, batch): one to four boards, a board without DDR (U55C), an
# uneven head split (25 heads on 3), a batch sharing decode tiles.
CASES = [("gpt2-345m", "1xu280", "32:256", "1"), ("gpt2-345m", "2xu55c", "64:64", "1"),
         ("gpt2-1.5b", "4xu280", "64:64", "1"), ("gpt2-1.5b", "3xu280", "16:8", "4")]


@pytest.mark.parametrize("strategy", ["lora-f", "lora-q"])
@pytest.mark.parametrize(("model", "cluster", "tokens", "batch"), CASES)
def test_every_sampled_lora_design_matches_its_own_estimate(
        strategy: str, model: str, cluster: str, tokens: str, batch: str) -> None:
    seed = CASES.index((model, cluster, tokens, batch))
    feasible = _check_against_scalar(model, cluster, strategy, tokens,
                                     _sampled(strategy, 60, seed), batch)
    assert feasible.any()


def test_the_lora_f_space_holds_designs_over_the_fabric() -> None:
    """Some sampled designs exceed the U280's DSPs or BRAM: those read infeasible too."""
    feasible = _check_against_scalar("gpt2-1.5b", "4xu280", "lora-f", "64:64",
                                     _sampled("lora-f", 150, 7))
    assert feasible.any() and not feasible.all()


def test_a_model_over_the_hbm_is_infeasible_in_every_design() -> None:
    """LLaMA-2 7B's FP16 weights (13.5 GB) exceed one U280's 8 GB of HBM whatever the
    engine: the memory check the group shares."""
    feasible = _check_against_scalar("llama2-7b", "1xu280", "lora-f", "32:32",
                                     _sampled("lora-f", 10, 5))
    assert not feasible.any()


# DFX: (model, cluster, tokens, batch, precision): a board without DDR (U55C), a batch of
# sequences in turn in a narrower format, and a model over one U50's HBM, some of whose
# designs the floors refuse (a decode step below what reading its weights takes).
DFX_CASES = [("gpt2-345m", "1xu280", "64:64", "1", None),
             ("gpt2-1.5b", "4xu280", "64:64", "1", None),
             ("gpt2-1.5b", "2xu55c", "32:16", "4", "w4a16-kv8"),
             ("llama2-7b", "1xu50", "128:128", "1", None)]


@pytest.mark.parametrize(("model", "cluster", "tokens", "batch", "precision"), DFX_CASES)
def test_dfx_designs_costed_at_once_match_their_estimates_exactly(
        model: str, cluster: str, tokens: str, batch: str, precision: str | None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every figure of many random DFX designs costed in one pass (DFXEngine.variants) is
    the one `archi plan` and the utilization hook give each alone, to the last bit, and so
    is the refusal of each design the floors refuse; the batch evaluator's one-by-one path
    (an engine without `variants`) gives the same rows."""
    seed = DFX_CASES.index((model, cluster, tokens, batch, precision))
    engines = [dict(e, **({"precision": precision} if precision else {}))
               for e in _sampled("dfx", 60, seed, cluster)]
    _check_against_scalar(model, cluster, "dfx", tokens, engines, batch, 0.0)
    workload = parse_workload("dfx", {"tokens": tokens, "batch": batch}, "explore")
    together = evaluate_variants(model, cluster, "dfx", workload, engines)
    monkeypatch.setattr(DFXConfig, "varied", ())
    alone = evaluate_variants(model, cluster, "dfx", workload, engines)
    assert together.errors == alone.errors
    for name in ("latency_s", "tokens_per_s", "feasible", "dsp", "bram", "uram", "aie",
                 "hbm", "hbm_bandwidth"):
        assert np.array_equal(getattr(together, name), getattr(alone, name)), name


def test_the_floors_refuse_some_dfx_designs_alone() -> None:
    """LLaMA-2 7B on one U50: some designs' first decode step comes out below the floor
    (a bug the floors catch): those designs carry the error, the rest of the batch not."""
    workload = parse_workload("dfx", {"tokens": "128:128"}, "explore")
    space = design_space("dfx", "llama2-7b", "1xu50", workload)
    engines = [space.engine(row) for row in space.rows(np.arange(space.combinations))]
    got = evaluate_variants("llama2-7b", "1xu50", "dfx", workload, engines)
    refused = [e for e in got.errors if e is not None]
    assert 0 < len(refused) < len(engines)
    assert all("the first decode step estimated at" in e for e in refused)


def test_refused_designs_carry_the_plans_error_and_read_infeasible() -> None:
    engines = [
        {"d_sa": 16, "t_m": 16, "t_v": 64},  # 64 x 16 > 16^2 processing elements
        {"d_sa": 16, "t_m": 24, "t_v": 1},  # not a multiple of the array side
        {"d_sa": 16, "t_m": 16, "t_v": 4, "clock_hz": -1.0},
        {"d_sa": 16, "frequency": 2},
        {"d_sa": 16, "t_m": 32, "t_v": 8},  # a valid one among them
    ]
    _check_against_scalar("gpt2-345m", "1xu280", "lora-f", "64:64", engines)
    workload = parse_workload("lora-f", {"tokens": "64:64"}, "explore")
    got = evaluate_variants("gpt2-345m", "1xu280", "lora-f", workload, engines)
    assert [e is None for e in got.errors] == [False] * 4 + [True]
    assert "t_v x t_m (64 x 16)" in got.errors[0]
    assert np.isinf(got.dsp[:4]).all() and got.tokens_per_s[:4].tolist() == [0.0] * 4


def test_designs_of_two_precisions_and_splits_group_apart() -> None:
    """Precision changes the plan (bytes per value, rows packed per transfer); a split into
    stages is refused by the search as the utilization hook refuses it."""
    fp16 = _sampled("lora-f", 20, 11)
    engines = [dict(e, precision="w8a8") if i % 2 else e for i, e in enumerate(fp16)]
    engines.append(dict(fp16[0], split="tp=2,pp=2"))
    _check_against_scalar("gpt2-1.5b", "4xu280", "lora-f", "64:64", engines)
    workload = parse_workload("lora-f", {"tokens": "64:64"}, "explore")
    got = evaluate_variants("gpt2-1.5b", "4xu280", "lora-f", workload, engines)
    assert "the design search runs one ring" in got.errors[-1]


def test_no_designs_no_figures() -> None:
    workload = parse_workload("lora-q", {"tokens": "64:64"}, "explore")
    got = evaluate_variants("gpt2-345m", "1xu280", "lora-q", workload, [])
    assert got.latency_s.shape == got.feasible.shape == (0,) and got.errors == ()


def test_a_group_planned_once_costs_later_batches_alike() -> None:
    """A search asks for the same groups batch after batch: the group's plan, memory and
    floors are kept from the first, and a later batch's designs read as in one batch,
    searches of other workloads and rings between them costed as their own."""
    workload = parse_workload("lora-q", {"tokens": "64:64"}, "explore")
    longer = parse_workload("lora-q", {"tokens": "64:128"}, "explore")
    engines = _sampled("lora-q", 40, 9)
    whole = evaluate_variants("gpt2-1.5b", "4xu280", "lora-q", workload, engines)
    halves = []
    for part in (engines[:20], engines[20:]):
        halves.append(evaluate_variants("gpt2-1.5b", "4xu280", "lora-q", workload, part))
        other = [evaluate_variants("gpt2-1.5b", "2xu280", "lora-q", workload, part),
                 evaluate_variants("gpt2-1.5b", "4xu280", "lora-q", longer, part)]
        costed = np.isfinite(halves[-1].latency_s)
        assert costed.any()
        for figures in other:
            assert (figures.latency_s[costed] != halves[-1].latency_s[costed]).all()
    for name in ("latency_s", "tokens_per_s", "feasible", "dsp", "bram", "uram", "hbm",
                 "hbm_bandwidth"):
        assert np.array_equal(getattr(whole, name), np.concatenate(
            [getattr(half, name) for half in halves])), name
    assert whole.errors == halves[0].errors + halves[1].errors
