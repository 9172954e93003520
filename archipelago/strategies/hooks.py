"""The shapes of a plan kind's hooks, as typed Protocols: what `PlanKind.hook(role)` hands
back, and what a new kind's modules must provide. Plans, workloads and estimates are the
kind's own types (`Any` here); everything else is fixed."""

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from archipelago.estimate.summary import Summary


class Estimator(Protocol):
    """(plan, workload) -> estimate; the pipeline checks every figure in it is finite."""

    def __call__(self, plan: Any, workload: Any, /) -> Any: ...


class ReportModule(Protocol):
    """The kind's `report` module: an estimate's figures as one `estimate.summary.Summary`,
    from which the CLI renders the table and `--json` and the report page its headline.
    A kind with an emulator, writers, an explorer or commands adds `print_emulation`,
    `print_build`, `print_explore`, ... (each `(summary dict, console)`)."""

    def summarize(self, plan: Any, workload: Any, est: Any, /) -> "Summary": ...


class Emulator(Protocol):
    """(plan, EmulationJob) -> report dict, None on torchrun ranks other than 0."""

    def __call__(self, plan: Any, job: Any, /) -> dict[str, Any] | None: ...


class Writers(Protocol):
    """(plan, out, force) -> summary dict; every file inside `out`."""

    def __call__(self, plan: Any, out: str, force: bool, /) -> dict[str, Any]: ...


class OutputWriter(Protocol):
    """An output option's writer (`--gantt FILE`): (plan, workload, estimate, target),
    called by the pipeline after the estimate; the target was checked when parsed."""

    def __call__(self, plan: Any, workload: Any, est: Any, target: Path, /) -> Any: ...


class Utilization(Protocol):
    """(plan, estimate) -> {limit: worst fraction used}, for the design-space search."""

    def __call__(self, plan: Any, est: Any, /) -> dict[str, float]: ...


class Explorer(Protocol):
    """(model, cluster, strategy, option texts) -> summary dict: `archi explore` of a kind
    whose exploration is not an engine-parameter search."""

    def __call__(self, model: str, cluster: str, strategy: str, options: dict[str, str], /
                 ) -> dict[str, Any]: ...


class Page(Protocol):
    """(plan, workload, estimate, summary) -> report.page.KindPage: headline and charts."""

    def __call__(self, plan: Any, workload: Any, est: Any, summary: dict[str, Any], /
                 ) -> Any: ...


class BatchEvaluator(Protocol):
    """(model, cluster, strategy, workload, engines) -> figures of every engine design at
    once, one array entry per design (`latency_s`, `tokens_per_s`, `feasible`, the
    utilization hook's limits, `errors`), each as `utilization` and the estimator give it."""

    def __call__(self, model: str, cluster: str, strategy: str, workload: Any,
                 engines: Sequence[dict[str, Any]], /) -> Any: ...


class Floors(Protocol):
    """(plan, workload, estimate) -> [estimate.floors.PhaseFloor]: each phase's estimated
    seconds beside what each device must read and compute in it, from the plan alone; the
    pipeline refuses an estimate below a floor."""

    def __call__(self, plan: Any, workload: Any, est: Any, /) -> list[Any]: ...


class Traits(Protocol):
    """(plan, workload, estimate) -> estimate.generation.Traits: split and binding resource,
    for `archi compare`."""

    def __call__(self, plan: Any, workload: Any, est: Any, /) -> Any: ...


class Serving(Protocol):
    """(plan, workload, max_batch) -> estimate.iteration.IterationTable: the plan's prefill
    and decode iteration times over batches up to `max_batch` and contexts (its own
    estimator's, tabulated once) and the KV cache its free memory holds, for the serving
    simulator."""

    def __call__(self, plan: Any, workload: Any, max_batch: int, /) -> Any: ...


HOOKS: dict[str, type] = {"estimator": Estimator, "report": ReportModule,
                          "emulator": Emulator, "writers": Writers,
                          "utilization": Utilization, "explorer": Explorer, "page": Page,
                          "batch_evaluator": BatchEvaluator, "traits": Traits,
                          "floors": Floors, "serving": Serving}
