"""Gantt chart of a scheduled DAG (seeds/004 Figs. 5-6): one row per accelerator, one bar
per layer from its start to its end, coloured by modality. plotly is imported here only."""

from pathlib import Path
from typing import Any

from archipelago.output_file import write_atomically


def gantt_output(plan: Any, workload: Any, est: dict[str, Any], path: Path) -> Path:
    """`--gantt FILE`'s writer, called by the pipeline once the schedule is estimated."""
    return write_gantt(est, {la.name: la.modality for la in plan.dag.layers}, path)


def write_gantt(plan: dict[str, Any], modality: dict[str, str], path: Path) -> Path:
    """`plan` is a scheduled DAG's `to_dict()`. The target was checked (not a file the
    user has) when the option was parsed, before the search; it is written whole here."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for mod in sorted(set(modality.values())):
        rows = [m for m in plan["mapping"] if modality[m["layer"]] == mod]
        fig.add_trace(go.Bar(
            name=mod, orientation="h", base=[m["start_s"] for m in rows],
            x=[m["end_s"] - m["start_s"] for m in rows],
            y=[f"{m['fpga']}/{m['accelerator']}" for m in rows],
            text=[m["layer"] for m in rows], hovertemplate=(
                "%{text}<br>start %{base:.6f} s<br>duration %{x:.6f} s<extra></extra>")))
    fig.update_layout(barmode="overlay", xaxis_title="time (s)",
                      yaxis_title="FPGA / accelerator",
                      title=(f"{plan['model']} on {plan['cluster']} ({plan['strategy']}): "
                             f"{plan['latency_s'] * 1e3:.3f} ms"))
    write_atomically(path, fig.to_html(include_plotlyjs=True), "--gantt", force=True)
    return path  # plotly inlined: the chart opens offline
