"""What every `archi` command shares: the options' types and bounds, the words a kind's
options arrive as, an engine-config file checked against its strategy, and the console the
tables print on. Beside `cli`, which holds the commands themselves."""

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from archipelago.errors import ArchipelagoError, ConfigError, elide
from archipelago.output_file import output_path
from archipelago.safe_read import load_mapping
from archipelago.strict_numbers import check_numbers

# The status of a valid request that does not fit (`plan`) or of which nothing fits
# (`compare`): its input was valid, so not 2.
INFEASIBLE = 1

if TYPE_CHECKING:  # rich is imported when something is printed, not for `--json`
    from rich.console import Console

ModelArg = Annotated[str, typer.Argument(
    help="a built-in model or a model file (`archi catalog` lists the built-ins; an unknown "
         "name lists every form)")]
ClusterOpt = Annotated[str | None, typer.Option(
    help="NxDEVICE shorthand or cluster YAML (see `archi catalog`)", show_default=False)]
StrategyOpt = Annotated[str | None, typer.Option(
    help="partitioning strategy (see `archi catalog`)", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON object")]
EngineOpt = Annotated[Path | None, typer.Option(help="engine parameters (YAML)")]
EngineChoiceOpt = Annotated[str | None, typer.Option(
    "--engine", help="published (the paper's engine: the default) or best (the best of the "
    "strategy's design space bounded by the board, searched once for this model, cluster and "
    "workload, then read back from the explore store in the cache directory)",
    show_default=False)]
ForceReportOpt = Annotated[bool, typer.Option("--force", help="replace an existing report file")]


# Where a command writes: a path, never the empty string.
OUTPUT = {"parser": output_path, "metavar": "<path>"}
# The options of the strategy's plan kind (--tokens IN:OUT, --seq-len N, ...): typer passes
# them through as extra words, and the kind parses or refuses them.
KIND_OPTIONS = {"allow_extra_args": True, "ignore_unknown_options": True}
KIND_HELP = ("The strategy's plan kind adds its own options (`archi catalog` lists them); "
             "each kind's, for this command:")


def load_engine_config(path: Path | None, strategy: str) -> dict[str, Any]:
    """An engine-config YAML/JSON file: a mapping of engine design parameters (or a best-of
    file from `archi explore`, which keeps them under `engine`), checked against
    `strategy`'s engine here, where a bad value can be blamed on the file."""

    if path is None:
        return {}
    data = load_mapping(path, "engine")
    return checked_engine(data.get("engine", data), strategy, str(path))


def checked_engine(engine: Any, strategy: str, source: str) -> dict[str, Any]:
    """Engine parameters (from a file, or the library's `engine=` mapping) checked against
    `strategy`'s engine, a bad value blamed on `source`."""
    from archipelago.strategies.registry import get_strategy

    if not isinstance(engine, dict):
        raise ConfigError(source, "engine", f"must be a mapping of design parameters, got "
                          f"{type(engine).__name__} {elide(repr(engine), 60)}")
    check_numbers(engine, get_strategy(strategy).engine_config, source)
    try:
        get_strategy(strategy).config(engine)
    except ArchipelagoError as err:
        raise ArchipelagoError(f"{source}: {err}") from None
    return engine


def workload_options(ctx: typer.Context) -> dict[str, str]:
    """`--name value` / `--name=value` pairs typer left over, as {name: text}; which names
    are valid is the plan kind's to say."""
    words, given = list(ctx.args), {}
    while words:
        flag, eq, value = words.pop(0).partition("=")
        if not flag.startswith("--"):
            raise ArchipelagoError(f"unexpected argument '{flag}'; options look like --name "
                                   "value")
        if not eq:  # a bare flag (nothing after it, or another flag) means "true"
            value = "true" if not words or words[0].startswith("--") else words.pop(0)
        given[flag[2:].replace("-", "_")] = value
    return given


# A bound that still means "search long": 10^5 trials are more than every built-in design
# space holds (the LORA-Q space has 37,800 gene combinations); a larger count is a typo.
MAX_TRIALS = 100_000
# Seconds of work since issue 22, and enough to reach the optimum of an enumeration of the
# LORA spaces in every case measured (benchmarks/bench_explore.py).
DEFAULT_TRIALS = 10_000
MAX_SAMPLER_SEED = 2**32 - 1  # the search's numpy generator: any 32-bit seed
SEARCH_OPTIONS = ("trials", "storage", "study", "out", "seed", "force", "workers", "scheduler")


def within(low: int, high: int) -> Callable[[int | None], int | None]:
    """An option callback bounding an integer; the error names the value and the range."""

    def check(value: int | None) -> int | None:
        if value is not None and not low <= value <= high:
            shown = str(value) if len(str(value)) <= 24 else f"a {len(str(value))}-digit number"
            raise typer.BadParameter(f"{shown} is outside {low}..{high}")
        return value

    return check


def machine_workers() -> Callable[[int | None], int | None]:
    """A --workers callback: at most what this machine runs (batch.workers.check_workers,
    which says the limit and why), or 0 (in this process, as when it is left out)."""

    def check(value: int | None) -> int | None:
        if value is None:
            return value
        from archipelago.batch.workers import check_workers
        from archipelago.errors import ArchipelagoError

        try:
            return check_workers(value, "", 0)
        except ArchipelagoError as err:
            raise typer.BadParameter(str(err).strip()) from None

    return check


def given_options(ctx: typer.Context, names: tuple[str, ...]) -> tuple[str, ...]:
    """Which of `names` the user gave (not left at their defaults)."""
    sources = {name: ctx.get_parameter_source(name) for name in names}
    return tuple(name for name, source in sources.items()
                 if source is not None and source.name != "DEFAULT")  # typer's click enum


@cache
def console() -> "Console":
    """The terminal the commands print tables on, made (and rich imported) the first time a
    command prints one: a `--json` run never pays for it."""
    from rich.console import Console

    return Console()
