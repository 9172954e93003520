"""Render an emulation report for people (the JSON form is the report dict itself)."""

from typing import Any

from rich.console import Console
from rich.table import Table


def print_emulation(report: dict[str, Any], console: Console) -> None:
    verdict = "[green]yes[/green]" if report["tokens_match"] else "[red]no[/red]"
    head = Table(title=f"{report['model']} emulated on {report['cluster']} · strategy "
                       f"{report['strategy']} · {report['precision']} · {report['ranks']} ranks")
    head.add_column("check")
    head.add_column("value")
    head.add_row("tokens identical to transformers", verdict)
    head.add_row("generated", " ".join(map(str, report["generated"])))
    head.add_row("reference", " ".join(map(str, report["reference"])))
    head.add_row("max |logit difference|", f"{report['max_abs_logit_diff']:.3g}")
    head.add_row("collectives per rank",
                 ", ".join(f"{k} {n}" for k, n in report["collectives"].items()))
    head.add_row("weights", report["weights"])
    head.add_row("tokens/s (emulated, CPU)", f"{report['tokens_per_s']:,.2f}")
    console.print(head)
    held = Table(title="weights each rank holds")
    for col in ("rank", "MiB", *report["bytes_per_rank_by_memory"][0]):
        held.add_column(col, justify="right")
    for rank, (total, parts) in enumerate(zip(report["bytes_per_rank"],
                                              report["bytes_per_rank_by_memory"], strict=True)):
        held.add_row(str(rank), f"{total / 2**20:,.2f}",
                     *(f"{b / 2**20:,.2f}" for b in parts.values()))
    console.print(held)
