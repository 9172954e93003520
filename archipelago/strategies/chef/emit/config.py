"""The hls4ml configuration of one project, from the plan: precision, each layer's reuse
factor from the IP instance it runs on, the board's part number.

Reuse factor. An hls4ml Dense or (io_stream) Conv2D layer performs n_in x n_out
multiplications per invocation (n_in = K_r K_c C_in for a conv: one output pixel; n_out =
its outputs or filters) on n_in x n_out / ReuseFactor multipliers, each used ReuseFactor
times (hls4ml docs, "Reuse factor"). The plan runs the layer on an IP of `macs_per_cycle`
multipliers (tn x tm for the Conv and FC IPs of seeds/004 refs [23], [24]), so the layer
gets the smallest reuse factor hls4ml accepts for its shape (a divisor of n_in x n_out
passing the backend's own check) that uses at most that many multipliers:
    ReuseFactor >= ceil(n_in n_out / macs_per_cycle).
hls4ml builds one engine per layer where the plan time-shares one IP between its layers,
so a project holds each layer's multipliers separately (the manifest lists both).

Precision. Every weight, bias and result is `precision` (ap_fixed<16,6> unless `archi
build --hls-precision` or the engine config's `hls_precision` says otherwise);
accumulators are twice as wide in both integer and fraction bits, so the sum of products
of two values with F fraction bits is exact.
"""

from math import ceil, isqrt
from typing import Any

from archipelago.strategies.chef.hls_precision import fixed_bits

BACKEND = "Vitis"
IO_TYPE = "io_stream"  # FIFOs between layers; a project's inputs and outputs are streams


def accumulator(precision: str) -> str:
    width, integer = fixed_bits(precision)
    return f"ap_fixed<{2 * width},{2 * integer}>"


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def reuse_factor(backend: Any, n_in: int, n_out: int, multipliers: int) -> int:
    """The smallest reuse factor the backend accepts for an n_in x n_out layer that needs
    no more than `multipliers` multipliers (the largest valid one when none does)."""
    target = ceil(n_in * n_out / max(1, multipliers))
    valid = [rf for rf in _divisors(n_in * n_out)
             if backend._validate_reuse_factor(n_in, n_out, rf)]
    return next((rf for rf in valid if rf >= target), valid[-1])


def layer_shape(module: Any) -> tuple[int, int] | None:
    """(n_in, n_out) of a torch Linear or Conv2d as hls4ml counts them; None otherwise."""
    from torch import nn

    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    if isinstance(module, nn.Conv2d):
        rows, cols = module.kernel_size
        return module.in_channels * rows * cols, module.out_channels
    return None


def hls_config(net: Any, shapes: list[tuple[int, ...]], precision: str,
               multipliers: dict[str, int]) -> tuple[dict[str, Any], dict[str, int]]:
    """hls4ml's per-layer configuration of `net` (a stage_module) and the reuse factor each of
    its Conv2d/Linear layers got; `multipliers` maps a module name to its IP's."""
    import hls4ml

    config = hls4ml.utils.config_from_pytorch_model(
        net, [tuple(s) for s in shapes], granularity="name", backend=BACKEND,
        default_precision=precision, channels_last_conversion="internal",
        transpose_outputs=False)
    backend = hls4ml.backends.get_backend(BACKEND)
    modules = dict(net.named_modules())
    reuse: dict[str, int] = {}
    wide = accumulator(precision)
    for name, entry in config["LayerName"].items():
        for key in list(entry.get("Precision", {})):
            if key in ("result", "weight", "bias"):
                entry["Precision"][key] = precision
            elif key == "accum":
                entry["Precision"][key] = wide
        shape = layer_shape(modules.get(name))
        if shape is not None and name in multipliers:
            reuse[name] = entry["ReuseFactor"] = reuse_factor(backend, *shape,
                                                             multipliers[name])
            entry["Strategy"] = "Latency" if reuse[name] == 1 else "Resource"
    return config, reuse
