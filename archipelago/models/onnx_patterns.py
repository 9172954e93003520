"""Operators exporters write as several element-wise nodes, recognised as one: GELU as
x * 0.5 * (1 + erf(x / sqrt 2)) (or its tanh approximation), SiLU as x * sigmoid(x),
HardSwish as x * hardsigmoid(x), LayerNormalization as ReduceMean, Sub, Pow, ReduceMean,
Add, Sqrt, Div (the legacy exporter before opset 17).

A pattern is a region of element-wise nodes computed from one value x (and constants),
which reads x at least twice (a bias Add or scale before it is not part of it), that x
and every value inside feed only, closing where a single value leaves it, read by
a single node; a region that closes on a value several nodes read (LayerNorm's centred x,
read by Pow and Div) grows on to the next close. Its operator multiset names it; a region
no name fits is left to the node-by-node rule.
"""

from collections import Counter

from archipelago.models.onnx_graph import Builder

ELEMENTWISE = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh", "Softplus",
               "Erf", "Exp", "Log", "Sqrt", "Neg", "Abs", "Reciprocal", "Add", "Sub", "Mul",
               "Div", "Pow", "ReduceMean"}
_MAX_NODES = 16  # the largest pattern (tanh GELU) has 8 nodes


def pattern_name(ops: Counter) -> str | None:
    """The operator a region of these operators computes."""
    if ops["Erf"] or (ops["Tanh"] and ops["Pow"]):
        return "Gelu"
    if ops["ReduceMean"] == 2 and ops["Sub"] and ops["Sqrt"] and ops["Div"]:
        return "LayerNormalization"
    names = {frozenset({"Sigmoid", "Mul"}): "SiLU", frozenset({"HardSigmoid", "Mul"}):
             "HardSwish", frozenset({"Softplus", "Tanh", "Mul"}): "Mish"}
    return names.get(frozenset(ops)) if sum(ops.values()) == len(ops) else None


def find_pattern(b: Builder, index: int, x: str) -> tuple[str, tuple[int, ...]] | None:
    """(name, node indices, the exit node last) of the pattern node `index` starts on
    value `x`, or None."""
    inside: list[int] = []
    values = {x}
    best = None  # the last region that closed with a name
    for i in range(index, min(index + 4 * _MAX_NODES, len(b.nodes))):
        node = b.nodes[i]
        data = [n for n in node.input if n in b.src or n in values]
        if not set(data) & values:
            continue
        if node.op_type not in ELEMENTWISE or not set(data) <= values or \
                len(inside) >= _MAX_NODES:
            return best
        inside.append(i)
        values.update(o for o in node.output if o)
        exit_value = _closed(b, inside, values, x)
        if exit_value is None:
            continue
        name = pattern_name(Counter(b.nodes[j].op_type for j in inside))
        if name and sum(x in b.nodes[j].input for j in inside) > 1:
            best = (name, tuple(inside))
        if b.readers.get(exit_value, 0) == 1:
            return best
    return best


def _closed(b: Builder, inside: list[int], values: set[str], x: str) -> str | None:
    """The one value of the region read outside it, when x and all others are read only
    inside it."""
    members = set(inside)
    leaving = [v for v in values
               if v in b.outputs or any(r not in members for r in b.reader_nodes.get(v, []))]
    if len(leaving) != 1 or leaving[0] == x:
        return None
    return leaving[0]
