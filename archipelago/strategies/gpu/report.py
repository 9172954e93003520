"""The GPU kind's report: the figures the tensor-parallel kind prints (latency, tokens/s,
prefill, decode per token, bandwidth and compute efficiency) as one summary, rendered as a
table, one JSON object and the report page's headline."""

from archipelago.estimate.generation_figures import (
    HEAD,
    generation_title,
    time_section,
    timing_figures,
)
from archipelago.estimate.summary import Figure, Summary, Unit, row, verdict
from archipelago.estimate.workload import Generation
from archipelago.strategies.gpu.estimate import GPUEstimate
from archipelago.strategies.gpu.plan import GPUPlan


def summarize(plan: GPUPlan, workload: Generation, est: GPUEstimate) -> Summary:
    """The kind's figures of one estimate."""
    link = plan.link
    seconds = est.decode_s_per_token or est.prefill_s
    memory = plan.ranks * plan.memory_Bps
    peak = plan.ranks * plan.tensor_ops_per_s
    fmt = plan.format.name
    streams = (f"{est.decode_bytes_per_token / seconds / 1e9:,.1f} of {memory / 1e9:,.0f} "
               f"GB/s ({100 * est.bandwidth_efficiency:.0f}%)")
    compute = (f"{est.decode_flops_per_token / seconds / 1e9:,.1f} of {peak / 1e9:,.0f} "
               f"GFLOPS ({100 * est.compute_efficiency:.1f}%)")
    return Summary([
        Figure("model", plan.spec.name), Figure("cluster", plan.cluster.name),
        Figure("strategy", plan.strategy),
        Figure("tokens", {"input": workload.input_tokens, "output": workload.output_tokens}),
        Figure("batch", est.batch),
        Figure("precision", fmt),
        *timing_figures(est, plan.ranks),
        Figure("bandwidth_efficiency", est.bandwidth_efficiency, unit=Unit("%", 100, 1),
               headline="memory bandwidth used"),
        Figure("compute_efficiency", est.compute_efficiency),
        Figure("decode_roofline", {
            "bytes_per_token": est.decode_bytes_per_token,
            "flops_per_token": est.decode_flops_per_token,
            "memory_Bps": memory,
            "peak_ops_per_s": peak,
        }),
        row("decode streams (of the GPUs' memory)", streams),
        row(f"decode compute (of the {plan.format.tensor.upper()} tensor peak)", compute),
        Figure("engine", plan.config.model_dump()),
        Figure("link", None if link is None else {"kind": link.kind, "bandwidth_Bps":
                                                  link.bandwidth_Bps, "hop_s": link.latency_s}),
        Figure("memory_bytes_per_device", est.memory_bytes, "memory per GPU",
               (f"{est.memory_bytes / 1e9:,.2f} of {plan.capacity_bytes / 1e9:,.2f} GB",)),
        *verdict(est.feasible, est.reasons),
    ], generation_title(f"{plan.spec.name} on {plan.cluster.name} · strategy {plan.strategy}",
                        workload, est.feasible), HEAD,
        [time_section(est.breakdown_s, est.latency_s, "where the time goes (each kernel "
                      "charged from the previous one's end)")], dim=not est.feasible)
