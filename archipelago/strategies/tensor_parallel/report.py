"""The tensor-parallel kind's report: a generation estimate as one summary (the table for
people, the JSON object for programs and the report page's headline are rendered from it by
estimate.summary); an emulation's or a build's report dict as a table."""

from dataclasses import replace
from typing import Any

from rich.console import Console
from rich.table import Table

from archipelago.estimate.generation_figures import (
    HEAD,
    MS3,
    generation_title,
    time_section,
    timing_figures,
)
from archipelago.estimate.summary import Column, Figure, Section, Summary, Unit, row, verdict
from archipelago.estimate.workload import Generation
from archipelago.models.weights import parameter_count
from archipelago.strategies.tensor_parallel.costs import DeviceUse
from archipelago.strategies.tensor_parallel.efficiency import DecodeEfficiency, decode_efficiency
from archipelago.strategies.tensor_parallel.estimate import Estimate
from archipelago.strategies.tensor_parallel.staged import StagedPlan
from archipelago.table_fit import fitted


def _efficiency_figures(eff: DecodeEfficiency | None) -> list[Figure]:
    """How much of the boards' memory bandwidth and matrix units one decode token uses
    (None: nothing decoded)."""
    if eff is None:
        return [Figure("bandwidth_efficiency"), Figure("compute_efficiency"),
                Figure("decode_roofline")]
    streams = (f"{eff.streamed_Bps / 1e9:,.1f} of {eff.memory_Bps / 1e9:,.0f} GB/s "
               f"({100 * eff.bandwidth:.0f}%)")
    compute = (f"{eff.flops_per_token / eff.seconds_per_token / 1e9:,.1f} of "
               f"{eff.peak_ops_per_s / 1e9:,.0f} GFLOPS ({100 * eff.compute:.0f}%)")
    return [
        Figure("bandwidth_efficiency", eff.bandwidth),
        Figure("compute_efficiency", eff.compute),
        Figure("decode_roofline", {
            "context": eff.context, "bytes_per_token": eff.bytes_per_token,
            "flops_per_token": eff.flops_per_token, "streamed_Bps": eff.streamed_Bps,
            "memory_Bps": eff.memory_Bps, "peak_ops_per_s": eff.peak_ops_per_s,
        }),
        row("decode streams (of the boards' memory)", streams),
        row("decode compute (of the matrix units' peak)", compute),
    ]


def device_to_dict(d: DeviceUse) -> dict[str, Any]:
    return {
        "rank": d.rank, "device": d.device,
        "dsp": d.total.dsp, "bram": d.total.bram, "uram": d.total.uram,
        "hbm_bytes": d.hbm_bytes, "ddr_bytes": d.ddr_bytes,
        "units": {name: r.model_dump(exclude_defaults=True) for name, r in d.units.items()},
    }


def _split_dict(plan: StagedPlan) -> dict[str, Any]:
    split = plan.split
    return {"tp": split.tp, "pp": split.pp, "layers": list(split.layers or ()),
            "devices": split.tp * split.pp, "chosen": plan.chosen,
            "tp_refused": {str(tp): why for tp, why in plan.refused.items()},
            **({"ep": split.ep} if plan.spec.moe else {})}


def stage_dict(plan: StagedPlan, est: Estimate, s: int) -> dict[str, Any]:
    """One stage's row: its layers, boards, times, the fullest device's memory, its core and
    the link to the next stage."""
    part = est.stages[s]
    stage = part.stage
    link = est.links[s] if s < len(est.stages) - 1 else None
    worst = {k: max(getattr(d, k) for d in part.devices) for k in ("hbm_bytes", "ddr_bytes")}
    total = part.devices[0].total
    return {
        "stage": s, "layers": [stage.layers.start, stage.layers.stop],
        "nodes": [plan.cluster.nodes[i].name for i in stage.nodes],
        "prefill_s": part.prefill_s, "decode_s_per_token": part.decode_s_per_token,
        "busy_s": part.busy_s, "dsp": total.dsp, "bram": total.bram, "uram": total.uram,
        **worst,
        "link_to_next": None if link is None else {"latency_s": link.latency_s,
                                                   "bandwidth_Bps": link.bandwidth_Bps},
        "ranks": [{**device_to_dict(d), "rank": tp_rank}  # its rank in the stage's ring
                  for tp_rank, d in enumerate(part.devices)],
    }


def summarize(plan: StagedPlan, workload: Generation, est: Estimate) -> Summary:
    """A ring's figures; a plan that shows its split adds it, the transfers between its
    stages and a table per stage."""
    shown = plan.shows_split
    stages = [stage_dict(plan, est, s) for s in range(len(est.stages))] if shown else []
    return Summary([
        Figure("model", plan.spec.name), Figure("cluster", plan.cluster.name),
        Figure("strategy", plan.strategy),
        Figure("tokens", {"input": workload.input_tokens, "output": workload.output_tokens}),
        Figure("batch", est.batch), Figure("batch_note", est.batch_note),
        Figure("precision", plan.program.numerics),  # the format (number_formats.py)
        *([Figure("parameters", parameter_count(plan.spec)), Figure("split", _split_dict(plan))]
          if shown else []),
        *_timing_figures(est),
        *(_split_rows(plan, est) if shown else []),
        Figure("prefill_breakdown_s", est.prefill_breakdown_s),
        *_efficiency_figures(decode_efficiency(plan, workload, est)),
        Figure("devices", [device_to_dict(d) for d in est.devices]),
        *([Figure("stages", stages)] if shown else []),
        *verdict(est.feasible, est.reasons),
    ], generation_title(f"{plan.spec.name} on {plan.cluster.name} · strategy {plan.strategy}",
                        workload, est.feasible), HEAD,
        [time_section(est.breakdown_s, est.latency_s),
         *([_stage_section(est, stages)] if shown else []), _device_section(est)],
        [f"note: {est.batch_note}"] if est.batch_note else [], dim=not est.feasible)


def _timing_figures(est: Estimate) -> list[Figure]:
    """The shared timing figures; a batch's tokens/s per device is a row of the table too."""
    figures = timing_figures(est, len(est.devices))
    if est.batch == 1:
        return figures
    return [replace(f, label="tokens/s per device", unit=Unit(digits=2))
            if f.key == "tokens_per_s_per_device" else f for f in figures]


def _split_rows(plan: StagedPlan, est: Estimate) -> list[Figure]:
    """The parameters and the split as rows (their JSON figures come before the timing),
    then the transfers between stages."""
    split = plan.split
    experts = f", ep={split.ep}" if plan.spec.moe else ""
    return [
        row("parameters", f"{parameter_count(plan.spec) / 1e9:,.2f} B"),
        row(f"split ({plan.chosen})", f"tp={split.tp} x pp={split.pp}{experts} "
            f"({split.tp * split.pp} of {plan.cluster.size} devices)"),
        Figure("transfer_s", est.transfer_s, "inter-stage transfers (whole run)", unit=MS3),
    ]


def _stage_section(est: Estimate, stages: list[dict[str, Any]]) -> Section:
    """Each stage's layers, boards, times and fullest device's memory."""
    rows = []
    for part, stage in zip(est.stages, stages, strict=True):
        nodes, (start, stop) = part.stage.nodes, stage["layers"]
        rows.append((str(stage["stage"]), f"{start}-{stop - 1}", f"{nodes[0]}-{nodes[-1]}",
                     f"{part.prefill_s * 1e3:,.1f}", f"{part.decode_s_per_token * 1e3:,.3f}",
                     f"{stage['hbm_bytes'] / 1e9:,.2f}", f"{stage['ddr_bytes'] / 1e9:,.2f}"))
    columns = ("stage", "layers", "devices", "prefill ms", "decode ms/tok", "HBM GB", "DDR GB")
    return Section("per stage (the fullest device of each)", tuple(map(Column, columns)), rows)


def _pct(used: float, have: float, fmt: str = ",.0f") -> str:
    return f"{used:{fmt}} ({100 * used / have:.0f}%)" if have else f"{used:{fmt}}"


def _device_section(est: Estimate) -> Section:
    """Each device's fabric and memory use, against what its board has."""
    rows = []
    for part in est.stages:
        for d, dp in zip(part.devices, part.stage.program.devices, strict=True):
            res = part.stage.program.fabric(dp.rank)
            hbm = dp.device.memory("hbm")
            rows.append((
                str(d.rank), d.device, _pct(d.total.dsp, res.dsp),
                _pct(d.total.bram, res.bram), _pct(d.total.uram, res.uram),
                _pct(d.hbm_bytes / 1e9, hbm.capacity_bytes / 1e9 if hbm else 0, ",.2f"),
                f"{d.ddr_bytes / 1e9:,.2f}",
            ))
    columns = ("rank", "device", "DSP", "BRAM", "URAM", "HBM GB", "DDR GB")
    return Section("per device", tuple(map(Column, columns)), rows)


def print_emulation(report: dict[str, Any], console: Console) -> None:
    verdict = "[green]yes[/green]" if report["tokens_match"] else "[red]no[/red]"
    head = Table(title=f"{report['model']} emulated on {report['cluster']} · strategy "
                       f"{report['strategy']} · {report['precision']} · {report['ranks']} ranks")
    head.add_column("check")
    head.add_column("value")
    head.add_row("tokens identical to transformers", verdict)
    head.add_row("generated", " ".join(map(str, report["generated"])))
    head.add_row("reference", " ".join(map(str, report["reference"])))
    head.add_row("max |logit difference|", f"{report['max_abs_logit_diff']:.3g}")
    split = report.get("split")
    if split is None:
        head.add_row("collectives per rank",
                     ", ".join(f"{k} {n}" for k, n in report["collectives"].items()))
    else:  # a pipeline: what each stage's ranks ran, and the links between stages
        head.add_row("split", f"tp={split['tp']}, pp={split['pp']}, layers="
                     f"{'+'.join(map(str, split['layers']))} ({split['chosen']})")
        for stage, counts in enumerate(report["collectives"]):
            head.add_row(f"collectives per rank, stage {stage}",
                         ", ".join(f"{k} {n}" for k, n in counts.items()))
        for link in report["stage_links"]:
            head.add_row(f"bytes stage {link['from_stage']} -> {link['to_stage']} "
                         f"({link['carries']})", ", ".join(f"{b:,.0f}" for b in link["bytes"]))
    head.add_row("bytes per ring link",
                 ", ".join(f"{k} {b:,.0f}" for k, b in report["bytes_per_link"].items()))
    head.add_row("weights", report["weights"])
    head.add_row("tokens/s (emulated, CPU)", f"{report['tokens_per_s']:,.2f}")
    console.print(fitted(head, console))
    held = Table(title="weights each rank holds")
    for col in ("rank", "MiB", *report["bytes_per_rank_by_memory"][0]):
        held.add_column(col, justify="right")
    for rank, (total, parts) in enumerate(zip(report["bytes_per_rank"],
                                              report["bytes_per_rank_by_memory"], strict=True)):
        held.add_row(str(rank), f"{total / 2**20:,.2f}",
                     *(f"{b / 2**20:,.2f}" for b in parts.values()))
    console.print(fitted(held, console))


def print_build(summary: dict[str, Any], console: Console) -> None:
    console.print(f"{summary['headline']}; {len(summary['files'])} files in {summary['out']}")
