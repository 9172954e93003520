"""The generation figures (estimate.generation_figures) as the rich tables and JSON of a
report written with two functions, `estimate_to_dict` and `print_estimate`: the
tensor-parallel kind's, until it returns a summary (issue 31 point 5). Why a plan does not
fit comes first, then the head, to which the kind adds its own rows, and where the time
goes."""

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

from archipelago.estimate.generation import GenerationTiming
from archipelago.estimate.generation_figures import (
    HEAD,
    generation_title,
    time_section,
    timing_figures,
)
from archipelago.estimate.summary import Summary, head_rows, rich_table
from archipelago.estimate.workload import Generation

_HEAD_ROWS = 2  # latency and tokens/s; the phases follow the kind's own rows


def print_reasons(reasons: Iterable[str], console: Console) -> None:
    """Why the plan does not fit, one line per device and memory or resource, with how far
    over: printed before any figure."""
    for reason in reasons:
        console.print(f"[red]does not fit:[/red] {reason}", soft_wrap=True)


def generation_head(what: str, workload: Generation, est: GenerationTiming) -> Table:
    """The summary table of `what` ("MODEL on CLUSTER · strategy S"): latency, tokens/s;
    dimmed and titled so when the plan does not fit."""
    rows = head_rows(timing_figures(est, 1))[:_HEAD_ROWS]
    return rich_table(generation_title(what, workload, est.feasible), HEAD, rows,
                      not est.feasible)


def add_phase_rows(head: Table, est: GenerationTiming) -> None:
    """Prefill, then decode per token and how it moves from the first token to the last."""
    for cells in head_rows(timing_figures(est, 1))[_HEAD_ROWS:]:
        head.add_row(*cells)


def time_table(breakdown_s: dict[str, float], latency_s: float,
               title: str = "where the time goes") -> Table:
    """Each part's milliseconds and share of the latency."""
    section = time_section(breakdown_s, latency_s, title)
    return rich_table(section.title, section.columns, section.rows)


def timing_dict(est: GenerationTiming, devices: int) -> dict[str, Any]:
    """The timing figures of `--json`, in the order every kind prints them."""
    return Summary(timing_figures(est, devices)).as_json()
