"""The host-program kind's report: an estimate's figures as one summary (its JSON, tables
and page headline); emulations and sizings as tables."""

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from archipelago.estimate.summary import MS, Column, Figure, Section, Summary, Unit, row
from archipelago.strategies.host_offload.estimate import HostEstimate
from archipelago.strategies.host_offload.plan import HostPlan
from archipelago.strategies.host_offload.proxies import FIT_MAX_ELEMENTS
from archipelago.table_fit import fitted

TOP_CALLS = 8  # the costliest calls a report names


def _figures(plan: HostPlan, est: HostEstimate) -> dict[str, Any]:
    design = plan.designs[0]
    return {
        "model": plan.spec.name, "params": plan.spec.params,
        "matrix_params": plan.spec.matrix_params, "cards": plan.cards,
        "devices": sorted({d.device.key for d in plan.designs}), "steps": plan.steps,
        "weights": plan.layout.weights, "latency_s": est.latency_s, "setup_s": est.setup_s,
        "breakdown_s": est.breakdown_s,
        "per_call": {name: {"count": int(v["count"]), "time_s": v["time_s"]}
                     for name, v in est.top_calls(TOP_CALLS)},
        "onchip_bytes": est.onchip_bytes, "onchip_capacity_bytes": est.onchip_capacity_bytes,
        "npu": {"tiles": design.tiles, "native_dim": design.native_dim,
                "lanes": design.lanes, "clock_hz": design.clock_hz},
        "feasible": est.feasible, "reasons": est.reasons, "cpu_profile": est.cpu_profile,
    }


def summarize(plan: HostPlan, workload: None, est: HostEstimate) -> Summary:
    """The kind's figures of one estimate."""
    return host_summary(_figures(plan, est))


# The figures on the report page's headline: key -> (label, unit).
_HEADLINE: dict[str, tuple[str, Unit | None]] = {
    "latency_s": ("latency per inference", MS), "setup_s": ("setup", MS),
    "cards": ("cards", None), "steps": ("steps", None)}


def host_summary(report: dict[str, Any]) -> Summary:
    """The summary of an estimate's figures (`summarize`'s, or `--largest`'s, which adds
    the model's size): latency split into CPU, FPGA and communication, then setup; the
    costliest calls; how full the cards' on-chip memory is."""
    latency = report["latency_s"] or 1.0
    figures = []
    for key, value in report.items():
        headline, unit = _HEADLINE.get(key, (None, None))
        cells = (_ms(value), "") if key == "latency_s" else ()
        figures.append(Figure(key, value, "latency" if cells else None, cells, unit, headline))
        if key == "breakdown_s":  # the setup row follows the parts of the latency
            figures += [row(f"  {part}", _ms(seconds), f"{100 * seconds / latency:.0f}%")
                        for part, seconds in value.items()]
            figures.append(row("setup (programs, weights)", _ms(report["setup_s"]), ""))
    calls = Section("costliest calls", (Column("call", right=False), Column("count"),
                                         Column("time")),
                    [(name, f"{v['count']:,}", _ms(v["time_s"]))
                     for name, v in report["per_call"].items()])
    used = max(b / c for b, c in zip(report["onchip_bytes"], report["onchip_capacity_bytes"],
                                     strict=True))
    onchip = (f"on-chip weights: up to {max(report['onchip_bytes']) / 2**20:,.1f} MiB per "
              f"card ({100 * used:.0f}% of what it holds)")
    return Summary(figures, f"{report['model']} ({report['params'] / 1e6:,.1f} M params) on "
                            f"{report['cards']} x {', '.join(report['devices'])}, "
                            f"{report['steps']} steps, weights {report['weights']}",
                   (Column("", right=False), Column("time"), Column("share")), [calls],
                   [onchip])


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f} ms"


def print_emulation(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"{report['model']} emulated on {report['cards']} card process(es)")
    table.add_column("check")
    table.add_column("result")
    rows = [("trace equals the plan's program", report["trace_matches_plan"])]
    if "tokens_match" in report:
        rows += [("tokens", " ".join(map(str, report["tokens"]))),
                 ("reference tokens", " ".join(map(str, report["reference_tokens"]))),
                 ("tokens match", report["tokens_match"]),
                 ("reference's closest call", f"{report['reference_min_margin']:.2e} "
                  "(log-probability)")]
    rows += [("max state difference", f"{report['max_state_diff']:.2e} "
              f"(tolerance {report['state_tolerance']})"),
             ("integer checksum", report["integer_checksum"]),
             ("INT8 bytes per card", ", ".join(f"{b:,}" for b in report["weight_bytes_per_card"]))]
    for name, value in rows:
        table.add_row(name, str(value))
    console.print(fitted(table, console))


def print_build(summary: dict[str, Any], console: Console) -> None:
    console.print(f"{summary['model']} on {summary['cards']} card(s) of {summary['hardware']}: "
                  f"a host program of {summary['program_lines']:,} lines "
                  f"({summary['calls']:,} API calls per inference); {len(summary['files'])} "
                  f"files in {summary['out']}")


def print_explore(summary: dict[str, Any], console: Console) -> None:
    """`--largest`: the model and its estimate; `--latency-target`: cards per type."""
    if summary["mode"] == "largest":
        console.print(f"largest persistent {summary['model']}: hidden {summary['hidden']}")
        host_summary(summary).print(console)
        return
    table = Table(title=f"{summary['model']}: fewest cards for "
                        f"{_ms(summary['latency_target_s'])} ({summary['steps']} steps)")
    for col in ("card", "cards", "latency"):
        table.add_column(col)
    for device, sized in summary["devices"].items():
        table.add_row(device, str(sized["cards"] or "-"),
                      _ms(sized["latency_s"]) if sized["cards"] else sized["reason"])
    console.print(fitted(table, console))


def print_proxies(report: dict[str, Any], console: Console) -> None:
    """`archi proxies`: each CPU call's fit (numpy's per-call cost apart from the per-element
    cost), the time the model prices at the longest length measured, where it was stored."""
    native_ns = report["native_call_s"] * 1e9
    table = Table(title="CPU proxies: measured t = numpy call + n x per element",
                  caption=f"model: {native_ns:g} ns (a native call) + n x per element; n: "
                          f"the longest length measured (fitted up to {FIT_MAX_ELEMENTS}; "
                          "--json: the sizes fitted)",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("call", "numpy call", "per element", "n", "measured", "model"):
        table.add_column(col, justify="left" if col == "call" else "right", no_wrap=True)
    for name, fit in report["fits"].items():
        n, t = report["measured_s"][name][-1]
        model = report["native_call_s"] + n * fit["per_element_s"]
        table.add_row(name, f"{fit['numpy_call_s'] * 1e6:.3f} us",
                      f"{fit['per_element_s'] * 1e9:.4f} ns", f"{n}", f"{t * 1e6:.2f} us",
                      f"{model * 1e6:.2f} us")
    console.print(fitted(table, console))
    console.print(f"stored in {report['file']} ({report['machine']})")
