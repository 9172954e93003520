"""`archi explore` behind its options: a kind that explores without an engine-parameter
search (server sizing) answers itself; otherwise the request is checked whole before any
trial (design space, storage, scheduler, study name, --out), the search runs with a bar on a
terminal, and the best design is written as an engine config and printed. The CLI only
declares the options."""

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from archipelago.errors import ArchipelagoError


@dataclass(frozen=True)
class ExploreCommand:
    """The options of `archi explore` as typed; `search_options` names the options of the
    engine-parameter search the user gave (a kind's own exploration refuses them)."""

    model: str
    cluster: str | None
    strategy: str | None
    workload: dict[str, str]
    trials: int
    storage: str | None  # None: the explore store in the cache directory
    study: str | None
    out: Path | None
    seed: int
    force: bool
    workers: int | None
    scheduler: str | None
    as_json: bool
    search_options: tuple[str, ...]


def run_explore(options: ExploreCommand, console: Console) -> None:
    """Explore and print the result (a table, or one JSON object)."""
    from archipelago.api import choose, explore_kind
    from archipelago.strategies.registry import get_strategy

    strategy, cluster = choose("explore", options.strategy, options.cluster)
    kind = get_strategy(strategy).plan_kind
    if kind.explorer is None:
        _search(options, strategy, cluster, console)
        return
    _refuse_search_options(options.search_options, f"strategy '{strategy}' (its plan kind "
                           f"'{kind.name}' explores without an engine-parameter search)")
    summary = explore_kind(options.model, cluster, strategy, options.workload)
    if options.as_json:
        print(json.dumps(summary, indent=2))
    else:
        kind.hook("report").print_explore(summary, console)


def _refuse_search_options(given: tuple[str, ...], who: str) -> None:
    """A one-line error when an option of the engine-parameter search was given to `who`,
    which would silently ignore it."""
    if given:
        flags = ", ".join(f"--{name}" for name in given)
        one = len(given) == 1
        raise ArchipelagoError(f"{flags} {'does' if one else 'do'} not apply to {who}; leave "
                               f"{'it' if one else 'them'} out")


def _search(options: ExploreCommand, strategy: str, cluster: str, console: Console) -> None:
    """The engine-parameter search (NSGA-II, seeds of the study journal), its best design
    written to --out (default best-STUDY.yaml beside the study's journal)."""
    import yaml

    from archipelago.api import parse_workload
    from archipelago.batch.workers import check_scheduler
    from archipelago.explore.best import explore_store
    from archipelago.explore.search import SearchRequest, run_search
    from archipelago.explore.spaces import space_builder
    from archipelago.explore.store import check_storage
    from archipelago.explore.study import check_study_name, default_study_name, study_identity
    from archipelago.output_file import check_output_file, write_atomically
    from archipelago.progress_bar import progress_bar
    from archipelago.strategies.registry import get_strategy

    space_builder(strategy)  # a strategy without one is refused before any storage is made
    o = options
    if o.storage is not None:
        check_storage(o.storage)
    if o.scheduler is not None:
        check_scheduler(o.scheduler)
        if o.workers is not None:
            raise ArchipelagoError(f"--workers {o.workers} sizes a local cluster; a running "
                                   "one (--scheduler) has its own: leave --workers out")
    if o.study is not None:
        check_study_name(o.study)
    if o.storage is None:  # the user named no place: the cache directory's, never the cwd
        o = replace(o, storage=explore_store("--storage DIR"))
    work = parse_workload(strategy, o.workload, "explore")
    texts = get_strategy(strategy).plan_kind.workload.texts(o.workload, "explore")
    # Resolves model, cluster and strategy: bad names and splits fail before any trial.
    name = o.study or default_study_name(study_identity(o.model, cluster, strategy, work))
    target = o.out or Path(o.storage) / f"best-{name.replace('/', '-')}.yaml"
    replaces = o.force or o.out is None  # the default file follows its study, run after run
    check_output_file(target, "--out", replaces)
    request = SearchRequest(o.model, cluster, strategy, work, o.trials, o.storage, name,
                            o.seed, o.workers, o.scheduler)
    errors = Console(stderr=True)  # no bar (and no line it leaves behind) off a terminal
    with progress_bar(errors, shown=errors.is_terminal) as bar:
        task = bar.add_task(f"exploring {name}", total=o.trials)
        best = run_search(request, on_trial=lambda n: bar.advance(task, n))
    write_atomically(target, yaml.safe_dump({
        "strategy": strategy, "model": o.model, "cluster": cluster, **texts,
        "latency_s": best.latency_s, "tokens_per_s": best.tokens_per_s,
        "engine": best.engine}, sort_keys=False), "--out", replaces)
    summary: dict[str, Any] = {
        "study": name, "storage": o.storage, "trials": best.trials_done,
        "trials_added": best.trials_added, "exhausted": best.exhausted,
        "feasible_trials": best.feasible_trials, "latency_s": best.latency_s,
        "tokens_per_s": best.tokens_per_s, "utilization": best.utilization,
        "engine": best.engine, "engine_config_file": str(target)}
    if o.as_json:
        print(json.dumps(summary, indent=2))
        return
    _print_best(best, console)
    console.print(f"engine config written to {target}; use it with "
                  f"`archi plan {o.model} --cluster {cluster} --strategy {strategy} "
                  f"--engine-config {target}`")


def _print_best(best: Any, console: Console) -> None:
    """The best design's parameters, figures and resource use."""
    from rich.table import Table

    from archipelago.table_fit import fitted

    table = Table(title=f"best of {best.trials_done} trials ({best.feasible_trials} feasible)")
    table.add_column("parameter")
    table.add_column("value", justify="right")
    for key, value in best.engine.items():
        table.add_row(key, f"{value:g}" if isinstance(value, float) else str(value))
    table.add_row("latency", f"{best.latency_s * 1e3:,.2f} ms")
    table.add_row("tokens/s", f"{best.tokens_per_s:,.2f}")
    for key, value in best.utilization.items():
        table.add_row(f"{key} used", f"{100 * value:.0f}%")
    console.print(fitted(table, console))
    if best.exhausted:
        console.print(f"the design space has no other designs: all {best.trials_done} "
                      "were evaluated")
