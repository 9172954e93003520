"""What a seeded DAG's element-wise layer computes (`models/dag.py` Elementwise), by its
ONNX operator name (`op`, case-insensitive), with ONNX's default attributes: the DAG keeps
neither axes nor indices, so a layer's inputs are shaped into its output by the rules its
shape check admits (dag.py `_operand_problem`):

- arithmetic of several inputs (Mul, Add, Sub, Div, Sum, Mean, Max, Min, Pow): each input
  broadcast over the shape, on its leading axes (squeeze-and-excitation's per-channel
  scale), else its trailing ones, else repeated;
- otherwise the inputs joined: filling the shape exactly; with the layer's stored elements
  first when they fall short (a class token before the patches); repeated when a divisor
  of it (Expand, Tile); reduced over equal consecutive groups (Reduce*) or, for a
  selection (Gather, Slice, Split, ...), their first elements when they exceed it.

Then the operator: an activation; BatchNormalization, InstanceNormalization and
LayerNormalization with `params` as scale then shift; Softmax over the last axis; LRN over
5 channels (AlexNet's, ZFNet's and GoogLeNet's size); Clip as ReLU6 (what MobileNets
export); Log and Sqrt of |x| (seeded inputs are signed; a NaN is no test); And and Or of
one computed value (an attention mask with a constant) as its positive elements, 1 or 0,
and Where of it as the additive mask the exporters make, 0 where it holds and float32's
lowest elsewhere (finite, so a row masked whole stays a number); a Roll, whose shifts the
DAG does not keep, moves the elements as they are (a data movement like Gather).
"""

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from archipelago.emulate.errors import EmulationError
from archipelago.models.dag import ModelDAG

Unary = Callable[[torch.Tensor], torch.Tensor]
ACTIVATIONS: dict[str, Unary] = {
    "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "erf": torch.erf,
    "hardsigmoid": lambda x: torch.clamp(0.2 * x + 0.5, 0, 1), "hardswish": F.hardswish,
    "gelu": F.gelu, "silu": F.silu, "swish": F.silu, "mish": F.mish, "elu": F.elu,
    "selu": F.selu, "celu": F.celu, "softplus": F.softplus, "softsign": F.softsign,
    "clip": lambda x: torch.clamp(x, 0, 6), "leakyrelu": lambda x: F.leaky_relu(x, 0.01),
    "prelu": lambda x: F.leaky_relu(x, 0.25), "exp": torch.exp, "neg": torch.neg,
    "abs": torch.abs, "floor": torch.floor, "ceil": torch.ceil,
    "log": lambda x: torch.log(x.abs() + 1e-6), "sqrt": lambda x: torch.sqrt(x.abs()),
    "softmax": lambda x: torch.softmax(x, -1), "logsoftmax": lambda x: torch.log_softmax(x, -1),
    "lrn": lambda x: F.local_response_norm(x[None], 5)[0],
    "and": lambda x: (x > 0).to(x.dtype), "or": lambda x: (x > 0).to(x.dtype),
    "where": lambda x: torch.where(x > 0, 0.0, torch.finfo(x.dtype).min).to(x.dtype),
}
ARITHMETIC: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mul": torch.mul, "add": torch.add, "sub": torch.sub, "div": torch.div, "sum": torch.add,
    "mean": torch.add, "max": torch.maximum, "min": torch.minimum, "pow": torch.pow,
}
REDUCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "reducemean": lambda g: g.mean(1), "reducesum": lambda g: g.sum(1),
    "reducemax": lambda g: g.amax(1), "reducemin": lambda g: g.amin(1),
    "reducel2": lambda g: g.norm(dim=1), "reducesumsquare": lambda g: (g * g).sum(1),
}
NORMALIZATIONS = ("batchnormalization", "instancenormalization", "layernormalization")
SHAPING = ("identity", "concat", "gather", "slice", "split", "expand", "tile", "roll",
           "gathernd")
OPS = (*ACTIVATIONS, *ARITHMETIC, *REDUCTIONS, *NORMALIZATIONS, *SHAPING)


def check_ops(dag: ModelDAG) -> None:
    """Every element-wise layer names an operator computed here: else one line, before
    any process starts."""
    for layer in dag.layers:
        if layer.type == "elementwise" and layer.op.lower() not in OPS:
            raise EmulationError(f"layer '{layer.name}': element-wise op '{layer.op}' is not "
                                 f"emulated (valid: {', '.join(OPS)})")


def elementwise(layer, inputs: list[torch.Tensor], params: torch.Tensor | None) -> torch.Tensor:
    op, shape = layer.op.lower(), tuple(layer.shape)
    if op in ARITHMETIC and len(inputs) > 1:
        out = _broadcast(inputs[0], shape)
        for other in inputs[1:]:
            out = ARITHMETIC[op](out, _broadcast(other, shape))
        out = out / len(inputs) if op == "mean" else out
        return out.expand(shape).clone()
    x = _shaped(op, torch.cat([t.flatten() for t in inputs]), shape,
                params if op not in NORMALIZATIONS else None)
    if op in ACTIVATIONS:
        return ACTIVATIONS[op](x)
    if op in NORMALIZATIONS:
        return _normalized(op, x, params)
    if op in ARITHMETIC and params is not None:  # the other operand a stored constant
        return ARITHMETIC[op](x, _broadcast(params, shape))
    return x


def _broadcast(x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    for k in range(len(shape), -1, -1):
        if math.prod(shape[:k]) == x.numel():
            return x.reshape(*shape[:k], *(1,) * (len(shape) - k))
    for k in range(len(shape)):
        if math.prod(shape[k:]) == x.numel():
            return x.reshape(shape[k:])
    return _repeated(x, shape)


def _repeated(x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    total = math.prod(shape)
    if total % x.numel():
        raise EmulationError(f"{x.numel()} elements neither fill nor divide shape "
                             f"{list(shape)}")
    return x.flatten().repeat(total // x.numel()).reshape(shape)


def _shaped(op: str, joined: torch.Tensor, shape: tuple[int, ...],
            stored: torch.Tensor | None) -> torch.Tensor:
    total, n = math.prod(shape), joined.numel()
    if n == total:
        return joined.reshape(shape)
    if n < total and stored is not None and stored.numel() >= total - n:
        return torch.cat([stored[:total - n], joined]).reshape(shape)
    if n < total:
        return _repeated(joined, shape)
    if op in REDUCTIONS and n % total == 0:
        return REDUCTIONS[op](joined.reshape(total, n // total)).reshape(shape)
    return joined[:total].reshape(shape)


def _normalized(op: str, x: torch.Tensor, params: torch.Tensor | None) -> torch.Tensor:
    axis = -1 if op == "layernormalization" else 0
    if op == "layernormalization":
        x = F.layer_norm(x, (x.shape[-1],))
    elif op == "instancenormalization":
        x = F.instance_norm(x.reshape(1, x.shape[0], -1)).reshape(x.shape)
    n = x.shape[axis]
    if params is None or params.numel() < 2 * n:
        return x
    view = [1] * x.dim()
    view[axis] = n
    return x * params[:n].reshape(view) + params[n:2 * n].reshape(view)
