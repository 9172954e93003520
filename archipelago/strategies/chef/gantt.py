"""Gantt chart of a scheduled DAG (seeds/004 Figs. 5-6): one row per accelerator, one bar
per layer from its start to its end, coloured as the report page colours it: by model where
the DAG holds several, else by modality. plotly is imported here only."""

from pathlib import Path
from typing import Any

from archipelago.output_file import write_atomically
from archipelago.strategies.chef.layer_groups import colour_groups


def gantt_output(plan: Any, workload: Any, est: dict[str, Any], path: Path) -> Path:
    """`--gantt FILE`'s writer, called by the pipeline once the schedule is estimated."""
    groups, legend = colour_groups(plan.dag.layers)
    return write_gantt(est, groups, path, legend)


def write_gantt(plan: dict[str, Any], group: dict[str, str], path: Path,
                legend: str = "modality") -> Path:
    """`plan` is a scheduled DAG's `to_dict()`, `group` each layer's colour group (its model
    or modality, named by `legend`). The target was checked (not a file the user has) when
    the option was parsed, before the search; it is written whole here."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for name in sorted(set(group.values())):
        rows = [m for m in plan["mapping"] if group[m["layer"]] == name]
        fig.add_trace(go.Bar(
            name=name, orientation="h", base=[m["start_s"] for m in rows],
            x=[m["end_s"] - m["start_s"] for m in rows],
            y=[f"{m['fpga']}/{m['accelerator']}" for m in rows],
            text=[m["layer"] for m in rows], hovertemplate=(
                "%{text}<br>start %{base:.6f} s<br>duration %{x:.6f} s<extra></extra>")))
    fig.update_layout(barmode="overlay", xaxis_title="time (s)", legend_title_text=legend,
                      yaxis_title="FPGA / accelerator",
                      title=(f"{plan['model']} on {plan['cluster']} ({plan['strategy']}): "
                             f"{plan['latency_s'] * 1e3:.3f} ms"))
    write_atomically(path, fig.to_html(include_plotlyjs=True), "--gantt", force=True)
    return path  # plotly inlined: the chart opens offline
