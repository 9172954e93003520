"""The calls of a traced torch graph, each as one `Call`: the operator it performs under
one name whichever way the user wrote it. torch.fx records `F.relu(x)`, `torch.relu(x)`,
`x.relu()` and a `nn.ReLU` module as four different nodes, torch.export records all four
as `aten.relu`; both become the operator "relu", so torch_layers.py has one handler per
operator. Which torch objects mean which operator is written here only; torch is passed
in (it is imported by torch_import.py once a module is given).
"""

import operator
from dataclasses import dataclass, field
from typing import Any

# Value-preserving operators: the DAG layer reading their output flattens what it reads.
PASS = "pass"


@dataclass(frozen=True)
class Call:
    """One operator application: `op`, the layer name it would take (`base`: the module
    path of a torch.nn module call, else the operator), the graph nodes it reads in
    argument order (`inputs`; the importer tells data from parameters), the node holding
    its result (`out`), its settings (`attrs`) and how an error names it (`what`)."""

    op: str
    base: str
    inputs: tuple
    out: Any
    what: str
    attrs: dict[str, Any] = field(default_factory=dict)


def _nodes(value: Any, torch) -> list:
    """The graph nodes inside an argument (a node, or a list/tuple of them)."""
    if isinstance(value, torch.fx.Node):
        return [value]
    if isinstance(value, list | tuple):
        return [n for item in value for n in _nodes(item, torch)]
    return []


def _arg(node, index: int, name: str, default: Any = None) -> Any:
    """Argument `name` of a call, positional or keyword, else `default`."""
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def _module_ops(nn) -> dict[type, str]:
    return {nn.Conv2d: "conv", nn.Linear: "linear", nn.LSTM: "lstm", nn.GRU: "gru",
            nn.MaxPool2d: "max_pool", nn.AvgPool2d: "avg_pool",
            nn.AdaptiveAvgPool2d: "adaptive_avg_pool", nn.BatchNorm2d: "batch_norm",
            nn.BatchNorm1d: "batch_norm", nn.LayerNorm: "layer_norm", nn.ReLU: "relu",
            nn.ReLU6: "clip", nn.Hardtanh: "clip", nn.SiLU: "silu",
            nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.Hardswish: "hardswish",
            nn.Hardsigmoid: "hardsigmoid", nn.GELU: "gelu", nn.Softmax: "softmax",
            nn.LocalResponseNorm: "lrn", nn.MultiheadAttention: "mha", nn.Identity: PASS,
            nn.Flatten: PASS, nn.Dropout: PASS}


def _module_attrs(op: str, module) -> dict[str, Any]:
    """A torch.nn module's settings, in the names the ATen operators give them."""
    if op == "conv":
        return {"weight": tuple(module.weight.shape), "stride": module.stride,
                "padding": module.padding, "dilation": module.dilation,
                "groups": module.groups, "padding_mode": module.padding_mode}
    if op in {"max_pool", "avg_pool"}:
        return {"kernel": module.kernel_size, "stride": module.stride or module.kernel_size,
                "padding": module.padding, "dilation": getattr(module, "dilation", 1)}
    if op == "linear":
        return {"weight": tuple(module.weight.shape)}
    if op in {"lstm", "gru"}:
        return {"input_size": module.input_size, "hidden": module.hidden_size,
                "layers": module.num_layers, "bidirectional": module.bidirectional,
                "batch_first": module.batch_first, "bias": module.bias,
                "proj_size": getattr(module, "proj_size", 0)}
    if op == "batch_norm":
        return {"params": 2 * module.num_features if module.affine else 0}
    if op == "layer_norm":
        return {"params": 2 * module.weight.numel() if module.elementwise_affine else 0}
    if op == "lrn":
        return {"size": module.size, "outputs": 1}
    if op == "mha":
        return {"heads": module.num_heads, "embed": module.embed_dim,
                "packed": module._qkv_same_embed_dim, "tuple": True, "outputs": 1}
    return {}


def fx_call(node, modules: dict[str, Any], torch) -> Call | None:
    """The Call a torch.fx node makes; None for an operator this importer does not know."""
    if node.op == "call_module":
        module = modules[node.target]
        op = next((o for t, o in _module_ops(torch.nn).items() if type(module) is t), None)
        if op is None:
            return None
        return Call(op, node.target.replace(".", "_"), tuple(_nodes(node.args, torch)), node,
                    f"module {node.target} ({type(module).__name__})",
                    {**_module_attrs(op, module), "path": node.target})
    if node.op == "call_method":
        op = _METHODS.get(node.target)
        what = f"method .{node.target}()"
    else:
        op = _functions(torch).get(node.target)
        what = f"function {getattr(node.target, '__name__', node.target)}"
    if op is None:
        return None
    inputs = tuple(_nodes(node.args, torch) + _nodes(list(node.kwargs.values()), torch))
    return Call(op, op, inputs, node, what, _function_attrs(op, node))


def _function_attrs(op: str, node) -> dict[str, Any]:
    """Settings of a functional call, from its arguments (F.max_pool2d and F.avg_pool2d
    share their first four; `torch.cat(xs, dim)`; `x[i]` on a module's tuple output)."""
    if op in {"max_pool", "avg_pool"}:
        kernel = _arg(node, 1, "kernel_size")
        return {"kernel": kernel, "stride": _arg(node, 2, "stride") or kernel,
                "padding": _arg(node, 3, "padding", 0),
                "dilation": _arg(node, 4, "dilation", 1) if op == "max_pool" else 1}
    if op in {"layer_norm", "batch_norm"}:  # F.layer_norm(x, shape, weight, bias),
        weight = _arg(node, 2 if op == "layer_norm" else 3, "weight")  # F.batch_norm(x,
        return {"params": 2 * _numel(_shape(weight)) if weight is not None else 0}  # m, v, w
    if op == "cat":
        return {"dim": _arg(node, 1, "dim", 0)}
    if op == "getitem":
        return {"index": node.args[1]}
    if op == "mean":
        return {"dims": _arg(node, 1, "dim")}
    return {}


_METHODS = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "softmax": "softmax",
            "view": PASS, "reshape": PASS, "flatten": PASS, "permute": PASS,
            "transpose": PASS, "contiguous": PASS, "squeeze": PASS, "unsqueeze": PASS,
            "size": "meta", "dim": "meta", "add": "add", "mul": "mul", "sub": "sub",
            "div": "div", "matmul": "matmul", "mean": "mean"}


def _functions(torch) -> dict[Any, str]:
    F = torch.nn.functional
    return {F.relu: "relu", torch.relu: "relu", F.relu6: "clip", F.hardtanh: "clip",
            F.silu: "silu", torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid",
            F.hardswish: "hardswish", F.hardsigmoid: "hardsigmoid", F.gelu: "gelu",
            torch.tanh: "tanh", F.tanh: "tanh", F.softmax: "softmax", torch.softmax: "softmax",
            F.max_pool2d: "max_pool", F.avg_pool2d: "avg_pool",
            F.adaptive_avg_pool2d: "adaptive_avg_pool", F.layer_norm: "layer_norm",
            F.batch_norm: "batch_norm", F.dropout: PASS, torch.flatten: PASS,
            torch.reshape: PASS, torch.permute: PASS, torch.transpose: PASS,
            torch.cat: "cat", operator.add: "add", torch.add: "add", operator.iadd: "add",
            operator.mul: "mul", operator.imul: "mul", torch.mean: "mean",
            torch.mul: "mul", operator.sub: "sub", torch.sub: "sub",
            operator.truediv: "div", torch.div: "div", operator.matmul: "matmul",
            torch.matmul: "matmul", torch.bmm: "matmul", operator.getitem: "getitem",
            getattr: "meta"}


# torch.export's ATen operators (`aten::relu`), by name without the namespace
_ATEN = {"conv2d": "conv", "linear": "linear", "lstm": "lstm", "gru": "gru",
         "max_pool2d": "max_pool", "avg_pool2d": "avg_pool",
         "adaptive_avg_pool2d": "adaptive_avg_pool", "batch_norm": "batch_norm",
         "_native_batch_norm_legit_no_training": "batch_norm", "layer_norm": "layer_norm",
         "relu": "relu", "relu6": "clip", "hardtanh": "clip", "silu": "silu",
         "sigmoid": "sigmoid", "tanh": "tanh", "hardswish": "hardswish",
         "hardsigmoid": "hardsigmoid", "gelu": "gelu", "softmax": "softmax",
         "_softmax": "softmax", "add": "add", "sub": "sub", "mul": "mul", "div": "div",
         "matmul": "matmul", "bmm": "matmul", "cat": "cat", "zeros": "const", "mean": "mean",
         "flatten": PASS, "view": PASS, "reshape": PASS, "permute": PASS, "transpose": PASS,
         "contiguous": PASS, "squeeze": PASS, "unsqueeze": PASS, "unflatten": PASS,
         "dropout": PASS, "clone": PASS, "alias": PASS, "t": PASS,
         "embedding": "embedding", "select": "select", "slice": "slice", "index": "index",
         "chunk": "split", "split": "split", "split_with_sizes": "split", "unbind": "split",
         "scaled_dot_product_attention": "sdpa", "expand": "expand", "gather": "gather",
         "ne": "ne", "eq": "eq", "cumsum": "cumsum", "to": PASS, "type_as": PASS,
         "__and__": "and", "bitwise_and": "and", "logical_and": "and", "roll": "roll",
         "sym_size": "meta", "sym_numel": "meta"}


def aten_name(node) -> str:
    """The operator an ATen call names, without namespace, overload or in-place mark
    (`aten::add_.Tensor`: `add`); "" for a Python callable (operator.getitem)."""
    if not callable(getattr(node.target, "name", None)):
        return ""
    name = node.target.name().partition("::")[2].partition(".")[0]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def module_of(node) -> tuple[str, str] | None:
    """(path, class) of the torch.nn module a torch.export node was recorded in, if any;
    its reuse count (`pool@1`) dropped."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return None
    path, cls = next(reversed(stack.values()))
    cls = cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"
    return (path, cls) if cls.startswith("torch.nn.modules.") else None


def aten_call(node, torch) -> Call | None:
    """The Call a torch.export (ATen) node makes; None for an unknown operator."""
    if node.target is operator.getitem:
        return Call("getitem", "getitem", (node.args[0],), node, "getitem",
                    {"index": node.args[1]})
    if not isinstance(node.target, torch._ops.OpOverload):
        return None
    name = aten_name(node)
    op = _ATEN.get(name)
    if op is None:
        return None
    module = module_of(node)
    base = module[0].replace(".", "_") if module and module[0] else op
    what = f"aten.{name}" + (f" in module {module[0]}" if module else "")
    inputs = tuple(_nodes(node.args, torch) + _nodes(list(node.kwargs.values()), torch))
    return Call(op, base, inputs, node, what, _aten_attrs(op, name, node))


def _region(op: str, nodes: list, live: set, attrs: dict[str, Any]) -> Call:
    """One call of a module that torch.export records as the ATen operators of its
    computation (`nodes`, in graph order), as the module call torch.fx records: the data
    it reads and the value it returns (`outputs`: how many of its values are read)."""
    region = set(nodes)
    reads = [n for node in nodes for n in node.all_input_nodes if n not in region]
    data = tuple(dict.fromkeys(n for n in reads if n.op != "get_attr"))
    outs = [n for n in nodes if any(u in live and u not in region for u in n.users)]
    path, cls = module_of(nodes[0])
    return Call(op, path.replace(".", "_"), data, outs[-1] if outs else nodes[-1],
                f"module {path} ({cls.rpartition('.')[2]})", {**attrs, "outputs": len(outs)})


def _attention(nodes: list, live: set) -> Call:
    """nn.MultiheadAttention: its heads are the batch of its first bmm (batch size 1
    times the heads) where it computes its weights, else the head axis of the query its
    scaled_dot_product_attention reads (batch, heads, tokens, width); its embedding the
    width of its packed input projection."""
    reads = [n for node in nodes for n in node.all_input_nodes]
    packed = [n for n in reads if n.op == "get_attr" and n.target.endswith("in_proj_weight")]
    scores = next((n for n in nodes
                   if aten_name(n) in ("bmm", "scaled_dot_product_attention")), None)
    heads = 1 if scores is None else _shape(scores.args[0])[
        0 if aten_name(scores) == "bmm" else -3]
    return _region("mha", nodes, live, {
        "embed": _shape(packed[0])[1] if packed else 0, "packed": bool(packed),
        "heads": heads, "tuple": False})


def _local_response_norm(nodes: list, live: set) -> Call:
    """nn.LocalResponseNorm: its size is the depth of the avg_pool3d summing the squares."""
    pool = next((n for n in nodes if aten_name(n) == "avg_pool3d"), None)
    return _region("lrn", nodes, live, {"size": pool.args[1][0] if pool is not None else 1})


# torch.nn modules torch.export decomposes, by class: each call is imported as a whole
REGIONS = {"torch.nn.modules.activation.MultiheadAttention": _attention,
           "torch.nn.modules.normalization.LocalResponseNorm": _local_response_norm}


def _aten_attrs(op: str, name: str, node) -> dict[str, Any]:
    """Settings of an ATen call from its schema's arguments (weights' shapes from the
    lifted parameters' metadata)."""
    if op in {"conv", "linear", "lstm", "gru"}:  # the module holding the weights
        weight = node.args[2][0] if op in {"lstm", "gru"} else node.args[1]
        path = weight.target.rpartition(".")[0] if weight.op == "get_attr" else ""
        return {**_aten_weights(op, node), "path": path}
    if op in {"max_pool", "avg_pool"}:
        kernel = node.args[1]
        return {"kernel": kernel, "stride": _arg(node, 2, "stride", []) or kernel,
                "padding": _arg(node, 3, "padding", 0),
                "dilation": _arg(node, 4, "dilation", 1) if op == "max_pool" else 1}
    if op == "batch_norm":
        weight = node.args[1]
        return {"params": 2 * _shape(weight)[0] if weight is not None else 0}
    if op == "layer_norm":
        weight = _arg(node, 2, "weight")
        return {"params": 2 * _numel(_shape(weight)) if weight is not None else 0}
    if op == "cat":
        return {"dim": _arg(node, 1, "dim", 0)}
    if op == "mean":
        return {"dims": _arg(node, 1, "dim")}
    if op == "sdpa":
        return {"mask": _arg(node, 3, "attn_mask"), "dropout": _arg(node, 4, "dropout_p", 0.0)}
    if op == "roll":
        return {"dims": _arg(node, 2, "dims", [])}
    return {}


def _aten_weights(op: str, node) -> dict[str, Any]:
    """aten.conv2d(input, weight, bias, stride, padding, dilation, groups),
    aten.linear(input, weight, bias), aten.lstm / aten.gru(input, hx, params, has_biases,
    layers, dropout, train, bidirectional, batch_first)."""
    if op == "conv":
        return {"weight": _shape(node.args[1]), "stride": _arg(node, 3, "stride", 1),
                "padding": _arg(node, 4, "padding", 0),
                "dilation": _arg(node, 5, "dilation", 1), "groups": _arg(node, 6, "groups", 1)}
    if op == "linear":
        return {"weight": _shape(node.args[1])}
    weights = node.args[2]
    return {"input_size": _shape(weights[0])[1], "hidden": _shape(weights[1])[1],
            "layers": node.args[4], "bidirectional": node.args[7], "batch_first": node.args[8],
            "bias": node.args[3], "proj_size": 0}


def _shape(node) -> tuple[int, ...]:
    return tuple(node.meta["tensor_meta"].shape)


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for dim in shape:
        total *= dim
    return total
