"""The host-program kind's report: estimates, emulations and sizings as one JSON object or
rich tables for people."""

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from archipelago.strategies.host_offload.estimate import HostEstimate
from archipelago.strategies.host_offload.plan import HostPlan
from archipelago.strategies.host_offload.proxies import FIT_MAX_ELEMENTS

TOP_CALLS = 8  # the costliest calls a report names


def estimate_to_dict(plan: HostPlan, workload: None, est: HostEstimate) -> dict[str, Any]:
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


def print_estimate(plan: HostPlan, workload: None, est: HostEstimate, console: Console
                   ) -> None:
    print_host_estimate(estimate_to_dict(plan, workload, est), console)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f} ms"


def print_host_estimate(report: dict[str, Any], console: Console) -> None:
    title = (f"{report['model']} ({report['params'] / 1e6:,.1f} M params) on "
             f"{report['cards']} x {', '.join(report['devices'])}, {report['steps']} steps, "
             f"weights {report['weights']}")
    table = Table(title=title)
    table.add_column("")
    table.add_column("time", justify="right")
    table.add_column("share", justify="right")
    latency = report["latency_s"] or 1.0
    table.add_row("latency", _ms(report["latency_s"]), "")
    for part, seconds in report["breakdown_s"].items():
        table.add_row(f"  {part}", _ms(seconds), f"{100 * seconds / latency:.0f}%")
    table.add_row("setup (programs, weights)", _ms(report["setup_s"]), "")
    console.print(table)
    calls = Table(title="costliest calls")
    for col in ("call", "count", "time"):
        calls.add_column(col, justify="left" if col == "call" else "right")
    for name, v in report["per_call"].items():
        calls.add_row(name, f"{v['count']:,}", _ms(v["time_s"]))
    console.print(calls)
    used = max(b / c for b, c in zip(report["onchip_bytes"], report["onchip_capacity_bytes"],
                                     strict=True))
    console.print(f"on-chip weights: up to {max(report['onchip_bytes']) / 2**20:,.1f} MiB per "
                  f"card ({100 * used:.0f}% of what it holds)")
    for reason in report["reasons"]:
        console.print(f"[red]infeasible:[/red] {reason}")


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
    console.print(table)


def print_explore(summary: dict[str, Any], console: Console) -> None:
    """`--largest`: the model and its estimate; `--latency-target`: cards per type."""
    if summary["mode"] == "largest":
        console.print(f"largest persistent {summary['model']}: hidden {summary['hidden']}")
        print_host_estimate(summary, console)
        return
    table = Table(title=f"{summary['model']}: fewest cards for "
                        f"{_ms(summary['latency_target_s'])} ({summary['steps']} steps)")
    for col in ("card", "cards", "latency"):
        table.add_column(col)
    for device, row in summary["devices"].items():
        table.add_row(device, str(row["cards"] or "-"),
                      _ms(row["latency_s"]) if row["cards"] else row["reason"])
    console.print(table)


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
    console.print(table)
    console.print(f"stored in {report['file']} ({report['machine']})")
