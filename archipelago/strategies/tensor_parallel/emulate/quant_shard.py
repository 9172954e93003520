"""Where a split meets a quantized format (quant_formats.py): what a plan must satisfy before
any rank starts, and a rank's loaded slices turned into the format.

Sharding changes quantization only across input rows. A column split keeps each output
channel's whole input column (its W8A8 scale, its W4A16 groups) and each token's whole
input row (its W8A8 activation scale) on the rank, so the slice quantizes exactly as the
same columns of the unsplit matrix. A split of the input rows (a scheme that all-reduces
partial sums, Megatron-LM's) divides both: its W8A8 ranks agree on each column's and each
token's maximum in an all-reduce of the maximum (ABSMAX_REDUCE), and its W4A16 ranks must
each hold whole groups, a split off the group boundaries being refused.
"""

from collections.abc import Callable

import torch

from archipelago.emulate.job import QUANTIZED_PRECISIONS
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import all_weights, layer_weights
from archipelago.strategies.tensor_parallel.emulate.checkpoint import LoadedShard
from archipelago.strategies.tensor_parallel.emulate.quant_formats import (
    GROUP_SIZE,
    INT32_FAN_IN,
    W4A16,
    W8A8,
    QuantizedMatrix,
    is_quantized,
    quantize_matrix,
)
from archipelago.strategies.tensor_parallel.plan import DevicePlan, Plan

ABSMAX_REDUCE = "absmax_all_reduce"  # the collective kind of a row split's W8A8 maxima


def refusal(plan: Plan, precision: str) -> str | None:
    """Why `plan` cannot run in `precision`, in one line; None if it can (or the precision
    is not a quantized one)."""
    if precision not in QUANTIZED_PRECISIONS:
        return None
    spec = plan.spec
    if plan.numerics != "fp16":
        return (f"--precision {precision}: {plan.strategy} runs its own {plan.numerics} "
                "(SmoothQuant-O3 static scales, seeds/002 §IV-B); it takes fp32 or fp16")
    if spec.moe or spec.mla:
        what = "experts" if spec.moe else "latent attention"
        return f"--precision {precision}: {spec.name}'s {what} are not emulated quantized"
    for tensor in layer_weights(spec, 0):  # dense blocks: every layer holds the same shapes
        if not is_quantized(tensor.role, len(tensor.shape)):
            continue
        fan_in, name = tensor.shape[0], f"{spec.name} {tensor.role}"
        if precision == W8A8 and fan_in > INT32_FAN_IN:
            return (f"--precision w8a8: {name} sums {fan_in} products per output, more than "
                    f"the {INT32_FAN_IN} an INT32 accumulator holds exactly")
        if precision == W4A16:
            refused = _straddles(plan, tensor.role, fan_in, name)
            if refused:
                return refused
    return None


def _straddles(plan: Plan, role: str, fan_in: int, name: str) -> str | None:
    """A W4A16 matrix whose groups do not fit its input rows or a rank's share of them."""
    if fan_in % GROUP_SIZE:
        return (f"--precision w4a16: {name} has {fan_in} input rows, not a multiple of the "
                f"group size {GROUP_SIZE}")
    tensor = next(t for t in layer_weights(plan.spec, 0) if t.role == role)
    for device in plan.devices:
        shard = device.shard_for(tensor)
        if shard.axis == 0 and (shard.start % GROUP_SIZE or shard.stop % GROUP_SIZE):
            return (f"--precision w4a16 on {plan.ranks} ranks: rank {device.rank} holds input "
                    f"rows {shard.start}..{shard.stop} of {name}, {shard.stop - shard.start} "
                    f"wide, not whole groups of {GROUP_SIZE}")
    return None


def row_maxima(spec: ModelSpec, device: DevicePlan, layers: range, precision: str) -> int:
    """The ABSMAX_REDUCE collectives a rank runs per forward pass over `layers`: one per
    W8A8 matrix it holds split by input rows (the progress bar counts them)."""
    if precision != W8A8:
        return 0
    return sum(1 for layer in layers for t in layer_weights(spec, layer)
               if is_quantized(t.role, len(t.shape)) and device.shard_for(t).axis == 0)


def quantize_shard(precision: str, spec: ModelSpec, device: DevicePlan, loaded: LoadedShard,
                   reduce_max: Callable[[torch.Tensor, str], torch.Tensor]
                   ) -> dict[str, QuantizedMatrix]:
    """Take the block matrices out of `loaded` (FP32 slices) in `precision`, counting their
    quantized bytes instead; `reduce_max(t, what)` all-reduces the maximum over the stage's
    ranks (called in the same tensor order on every rank)."""
    quantized: dict[str, QuantizedMatrix] = {}
    for tensor in all_weights(spec):
        if tensor.name not in loaded.weights or not is_quantized(tensor.role,
                                                                  len(tensor.shape)):
            continue
        shard = device.shard_for(tensor)
        w = loaded.weights.pop(tensor.name)
        matrix = quantize_matrix(
            precision, w, shard.axis == 0, shard.start if shard.axis == 1 else 0,
            lambda t, name=tensor.name: reduce_max(t, f"the column maxima of '{name}'"))
        loaded.bytes_by_memory[shard.memory] += matrix.nbytes - w.nbytes
        quantized[tensor.name] = matrix
    return quantized
