"""A plan kind's summary of one estimate, whatever its report module gives: a `Summary`
from `summarize(plan, workload, est)`, or, for a report not converted yet (the
tensor-parallel kind's, issue 31 point 5), its own `estimate_to_dict` and `print_estimate`
behind the same three methods. The CLI, the report page and `archi compare` read only this."""

from typing import TYPE_CHECKING, Any, Protocol

from archipelago.estimate.summary import Figure, Summary

if TYPE_CHECKING:
    from rich.console import Console

    from archipelago.strategies.registry import PlanKind


class Summarized(Protocol):
    def as_json(self) -> dict[str, Any]: ...

    def print(self, console: "Console") -> None: ...

    def headline(self) -> list[Figure]: ...


class _TwoFunctionReport:
    """A report module with `estimate_to_dict` and `print_estimate` (its page hook lists its
    own headline)."""

    def __init__(self, report: Any, result: tuple[Any, Any, Any]) -> None:
        self.report, self.result = report, result

    def as_json(self) -> dict[str, Any]:
        return self.report.estimate_to_dict(*self.result)

    def print(self, console: "Console") -> None:
        self.report.print_estimate(*self.result, console)

    def headline(self) -> list[Figure]:
        return []


def estimate_summary(kind: "PlanKind", result: tuple[Any, Any, Any]) -> Summarized:
    """The summary of `result`, a (plan, workload, estimate) of `kind`."""
    report = kind.hook("report")
    summarize = getattr(report, "summarize", None)
    if summarize is None:
        return _TwoFunctionReport(report, result)
    summary: Summary = summarize(*result)
    return summary
