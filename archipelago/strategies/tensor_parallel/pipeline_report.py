"""A tensor x pipeline estimate as one JSON object and as tables: its split, per-stage
resources and times, the refusal first when it does not fit (report.py hands a pipeline
plan here through the plan itself)."""

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from archipelago.estimate.tables import print_reasons, time_table
from archipelago.estimate.workload import Generation
from archipelago.models.weights import parameter_count
from archipelago.strategies.tensor_parallel import report as ring_report
from archipelago.strategies.tensor_parallel.efficiency import DecodeEfficiency, decode_roofline
from archipelago.strategies.tensor_parallel.pipeline_estimate import PipelineEstimate

if TYPE_CHECKING:  # the plan calls this module (pipeline.py imports it)
    from archipelago.strategies.tensor_parallel.pipeline import PipelinePlan


def pipeline_efficiency(plan: "PipelinePlan", est: PipelineEstimate, workload: Generation
                        ) -> DecodeEfficiency | None:
    """Decode against the memory and matrix units of every device of every stage."""
    ring = plan.rings[est.split.tp, est.split.ep]
    devices = [d.device for _ in est.stages for d in ring.devices]
    return decode_roofline(ring.graph, ring.bytes_per_param, devices,
                           len(devices) * ring.engine.peak_ops_per_s, workload,
                           est.decode_s_per_token, workload.batch if est.batch_note else 1)


def _stage_dict(plan: "PipelinePlan", est: PipelineEstimate, s: int) -> dict[str, Any]:
    stage = est.stages[s]
    link = est.links[s] if s < len(est.stages) - 1 else None
    ranks = stage.ranks()
    worst = {k: max(getattr(d, k) for d in ranks) for k in ("hbm_bytes", "ddr_bytes")}
    total = ranks[0].total
    return {
        "stage": s, "layers": [stage.first_layer, stage.first_layer + stage.layers],
        "nodes": [plan.cluster.nodes[i].name for i in stage.nodes],
        "prefill_s": stage.prefill_s, "decode_s_per_token": stage.decode_s_per_token,
        "busy_s": stage.busy_s, "dsp": total.dsp, "bram": total.bram, "uram": total.uram,
        **worst,
        "link_to_next": None if link is None else {"latency_s": link.latency_s,
                                                   "bandwidth_Bps": link.bandwidth_Bps},
        "ranks": [ring_report.device_to_dict(d) for d in ranks],
    }


def pipeline_to_dict(plan: "PipelinePlan", workload: Generation,
                     est: PipelineEstimate) -> dict[str, Any]:
    split = est.split
    return {
        "model": plan.spec.name, "cluster": plan.cluster.name, "strategy": plan.strategy,
        "tokens": {"input": workload.input_tokens, "output": workload.output_tokens},
        "batch": est.batch, "batch_note": est.batch_note,
        "parameters": parameter_count(plan.spec),
        "split": {"tp": split.tp, "pp": split.pp, "layers": list(split.layers or ()),
                  "devices": split.tp * split.pp, "chosen": est.chosen,
                  "tp_refused": {str(tp): why for tp, why in plan.refused.items()},
                  **({"ep": split.ep} if plan.spec.moe else {})},
        "latency_s": est.latency_s, "tokens_per_s": est.tokens_per_s,
        "prefill_s": est.prefill_s, "decode_s_per_token": est.decode_s_per_token,
        "decode_s_first": est.decode_s_first, "decode_s_last": est.decode_s_last,
        "transfer_s": est.transfer_s, "breakdown_s": est.breakdown_s,
        "prefill_breakdown_s": est.prefill_breakdown_s,
        **ring_report.efficiency_to_dict(pipeline_efficiency(plan, est, workload)),
        "stages": [_stage_dict(plan, est, s) for s in range(len(est.stages))],
        "feasible": est.feasible, "reasons": est.reasons,
    }


def print_pipeline(plan: "PipelinePlan", workload: Generation, est: PipelineEstimate,
                    console: Console) -> None:
    print_reasons(est.reasons, console)  # a plan that does not fit says so above any figure
    split = est.split
    batch = f" · batch {est.batch}" if est.batch > 1 else ""
    head = Table(title=f"{plan.spec.name} on {plan.cluster.name} · strategy {plan.strategy} · "
                       f"{workload.input_tokens}:{workload.output_tokens} tokens{batch}")
    head.add_column("metric")
    head.add_column("value", justify="right")
    head.add_row("parameters", f"{parameter_count(plan.spec) / 1e9:,.2f} B")
    experts = f", ep={split.ep}" if plan.spec.moe else ""
    head.add_row(f"split ({est.chosen})", f"tp={split.tp} x pp={split.pp}{experts} "
                 f"({split.tp * split.pp} of {plan.cluster.size} devices)")
    head.add_row("end-to-end latency", f"{est.latency_s * 1e3:,.2f} ms")
    head.add_row("tokens/s (all sequences' output / latency)", f"{est.tokens_per_s:,.2f}")
    head.add_row("prefill (summarization)", f"{est.prefill_s * 1e3:,.2f} ms")
    head.add_row("decode per token (mean)", f"{est.decode_s_per_token * 1e3:,.3f} ms")
    head.add_row("inter-stage transfers (whole run)", f"{est.transfer_s * 1e3:,.3f} ms")
    eff = pipeline_efficiency(plan, est, workload)
    if eff is not None:
        head.add_row("decode streams (of all stages' memory)",
                     f"{eff.streamed_Bps / 1e9:,.1f} of {eff.memory_Bps / 1e9:,.0f} GB/s "
                     f"({100 * eff.bandwidth:.0f}%)")
    core = est.stages[0].ranks()[0].total
    head.add_row("each device's core (every stage)",
                 f"DSP {core.dsp:,} · BRAM {core.bram:,} · URAM {core.uram:,}")
    head.add_row("feasible", "yes" if est.feasible else "[red]no[/red]")
    console.print(head)
    stages = Table(title="per stage (the fullest device of each)")
    for col in ("stage", "layers", "devices", "prefill ms", "decode ms/tok", "HBM GB",
                "DDR GB"):
        stages.add_column(col, justify="right")
    for s, stage in enumerate(est.stages):
        row = _stage_dict(plan, est, s)
        stages.add_row(str(s), f"{row['layers'][0]}-{row['layers'][1] - 1}",
                       f"{stage.nodes[0]}-{stage.nodes[-1]}", f"{stage.prefill_s * 1e3:,.1f}",
                       f"{stage.decode_s_per_token * 1e3:,.3f}",
                       f"{row['hbm_bytes'] / 1e9:,.2f}", f"{row['ddr_bytes'] / 1e9:,.2f}")
    console.print(stages)
    console.print(time_table(est.breakdown_s, est.latency_s, "where the time goes (all stages)"))
    if est.batch_note:
        console.print(f"note: {est.batch_note}")
