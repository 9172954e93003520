"""Design-space search (seeds/002 §V-D, Eq. 13): minimize latency and resource use under the
device's DSP/BRAM/URAM/memory limits, with optuna's NSGA-II genetic sampler.

Every finished trial is committed to the study's storage (SQLite by default), so a killed
search loses at most the trial in flight; rerunning the same command resumes it and runs
only the trials still missing. What a study is and how runs share one: explore/study.py,
explore/trials.py.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from archipelago.api import estimate, make_plan
from archipelago.errors import ArchipelagoError, Interrupted
from archipelago.explore.spaces import DesignSpace, design_space
from archipelago.explore.storage import open_storage
from archipelago.explore.stored import DamagedStudy, TrialResult, read_stored
from archipelago.explore.study import DIRECTIONS, claim, study_identity
from archipelago.explore.trials import run_trials, stop_on_signals
from archipelago.strategies.registry import get_strategy

STORAGE_RETRIES = 5
RESULT = "result"  # user attr of a finished trial: what explore.stored.TrialResult holds


@dataclass(frozen=True)
class SearchRequest:
    model: str
    cluster: str
    strategy: str
    workload: Any  # what the strategy's plan kind parsed from the command line
    trials: int
    storage: str
    study_name: str
    seed: int = 0


@dataclass(frozen=True)
class Best:
    engine: dict[str, Any]
    latency_s: float
    tokens_per_s: float
    utilization: dict[str, float]
    trials_done: int
    feasible_trials: int


def evaluate(request: SearchRequest, engine: dict[str, Any]) -> tuple[Any, Any]:
    """The plan for one engine design and its estimate: the kind's estimator (through the
    pipeline), whose result has `latency_s`, `tokens_per_s` and `feasible`."""
    plan = make_plan(request.model, request.cluster, request.strategy, engine)
    return plan, estimate(request.strategy, plan, request.workload,
                          f"{request.strategy} plan of {request.model} on {request.cluster}")


def _objective(request: SearchRequest, space: DesignSpace
               ) -> Callable[[Any], tuple[float, float]]:
    sample = space.sample
    utilization = get_strategy(request.strategy).plan_kind.hook("utilization")

    def objective(trial: Any) -> tuple[float, float]:
        engine = sample(trial)
        plan, est = evaluate(request, engine)
        used = utilization(plan, est)
        # One write per trial: each attribute is a storage round trip.
        trial.set_user_attr(RESULT, {"engine": engine, "utilization": used,
                                       "tokens_per_s": est.tokens_per_s})
        # Feasible when <= 0: the worst overuse of any limit, or 1 for infeasible memory.
        trial.set_constraint("limits", max(max(used.values()) - 1.0,
                                           0.0 if est.feasible else 1.0))
        return est.latency_s, max(used["dsp"], used["bram"], used["uram"])

    return objective


def _create_study(request: SearchRequest) -> Any:
    """Create or load the study; runs started together race to create the storage's tables,
    so a loser retries once the winner is done."""
    import optuna
    from sqlalchemy.exc import IntegrityError, OperationalError

    sampler = optuna.samplers.NSGAIISampler(seed=request.seed, population_size=24)

    def create() -> Any:
        return optuna.create_study(study_name=request.study_name,
                                   storage=open_storage(request.storage),
                                   directions=list(DIRECTIONS), sampler=sampler,
                                   load_if_exists=True)

    for attempt in range(1, STORAGE_RETRIES):
        try:
            return create()
        except (OperationalError, IntegrityError):
            time.sleep(0.2 * attempt)
    return create()


def _open_study(request: SearchRequest) -> tuple[Any, str]:
    """The study, claimed for this search, and the digest of the search's identity."""
    import optuna
    from sqlalchemy.exc import SAWarning, SQLAlchemyError

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = _create_study(request)
    except (ValueError, ImportError, SQLAlchemyError, SAWarning,
            optuna.exceptions.OptunaError) as err:
        reason = str(err).strip().splitlines()[0]
        raise ArchipelagoError(f"storage '{request.storage}': {reason}") from None
    identity = study_identity(request.model, request.cluster, request.strategy,
                              request.workload)
    claim(study, identity, f"storage '{request.storage}'")
    for trial in _complete(study):  # refused now, not after the whole search
        _result(trial)
    return study, identity.digest


def _complete(study: Any) -> list[Any]:
    import optuna

    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def _result(trial: Any) -> TrialResult:
    return read_stored(TrialResult, trial.user_attrs.get(RESULT),
                       f"trial {trial.number}'s attribute '{RESULT}'")


def _finished(study: Any) -> int:
    return len(_complete(study))


def run_search(request: SearchRequest, on_trial: Callable[[int], None] | None = None) -> Best:
    """Run until the study holds `trials` finished trials (all runs on it together), then
    return the best feasible. SIGINT/SIGTERM stop it after the trial in flight."""
    import signal

    space = design_space(request.strategy)  # a strategy without one: before any storage
    try:
        study, search = _open_study(request)
        if on_trial:
            on_trial(_finished(study))
        with stop_on_signals() as stop:
            run_trials(study, _objective(request, space), request.trials, space.baseline,
                       stop, search, on_trial)
        if stop.signum is not None:
            raise Interrupted(f"interrupted by {signal.Signals(stop.signum).name}: study "
                              f"'{request.study_name}' holds {_finished(study)} finished "
                              "trials; rerun the same command to resume", stop.signum)
        return best_of(study)
    except DamagedStudy as err:
        raise ArchipelagoError(f"storage '{request.storage}': study '{request.study_name}' "
                               f"was not written by archi explore or is damaged: {err}; "
                               "choose another --study (or --storage)") from None


def _satisfied(constraints: Any) -> bool:
    values = constraints.values() if isinstance(constraints, dict) else constraints or [1.0]
    return all(v <= 0 for v in values)


def best_of(study: Any) -> Best:
    complete = _complete(study)
    feasible = [t for t in complete if _satisfied(t.constraints)]
    if not feasible:
        raise ArchipelagoError(f"none of {len(complete)} trials fits the devices; "
                               "try more trials or a larger cluster")
    best = min(feasible, key=lambda t: (t.values[0], t.values[1]))
    result = _result(best)
    return Best(engine=result.engine, latency_s=best.values[0],
                tokens_per_s=result.tokens_per_s, utilization=result.utilization,
                trials_done=len(complete), feasible_trials=len(feasible))
