"""Functional emulation of a host-offload plan (seeds/003): the plan's application runs for
real, the CPU side in FP32 numpy, each card a process holding only its INT8 blocks, and the
result is checked against an unsplit FP32 torch reference with the same weights.

    card       a card's state and handlers (INT8 matvec, int32 accumulation, LSTM cells)
    processes  one process per card, pipes, failures named by card
    executor   the Table I API run for real, traced against the plan's Program
    weights    seeded weights      reference  torch nn.LSTM NMT, greedy / beam search
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from archipelago.emulate.errors import EmulationError
from archipelago.emulate.job import EmulationJob
from archipelago.models.recurrent import LSTMSpec, MatvecSpec, NMTSpec
from archipelago.strategies.host_offload.apps import BOS, run_app
from archipelago.strategies.host_offload.emulate.card import CHECKSUM_MOD, LocalCard
from archipelago.strategies.host_offload.emulate.executor import Executor
from archipelago.strategies.host_offload.emulate.processes import start_cards
from archipelago.strategies.host_offload.emulate.weights import Arrays, make_source, make_weights
from archipelago.strategies.host_offload.plan import HostPlan
from archipelago.strategies.host_offload.program import Program

# Hidden states are tanh-bounded (|h| < 1); INT8 matvecs (per-row weight scales, one scale
# per input vector) keep them within this of the FP32 reference on the tiny models emulated.
STATE_TOLERANCE = 0.05
MAX_EMULATED_HIDDEN = 1024  # the torch reference and numpy host stay quick up to here


def emulate(plan: HostPlan, job: EmulationJob) -> dict[str, Any]:
    """The host-program kind's emulator (`archi emulate --strategy persistent`): seeded
    weights; the cards compute in INT8 and the host in FP32 (the kind takes no --precision
    or --checkpoint: the pipeline refuses them)."""
    return emulate_host(plan, job.seed, job.timeout_s)


@dataclass(frozen=True)
class SeededRun:
    """One run of a plan's application: its result (what the built host program prints),
    the calls it made, each card's report, and the seeded inputs it ran on."""

    result: Any
    trace: Program
    reports: list[dict[str, Any]]
    weights: Arrays
    biases: Arrays
    host: Arrays
    source: list[int]


def run_seeded(plan: HostPlan, seed: int = 0, timeout_s: float = 30.0,
               in_process: bool = False) -> SeededRun:
    """The plan's application run once with seeded weights, each card a process (or, for
    tests, an object in this one)."""
    spec = plan.spec
    if getattr(spec, "hidden", 0) > MAX_EMULATED_HIDDEN:
        raise EmulationError(f"--hidden {spec.hidden}: emulation runs models up to "
                             f"{MAX_EMULATED_HIDDEN} wide (use `archi plan` for larger)")
    weights, biases, host = make_weights(spec, seed, plan.steps)
    source = make_source(spec, seed, plan.steps)
    cards = ([LocalCard(k) for k in range(plan.cards)] if in_process
             else start_cards(plan.cards, timeout_s))
    try:
        executor = Executor(plan.layout, cards, weights, biases, host)
        result = run_app(executor, spec, plan.layout, plan.steps, source)
        reports = [card.request(("report",)) for card in cards]
    finally:
        for card in cards:
            if hasattr(card, "close"):
                card.close()
    return SeededRun(result, executor.trace.program, reports, weights, biases, host, source)


def emulate_host(plan: HostPlan, seed: int = 0, timeout_s: float = 30.0,
                 in_process: bool = False) -> dict[str, Any]:
    """Run the plan's application once with seeded weights and compare with the reference."""
    spec = plan.spec
    run = run_seeded(plan, seed, timeout_s, in_process)
    reports, result = run.reports, run.result
    checksum = sum(r["checksum"] for r in reports) % CHECKSUM_MOD
    report: dict[str, Any] = {
        "model": spec.name, "cards": plan.cards, "steps": plan.steps, "seed": seed,
        "trace_matches_plan": run.trace.calls == plan.program.calls,
        "calls": len(plan.program.calls), "integer_checksum": f"{checksum:016x}",
        "weight_bytes_per_card": [r["weight_bytes"] for r in reports],
        "state_tolerance": STATE_TOLERANCE,
    }
    report |= _compare(spec, plan.steps, run.weights, run.biases, run.host, run.source, result)
    report["states_within_tolerance"] = report["max_state_diff"] <= STATE_TOLERANCE
    report["agrees"] = (report["trace_matches_plan"] and report["states_within_tolerance"]
                        and report.get("tokens_match", True))
    return report


def _compare(spec: Any, steps: int, weights: dict, biases: dict, host: dict,
             source: list[int], result: Any) -> dict[str, Any]:
    """The run's outputs against the unsplit reference of its model family."""
    if isinstance(spec, MatvecSpec):
        exact = weights["w"].astype(np.float64) @ host["x"]
        return {"max_state_diff": float(np.abs(result - exact).max() / np.abs(exact).max())}
    from archipelago.strategies.host_offload.emulate.reference import ReferenceNMT, reference_lstm

    if isinstance(spec, LSTMSpec):
        ref = reference_lstm(spec, weights, biases, host["inputs"])
        return {"max_state_diff": float(np.abs(np.stack(result) - ref).max())}
    assert isinstance(spec, NMTSpec)
    ref = ReferenceNMT(spec, weights, biases, host).translate(source, steps, BOS)
    return {
        "beam": spec.beam, "source": source, "tokens": result["tokens"],
        "reference_tokens": ref["tokens"], "tokens_match": result["tokens"] == ref["tokens"],
        "max_state_diff": float(np.abs(np.stack(result["encoder"]) - ref["encoder"]).max()),
        "max_feed_diff": float(np.abs(result["feed"] - ref["feed"]).max()),
        # the reference's closest call between a kept and a dropped word (log-probability):
        # a mismatch where it is below the INT8 error is a near-tie, not a wrong split
        "reference_min_margin": ref["min_margin"],
    }
