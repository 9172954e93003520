"""Scheduled-DAG results: the JSON the issue asks for and a rich summary. The Gantt chart
is `--gantt`'s writer's (gantt.py), called by the pipeline; this only names its file."""

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from archipelago.models.dag_summary import summary_lines
from archipelago.strategies.chef.plan import ORIGINS


def _gantt(workload) -> str | None:
    return None if workload.gantt is None else str(Path(workload.gantt))


def estimate_to_dict(plan, workload, est: dict[str, Any]) -> dict[str, Any]:
    gantt = _gantt(workload)
    return {**est, **({"gantt": gantt} if gantt else {})}


def print_estimate(plan, workload, est: dict[str, Any], console: Console) -> None:
    gantt = _gantt(workload)
    table = Table(title=f"{est['model']} on {est['cluster']} ({est['strategy']})")
    for col in ("FPGA", "accelerators", "DSP used", "BRAM used", "layers"):
        table.add_column(col)
    per_fpga: dict[str, int] = {}
    for m in est["mapping"]:
        per_fpga[m["fpga"]] = per_fpga.get(m["fpga"], 0) + 1
    for f in est["deployment"]:
        accs = ", ".join(f"{a['acc']} {a['ip']}" for a in f["accelerators"]) or "-"
        table.add_row(f["fpga"], accs, f"{f['dsp_used']}/{f['dsp_available']}",
                      f"{f['bram_used']}/{f['bram_available']}",
                      str(per_fpga.get(f["fpga"], 0)))
    console.print(table)
    for line in summary_lines(est["model_summary"]):
        console.print(line)
    steps = " -> ".join(f"{s * 1e3:.3f}" for s in est["steps_latency_s"])
    console.print(f"latency {est['latency_s'] * 1e3:.3f} ms (steps {steps} ms), "
                  f"communication ratio {100 * est['comm_ratio']:.2f}%, "
                  f"search {est['search_s']:.2f} s")
    console.print(f"search started from: {est['origin']} ({ORIGINS[est['origin']]})")
    if gantt:
        console.print(f"Gantt chart written to {gantt}")


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
