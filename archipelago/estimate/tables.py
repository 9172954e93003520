"""What every generation estimate prints alike (a ring of FPGAs, a pipeline of rings,
GPUs): why a plan does not fit, first; the head with the figures a reader looks for first,
to which each kind adds its own rows; where the time goes; and the same figures for
`--json`."""

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

from archipelago.estimate.generation import GenerationTiming
from archipelago.estimate.workload import Generation


def print_reasons(reasons: Iterable[str], console: Console) -> None:
    """Why the plan does not fit, one line per device and memory or resource, with how far
    over: printed before any figure."""
    for reason in reasons:
        console.print(f"[red]does not fit:[/red] {reason}", soft_wrap=True)


def generation_head(what: str, workload: Generation, est: GenerationTiming) -> Table:
    """The summary table of `what` ("MODEL on CLUSTER · strategy S"): latency, tokens/s,
    prefill and decode; dimmed and titled so when the plan does not fit."""
    batch = f" · batch {workload.batch}" if workload.batch > 1 else ""
    hypothetical = "" if est.feasible else " · figures if it fitted"
    head = Table(title=f"{what} · {workload.input_tokens}:{workload.output_tokens} tokens"
                       f"{batch}{hypothetical}", style=None if est.feasible else "dim")
    head.add_column("metric")
    head.add_column("value", justify="right")
    head.add_row("end-to-end latency", f"{est.latency_s * 1e3:,.2f} ms")
    head.add_row("tokens/s (output / latency)", f"{est.tokens_per_s:,.2f}")
    return head


def add_phase_rows(head: Table, est: GenerationTiming) -> None:
    """Prefill, then decode per token and how it moves from the first token to the last."""
    head.add_row("prefill (summarization)", f"{est.prefill_s * 1e3:,.2f} ms")
    head.add_row("decode per token (mean)", f"{est.decode_s_per_token * 1e3:,.3f} ms")
    head.add_row("decode first → last token",
                 f"{est.decode_s_first * 1e3:,.3f} → {est.decode_s_last * 1e3:,.3f} ms")


def time_table(breakdown_s: dict[str, float], latency_s: float,
               title: str = "where the time goes") -> Table:
    """Each part's milliseconds and share of the latency."""
    where = Table(title=title)
    where.add_column("part")
    where.add_column("ms", justify="right")
    where.add_column("share", justify="right")
    for name, seconds in breakdown_s.items():
        where.add_row(name, f"{seconds * 1e3:,.2f}", f"{100 * seconds / latency_s:.1f}%")
    return where


def timing_dict(est: GenerationTiming, devices: int) -> dict[str, Any]:
    """The timing figures of `--json`, in the order every kind prints them."""
    return {
        "latency_s": est.latency_s,
        "tokens_per_s": est.tokens_per_s,
        "tokens_per_s_per_device": est.tokens_per_s / devices,
        "time_to_first_token_s": est.prefill_s,
        "time_per_output_token_s": est.decode_s_per_token,
        "prefill_s": est.prefill_s,
        "decode_s_per_token": est.decode_s_per_token,
        "decode_s_first": est.decode_s_first,
        "decode_s_last": est.decode_s_last,
        "breakdown_s": est.breakdown_s,
    }
