"""Write a plan's report page: the kind's JSON summary and `page` hook, laid out by
report.page, into one HTML file that never replaces a file the user has unless told to."""

from pathlib import Path
from typing import Any

from archipelago.errors import ArchipelagoError
from archipelago.report.page import render
from archipelago.strategies.registry import get_strategy


def report_html(subject: str, strategy: str, result: tuple[Any, Any, Any]) -> str:
    """The page of `result`, a (plan, workload, estimate) from api.plan_and_estimate;
    `subject` says what was planned where (the user's model and cluster)."""
    kind = get_strategy(strategy).plan_kind
    page_hook = kind.hook("page")  # a kind without one says so before any work
    summary = kind.hook("report").estimate_to_dict(*result)
    page = page_hook(*result, summary)
    title = f"{subject} · strategy {strategy}"
    texts = ", ".join(f"{k} {v}" for k, v in getattr(result[1], "__dict__", {}).items()
                      if v is not None)
    return render(title, f"plan kind {kind.name}" + (f" · {texts}" if texts else ""),
                  summary, page)


def check_target(out: Path, force: bool = False) -> None:
    """Refuse a report path before any work: not .html, an existing file without `force`,
    or a directory that does not exist."""
    if out.suffix.lower() not in {".html", ".htm"}:
        raise ArchipelagoError(f"report file '{out}' must end in .html")
    if out.exists() and not force:
        raise ArchipelagoError(f"report file '{out}' exists; pass --force to replace it")
    if not out.parent.is_dir():
        raise ArchipelagoError(f"report file '{out}': directory '{out.parent}' does not exist")


def write_report(subject: str, strategy: str, result: tuple[Any, Any, Any], out: Path,
                 force: bool = False) -> Path:
    """The page at `out` (a .html file; an existing one only with `force`)."""
    check_target(out, force)
    out.write_text(report_html(subject, strategy, result), encoding="utf-8")
    return out
