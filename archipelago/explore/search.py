"""Design-space search (seeds/002 §V-D, Eq. 13): minimize latency and the worst fabric
fraction used under the devices' DSP/BRAM/URAM/memory limits, with a numpy NSGA-II over the
space's genes (explore/genetic.py), a generation of candidates evaluated as one batch.

Each batch is appended to the study's journal as it finishes, within the study's budget, so
concurrent runs on one study stop at `trials` in total and a killed run loses only its batch
in flight; rerunning the same command rebuilds the population from the journal and goes on.
Batches run in this process (by default, or `workers=0`) or on Dask (a local cluster of
processes, or a running scheduler), each worker scoring a slice of the generation.
"""

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from archipelago.batch.runner import in_process
from archipelago.errors import ArchipelagoError, Interrupted, elide, elide_path
from archipelago.explore.evaluate import FABRIC, Problem, evaluate_chunk, fabric
from archipelago.explore.population import Population
from archipelago.explore.signals import StopFlag, stop_on_signals
from archipelago.explore.spaces import design_space
from archipelago.explore.store import MemoryStudy, check_storage, open_study
from archipelago.explore.stored import DamagedStudy
from archipelago.explore.study import study_identity

# Trials per generation (one batch, evaluated and persisted together): a search gets about
# GENERATIONS of them, within these bounds. Twenty generations of 500 reach the LORA spaces'
# optimum well inside 10,000 trials (tests/test_explore_genetic.py, bench_explore.py), and a
# batch of hundreds keeps the per-batch costs (a journal fsync, ~15 ms for a Dask round trip
# on a 2-core machine, the batch evaluator's plan) small beside the batch.
GENERATIONS = 20
BATCH_MIN, BATCH_MAX = 32, 512
CHUNK = 128  # in this process: trials between two looks at the stop flag

Scores = list[dict[str, Any] | None]  # per candidate; None where a stop left it unscored
Runner = Callable[[Problem, list[dict[str, Any]]], tuple[Scores, int | None]]


@dataclass(frozen=True)
class SearchRequest:
    model: str
    cluster: str
    strategy: str
    workload: Any  # what the strategy's plan kind parsed from the command line
    trials: int
    storage: str  # the directory of study journals; "" keeps the study in memory
    study_name: str
    seed: int = 0
    workers: int | None = None  # None or 0: in this process; N: a local Dask cluster of N
    scheduler: str | None = None  # a running Dask scheduler, tcp://HOST:PORT


@dataclass(frozen=True)
class Best:
    engine: dict[str, Any]
    latency_s: float
    tokens_per_s: float
    utilization: dict[str, float]
    trials_done: int  # in the study, every run's
    feasible_trials: int
    trials_added: int  # records this run wrote (a design two runs scored at once: twice)
    exhausted: bool  # the space has no design left that the study has not evaluated


def run_search(request: SearchRequest, on_trial: Callable[[int], None] | None = None) -> Best:
    """Run until the study holds `trials` trials (all runs on it together) or the space is
    exhausted, then return the best feasible. SIGINT/SIGTERM stop it after the batch in
    flight, keeping what finished."""
    # a strategy without one: refused before any storage
    space = design_space(request.strategy, request.model, request.cluster,
                         request.workload)
    identity = study_identity(request.model, request.cluster, request.strategy,
                              request.workload)
    study = (open_study(check_storage(request.storage), request.study_name, identity)
             if request.storage else MemoryStudy())
    population = Population(space)
    _take(population, study, request)
    advance = on_trial or (lambda _n: None)
    advance(len(population))
    problem = Problem(request.model, request.cluster, request.strategy, request.workload)
    rng = np.random.default_rng([request.seed, len(population)])
    added, exhausted, parted = 0, False, False
    batch = min(BATCH_MAX, max(BATCH_MIN, request.trials // GENERATIONS))
    with stop_on_signals() as stop, _runner(request, stop) as run:
        while len(population) < request.trials and stop.signum is None:
            candidates = population.propose(rng, min(batch, request.trials - len(population)))
            if not candidates:
                exhausted = True
                break
            decoded = [population.proposed[key] for _, key in candidates]
            scores, signum = run(problem, [engine for _, _, engine in decoded])
            items = _records(candidates, decoded, scores, study.records())
            taken = study.append_within(items, request.trials)
            added += taken
            before = len(population)
            population.add(dict(items[:taken]), own=True)
            _take(population, study, request)
            advance(len(population) - before)
            if len(population) - before > taken and not parted:
                # A peer runs the same search from the same seed: it would propose what
                # this run proposes; part ways (a lone run stays reproducible).
                rng, parted = np.random.default_rng([request.seed, len(population),
                                                    os.getpid()]), True
            stop.signum = stop.signum or signum
            if taken < len(items):
                break  # the budget is full: peers filled it meanwhile
    if stop.signum is not None:
        raise Interrupted(f"interrupted by {signal.Signals(stop.signum).name}: study "
                          f"'{request.study_name}' holds {len(population)} finished trials; "
                          "rerun the same command to resume", stop.signum)
    return best_of(population, added, exhausted or population.exhausted())


def _records(candidates: list[tuple[np.ndarray, str]], decoded: list[tuple[Any, ...]],
             scores: Scores, known: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The scored candidates (with their decoded genes and engine) as trials, leaving out
    what a peer recorded meanwhile: each as the journal keeps it (its fields in
    TrialRecord's order, the scores' in `evaluate_chunk`'s). Not validated: this run made
    them of the types TrialRecord holds (tests/test_explore.py checks they validate)."""
    return [(key, {"genes": values, "engine": engine, **score})
            for (_, key), (_, values, engine), score in zip(candidates, decoded, scores,
                                                            strict=True)
            if score is not None and key not in known]


def _take(population: Population, study: Any, request: SearchRequest) -> None:
    """Take in the study's trials this run does not hold yet (other runs')."""
    try:
        population.add(study.records())
    except DamagedStudy as err:
        raise ArchipelagoError(f"storage '{elide_path(request.storage, 80)}': study "
                               f"'{elide(request.study_name, 40)}' "
                               f"was not written by archi explore or is damaged: {err}; "
                               "choose another --study (or --storage)") from None


@contextmanager
def _runner(request: SearchRequest, stop: StopFlag) -> Iterator[Runner]:
    """How batches are scored: here, in slices between looks at `stop`; or on Dask, one
    slice per worker thread, a signal there ending the batch with what finished."""
    if in_process(request.workers, request.scheduler):
        def here(problem: Problem, engines: list[dict[str, Any]]) -> tuple[Scores, int | None]:
            scores: Scores = [None] * len(engines)
            for start in range(0, len(engines), CHUNK):
                scores[start:start + CHUNK] = evaluate_chunk(
                    (problem, engines[start:start + CHUNK]))
                if stop.signum is not None:
                    break
            return scores, stop.signum

        yield here
        return
    from archipelago.batch.workers import dask_client, stream

    with dask_client(request.scheduler, request.workers) as client:
        threads = max(1, sum(client.nthreads().values()))

        def on_dask(problem: Problem, engines: list[dict[str, Any]]
                    ) -> tuple[Scores, int | None]:
            slices = np.array_split(np.arange(len(engines)), min(threads, len(engines)))
            scores: Scores = [None] * len(engines)

            def done(key: str, result: list[dict[str, Any]]) -> None:
                for i, score in zip(slices[int(key)], result, strict=True):
                    scores[i] = score

            tasks = {str(n): (problem, [engines[i] for i in part])
                     for n, part in enumerate(slices)}
            try:
                stream(client, evaluate_chunk, tasks, done)
            except Interrupted as err:
                return scores, err.exit_code - 128
            return scores, None

        yield on_dask


def best_of(population: Population, added: int, exhausted: bool) -> Best:
    """The feasible trial of least latency, then least worst fabric fraction, then least
    fabric in total (ties between designs that differ only where nothing is measured
    go to the leanest), then the engine key: the same answer whatever order found it."""
    records, scores = population.records, population.scores
    fits = scores[:, 2] <= 0  # no violation
    if not fits.any():
        raise ArchipelagoError(f"none of {len(records)} trials fits the devices; "
                               "try more trials or a larger cluster")
    keys = list(records)
    fastest = np.flatnonzero(fits & (scores[:, 0] == scores[fits, 0].min()))

    def order(key: str) -> tuple[float, float, float, str]:
        used = records[key]["utilization"]
        return (records[key]["latency_s"], fabric(used), sum(used[k] for k in FABRIC), key)

    best = records[min((keys[i] for i in fastest), key=order)]
    # copies: the study's own values stay the journal's
    return Best(engine=dict(best["engine"]), latency_s=best["latency_s"],
                tokens_per_s=best["tokens_per_s"], utilization=dict(best["utilization"]),
                trials_done=len(records), feasible_trials=int(fits.sum()),
                trials_added=added, exhausted=exhausted)
