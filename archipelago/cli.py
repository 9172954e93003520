"""`archi`: the command line. Every user mistake is one line on stderr and exit status 2."""

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from archipelago.cli_group import OneLineErrorGroup
from archipelago.errors import ArchipelagoError, ConfigError, signals_as_errors
from archipelago.safe_read import load_mapping

app = typer.Typer(cls=OneLineErrorGroup, add_completion=False, invoke_without_command=True,
                  help="Plan, estimate and verify models split across FPGA clusters.")
console = Console()

ModelArg = Annotated[str, typer.Argument(help="zoo name (see `archi catalog`) or config.json path")]
ClusterOpt = Annotated[str, typer.Option(help="NxDEVICE shorthand (e.g. 4xu280) or cluster YAML")]
StrategyOpt = Annotated[str, typer.Option(help="partitioning strategy (see `archi catalog`)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON object")]
EngineOpt = Annotated[Path | None, typer.Option(help="engine parameters (YAML)")]
ForceReportOpt = Annotated[bool, typer.Option("--force", help="replace an existing report file")]
# The workload options (--tokens IN:OUT, --seq-len N, ...) belong to the strategy's plan kind:
# typer passes them through as extra words, and the kind parses them.
KIND_OPTIONS = {"allow_extra_args": True, "ignore_unknown_options": True}
KIND_HELP = ("\n\nThe strategy's plan kind adds its workload options (`archi catalog` lists "
             "them), e.g. --tokens IN:OUT for tensor-parallel strategies, --seq-len N for "
             "dataflow ones.")


@app.callback()
def _commands(ctx: typer.Context) -> None:
    """A bare `archi` prints its help (the commands) rather than an error."""
    if ctx.invoked_subcommand is None:
        print(ctx.get_help())


def user_errors(command: Callable[..., None]) -> Callable[..., None]:
    """Turn ArchipelagoError into `error: ...` on stderr and exit status 2, no traceback;
    SIGINT and SIGTERM into `error: interrupted by ...` and exit status 128 + N."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            with signals_as_errors():
                command(*args, **kwargs)
        except ArchipelagoError as err:
            print(f"error: {err}", file=sys.stderr)
            raise typer.Exit(getattr(err, "exit_code", 2)) from None

    return run


def load_engine_config(path: Path | None, strategy: str) -> dict[str, Any]:
    """An engine-config YAML/JSON file: a mapping of engine design parameters (or a best-of
    file from `archi explore`, which keeps them under `engine`), checked against
    `strategy`'s engine here, where a bad value can be blamed on the file."""
    from archipelago.strategies.registry import get_strategy

    if path is None:
        return {}
    data = load_mapping(path, "engine")
    engine = data.get("engine", data)
    if not isinstance(engine, dict):
        raise ConfigError(str(path), "engine", f"must be a mapping of design parameters, got "
                          f"{type(engine).__name__} {str(engine)[:40]!r}")
    try:
        get_strategy(strategy).config(engine)
    except ArchipelagoError as err:
        raise ArchipelagoError(f"{path}: {err}") from None
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


@app.command(context_settings=KIND_OPTIONS, help=f"Split MODEL over CLUSTER and estimate its "
             f"latency, throughput and resource use.{KIND_HELP}")
@user_errors
def plan(
    ctx: typer.Context,
    model: ModelArg,
    cluster: ClusterOpt = "4xu280",
    strategy: StrategyOpt = "dfx",
    engine_config: EngineOpt = None,
    as_json: JsonOpt = False,
    report_file: Annotated[Path | None, typer.Option(
        "--report", help="also write the HTML report page (as `archi report`) to this file")
    ] = None,
    force: ForceReportOpt = False,
) -> None:
    from archipelago.api import plan_and_estimate
    from archipelago.strategies.registry import get_strategy

    kind = get_strategy(strategy).plan_kind
    if report_file is not None:  # a kind without a page, or a bad path, fails before planning
        from archipelago.report.html import check_target

        kind.hook("page")
        check_target(report_file, force, "--report")
    result = plan_and_estimate(model, cluster, strategy, workload_options(ctx),
                               load_engine_config(engine_config, strategy))
    report = kind.hook("report")
    if as_json:
        print(json.dumps(report.estimate_to_dict(*result), indent=2))
    else:
        report.print_estimate(*result, console)
    if report_file is not None:
        from archipelago.report.html import write_report

        write_report(f"{model} on {cluster}", strategy, result, report_file, force, "--report")
        if not as_json:
            console.print(f"report page written to {report_file}")


@app.command(context_settings=KIND_OPTIONS, help=f"Write MODEL's plan on CLUSTER as one "
             f"self-contained HTML page of charts (opens offline).{KIND_HELP}")
@user_errors
def report(
    ctx: typer.Context,
    model: ModelArg,
    out: Annotated[Path, typer.Option(help="the HTML file to write")],
    cluster: ClusterOpt = "4xu280",
    strategy: StrategyOpt = "dfx",
    engine_config: EngineOpt = None,
    force: ForceReportOpt = False,
) -> None:
    from archipelago.api import plan_and_estimate
    from archipelago.report.html import check_target, write_report
    from archipelago.strategies.registry import get_strategy

    get_strategy(strategy).plan_kind.hook("page")  # no page, or a bad path: fail before planning
    check_target(out, force)
    result = plan_and_estimate(model, cluster, strategy, workload_options(ctx),
                               load_engine_config(engine_config, strategy))
    path = write_report(f"{model} on {cluster}", strategy, result, out, force)
    console.print(f"report page written to {path} ({path.stat().st_size / 1e6:.2f} MB)")


@app.command(context_settings=KIND_OPTIONS, help=f"Run the plan with one process per device "
             f"and check it against the unsplit model.{KIND_HELP}")
@user_errors
def emulate(
    ctx: typer.Context,
    model: ModelArg,
    cluster: ClusterOpt = "4xu280",
    strategy: StrategyOpt = "dfx",
    seed: Annotated[int, typer.Option(help="seed of the random weights and the prompt")] = 0,
    precision: Annotated[str, typer.Option(help="arithmetic on the ranks: fp32 or fp16")] = "fp32",
    checkpoint: Annotated[Path | None, typer.Option(
        help="local Hugging Face checkpoint directory (safetensors) instead of seeded weights")
    ] = None,
    timeout: Annotated[float, typer.Option(
        help="seconds a rank may keep the others waiting before all are stopped")] = 30.0,
    as_json: JsonOpt = False,
) -> None:
    from archipelago.api import emulate as run_emulation
    from archipelago.strategies.registry import get_strategy

    report = run_emulation(model, cluster, strategy, workload_options(ctx), seed, precision,
                           None if checkpoint is None else str(checkpoint), timeout)
    if report is None:  # a torchrun rank other than 0
        return
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        get_strategy(strategy).plan_kind.hook("report").print_emulation(report, console)


@app.command()
@user_errors
def build(
    model: ModelArg,
    out: Annotated[Path, typer.Option(help="directory for the build files")],
    cluster: ClusterOpt = "72xsidewinder",
    strategy: StrategyOpt = "galapagos",
    engine_config: EngineOpt = None,
    force: Annotated[bool, typer.Option(help="write into a non-empty --out")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write the deployment files of MODEL's plan (Galapagos: Cluster Builder JSON,
    logical/map XML per cluster, routing tables and a summary), all inside --out."""
    from archipelago.api import build as write
    from archipelago.emit.output_dir import check_output_dir
    from archipelago.strategies.registry import get_strategy

    check_output_dir(out, force)  # before any planning
    summary = write(model, cluster, strategy, str(out), force,
                    load_engine_config(engine_config, strategy))
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        get_strategy(strategy).plan_kind.hook("report").print_build(summary, console)


@app.command()
@user_errors
def catalog(as_json: JsonOpt = False) -> None:
    """List the model and cluster families' built-ins, devices and strategies."""
    from archipelago.families import families
    from archipelago.hardware.catalog import catalog as devices
    from archipelago.strategies.registry import kinds, strategies

    tables = [f.catalog() for what in ("model", "cluster") for f in families(what) if f.catalog]
    if as_json:
        print(json.dumps({
            **{t.key: t.as_json() for t in tables},
            "devices": {k: {"name": d.name, "kind": d.kind} for k, d in devices().items()},
            "strategies": {n: s.summary for n, s in strategies().items()},
            "plan_kinds": {n: {"workload": k.workload.name,
                               "options": {o.name: o.default for o in k.workload.options}}
                           for n, k in kinds().items()},
        }, indent=2))
        return
    for t in tables:
        table = Table(title=t.title)
        for col in t.columns:
            table.add_column(col)
        for name, row in t.rows.items():
            table.add_row(name, *(str(value) for value in row))
        console.print(table)
    table = Table(title="devices")
    for col in ("key", "name", "kind", "DSP", "memories"):
        table.add_column(col)
    for key, d in devices().items():
        mems = ", ".join(f"{k} {m.capacity_bytes / 2**30:.0f} GiB" for k, m in d.memories.items())
        table.add_row(key, d.name, d.kind, str(d.resources.dsp or "-"), mems or "-")
    console.print(table)
    table = Table(title="strategies")
    for col in ("name", "plan kind", "workload options", "what it does"):
        table.add_column(col)
    for name, info in strategies().items():
        options = ", ".join(f"--{o.name.replace('_', '-')} ({o.help}; {o.default})"
                            for o in info.plan_kind.workload.options)
        table.add_row(name, info.kind, options, info.summary)
    console.print(table)


# A bound that still means "search long": NSGA-II's bookkeeping grows with the study, and
# 10^5 trials already take hours; a larger count is a typo, not a plan.
MAX_TRIALS = 100_000
MAX_SAMPLER_SEED = 2**32 - 1  # optuna's samplers seed numpy's RandomState: 0 .. 2^32-1
SEARCH_OPTIONS = ("trials", "storage", "study", "out", "seed", "force")


def within(low: int, high: int) -> Callable[[int], int]:
    """An option callback bounding an integer; the error names the value and the range."""

    def check(value: int) -> int:
        if not low <= value <= high:
            shown = str(value) if len(str(value)) <= 24 else f"a {len(str(value))}-digit number"
            raise typer.BadParameter(f"{shown} is outside {low}..{high}")
        return value

    return check


def refuse_search_options(ctx: typer.Context, who: str) -> None:
    """A one-line error when an option of the engine-parameter search was given to `who`,
    which would silently ignore it."""
    sources = {name: ctx.get_parameter_source(name) for name in SEARCH_OPTIONS}
    given = [f"--{name}" for name, source in sources.items()
             if source is not None and source.name != "DEFAULT"]  # typer's own click enum
    if given:
        raise ArchipelagoError(f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} "
                               f"not apply to {who}; leave {'it' if len(given) == 1 else 'them'}"
                               " out")


@app.command(context_settings=KIND_OPTIONS, help=f"Search engine design parameters (NSGA-II) "
             f"under the devices' limits; resumable.{KIND_HELP}")
@user_errors
def explore(
    ctx: typer.Context,
    model: ModelArg,
    cluster: ClusterOpt = "1xu280",
    strategy: StrategyOpt = "lora-q",
    trials: Annotated[int, typer.Option(callback=within(1, MAX_TRIALS),
                                        help="finished trials the study should hold")] = 200,
    storage: Annotated[str, typer.Option(help="optuna storage URL")] = "sqlite:///archi-explore.db",
    study: Annotated[str | None, typer.Option(help="study name (default from the inputs)")] = None,
    out: Annotated[Path | None, typer.Option(help="best engine config YAML")] = None,
    seed: Annotated[int, typer.Option(callback=within(0, MAX_SAMPLER_SEED),
                                      help="sampler seed")] = 0,
    force: Annotated[bool, typer.Option(help="replace an existing --out file")] = False,
    as_json: JsonOpt = False,
) -> None:
    from rich.progress import Progress

    from archipelago.api import parse_workload
    from archipelago.explore.search import SearchRequest, run_search
    from archipelago.explore.spaces import design_space
    from archipelago.explore.storage import check_storage_url
    from archipelago.explore.study import check_study_name, default_study_name, study_identity
    from archipelago.output_file import check_output_file, write_atomically
    from archipelago.strategies.registry import get_strategy

    given = workload_options(ctx)
    kind = get_strategy(strategy).plan_kind
    if kind.explorer is not None:  # the kind sizes servers instead of searching engines
        refuse_search_options(ctx, f"strategy '{strategy}' (its plan kind '{kind.name}' "
                              "explores without an engine-parameter search)")
        summary = kind.hook("explorer")(model, cluster, strategy, given)
        if as_json:
            print(json.dumps(summary, indent=2))
        else:
            kind.hook("report").print_explore(summary, console)
        return
    design_space(strategy)  # a strategy without one is refused before any storage is made
    check_storage_url(storage)
    if study is not None:
        check_study_name(study)
    work = parse_workload(strategy, given, "explore")
    texts = kind.workload.texts(given, "explore")
    # Resolves model, cluster and strategy: bad names and splits fail before any trial.
    name = study or default_study_name(study_identity(model, cluster, strategy, work))
    target = out or Path(f"best-{name.replace('/', '-')}.yaml")
    check_output_file(target, "--out", force)
    request = SearchRequest(model, cluster, strategy, work, trials, storage, name, seed)
    errors = Console(stderr=True)  # no bar (and no line it leaves behind) off a terminal
    with Progress(console=errors, transient=True, disable=not errors.is_terminal) as bar:
        task = bar.add_task(f"exploring {name}", total=trials)
        best = run_search(request, on_trial=lambda n: bar.advance(task, n))
    write_atomically(target, yaml.safe_dump({
        "strategy": strategy, "model": model, "cluster": cluster, **texts,
        "latency_s": best.latency_s, "tokens_per_s": best.tokens_per_s,
        "engine": best.engine}, sort_keys=False), "--out", force)
    summary = {"study": name, "storage": storage, "trials": best.trials_done,
               "feasible_trials": best.feasible_trials, "latency_s": best.latency_s,
               "tokens_per_s": best.tokens_per_s, "utilization": best.utilization,
               "engine": best.engine, "engine_config_file": str(target)}
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    table = Table(title=f"best of {best.trials_done} trials ({best.feasible_trials} feasible)")
    table.add_column("parameter")
    table.add_column("value", justify="right")
    for key, value in best.engine.items():
        table.add_row(key, f"{value:g}" if isinstance(value, float) else str(value))
    table.add_row("latency", f"{best.latency_s * 1e3:,.2f} ms")
    table.add_row("tokens/s", f"{best.tokens_per_s:,.2f}")
    for key, value in best.utilization.items():
        table.add_row(f"{key} used", f"{100 * value:.0f}%")
    console.print(table)
    console.print(f"engine config written to {target}; use it with "
                  f"`archi plan {model} --cluster {cluster} --strategy {strategy} "
                  f"--engine-config {target}`")


@app.command()
@user_errors
def proxies(
    model: Annotated[str | None, typer.Argument(
        help="measure at the sizes this model's program uses (nmt-luong, nmt-li, lstm, "
             "matvec); default: a grid of sizes")] = None,
    cluster: Annotated[str | None, typer.Option(
        help="cluster MODEL's program is planned on (default 1xs10-2800)")] = None,
    hidden: Annotated[int | None, typer.Option(help="hidden size of MODEL")] = None,
    steps: Annotated[int | None, typer.Option(
        help="input/output steps of MODEL's program (default 50)")] = None,
    out: Annotated[Path | None, typer.Option(
        help="profile file (default ~/.cache/archipelago/cpu-proxies.json, which `plan` "
             "then uses)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Time the cpu_* calls of the host-offload API (seeds/003 Table I) with numpy on this
    machine and store them as the CPU proxies the modelling tool reads."""
    from archipelago.strategies.host_offload.service import host_request, proxies_report

    sizing = {"cluster": cluster, "hidden": hidden, "steps": steps}
    given = {name: value for name, value in sizing.items() if value is not None}
    if model is None and given:
        raise ArchipelagoError(f"{', '.join(f'--{n}' for n in given)}: "
                               f"{'applies' if len(given) == 1 else 'apply'} only to a MODEL's "
                               "program; name the model (nmt-luong, nmt-li, lstm, matvec) or "
                               f"drop {'it' if len(given) == 1 else 'them'}")
    request = None
    if model is not None:
        options = {k: v for k, v in given.items() if k != "cluster"}
        target = "1xs10-2800" if cluster is None else cluster  # "" is a bad name, not none
        request = host_request(model=model, cluster=target, **options)
    report = proxies_report(out, request)
    if as_json:
        print(json.dumps(report, indent=2))
        return
    for name, points in report["measured_s"].items():
        shown = ", ".join(f"{n}: {t * 1e6:.2f} us" for n, t in points)
        console.print(f"{name:12} {shown}")
    console.print(f"stored in {report['file']} ({report['machine']})")
