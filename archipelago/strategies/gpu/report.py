"""The GPU kind's report: the figures the tensor-parallel kind prints (latency, tokens/s,
prefill, decode per token, bandwidth and compute efficiency) as a table or one JSON object."""

from typing import Any

from rich.console import Console

from archipelago.estimate.tables import (
    add_phase_rows,
    generation_head,
    print_reasons,
    time_table,
    timing_dict,
)
from archipelago.estimate.workload import Generation
from archipelago.strategies.gpu.estimate import GPUEstimate
from archipelago.strategies.gpu.plan import GPUPlan


def estimate_to_dict(plan: GPUPlan, workload: Generation, est: GPUEstimate) -> dict[str, Any]:
    link = plan.link
    return {
        "model": plan.spec.name,
        "cluster": plan.cluster.name,
        "strategy": plan.strategy,
        "tokens": {"input": workload.input_tokens, "output": workload.output_tokens},
        "batch": est.batch,
        **timing_dict(est, plan.ranks),
        "bandwidth_efficiency": est.bandwidth_efficiency,
        "compute_efficiency": est.compute_efficiency,
        "decode_roofline": {
            "bytes_per_token": est.decode_bytes_per_token,
            "flops_per_token": est.decode_flops_per_token,
            "memory_Bps": plan.ranks * plan.memory_Bps,
            "peak_ops_per_s": plan.ranks * (plan.device.peak_fp16_flops or 0.0),
        },
        "engine": plan.config.model_dump(),
        "link": None if link is None else {"kind": link.kind, "bandwidth_Bps":
                                           link.bandwidth_Bps, "hop_s": link.latency_s},
        "memory_bytes_per_device": est.memory_bytes,
        "feasible": est.feasible,
        "reasons": est.reasons,
    }


def print_estimate(plan: GPUPlan, workload: Generation, est: GPUEstimate,
                   console: Console) -> None:
    print_reasons(est.reasons, console)
    head = generation_head(f"{plan.spec.name} on {plan.cluster.name} · strategy "
                           f"{plan.strategy}", workload, est)
    add_phase_rows(head, est)
    seconds = est.decode_s_per_token or est.prefill_s
    memory = plan.ranks * plan.memory_Bps
    head.add_row("decode streams (of the GPUs' memory)",
                 f"{est.decode_bytes_per_token / seconds / 1e9:,.1f} of {memory / 1e9:,.0f} "
                 f"GB/s ({100 * est.bandwidth_efficiency:.0f}%)")
    peak = plan.ranks * (plan.device.peak_fp16_flops or 0.0)
    head.add_row("decode compute (of the FP16 tensor peak)",
                 f"{est.decode_flops_per_token / seconds / 1e9:,.1f} of {peak / 1e9:,.0f} "
                 f"GFLOPS ({100 * est.compute_efficiency:.1f}%)")
    head.add_row("memory per GPU", f"{est.memory_bytes / 1e9:,.2f} of "
                                   f"{plan.capacity_bytes / 1e9:,.2f} GB")
    head.add_row("feasible", "yes" if est.feasible else "[red]no[/red]")
    console.print(head)
    console.print(time_table(est.breakdown_s, est.latency_s, "where the time goes (each "
                             "kernel charged from the previous one's end)"))
