"""The best engine for a model, a cluster and a workload (`plan --engine best`, compare's
rows): searched once, then read back from the explore store.

The store is the cache directory's `explore/` folder of study journals (store.py), one per
search, named by the study's identity digest: the model's and the boards' content, the
strategy, its space's genes (bounded by the device) and the whole parsed workload (tokens,
batch and every other field a workload carries, a number format included), so any change
to them is a new search and an unchanged request reads the finished study back without
costing a design. The search machinery is imported when a search is asked for: the
choice's names and checks are all compare's and plan's option parsing need.
"""

import time
from dataclasses import dataclass
from typing import Any

from archipelago.cache_dir import cache_folder
from archipelago.errors import ArchipelagoError
from archipelago.estimate.summary import Figure

# Trials of one search: the DFX spaces (at most a few hundred engines) are exhausted well
# within it; the LORA spaces reach their optimum in under 30% of a space of ~25,000 engines
# (tests/test_explore_genetic.py), and 2,000 trials take about 2 s (benchmarks/bench_best.py).
BEST_TRIALS = 2000
ENGINES = ("published", "best")  # `--engine` of plan and compare
PUBLISHED = "published"


@dataclass(frozen=True)
class BestEngine:
    """The engine a search chose, and what it took: trials held, whether the space was
    exhausted, the seconds this call spent and whether it only read the store back."""

    engine: dict[str, Any]
    trials: int
    exhausted: bool
    seconds: float
    cached: bool
    study: str

    def label(self, published: dict[str, Any]) -> str:
        """`searched: d=128 l=16 ...`, the parameters where it differs from `published`
        (the strategy's default engine config as a dict), or that it is the published one."""
        changed = {k: v for k, v in self.engine.items() if published.get(k) != v}
        if not changed:
            return "searched: the published engine"
        return "searched: " + " ".join(f"{k}={_short(v)}" for k, v in changed.items())


def _short(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def check_engine(text: str) -> str:
    """`--engine`'s value, or a one-line error naming the choices."""
    if text not in ENGINES:
        raise ArchipelagoError(f"--engine '{text[:40]}': valid choices are "
                               f"{', '.join(ENGINES)}")
    return text


def explore_store(instead: str = "--engine published") -> str:
    """The explore store in the cache directory, made if missing (`instead`: the option
    that keeps a search out of it)."""
    return str(cache_folder("explore", "searched engines and their studies", instead))


def best_engine(model: str, cluster: str, strategy: str, workload: Any) -> BestEngine:
    """The best engine of `strategy`'s space for `model` on `cluster` at `workload` (as the
    strategy's plan kind parsed it), from the store when searched before."""
    from archipelago.explore.search import SearchRequest, run_search
    from archipelago.explore.spaces import space_builder
    from archipelago.explore.study import study_identity

    start = time.perf_counter()
    space_builder(strategy)  # a strategy without a space: one line, before anything else
    identity = study_identity(model, cluster, strategy, workload)
    name = f"best-{identity.digest}"
    found = run_search(SearchRequest(model, cluster, strategy, workload, BEST_TRIALS,
                                     explore_store(), name))
    return BestEngine(found.engine, found.trials_done, found.exhausted,
                      time.perf_counter() - start, found.trials_added == 0, name)


@dataclass(frozen=True)
class Chosen:
    """The engine `plan --engine` runs (None: the strategy's defaults) and its label."""

    engine: dict[str, Any] | None
    label: str
    found: BestEngine | None = None

    def as_json(self) -> dict[str, Any]:
        search = {} if self.found is None else {
            "parameters": self.found.engine, "trials": self.found.trials,
            "exhausted": self.found.exhausted, "search_s": self.found.seconds,
            "from_store": self.found.cached}
        return {"engine": self.label, **search}

    def shown(self) -> str:
        if self.found is None:
            return self.label
        how = ("read back from the explore store" if self.found.cached
               else f"searched in {self.found.seconds:,.1f} s")
        return f"{self.label} (best of {self.found.trials:,} trials, {how})"

    def figure(self) -> Figure:
        """The summary's `engine` figure: a head-table row and the `--json` object."""
        return Figure("engine", self.as_json(), "engine", (self.shown(),))


def engine_choice(given: str | None, strategy: str) -> str | None:
    """The `--engine` a plan runs: as given, else `published` where the strategy has an
    engine design space (so its output always says which engine ran), else None (a
    strategy with one engine has nothing to choose or label)."""
    from archipelago.strategies.registry import get_strategy

    if given is not None:
        return given
    return PUBLISHED if get_strategy(strategy).design_space is not None else None


def choose_engine(choice: str, model: str, cluster: str, strategy: str, workload: Any,
                  given: dict[str, Any]) -> Chosen:
    """`--engine published` (the strategy's defaults, with any --engine-config `given`) or
    `--engine best` (searched, refusing an --engine-config it would override)."""
    from archipelago.strategies.registry import get_strategy

    check_engine(choice)
    if choice == PUBLISHED:
        return Chosen(given or None, "published" if not given else "published, with the "
                      "parameters of --engine-config")
    if given:
        raise ArchipelagoError("--engine best searches the engine's parameters; leave "
                               "--engine-config out (or use --engine published)")
    registered = get_strategy(strategy)
    if registered.design_space is None and registered.searched_engine is not None:
        return Chosen(dict(registered.searched_engine), "best (the planner's own search over "
                      "candidates bounded by the boards)")
    found = best_engine(model, cluster, strategy, workload)
    published = registered.config({}).model_dump()
    return Chosen(found.engine, found.label(published), found)


def chosen_engine(choice: str | None, model: str, cluster: str, strategy: str,
                  workload: dict[str, str], command: str, given: dict[str, Any] | None
                  ) -> tuple[dict[str, Any] | None, Chosen | None]:
    """(the engine parameters to plan with, the `Chosen` engine that labels them) for
    `plan`, `report` and the library's `plan()`: the one `--engine` names (published by
    default where the strategy has a design space, searched at the workload the plan is
    costed on: `workload`, the kind's option texts); (`given`, None) for a strategy with
    one engine and no `--engine`."""
    from archipelago.api import parse_workload

    choice = engine_choice(choice, strategy)
    if choice is None:
        return given, None
    work = None if choice == PUBLISHED else parse_workload(strategy, workload, command)
    chosen = choose_engine(choice, model, cluster, strategy, work, given or {})
    return chosen.engine, chosen
