"""Write a plan's report page: the kind's summary (its JSON object and headline figures)
and `page` hook, laid out by report.page, into one HTML file that never replaces a file
the user has unless told to."""

from dataclasses import replace
from pathlib import Path
from typing import Any

from archipelago.estimate.summary import Figure, Unit
from archipelago.output_file import check_output_file, write_atomically
from archipelago.report.page import Headline, render
from archipelago.strategies.registry import get_strategy


def report_html(subject: str, strategy: str, result: tuple[Any, Any, Any],
                engine: str | None = None) -> str:
    """The page of `result`, a (plan, workload, estimate) from api.plan_and_estimate;
    `subject` says what was planned where (the user's model and cluster), `engine` which
    engine ran (`plan --engine`'s label, shown under the title; None: a strategy with one
    engine)."""
    kind = get_strategy(strategy).plan_kind
    page_hook = kind.hook("page")  # a kind without one says so before any work
    summarized = kind.hook("report").summarize(*result)
    summary = summarized.as_json()
    page = page_hook(*result, summary)
    headline = [_headline(f) for f in summarized.headline()]
    title = f"{_named(subject, summary)} · strategy {strategy}"
    texts = ", ".join(f"{k} {v}" for k, v in getattr(result[1], "__dict__", {}).items()
                      if v is not None)
    subtitle = f"plan kind {kind.name}" + (f" · {texts}" if texts else "") + (
        f" · engine {engine}" if engine else "")
    return render(title, subtitle, summary, replace(page, headline=headline + page.headline))


def _named(subject: str, summary: dict[str, Any]) -> str:
    """The model and cluster by the names the summary gives them (a model read from a file
    by its display name, not the path the user typed), else `subject` as given."""
    model, cluster = summary.get("model"), summary.get("cluster")
    if isinstance(model, str) and isinstance(cluster, str):
        return f"{model} on {cluster}"
    return subject


def _headline(figure: Figure) -> Headline:
    """A summary's headline figure on the page, shown in its unit (a count as it is)."""
    unit = figure.unit or Unit()
    return Headline(str(figure.headline), str(figure.key), unit.name, unit.scale, unit.digits)


HTML_SUFFIXES = (".html", ".htm")


def check_target(out: Path, force: bool = False, option: str = "--out") -> None:
    """Refuse a report path before any work: not .html, an existing file without `force`,
    a directory that does not exist or cannot be written."""
    check_output_file(out, option, force, HTML_SUFFIXES)


def write_report(subject: str, strategy: str, result: tuple[Any, Any, Any], out: Path,
                 force: bool = False, option: str = "--out", engine: str | None = None
                 ) -> Path:
    """The page at `out` (a .html file; an existing one only with `force`)."""
    check_target(out, force, option)
    write_atomically(out, report_html(subject, strategy, result, engine), option, force)
    return out
