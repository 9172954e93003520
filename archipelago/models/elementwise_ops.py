"""The element-wise operators of a layer DAG, by their ONNX names (both importers write
these, so an Elementwise layer's `op` means the same whichever framework it came from and
the emulator runs it by that name), and the work each adds per output element: what the
cost model charges an element-wise layer, or a layer the operator fused into."""

# Operations per output element of each element-wise operator, counted from its formula
# (each arithmetic operation, comparison and elementary function exp/erf/tanh/sqrt one):
# the work an Elementwise layer, or a layer an operator fused into, adds per element.
OPS_PER_ELEMENT = {
    "Relu": 1, "Clip": 2, "LeakyRelu": 2, "PRelu": 2, "Elu": 3, "Selu": 4, "Celu": 3,
    "Sigmoid": 4,            # 1 / (1 + exp(-x))
    "HardSigmoid": 4,        # max(0, min(1, a x + b))
    "HardSwish": 5,          # x * HardSigmoid(x)
    "SiLU": 5,               # x * Sigmoid(x)
    "Gelu": 5,               # x * 0.5 * (1 + erf(x / sqrt 2))
    "Tanh": 1, "Softplus": 3, "Softsign": 3, "Mish": 5, "Erf": 1, "Exp": 1, "Log": 1,
    "Sqrt": 1, "Neg": 1, "Abs": 1, "Reciprocal": 1, "Pow": 1, "Floor": 1, "Ceil": 1,
    "IsNaN": 2,              # x's NaNs replaced: a test and a select (onnx_layers' guard)
    "Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "Max": 1, "Min": 1, "Sum": 1, "Mean": 2,
    "BatchNormalization": 2,  # scale and shift, the statistics folded into them
    "InstanceNormalization": 6, "LayerNormalization": 6, "GroupNormalization": 6,
    # mean, subtract, square, mean, normalise, scale and shift
    "Softmax": 5, "LogSoftmax": 5,  # max, subtract, exp, sum, divide (or log)
    "Concat": 1, "Split": 1, "Gather": 1, "Slice": 1, "Expand": 1, "Tile": 1,
    "GatherElements": 1, "GatherND": 1, "Equal": 1, "Not": 1, "And": 1, "Or": 1,
    "Where": 1,              # a select between two values by a condition
    "Roll": 1,               # every element copied once per axis rolled
    "CumSum": 1,             # a running sum: one add
    "ReduceMean": 1, "ReduceSum": 1, "ReduceMax": 1, "ReduceMin": 1, "ReduceL2": 2,
    "ReduceSumSquare": 2,
}

# torch import's operator names (torch_calls.py) and the ONNX operator each one is.
TORCH_TO_ONNX = {
    "relu": "Relu", "clip": "Clip", "sigmoid": "Sigmoid", "tanh": "Tanh", "silu": "SiLU",
    "hardsigmoid": "HardSigmoid", "hardswish": "HardSwish", "gelu": "Gelu",
    "softmax": "Softmax", "layer_norm": "LayerNormalization",
    "batch_norm": "BatchNormalization", "lrn": "LRN",
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div",
    "ne": "Equal", "eq": "Equal", "cumsum": "CumSum", "and": "And",
}


def lrn_ops(size: int) -> int:
    """LRN over `size` channels: a square and an add per neighbour, then scale, add the
    bias, raise to beta and divide."""
    return 2 * size + 4
