"""The unsplit transformers model in a quantized format: the reference a quantized split is
checked against carries the same quantized weights and, for W8A8, the same per-token
activation quantization at the input of the same matrices.

Each quantized module's whole parameter (GPT-2's fused c_attn holds q, k and v side by
side) is quantized by quant_formats.quantize_matrix, as one rank with every column would:
scales are per output column and groups run down one column, so the fused matrix quantizes
as its parts do. W4A16 writes the dequantized weights (exact in FP32) back into the
parameter; W8A8 replaces the module's output with the INT8 x INT8 -> INT32 product of its
input, plus its bias.
"""

from functools import partial

import torch
from transformers import PreTrainedModel

from archipelago.models.hf_state_dict import hf_source
from archipelago.models.spec import ModelSpec
from archipelago.models.weights import all_weights
from archipelago.strategies.tensor_parallel.emulate.quant_formats import (
    W8A8,
    QuantizedMatrix,
    is_quantized,
    quantize_matrix,
)


def _w8a8_output(matrix: QuantizedMatrix, module: torch.nn.Module,
                 args: tuple[torch.Tensor, ...], out: torch.Tensor) -> torch.Tensor:
    """A forward hook: the module's output recomputed in W8A8 from its input."""
    x = args[0]
    y, _ = matrix(x.reshape(-1, x.shape[-1]), None)
    y = y.view(*x.shape[:-1], y.shape[-1])
    return y if module.bias is None else y + module.bias


def quantize_reference(model: PreTrainedModel, spec: ModelSpec, precision: str) -> None:
    """Put `model` (FP32, unsplit) in `precision`, in place."""
    sources = {}
    for tensor in all_weights(spec):
        if is_quantized(tensor.role, len(tensor.shape)):
            source = hf_source(spec, tensor)
            sources[source.key] = source.transposed
    for key, transposed in sources.items():
        param = model.get_parameter(key)
        whole = param.T if transposed else param  # (in, out)
        matrix = quantize_matrix(precision, whole.detach(), False, 0, lambda t: t)
        if precision == W8A8:
            model.get_submodule(key.rsplit(".", 1)[0]).register_forward_hook(
                partial(_w8a8_output, matrix))
        else:
            with torch.no_grad():
                whole.copy_(matrix.dequantized())
