"""A comparison on the console: why combinations are absent first (strategies not compared,
refusals and misfits, one line per reason), then the ranked table with the Pareto front
starred, then the latency target's answer, the unknowns and the power model."""

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from archipelago.compare.rows import Row
from archipelago.explore.best import PUBLISHED
from archipelago.table_fit import fitted

_MS = 1e3


def _money(value: float | None) -> str:
    return "?" if value is None else f"{value:,.0f}"


def _figure(value: float | None, fmt: str) -> str:
    return "?" if value is None else format(value, fmt)


def binding(row: Row) -> str:
    """The binding resource and its share of the decode step (`HBM bandwidth 64%`): a low
    share says no resource is near its limit (the engine's own latencies dominate)."""
    share = row.shares.get(row.binding)
    return row.binding if share is None else f"{row.binding} {share:.0%}"


def engine_names(rows: Sequence[Row]) -> dict[tuple[str, str], str]:
    """A short name for each searched engine (strategy, label), E1, E2, ... in rank order:
    the table names it, and a line under the table gives its parameters."""
    names: dict[tuple[str, str], str] = {}
    for row in rows:
        if row.engine != PUBLISHED and (row.strategy, row.engine) not in names:
            names[(row.strategy, row.engine)] = f"E{len(names) + 1}"
    return names


def engine_lines(names: dict[tuple[str, str], str]) -> list[str]:
    return [f"{short} ({strategy}): {label}" for (strategy, label), short in names.items()]


def cells(row: Row, names: dict[tuple[str, str], str], formats: bool = False) -> list[str]:
    """The row's cells from cluster to engine (the columns after rank and marks), with its
    format after the strategy when the comparison asked for formats."""
    batch = f" b{row.batch}" if row.batch > 1 else ""
    fmt = [row.precision or ""] if formats else []
    return [f"{row.count}x{row.device}{batch}", f"{row.latency_s * _MS:,.2f}",
            f"{row.tokens_per_s:,.1f}", f"{row.prefill_s * _MS:,.2f}",
            f"{row.decode_s_per_token * _MS:,.3f}", _money(row.upfront_usd),
            _figure(row.tokens_per_s_per_million_usd, ",.0f"),
            _figure(row.joules_per_token, ",.3f"), binding(row), row.strategy, *fmt,
            row.split, names.get((row.strategy, row.engine), row.engine)]


COLUMNS = ("cluster", "latency ms", "tokens/s", "prefill ms", "decode ms/tok", "upfront $",
           "tok/s per M$", "J/token", "binding", "strategy", "split", "engine")


def columns(formats: bool = False) -> tuple[str, ...]:
    """The headers of `cells`: a `precision` column after the strategy when asked for."""
    at = COLUMNS.index("strategy") + 1
    return COLUMNS[:at] + (("precision",) if formats else ()) + COLUMNS[at:]


# The columns a narrow terminal loses, least needed first (table_fit.fitted); rank, the
# marks, the cluster, the latency and the strategy always stay. The column the rows are
# ranked by (SORTED) is kept until last.
DROP = ("split", "binding", "engine", "req/s per replica", "boards", "tok/s per M$", "J/token",
        "prefill ms", "decode ms/tok", "precision", "upfront $", "tokens/s")
SORTED = {"cost": "upfront $", "tokens-per-dollar": "tok/s per M$",
          "joules-per-token": "J/token"}
# --rate's columns, after the cluster ("boards" and "req/s per replica" may be dropped).
SERVING_COLUMNS = ("$/M tok", "replicas", "boards", "req/s per replica", "service")


def drop_order(sort: str) -> tuple[str, ...]:
    """DROP with the column of the sort moved last."""
    ranked_by = SORTED.get(sort)
    return (*(c for c in DROP if c != ranked_by), *([ranked_by] if ranked_by else []))


def serving_cells(row: Row) -> list[str]:
    """A served row's cells: $ per million tokens, replicas, boards, one replica's capacity
    (≥ where it was met at the search's highest rate), and ✓ or why it cannot serve."""
    s = row.serving or {}
    if not s.get("meets"):
        return ["-", "-", "-", "-", s.get("reason") or "not served"]
    usd = s["usd_per_million_tokens"]
    return ["?" if usd is None else f"{usd:,.4g}", str(s["replicas"]), str(s["boards"]),
            f"{'' if s['bounded'] else '≥ '}{s['capacity_rps']:,.3g}", "✓"]


def not_compared_lines(not_applicable: dict[str, str]) -> list[str]:
    """One line per reason, naming every strategy it keeps out (a kind's strategies share
    theirs)."""
    by_reason: dict[str, list[str]] = {}
    for name, why in not_applicable.items():
        by_reason.setdefault(why, []).append(name)
    return [f"not compared: {', '.join(names)} ({why})" for why, names in by_reason.items()]


def print_comparison(summary: dict[str, Any], rows: list[Row], console: Console) -> None:
    """`summary` is comparison_dict's object, `rows` its rows."""
    for line in not_compared_lines(summary["not_applicable"]):
        console.print(escape(line))
    for what, word in (("refused", "refused"), ("infeasible", "does not fit")):
        for r in summary[what]:
            console.print(f"{word}: {escape(r['line'])}")
    target = summary["latency_target"]
    formats = bool(summary.get("precision"))
    precision = f"{', '.join(summary['precision'])} · " if formats else ""
    serving = summary.get("serving")
    table = Table(title=f"{summary['model']} · {summary['tokens']} tokens · {precision}"
                        f"ranked by {summary['sort']} · ★ Pareto front (latency x upfront $)")
    plain = columns(formats)
    for col in ("#", "★", *(["≤ target"] if target else []), plain[0],
                *(SERVING_COLUMNS if serving else ()), *plain[1:]):
        table.add_column(col, justify="left" if col in ("cluster", "binding", "strategy",
                                                        "precision", "split", "engine",
                                                        "service")
                         else "right", no_wrap=True)
    names = engine_names(rows)
    for data, row in zip(summary["rows"], rows, strict=True):
        marks = ["★" if data["front"] else ""]
        if target:
            marks.append("✓" if data["meets_target"] else "")
        mine = cells(row, names, formats)
        table.add_row(str(data["rank"]), *marks, escape(mine[0]),
                      *(escape(c) for c in (serving_cells(row) if serving else ())),
                      *(escape(c) for c in mine[1:]))
    console.print(fitted(table, console, drop_order(summary["sort"]), ("cluster",)))
    for line in engine_lines(names):
        console.print(escape(line))
    _print_notes(summary, console)


def _print_notes(summary: dict[str, Any], console: Console) -> None:
    _print_serving(summary.get("serving"), console)
    target = summary["latency_target"]
    if target:
        limit = f"{target['seconds'] * _MS:,.3g} ms"
        if target["cheapest"]:
            console.print(f"latency target {limit}: {len(target['meeting'])} rows meet it; the "
                          f"cheapest is {target['cheapest']}")
        elif target["meeting"]:
            console.print(f"latency target {limit}: {len(target['meeting'])} rows meet it, none "
                          "of known price")
        else:
            console.print(f"latency target {limit}: no row meets it")
    if summary["unknown_cost"]:
        console.print(f"no price for {', '.join(summary['unknown_cost'])}: shown as ?, ranked "
                      "last by cost and left out of the Pareto front")
    if summary["unknown_power"]:
        console.print(f"no power figure for {', '.join(summary['unknown_power'])}: J/token "
                      "shown as ?")
    console.print(f"energy: {summary['power_model']['statement']}")
    console.print(f"store {summary['store']}: {summary['evaluated']} combinations estimated "
                  f"now, {summary['reused']} read back")


def _print_serving(serving: dict[str, Any] | None, console: Console) -> None:
    if not serving:
        return
    s = serving
    asked = (f"serving {s['rate']:g} req/s (prompt {s['prompt']}, output {s['output']} "
             f"tokens; P{s['percentile']:g} TTFT ≤ {s['ttft_s'] * _MS:,.4g} ms, TPOT ≤ "
             f"{s['tpot_s'] * _MS:,.4g} ms; {s['policy']} batching ≤ {s['max_batch']}, "
             f"{s['router']} routing; {s['requests']} requests x {s['seeds']} seed(s) per "
             "simulation)")
    if s["cheapest"]:
        found = f"{len(s['meeting'])} rows meet it; the cheapest is {s['cheapest']}"
    elif s["meeting"]:
        found = f"{len(s['meeting'])} rows meet it, none of known price"
    else:
        found = "no row meets it"
    console.print(escape(f"{asked}: {found}"))
    console.print(escape(f"serving cost: {s['cost_model']}"))
