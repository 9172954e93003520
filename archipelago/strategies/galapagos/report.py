"""The dataflow kind's report (Galapagos): estimates, emulations and builds as one JSON
object or rich tables for people."""

from typing import Any

from rich.console import Console
from rich.table import Table

from archipelago.estimate.workload import Sequence
from archipelago.strategies.galapagos.estimate import EncoderTiming, StreamEstimate
from archipelago.strategies.galapagos.plan import DataflowPlan


def _timing(est: StreamEstimate, t: EncoderTiming) -> dict[str, Any]:
    f = est.clock_hz
    return {
        "seq_len": t.seq_len,
        "latency_s": est.whole_model_s(t),
        "encoder_latency_s": t.last_output / f,
        "first_output_s": t.first_output / f,
        "packet_interval_s": t.interval / f,
        "throughput_per_s": f / t.bottleneck,
        "cycles": {"X": t.first_output, "T": t.last_output, "I": t.interval},
    }


def estimate_to_dict(plan: DataflowPlan, workload: Sequence, est: StreamEstimate
                     ) -> dict[str, Any]:
    unpadded = _timing(est, est.timing)
    return {
        "model": plan.spec.name,
        "cluster": plan.cluster.name,
        "strategy": plan.strategy,
        **unpadded,
        "padded": _timing(est, est.padded),
        "clock_hz": est.clock_hz,
        "switch_latency_s": est.switch_latency_s,
        "row_interval_cycles": plan.row_interval,
        "bottleneck_kernel": est.timing.bottleneck_kernel,
        "encoders": est.layers,
        "kernels": est.kernels,
        "clusters": est.clusters,
        "fpgas_needed": plan.fpgas_needed,
        "encoder_kernels": _encoder_kernels(plan, est.seq_len),
        "aie_per_encoder": sum(plan.designs[n].resources.aie for n in plan.layer_kernels(0)
                               if n in plan.designs),
        "devices": [
            {"index": u.index, "device": u.device.key, "cluster": u.cluster,
             "kernels": len(u.kernels), "dsp": u.resources.dsp, "bram": u.resources.bram,
             "uram": u.resources.uram}
            for u in plan.fpgas
        ],
        "feasible": est.feasible,
        "reasons": est.reasons,
    }


def _encoder_kernels(plan: DataflowPlan, seq_len: int) -> list[dict[str, Any]]:
    """The first encoder's compute kernels: fabric, AI Engines and busy time per sequence
    (rows x compute cycles; on Versal the AIE matrix-multiply time of seeds/000 §9.3)."""
    f, engine = plan.engine.config.clock_hz, plan.engine
    rows = []
    for name, k in plan.compute.items():
        if k.layer:
            continue
        use = k.design.resources
        row = {"name": name, "aie": use.aie, "dsp": use.dsp, "bram": use.bram,
               "uram": use.uram,
               "compute_s": seq_len * engine.compute_cycles(k.design, seq_len) / f}
        if use.aie:  # only Versal engines place kernels on AI Engines
            row["aie_s"] = engine.aie_seconds(k.design, seq_len)
        rows.append(row)
    return rows


def _pct(used: int, have: int) -> str:
    return f"{used:,} ({100 * used / have:.0f}%)" if have else f"{used:,}"


def print_estimate(plan: DataflowPlan, workload: Sequence, est: StreamEstimate,
                   console: Console) -> None:
    f = est.clock_hz
    head = Table(title=f"{plan.spec.name} on {plan.cluster.name} · strategy {plan.strategy} · "
                       f"{est.seq_len} tokens")
    head.add_column("metric")
    head.add_column(f"{est.seq_len} tokens (no padding)", justify="right")
    head.add_column(f"padded to {est.padded.seq_len}", justify="right")
    for label, get in (
        ("whole model T + (L-1)(X+d)", lambda t: f"{est.whole_model_s(t) * 1e3:,.3f} ms"),
        ("encoder latency T", lambda t: f"{t.last_output / f * 1e6:,.1f} µs"),
        ("first output X", lambda t: f"{t.first_output / f * 1e6:,.1f} µs"),
        ("packet interval I", lambda t: f"{t.interval:,.0f} cycles"),
        ("throughput", lambda t: f"{f / t.bottleneck:,.1f} /s"),
    ):
        head.add_row(label, get(est.timing), get(est.padded))
    head.add_row("kernels / clusters / FPGAs",
                 f"{est.kernels:,} / {est.clusters} / {plan.fpgas_needed}", "")
    head.add_row("feasible", "yes" if est.feasible else "[red]no[/red]", "")
    console.print(head)
    use = Table(title="per FPGA (first cluster)")
    for col in ("FPGA", "cluster", "kernels", "DSP", "BRAM", "URAM"):
        use.add_column(col, justify="right")
    first = plan.clusters[0].fpgas
    for u in (plan.fpgas[i] for i in first):
        r = u.device.resources
        use.add_row(str(u.index), str(u.cluster), str(len(u.kernels)),
                    _pct(u.resources.dsp, r.dsp), _pct(u.resources.bram, r.bram),
                    _pct(u.resources.uram, r.uram))
    console.print(use)
    for reason in est.reasons:
        console.print(f"[red]infeasible:[/red] {reason}")


def print_emulation(report: dict[str, Any], console: Console) -> None:
    """The emulation verdict and the busiest FPGA-to-FPGA links."""
    head = Table(title=f"{report['model']} on {report['cluster']} · strategy "
                       f"{report['strategy']} · {report['seq_len']} tokens (emulated)")
    head.add_column("check")
    head.add_column("value", justify="right")
    verdict = "[green]yes[/green]" if report["bit_exact"] else "[red]no[/red]"
    head.add_row("bit-identical to IBertModel", verdict)
    head.add_row("max |difference|", f"{report['max_abs_diff']:.3g}")
    head.add_row("kernel threads", str(report["threads"]))
    head.add_row("packets (local)", f"{report['packets']:,} ({report['local_packets']:,})")
    head.add_row("bytes", f"{report['bytes']:,}")
    head.add_row("seconds", f"{report['seconds']:.1f}")
    console.print(head)
    links = Table(title="busiest links")
    for col in ("link", "packets", "bytes"):
        links.add_column(col, justify="right")
    busiest = sorted(report["links"].items(), key=lambda kv: -kv[1]["bytes"])[:8]
    for link, use in busiest:
        links.add_row(link, f"{use['packets']:,}", f"{use['bytes']:,}")
    console.print(links)


def print_build(summary: dict[str, Any], console: Console) -> None:
    console.print(f"{summary['model']} on {summary['hardware']}: {summary['kernels']:,} kernels "
                  f"in {summary['clusters']} clusters on {summary['fpgas_needed']} FPGAs; "
                  f"{len(summary['files'])} files in {summary['out']}")
