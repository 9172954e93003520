"""Write a plan's report page: the kind's JSON summary and `page` hook, laid out by
report.page, into one HTML file that never replaces a file the user has unless told to."""

from pathlib import Path
from typing import Any

from archipelago.output_file import check_output_file, write_atomically
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


HTML_SUFFIXES = (".html", ".htm")


def check_target(out: Path, force: bool = False, option: str = "--out") -> None:
    """Refuse a report path before any work: not .html, an existing file without `force`,
    a directory that does not exist or cannot be written."""
    check_output_file(out, option, force, HTML_SUFFIXES)


def write_report(subject: str, strategy: str, result: tuple[Any, Any, Any], out: Path,
                 force: bool = False, option: str = "--out") -> Path:
    """The page at `out` (a .html file; an existing one only with `force`)."""
    check_target(out, force, option)
    write_atomically(out, report_html(subject, strategy, result), option, force)
    return out
