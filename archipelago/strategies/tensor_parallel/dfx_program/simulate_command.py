"""`archi simulate`, which the tensor-parallel kind declares (`PlanKind.commands`): plan as
`archi plan` does (archipelago.api), compile every core's program, run them on the timing
simulator (dfx_program/timing.py) and print its figures beside the analytical estimate's
(dfx_program/versus.py says how the two are cut into the same classes).

Only a strategy whose engine has an instruction set can be simulated; the registry says which
(`Strategy.instruction_set`), and the refusal names them."""

import json
from statistics import mean
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from archipelago.errors import ArchipelagoError
from archipelago.estimate.summary import print_reasons
from archipelago.table_fit import fitted

# As `archi plan`: the figures of a plan that does not fit are printed, with status 1.
INFEASIBLE = 1
MS, US = 1e3, 1e6


def simulate(
    model: Annotated[str, typer.Argument(
        help="a built-in model or a model file (`archi catalog` lists the built-ins)")],
    cluster: Annotated[str | None, typer.Option(
        help="NxDEVICE shorthand or cluster YAML (see `archi catalog`)",
        show_default=False)] = None,
    strategy: Annotated[str | None, typer.Option(
        help="a strategy whose engine has an instruction set", show_default=False)] = None,
    tokens: Annotated[str | None, typer.Option(
        help="IN:OUT prompt and generated token counts (default: the strategy's, 64:64 "
             "for tensor parallel)", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="print one JSON object: `simulated` and `estimated` figures")] = False,
) -> None:
    """Run every core's program of MODEL's plan on the timing simulator, beside the estimate."""
    from archipelago.api import choose, plan_and_estimate
    from archipelago.strategies.tensor_parallel.dfx_program.versus import side_by_side
    from archipelago.strategies.tensor_parallel.planning.rings import one_ring

    strategy, cluster = choose("simulate", strategy, cluster)
    check_instruction_set(strategy)
    plan, work, est = plan_and_estimate(model, cluster, strategy,
                                        {} if tokens is None else {"tokens": tokens},
                                        command="simulate")
    summary = side_by_side(one_ring(plan, "a program simulation"), work, est)
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        print_simulation(summary, Console())
    if not summary["feasible"]:
        raise typer.Exit(INFEASIBLE)


def check_instruction_set(strategy: str) -> None:
    """A one-line refusal of a strategy whose engine runs no program, naming those that do."""
    from archipelago.strategies.registry import get_strategy, strategies

    if get_strategy(strategy).instruction_set is None:
        having = [s.name for s in strategies().values() if s.instruction_set is not None]
        raise ArchipelagoError(f"strategy '{strategy}' has no instruction set to simulate (its "
                               f"engine runs no program); strategies with one: "
                               f"{', '.join(having)}")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "-"


def print_simulation(summary: dict[str, Any], console: Console) -> None:
    """The figures, the cycles per class and the simulated instruction classes as tables."""
    print_reasons(summary["reasons"], console)
    sim, est = summary["simulated"], summary["estimated"]
    tokens = summary["tokens"]
    head = Table(title=f"{summary['model']} on {summary['cluster']} · strategy "
                       f"{summary['strategy']} · {tokens['input']}:{tokens['output']} tokens "
                       f"· {summary['cores']} core{'s' if summary['cores'] > 1 else ''}: "
                       "simulated beside estimated")
    for column in ("figure", "simulated", "estimated", "sim / est"):
        head.add_column(column, justify="left" if column == "figure" else "right")
    rows = (("end-to-end latency (ms)", "latency_s", MS, ",.3f"),
            ("tokens/s", "tokens_per_s", 1, ",.2f"),
            ("prefill (ms)", "prefill_s", MS, ",.3f"),
            ("decode per token, mean (ms)", "decode_s_per_token", MS, ",.4f"))
    for label, key, scale, fmt in rows:
        head.add_row(label, f"{sim[key] * scale:{fmt}}", f"{est[key] * scale:{fmt}}",
                     _ratio(sim[key], est[key]))
    layers_sim, layers_est = sim["layer_s"], est["layer_s"]
    head.add_row(f"decoder layer at context {summary['layer_context']}, mean (µs)",
                 f"{mean(layers_sim) * US:,.2f}", f"{mean(layers_est) * US:,.2f}",
                 _ratio(mean(layers_sim), mean(layers_est)))
    head.add_row("  min .. max over layers (µs)",
                 f"{min(layers_sim) * US:,.2f} .. {max(layers_sim) * US:,.2f}",
                 f"{min(layers_est) * US:,.2f} .. {max(layers_est) * US:,.2f}", "")
    console.print(fitted(head, console))
    groups = Table(title=f"cycles per class over the run, critical path (clock "
                         f"{summary['clock_hz'] / 1e6:,.0f} MHz)")
    for column in ("class", "simulated", "estimated", "sim / est"):
        groups.add_column(column, justify="left" if column == "class" else "right")
    for name, cycles in sim["cycles_per_class"].items():
        other = est["cycles_per_class"][name]
        if cycles or other:
            groups.add_row(name, f"{cycles:,.0f}", f"{other:,.0f}", _ratio(cycles, other))
    console.print(fitted(groups, console))
    own = Table(title="simulated instruction classes: own cycles on one core (they overlap)")
    own.add_column("instruction class")
    own.add_column("cycles", justify="right")
    for name, cycles in sorted(sim["cycles_per_instruction"].items(), key=lambda kv: -kv[1]):
        own.add_row(name, f"{cycles:,.0f}")
    console.print(fitted(own, console))
    console.print(f"[dim]{summary['fitted']}[/dim]", soft_wrap=True)
