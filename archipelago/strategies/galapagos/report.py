"""The dataflow kind's report (Galapagos): an estimate's figures as one summary (its JSON,
tables and page headline), emulations and builds as tables."""

from typing import Any

from rich.console import Console
from rich.table import Table

from archipelago.estimate.summary import MS, Column, Figure, Section, Summary, Unit, row, verdict
from archipelago.estimate.workload import Sequence
from archipelago.strategies.galapagos.estimate import EncoderTiming, StreamEstimate
from archipelago.strategies.galapagos.plan import DataflowPlan
from archipelago.table_fit import fitted


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


_US = Unit("µs", 1e6, 1)


def _timing_figures(est: StreamEstimate, unpadded: dict[str, Any], padded: dict[str, Any]
                    ) -> list[Figure]:
    """The timing figures; those of the head table show the unpadded and the padded
    sequence side by side."""
    rows: dict[str, tuple[str, str | None, Unit]] = {  # key -> (row, page headline, unit)
        "latency_s": ("whole model T + (L-1)(X+d)", "whole-model latency", MS),
        "encoder_latency_s": ("encoder latency T", "encoder latency T", _US),
        "first_output_s": ("first output X", "first output X", _US),
        # in clock cycles, as the paper counts it
        "packet_interval_s": ("packet interval I", None, Unit("cycles", est.clock_hz, 0)),
        "throughput_per_s": ("throughput", "throughput (sequences)", Unit("/s", 1, 1)),
    }
    figures = []
    for key, value in unpadded.items():
        if key not in rows:
            figures.append(Figure(key, value))
            continue
        label, headline, unit = rows[key]
        figures.append(Figure(key, value, label, (unit.show(value), unit.show(padded[key])),
                              unit, headline))
    return figures


def summarize(plan: DataflowPlan, workload: Sequence, est: StreamEstimate) -> Summary:
    """The kind's figures: timing without and with padding, kernels, per-FPGA use."""
    unpadded, padded = _timing(est, est.timing), _timing(est, est.padded)
    use = Section("per FPGA (first cluster)", tuple(Column(c) for c in (
        "FPGA", "cluster", "kernels", "DSP", "BRAM", "URAM")), [
        (str(u.index), str(u.cluster), str(len(u.kernels)),
         _pct(u.resources.dsp, u.device.resources.dsp),
         _pct(u.resources.bram, u.device.resources.bram),
         _pct(u.resources.uram, u.device.resources.uram))
        for u in (plan.fpgas[i] for i in plan.clusters[0].fpgas)])
    return Summary([
        Figure("model", plan.spec.name), Figure("cluster", plan.cluster.name),
        Figure("strategy", plan.strategy),
        *_timing_figures(est, unpadded, padded),
        Figure("padded", padded),
        Figure("clock_hz", est.clock_hz), Figure("switch_latency_s", est.switch_latency_s),
        Figure("row_interval_cycles", plan.row_interval),
        Figure("bottleneck_kernel", est.timing.bottleneck_kernel),
        Figure("encoders", est.layers),
        Figure("kernels", est.kernels, headline="kernels"),
        Figure("clusters", est.clusters),
        Figure("fpgas_needed", plan.fpgas_needed, headline="FPGAs"),
        row("kernels / clusters / FPGAs",
            f"{est.kernels:,} / {est.clusters} / {plan.fpgas_needed}"),
        Figure("encoder_kernels", _encoder_kernels(plan, est.seq_len)),
        Figure("aie_per_encoder", sum(plan.designs[n].resources.aie
                                      for n in plan.layer_kernels(0) if n in plan.designs)),
        Figure("devices", [
            {"index": u.index, "device": u.device.key, "cluster": u.cluster,
             "kernels": len(u.kernels), "dsp": u.resources.dsp, "bram": u.resources.bram,
             "uram": u.resources.uram}
            for u in plan.fpgas
        ]),
        *verdict(est.feasible, est.reasons),
    ], title=f"{plan.spec.name} on {plan.cluster.name} · strategy {plan.strategy} · "
             f"{est.seq_len} tokens",
        columns=(Column("metric", right=False), Column(f"{est.seq_len} tokens (no padding)"),
                 Column(f"padded to {est.padded.seq_len}")),
        sections=[use])


def _encoder_kernels(plan: DataflowPlan, seq_len: int) -> list[dict[str, Any]]:
    """The first encoder's compute kernels: fabric, AI Engines and busy time per sequence
    (rows x compute cycles; on Versal the AIE matrix-multiply time of seeds/000 §9.3)."""
    f, engine = plan.engine.config.clock_hz, plan.engine
    rows = []
    for name, k in plan.compute.items():
        if k.layer:
            continue
        use = k.design.resources
        kernel = {"name": name, "aie": use.aie, "dsp": use.dsp, "bram": use.bram,
                  "uram": use.uram,
                  "compute_s": seq_len * engine.compute_cycles(k.design, seq_len) / f}
        if use.aie:  # only Versal engines place kernels on AI Engines
            kernel["aie_s"] = engine.aie_seconds(k.design, seq_len)
        rows.append(kernel)
    return rows


def _pct(used: int, have: int) -> str:
    return f"{used:,} ({100 * used / have:.0f}%)" if have else f"{used:,}"


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
    console.print(fitted(head, console))
    links = Table(title="busiest links")
    for col in ("link", "packets", "bytes"):
        links.add_column(col, justify="right")
    busiest = sorted(report["links"].items(), key=lambda kv: -kv[1]["bytes"])[:8]
    for link, use in busiest:
        links.add_row(link, f"{use['packets']:,}", f"{use['bytes']:,}")
    console.print(fitted(links, console))


def print_build(summary: dict[str, Any], console: Console) -> None:
    console.print(f"{summary['model']} on {summary['hardware']}: {summary['kernels']:,} kernels "
                  f"in {summary['clusters']} clusters on {summary['fpgas_needed']} FPGAs; "
                  f"{len(summary['files'])} files in {summary['out']}")
