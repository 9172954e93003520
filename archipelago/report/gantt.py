"""Gantt chart of a scheduled DAG (seeds/004 Figs. 5-6): one row per accelerator, one bar
per layer from its start to its end, coloured by modality. plotly is imported here only."""

from pathlib import Path
from typing import Any

from archipelago.errors import ArchipelagoError


def write_gantt(plan: dict[str, Any], modality: dict[str, str], path: Path) -> Path:
    """`plan` is a scheduled DAG's `to_dict()`; refuses to overwrite an existing file."""
    import plotly.graph_objects as go

    if path.exists():
        raise ArchipelagoError(f"--gantt {path}: the file exists; choose a new name")
    if not path.parent.exists():
        raise ArchipelagoError(f"--gantt {path}: directory {path.parent} does not exist")
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
    fig.write_html(str(path), include_plotlyjs=True)  # inlined: it opens offline
    return path
