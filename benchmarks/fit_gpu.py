"""Fit the GPU rows' open constants to issue 33's three calibration points and print them
beside the estimate's error at each point (measured 2026-11-22 on one H100 SXM 80GB,
batch 1, FP16; "graph" a lean decoder with one CUDA graph per decode step, "eager"
transformers 5.x `generate`).

Five constants, each fitted only where no source pins it (their definitions state the
plausible ranges): the GPU's floor per kernel and its full-GPU streaming efficiency
(plan.KERNEL_FLOOR_S, plan.MEMORY_EFFICIENCY) to the two graph decode steps; PyTorch's host
cost per kernel (frameworks.PYTORCH_OP_S) to the two graph prompts, issued op by op;
transformers' per-token and per-call costs (frameworks.GENERATE_TOKEN_S, GENERATE_CALL_S)
to the eager decode step and prompt. Every other figure (datasheets, Little's law, tiles,
kernel counts) is held. The fits depend on each other a little (a graph step's launch is a
host op), so they are repeated until they settle.

    python -m benchmarks.fit_gpu
"""

from collections.abc import Callable
from typing import Any

from archipelago.api import plan_and_estimate

# (model, tokens, strategy, measured prefill s, measured decode s per token, tokens/s)
POINTS = (
    ("gpt2-345m", "64:64", "gpu-graph", 8.69e-3, 1.2865e-3, 713.2),
    ("llama2-7b", "128:128", "gpu-graph", 12.24e-3, 6.2047e-3, 160.0),
    ("llama2-7b", "128:128", "gpu-eager", 46.7e-3, 35.588e-3, 28.0),
)


def _estimate(point: tuple, engine: dict[str, Any]) -> Any:
    model, tokens, strategy = point[:3]
    return plan_and_estimate(model, "1xh100", strategy, {"tokens": tokens}, engine).estimate


def _solve(f: Callable[[float], float], low: float, high: float) -> float:
    """The root of increasing `f` in [low, high] by bisection."""
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if f(mid) < 0 else (low, mid)
    return (low + high) / 2


def fit() -> dict[str, float]:
    gpt2, llama, eager = POINTS
    c = {"kernel_floor_s": 3e-6, "memory_efficiency": 0.85, "host_op_s": 25e-6}
    for _ in range(4):
        def prompts(h: float) -> float:  # the mean relative error of the two graph prompts
            errs = [_estimate(p, {**c, "host_op_s": h}).prefill_s / p[3] - 1 for p in POINTS[:2]]
            return sum(errs) / 2
        c["host_op_s"] = _solve(prompts, 1e-6, 100e-6)

        def floor_for(eff: float) -> float:
            return _solve(lambda f: _estimate(gpt2, {**c, "memory_efficiency": eff,
                                                     "kernel_floor_s": f}).decode_s_per_token
                          - gpt2[4], 0.0, 1e-5)

        def llama_err(eff: float) -> float:  # more efficiency, shorter steps: negate
            floor = floor_for(eff)
            return llama[4] - _estimate(llama, {**c, "memory_efficiency": eff,
                                                "kernel_floor_s": floor}).decode_s_per_token
        c["memory_efficiency"] = _solve(llama_err, 0.31, 1.0)
        c["kernel_floor_s"] = floor_for(c["memory_efficiency"])
    shared = {k: c[k] for k in ("kernel_floor_s", "memory_efficiency", "host_op_s")}
    token = _solve(lambda t: _estimate(eager, {**shared, "token_s": t, "call_s": 0.0})
                   .decode_s_per_token - eager[4], 0.0, 0.05)
    call = _solve(lambda s: _estimate(eager, {**shared, "token_s": token, "call_s": s})
                  .prefill_s - eager[3], 0.0, 0.2)
    return {**shared, "token_s": token, "call_s": call}


def main() -> None:
    constants = fit()
    for name, value in constants.items():
        print(f"{name:<18} {value:.4g}")
    print(f"{'point':<34} {'prefill':>14} {'decode/token':>16} {'tokens/s':>14}")
    for p in POINTS:
        engine = constants if p[2] == "gpu-eager" else {
            k: v for k, v in constants.items() if k not in ("token_s", "call_s")}
        est = _estimate(p, engine)
        cells = [(est.prefill_s, p[3]), (est.decode_s_per_token, p[4]),
                 (est.tokens_per_s, p[5])]
        print(f"{' '.join(p[:3]):<34} " + " ".join(
            f"{got / want:>14.3f}x" for got, want in cells))


if __name__ == "__main__":
    main()
