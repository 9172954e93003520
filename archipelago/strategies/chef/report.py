"""Scheduled-DAG results: one summary of the JSON the issue asks for and the table and
lines people read. The Gantt chart is `--gantt`'s writer's (gantt.py), called by the
pipeline; this only names its file."""

from pathlib import Path
from typing import Any

from rich.console import Console

from archipelago.estimate.summary import MS, Column, Figure, Section, Summary, Unit
from archipelago.models.dag_summary import summary_lines
from archipelago.strategies.chef.plan import ORIGINS


def _gantt(workload) -> str | None:
    return None if workload.gantt is None else str(Path(workload.gantt))


# The figures on the report page's headline: key -> (label, unit).
_HEADLINE: dict[str, tuple[str, Unit | None]] = {
    "latency_s": ("latency", MS), "comm_ratio": ("communication ratio", Unit("%", 100, 2)),
    "layers": ("layers", None)}


def _figure(key: str, value: Any) -> Figure:
    label, unit = _HEADLINE.get(key, (None, None))
    return Figure(key, value, unit=unit, headline=label)


def summarize(plan, workload, est: dict[str, Any]) -> Summary:
    """The plan's record (the search already simulated it) and where `--gantt` wrote its
    chart; the table is the deployment per FPGA, the lines under it the search's steps."""
    gantt = _gantt(workload)
    per_fpga: dict[str, int] = {}
    for m in est["mapping"]:
        per_fpga[m["fpga"]] = per_fpga.get(m["fpga"], 0) + 1
    deployment = Section(f"{est['model']} on {est['cluster']} ({est['strategy']})", tuple(
        Column(c, right=False) for c in ("FPGA", "accelerators", "DSP used", "BRAM used",
                                          "layers")), [
        (f["fpga"], ", ".join(f"{a['acc']} {a['ip']}" for a in f["accelerators"]) or "-",
         f"{f['dsp_used']}/{f['dsp_available']}", f"{f['bram_used']}/{f['bram_available']}",
         str(per_fpga.get(f["fpga"], 0)))
        for f in est["deployment"]])
    steps = " -> ".join(f"{s * 1e3:.3f}" for s in est["steps_latency_s"])
    notes = [*summary_lines(est["model_summary"]),
             f"latency {est['latency_s'] * 1e3:.3f} ms (steps {steps} ms), communication "
             f"ratio {100 * est['comm_ratio']:.2f}%, search {est['search_s']:.2f} s",
             f"search started from: {est['origin']} ({ORIGINS[est['origin']]})",
             *([f"Gantt chart written to {gantt}"] if gantt else [])]
    figures = [_figure(key, value) for key, value in est.items()]
    return Summary(figures + ([Figure("gantt", gantt)] if gantt else []),
                   sections=[deployment], notes=notes)


def print_emulation(report: dict[str, Any], console: Console) -> None:
    if "reference" in report:  # an imported file, checked against onnxruntime
        _print_reference_check(report, console)
        return
    verdict = "equal" if report["outputs_equal"] else "DIFFERENT"
    console.print(f"{report['model']}: {report['processes']} FPGA processes; outputs "
                  f"{verdict} to the unsplit model (max |diff| {report['max_abs_diff']:.3g})")
    for link, nbytes in report["bytes_per_link"].items():
        console.print(f"  {link}: {nbytes:,} bytes")


def _print_reference_check(report: dict[str, Any], console: Console) -> None:
    tol = report["tolerance"]
    verdict = "PASS" if report["passed"] else "FAIL"
    console.print(f"{report['model']}: {report['processes']} FPGA processes against "
                  f"{report['reference']}, seed {report['seed']}: {verdict} (max |error| "
                  f"{report['max_abs_error']:.3g}, relative {report['max_rel_error']:.3g}; "
                  f"tolerance rtol {tol['rtol']:g}, atol {tol['atol']:g})")
    for name, out in report["per_output"].items():
        console.print(f"  output {name} {out['shape']}: max |error| "
                      f"{out['max_abs_error']:.3g}, {'pass' if out['passed'] else 'FAIL'}")
    for link, nbytes in report["bytes_per_link"].items():
        console.print(f"  {link}: {nbytes:,} bytes")


def print_build(summary: dict[str, Any], console: Console) -> None:
    idle = f"; idle: {', '.join(summary['idle'])}" if summary["idle"] else ""
    console.print(f"{summary['model']} on {summary['cluster']} ({summary['strategy']}): "
                  f"{len(summary['projects'])} hls4ml projects{idle}; "
                  f"{len(summary['files'])} files in {summary['out']}")
    for p in summary["projects"]:
        console.print(f"  {p['folder']}/: {p['layers']} layers on {p['fpga']} "
                      f"({summary['part'][p['fpga']]})")
