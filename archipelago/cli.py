"""`archi`: the command line. Every user mistake is one line on stderr and exit status 2;
a valid plan that does not fit on its cluster is reported (reasons first) with status 1.

The commands name no strategy, plan kind or device: which strategy a command runs and on
which cluster when the user leaves them out, the options a kind adds, the commands a kind
adds (attached by `cli_group`) and the help that lists them all come from the registry. The
options the commands share, and the console they print on, are in `cli_options`."""

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from archipelago.cli_fleet import register_fleet_commands
from archipelago.cli_group import OneLineErrorGroup, user_errors
from archipelago.cli_options import (
    DEFAULT_TRIALS,
    INFEASIBLE,
    KIND_HELP,
    KIND_OPTIONS,
    MAX_SAMPLER_SEED,
    MAX_TRIALS,
    OUTPUT,
    SEARCH_OPTIONS,
    ClusterOpt,
    EngineChoiceOpt,
    EngineOpt,
    ForceReportOpt,
    JsonOpt,
    ModelArg,
    StrategyOpt,
    console,
    given_options,
    load_engine_config,
    machine_workers,
    within,
    workload_options,
)
from archipelago.errors import ArchipelagoError
from archipelago.quick_exit import run_then_exit
from archipelago.scratch import owned_scratch

DISAGREES = 1  # `emulate`: the split run's outputs differ from its unsplit reference
# The hook a command needs of the strategy's plan kind, named in the command's help.
COMMAND_HOOKS = {"report": "page", "emulate": "emulator", "build": "writers",
                 "serve": "serving"}


class ArchiGroup(OneLineErrorGroup):
    """`archi`'s commands, their help completed from the registry when first looked up."""

    def describe(self, name: str, command: Any) -> None:
        from archipelago.strategies.registry import (
            default_strategy,
            kinds,
            strategies,
            strategies_with,
        )

        params = {p.name: p for p in command.params if p.param_type_name == "option"}
        if "strategy" in params:
            try:
                default = default_strategy(name)
            except ArchipelagoError:  # a command without a default strategy
                default = None
            if default is not None:
                params["strategy"].help += f" (default: {default.name})"
                cluster = default.declared_cluster(name)
                if "cluster" in params and cluster is not None:
                    params["cluster"].help += (f" (default: the strategy's own; {cluster} "
                                               f"for {default.name})")
        extra = []
        if name in COMMAND_HOOKS:
            extra.append(f"Strategies it applies to: "
                         f"{', '.join(strategies_with(COMMAND_HOOKS[name]))}.")
        if command.context_settings.get("allow_extra_args"):
            extra.append(KIND_HELP)
            hook = COMMAND_HOOKS.get(name)
            for kind in kinds().values():
                if hook is not None and getattr(kind, hook) is None:
                    continue  # the command refuses this kind's strategies anyway
                flags = ", ".join(f"--{o.name.replace('_', '-')}"
                                  for o in kind.workload.typed(name))
                users = [s.name for s in strategies().values() if s.kind == kind.name
                         and (name != "explore" or s.explorable)]
                if flags and users:
                    extra.append(f"{kind.workload.name} strategies ({', '.join(users)}): "
                                 f"{flags}.")
        if extra:
            command.help = "\n\n".join([command.help or "", *extra])


app = typer.Typer(cls=ArchiGroup, add_completion=False, invoke_without_command=True,
                  help="Plan, estimate and verify models split across FPGA clusters.")

@app.callback()
def _commands(ctx: typer.Context) -> None:
    """A bare `archi` prints its help (the commands) rather than an error; a command's
    temporary files (its own and its libraries') go in one directory it removes at the
    end (scratch.py)."""
    if ctx.invoked_subcommand is None:
        print(ctx.get_help())
    else:
        ctx.with_resource(owned_scratch())


@app.command(context_settings=KIND_OPTIONS, help="Split MODEL over CLUSTER and estimate its "
             "latency, throughput and resource use.")
@user_errors
def plan(
    ctx: typer.Context,
    model: ModelArg,
    cluster: ClusterOpt = None,
    strategy: StrategyOpt = None,
    engine_config: EngineOpt = None,
    engine_choice: EngineChoiceOpt = None,
    as_json: JsonOpt = False,
    report_file: Annotated[Path | None, typer.Option(
        "--report", help="also write the HTML report page (as `archi report`) to this file",
        **OUTPUT)] = None,
    force: ForceReportOpt = False,
) -> None:
    from archipelago.api import choose, listed_parameters, plan_and_estimate
    from archipelago.explore.best import chosen_engine
    from archipelago.strategies.registry import get_strategy

    strategy, cluster = choose("plan", strategy, cluster)
    kind = get_strategy(strategy).plan_kind
    if report_file is not None:  # a kind without a page, or a bad path, fails before planning
        from archipelago.report.html import check_target

        kind.hook("page")
        check_target(report_file, force, "--report")
    engine, chosen = chosen_engine(engine_choice, model, cluster, strategy,
                                   workload_options(ctx), ctx.info_name,
                                   load_engine_config(engine_config, strategy))
    result = plan_and_estimate(model, cluster, strategy, workload_options(ctx), engine)
    summary = kind.hook("report").summarize(*result)
    if chosen is not None:
        from dataclasses import replace

        summary = replace(summary, figures=[*summary.figures, chosen.figure()])
    parameters = listed_parameters(model)
    if as_json:
        figures = summary.as_json()
        if parameters is not None:  # right after the model's name
            name = {"model": figures.pop("model")} if "model" in figures else {}
            figures = {**name, "parameters": parameters, **figures}
        print(json.dumps(figures, indent=2))
    else:
        if parameters is not None:
            console().print(f"{parameters:,} parameters ({parameters / 1e9:,.2f} B)")
        summary.print(console())
    if report_file is not None:
        from archipelago.report.html import write_report

        write_report(f"{model} on {cluster}", strategy, result, report_file, force, "--report",
                     None if chosen is None else chosen.shown())
        if not as_json:
            console().print(f"report page written to {report_file}")
    if not getattr(result.estimate, "feasible", True):
        raise typer.Exit(INFEASIBLE)


@app.command(context_settings=KIND_OPTIONS, help="Write MODEL's plan on CLUSTER as one "
             "self-contained HTML page of charts (opens offline).")
@user_errors
def report(
    ctx: typer.Context,
    model: ModelArg,
    out: Annotated[Path, typer.Option(help="the HTML file to write", **OUTPUT)],
    cluster: ClusterOpt = None,
    strategy: StrategyOpt = None,
    engine_config: EngineOpt = None,
    engine_choice: EngineChoiceOpt = None,
    force: ForceReportOpt = False,
) -> None:
    from archipelago.api import choose, plan_and_estimate
    from archipelago.explore.best import chosen_engine
    from archipelago.report.html import check_target, write_report
    from archipelago.strategies.registry import get_strategy

    strategy, cluster = choose("report", strategy, cluster)
    get_strategy(strategy).plan_kind.hook("page")  # no page, or a bad path: fail before planning
    check_target(out, force)
    engine, chosen = chosen_engine(engine_choice, model, cluster, strategy,
                                   workload_options(ctx), ctx.info_name,
                                   load_engine_config(engine_config, strategy))
    result = plan_and_estimate(model, cluster, strategy, workload_options(ctx), engine,
                               "report")
    path = write_report(f"{model} on {cluster}", strategy, result, out, force, "--out",
                        None if chosen is None else chosen.shown())
    console().print(f"report page written to {path} ({path.stat().st_size / 1e6:.2f} MB)")


@app.command(context_settings=KIND_OPTIONS, help="Run the plan with one process per device "
             "and check it against the unsplit model.")
@user_errors
def emulate(
    ctx: typer.Context,
    model: ModelArg,
    cluster: ClusterOpt = None,
    strategy: StrategyOpt = None,
    seed: Annotated[int, typer.Option(help="seed of the random weights and the prompt")] = 0,
    timeout: Annotated[float, typer.Option(
        help="seconds a rank may keep the others waiting before all are stopped")] = 30.0,
    as_json: JsonOpt = False,
) -> None:
    from archipelago.api import choose
    from archipelago.api import emulate as run_emulation
    from archipelago.strategies.registry import get_strategy

    strategy, cluster = choose("emulate", strategy, cluster)
    report = run_emulation(model, cluster, strategy, workload_options(ctx), seed, timeout)
    if report is None:  # a torchrun rank other than 0
        return
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        get_strategy(strategy).plan_kind.hook("report").print_emulation(report, console())
    if not report["agrees"]:  # the split run computed something else: a failed check
        raise typer.Exit(DISAGREES)


@app.command(context_settings=KIND_OPTIONS, help="Write the deployment files of MODEL's "
             "plan (the strategy's plan kind and engine say which: cluster descriptions and "
             "routing tables, programs, memory layouts and engine headers, a summary), all "
             "inside --out.")
@user_errors
def build(
    ctx: typer.Context,
    model: ModelArg,
    out: Annotated[Path, typer.Option(help="directory for the build files", **OUTPUT)],
    cluster: ClusterOpt = None,
    strategy: StrategyOpt = None,
    engine_config: EngineOpt = None,
    force: Annotated[bool, typer.Option(help="write into a non-empty --out")] = False,
    as_json: JsonOpt = False,
) -> None:
    from archipelago.api import build as write
    from archipelago.api import choose
    from archipelago.emit.output_dir import check_output_dir
    from archipelago.strategies.registry import get_strategy

    strategy, cluster = choose("build", strategy, cluster)
    check_output_dir(out, force)  # before any planning
    summary = write(model, cluster, strategy, str(out), force,
                    load_engine_config(engine_config, strategy), workload_options(ctx))
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        get_strategy(strategy).plan_kind.hook("report").print_build(summary, console())


@app.command()
@user_errors
def catalog(as_json: JsonOpt = False) -> None:
    """List the model and cluster families' built-ins, devices and strategies."""
    from rich.table import Table

    from archipelago.families import families
    from archipelago.hardware.catalog import catalog as devices
    from archipelago.strategies.registry import kinds, strategies
    from archipelago.table_fit import fitted

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
        console().print(fitted(table, console()))
    table = Table(title="devices")
    for col in ("key", "name", "kind", "DSP", "memories"):
        table.add_column(col)
    for key, d in devices().items():
        mems = ", ".join(f"{k} {m.capacity_bytes / 2**30:.0f} GiB" for k, m in d.memories.items())
        table.add_row(key, d.name, d.kind, str(d.resources.dsp or "-"), mems or "-")
    console().print(fitted(table, console()))
    table = Table(title="strategies")
    for col in ("name", "plan kind", "workload options", "what it does"):
        table.add_column(col)
    for name, info in strategies().items():
        options = ", ".join(f"--{o.name.replace('_', '-')} ({o.help}; {o.default})"
                            for o in info.plan_kind.workload.options)
        table.add_row(name, info.kind, options, info.summary)
    console().print(fitted(table, console()))


@app.command(context_settings=KIND_OPTIONS, help="Search engine design parameters (NSGA-II) "
             "under the devices' limits, in batches on Dask; resumable.")
@user_errors
def explore(
    ctx: typer.Context,
    model: ModelArg,
    cluster: ClusterOpt = None,
    strategy: StrategyOpt = None,
    trials: Annotated[int, typer.Option(callback=within(1, MAX_TRIALS),
                                        help="finished trials the study should hold")
                      ] = DEFAULT_TRIALS,
    storage: Annotated[str | None, typer.Option(
        help="directory of study journals (made if missing; default: explore/ in the cache "
             "directory)", show_default=False)] = None,
    study: Annotated[str | None, typer.Option(help="study name (default from the inputs)")] = None,
    out: Annotated[Path | None, typer.Option(
        help="best engine config YAML (default: best-STUDY.yaml in --storage)", **OUTPUT)
    ] = None,
    seed: Annotated[int, typer.Option(callback=within(0, MAX_SAMPLER_SEED),
                                      help="the search's random seed")] = 0,
    force: Annotated[bool, typer.Option(help="replace an existing --out file")] = False,
    workers: Annotated[int | None, typer.Option(
        callback=machine_workers(),
        help="local Dask worker processes (default, or 0: in this process, no Dask)")
    ] = None,
    scheduler: Annotated[str | None, typer.Option(
        help="a running Dask scheduler, tcp://HOST:PORT (default: in this process)")] = None,
    as_json: JsonOpt = False,
) -> None:
    from archipelago.explore.command import ExploreCommand, run_explore

    run_explore(ExploreCommand(model, cluster, strategy, workload_options(ctx), trials, storage,
                               study, out, seed, force, workers, scheduler, as_json,
                               given_options(ctx, SEARCH_OPTIONS)), console())


register_fleet_commands(app)


def main() -> None:
    """The `archi` entry point: the CLI, then an exit that skips the interpreter's teardown
    where torch made it costly (quick_exit.py)."""
    run_then_exit(app)
