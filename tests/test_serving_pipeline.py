"""Micro-batches in flight through a plan's pipeline stages (serving/pipeline.py, issue 35
point 5): the steady throughput of S stages of time t with M micro-batches against
min(M, S) / (S t) by hand, a three-request trace by hand, steps advanced together against
one at a time, and a real rack whose capacity grows with its stages."""

import json
import subprocess
from dataclasses import replace

import numpy as np
import pytest

from archipelago import api
from archipelago.errors import ArchipelagoError
from archipelago.estimate.iteration import IterationTable
from archipelago.serving import pipeline
from archipelago.serving.replica import Policy
from archipelago.serving.requests import Lengths, Requests, generate
from archipelago.serving.simulate import simulate
from archipelago.strategies.registry import get_strategy
from tests.cli_here import archi_here
from tests.serving_tables import TOP, linear_table


def _const(prefill: float, decode: float) -> IterationTable:
    """A stage that takes `prefill` seconds for any prompt pass and `decode` for any step."""
    batches, contexts = np.array([1, 8]), np.array([1, TOP - 2])
    return IterationTable(batches, contexts, np.full((2, 2), prefill), np.full((2, 2), decode),
                          10**7, TOP, 2.0)


def _pipeline(stages: list[IterationTable]) -> IterationTable:
    """The whole plan's table (the stages' sum, as the hook makes it) holding the stages."""
    first = stages[0]
    return replace(first, prefill_s=sum(s.prefill_s for s in stages),
                   decode_s=sum(s.decode_s for s in stages), stages=tuple(stages), _rows={})


def _requests(arrivals: list[float], prompt: list[int], output: list[int]) -> Requests:
    return Requests(np.array(arrivals, dtype=float), np.array(prompt), np.array(output))


@pytest.mark.parametrize("m", [1, 2, 4, 8])
def test_steady_throughput_is_min_m_s_over_s_t(m: int) -> None:
    """S = 4 stages of t = 10 ms for a prompt pass or a step; eight requests at 0, one a
    micro-batch (max batch 1), each 101 iterations (its prompt, then 100 steps). By hand:
    requests go to the micro-batches in turn (fewest unfinished, ties to the lowest), so
    request j is the (j // M)-th of micro-batch j % M, which enters at steps j % M + i P
    (P = max(M, S) = 4, or 8 for M = 8) and leaves S - 1 steps later; a step lasts t. Its
    last iteration, 101 (j // M + 1) - 1, leaves at the end of step
    j % M + (101 (j // M + 1) - 1) P + S - 1. In steady state a micro-batch runs an
    iteration every P steps: min(M, S) / (S t) = 25, 50, 100, 100 iterations a second."""
    s, t, n = 4, 0.010, 8
    table = _pipeline([_const(t, t)] * s)
    out = simulate(table, _requests([0.0] * n, [16] * n, [101] * n), 1.0,
                   Policy("continuous", 1, micro_batches=m))
    period = max(m, s)
    j = np.arange(n)
    last_step = j % m + (101 * (j // m + 1) - 1) * period + s - 1
    assert out.records.finish == pytest.approx((last_step + 1) * t, rel=1e-9)
    assert out.iterations == 101 * n
    assert out.busy_s[0] == pytest.approx(101 * n * t)  # every stage busy t an iteration
    # iterations a second over the run: min(M, S) / (S t), less the ramp of the M - 1
    # steps before the last micro-batch enters (under 1% of 808 or more steps)
    steady = min(m, s) / (s * t)
    assert out.iterations / out.records.finish.max() == pytest.approx(steady, rel=0.01)
    if m < n:  # a micro-batch's consecutive requests finish 101 P steps apart
        gaps = np.diff(out.records.finish[::m])
        assert gaps == pytest.approx(101 * period * t)


def test_the_slowest_stage_bounds_the_throughput() -> None:
    """Stages of 10, 10, 20 and 10 ms, four micro-batches busy: once the third stage is
    reached every step holds it, so a step lasts 20 ms and one iteration leaves per step,
    50 a second (not min(M, S) / (S t) of the mean stage, 80)."""
    t = 0.010
    table = _pipeline([_const(t, t), _const(t, t), _const(2 * t, 2 * t), _const(t, t)])
    n = 8
    out = simulate(table, _requests([0.0] * n, [16] * n, [101] * n), 1.0,
                   Policy("continuous", 1, micro_batches=4))
    assert out.iterations / out.records.finish.max() == pytest.approx(1 / (2 * t), rel=0.01)


def test_three_requests_traced_by_hand() -> None:
    """Two stages, two micro-batches (max batch 2). Stage 0 takes 30 ms a prompt and 10 ms
    a step, stage 1 20 and 5 ms, whatever the batch; an iteration of steps and a prompt
    takes both. R0 (3 tokens out) arrives at 0, R1 (2) at 5 ms, R2 (1) at 12 ms.
    step 0 (t=0)      R0 -> micro-batch 0, whose turn it is: R0's prompt. Stage 0 30 ms.
    step 1 (30 ms)    R1 -> mb 1 (fewest unfinished), R2 -> mb 0 (a tie: the lower); mb 1
                      in: R1's prompt at stage 0 (30), mb 0 at stage 1 (20): 30 ms. mb 0
                      out: R0's first token at 60 ms.
    step 2 (60 ms)    mb 0 in: R0's step and R2's prompt, stage 0 10 + 30; mb 1 at stage 1
                      (20): 40 ms. R1's first token at 100 ms.
    step 3 (100 ms)   mb 1 in: R1's step (10); mb 0 at stage 1, 5 + 20: 25 ms. R2's first
                      and only token at 125 ms, R0's second.
    step 4 (125 ms)   mb 0 in: R0's step (10); mb 1 at stage 1 (5): 10 ms. R1 done, 135 ms.
    step 5 (135 ms)   mb 1 has nothing; mb 0 at stage 1 (5): R0 done at 140 ms."""
    table = _pipeline([_const(0.030, 0.010), _const(0.020, 0.005)])
    out = simulate(table, _requests([0.0, 0.005, 0.012], [10, 10, 10], [3, 2, 1]), 1.0,
                   Policy("continuous", 2, micro_batches=2))
    assert out.records.start == pytest.approx([0.0, 0.030, 0.060])
    assert out.records.first == pytest.approx([0.060, 0.100, 0.125])
    assert out.records.finish == pytest.approx([0.140, 0.135, 0.125])
    # per stage: 3 prompts and 3 steps at stage 0 (120 ms), at stage 1 60 + 15 ms
    assert out.busy_s[0] == pytest.approx((0.120 + 0.075) / 2)


# Three uneven stages, linear in batch and context, a KV cache that binds.
_STAGES = [(0.03, 2e-4, 0.004, 0.001, 2e-6), (0.02, 3e-4, 0.006, 0.002, 1e-6),
           (0.025, 1e-4, 0.003, 0.0005, 3e-6)]


@pytest.mark.parametrize("policy, replicas, router", [
    (Policy("continuous", 4, micro_batches=3), 1, "round-robin"),
    (Policy("chunked", 8, 128, micro_batches=2), 2, "least-outstanding"),
    (Policy("continuous", 8, micro_batches=5), 1, "round-robin"),
    (Policy("continuous", 8, micro_batches=1), 2, "round-robin"),
])
def test_steps_advanced_together_equal_one_at_a_time(policy: Policy, replicas: int,
                                                     router: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    table = _pipeline([linear_table(*p, kv_tokens=6000) for p in _STAGES])
    reqs = generate("poisson", 300, Lengths("lognormal", 200, 0.6),
                    Lengths("lognormal", 60, 0.8), 3, TOP)
    leaped = simulate(table, reqs, 6.0, policy, replicas, router)
    monkeypatch.setattr(pipeline.PipelineReplica, "_quiet", lambda self: False)
    stepped = simulate(table, reqs, 6.0, policy, replicas, router)
    for field in ("start", "first", "finish"):
        assert getattr(leaped.records, field) == pytest.approx(
            getattr(stepped.records, field), abs=1e-9)
    assert leaped.iterations == stepped.iterations
    assert leaped.busy_s == pytest.approx(stepped.busy_s)


def test_one_micro_batch_runs_the_stages_in_turn() -> None:
    """M = 1 is the plan served as `archi plan` costs it: every iteration the whole
    table's (the stages' sum), the same event times as the single-table replica."""
    table = _pipeline([linear_table(*p) for p in _STAGES])
    reqs = generate("poisson", 200, Lengths("fixed", 300), Lengths("lognormal", 40, 0.5), 1,
                    TOP)
    piped = simulate(table, reqs, 4.0, Policy("chunked", 8, 256, micro_batches=1))
    whole = simulate(replace(table, stages=()), reqs, 4.0, Policy("chunked", 8, 256))
    assert piped.records.finish == pytest.approx(whole.records.finish, rel=1e-9)
    assert piped.busy_s * 3 == pytest.approx(whole.busy_s, rel=1e-9)  # each stage a third


def test_micro_batch_refusals() -> None:
    table = _pipeline([_const(0.01, 0.01)] * 2)
    reqs = _requests([0.0], [4], [4])
    with pytest.raises(ArchipelagoError, match=r"--micro-batches 0: must be in 1\.\.256"):
        simulate(table, reqs, 1.0, Policy("continuous", 1, micro_batches=0))
    with pytest.raises(ArchipelagoError, match="micro-batches fly under continuous, chunked"):
        simulate(table, reqs, 1.0, Policy("static", 1, micro_batches=2))


RACK = ("llama2-7b", "4x8xv80", "lora-q")


def _rack_table(split: str) -> IterationTable:
    opts = {"tokens": "512:128", "split": split}
    plan = api.make_plan(*RACK[:2], RACK[2], None, opts)
    return get_strategy(RACK[2]).plan_kind.hook("serving")(
        plan, api.parse_workload(RACK[2], opts), 64)


def test_a_racks_stage_tables_add_up_to_its_estimate() -> None:
    table = _rack_table("tp=8,pp=4")
    assert len(table.stages) == 4
    assert sum(s.prefill_s for s in table.stages) == pytest.approx(table.prefill_s, rel=1e-12)
    assert sum(s.decode_s for s in table.stages) == pytest.approx(table.decode_s, rel=1e-12)
    assert _rack_table("tp=8,pp=1").stages == ()


def test_a_rack_serves_more_with_its_stages_in_flight() -> None:
    """llama2-7b on 4 rings of 8 V80: pp=4 with its four micro-batches in flight serves
    more at saturation than pp=1 or than pp=4 with one micro-batch (the stages in turn),
    and a lone request still waits for every stage (its first token the whole prefill)."""
    four, one = _rack_table("tp=8,pp=4"), _rack_table("tp=8,pp=1")
    reqs = generate("poisson", 400, Lengths("fixed", 512), Lengths("fixed", 128), 0, 4096)

    def served(table: IterationTable, m: int | None = None) -> float:
        out = simulate(table, reqs, 20.0, Policy("continuous", 64, micro_batches=m))
        return len(reqs) / float(out.records.finish.max())

    assert served(four) > 1.5 * served(one)
    assert served(four, 1) == pytest.approx(served(one), rel=0.02)
    lone = simulate(four, _requests([0.0], [512], [3]), 1.0, Policy("continuous", 1))
    assert lone.records.first[0] == pytest.approx(float(four.prefill(1, 512)), rel=1e-9)


def _serve(*args: str) -> subprocess.CompletedProcess:
    return archi_here("serve", RACK[0], "--cluster", RACK[1], "--strategy", RACK[2], "--rate",
                      "1", "--requests", "200", *args)


def test_archi_serve_on_a_rack_capacity_grows_with_stages() -> None:
    runs = {split: _serve("--split", split, "--json") for split in ("tp=8,pp=4", "tp=8,pp=1")}
    for run in runs.values():
        assert run.returncode == 0, run.stderr
    four, one = (json.loads(runs[s].stdout) for s in ("tp=8,pp=4", "tp=8,pp=1"))
    assert (four["stages"], four["micro_batches"]) == (4, 4)
    assert (one["stages"], one["micro_batches"]) == (1, 1)
    assert four["capacity"]["rate"] > 1.5 * one["capacity"]["rate"]
    bad = _serve("--split", "tp=8,pp=4", "--micro-batches", "0")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "--micro-batches 0: must be in 1..256" in bad.stderr
