"""What a .pt2's program (models/model.json) may say before torch reads it. torch's
deserializer is not made for hostile files: it calls whatever a node names under `torch`,
`operator` or `math` (`torch.os.system` included) when the graph runs, hands symbolic sizes
to `sympy.sympify` (which evaluates Python), executes the program's `guards_code`, and
writes names and stack traces into the Python source torch.fx generates and runs. So,
before torch sees the program: every operator must be an ATen or prims overload or one of
the symbolic-size operators torch itself writes, every symbolic expression must be made of
sympy's own constructors and symbols, every other text must be a plain name (no quote,
bracket, '=', ':' or line break: torch.fx pastes names into the Python it generates and
runs), the guards are dropped, and node metadata keeps only what the importer reads.
"""

import json
import re
from typing import Any

from archipelago.errors import ConfigError, elide

# Node metadata the importer reads (nn_module_stack finds the module of a call); the rest
# (stack traces, annotations) would end up in generated source as comments.
KEPT_METADATA = frozenset({"nn_module_stack", "source_fn_stack", "torch_fn"})
OPERATOR_NAMESPACES = ("aten", "prims")
# What torch.export writes for a symbolic size (sympy.srepr: Symbol('s77', positive=True),
# Mul(Integer(3), ...)) and its own size functions (serialize.py's sympy_functions).
SYMPY_NAMES = frozenset({"Symbol", "Integer", "Rational", "Float", "Add", "Mul", "Pow", "Mod",
    "Max", "Min", "Abs", "floor", "ceiling", "sqrt", "Eq", "Ne", "Lt", "Le", "Gt", "Ge",
    "Equality", "Unequality", "StrictLessThan", "StrictGreaterThan", "LessThan", "GreaterThan",
    "And", "Or", "Not", "Piecewise", "ExprCondPair", "Tuple", "true", "false", "True", "False",
    "oo", "zoo", "nan", "Infinity", "NegativeInfinity", "IntInfinity", "NegativeIntInfinity",
    "Half", "One", "Zero", "NegativeOne", "FloorDiv", "ModularIndexing", "Where", "PythonMod",
    "CleanDiv", "CeilToInt", "FloorToInt", "CeilDiv", "LShift", "RShift", "PowByNatural",
    "FloatPow", "FloatTrueDiv", "IntTrueDiv", "IsNonOverlappingAndDenseIndicator", "TruncToFloat",
    "TruncToInt", "RoundToInt", "RoundDecimal", "ToFloat", "Identity"})
_TOKEN = re.compile(r"""\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)
                      |(?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)
                      |(?P<text>'[A-Za-z0-9_.+-]*')
                      |(?P<op>\*\*|//|==|!=|<=|>=|[-+*/%(),=<>]))""", re.VERBOSE)
_SYMBOL = re.compile(r"[a-z]+[0-9]+")  # s77, u0, zuf1: torch's size symbols
_KEYWORD = re.compile(r"[a-z_]+")  # an assumption passed by name: positive=True
_PLAIN = re.compile(r"(?!__)[A-Za-z0-9_]+")
# ATen's operators named as Python's (aten::__and__, what `mask_a & mask_b` records):
# named one by one, so no other double-underscore name reaches the getattr below.
_DUNDER_OPERATORS = frozenset({"__and__", "__or__", "__xor__", "__lshift__", "__rshift__",
                               "__iand__", "__ior__", "__ixor__"})
# Names, module paths, version and option texts: nothing that quotes, calls, assigns or
# annotates when torch.fx pastes a name into the Python it generates (an argument name
# `x=__import__(...)` would run as the default of `def forward`), and no line break.
_PLAIN_TEXT = re.compile(r"[A-Za-z0-9_.+,;<>@-]*")


def _check_expression(text: Any, source: str, entry: str) -> None:
    """`text` is made only of numbers, operators, quoted plain names, torch's size symbols
    and the sympy constructors above: nothing sympify could evaluate into a call of
    anything else."""
    if not isinstance(text, str):
        raise ConfigError(source, entry, f"symbolic size {elide(repr(text), 80)} is not a text")
    position, names = 0, []
    while position < len(text.rstrip()):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ConfigError(source, entry, f"symbolic size {elide(repr(text), 80)} is not "
                              "a sympy expression torch.export writes")
        if match.group("name"):
            names.append((match.group("name"), text[match.end():].lstrip()[:1]))
        position = match.end()
    for name, after in names:
        if not (name in SYMPY_NAMES or _SYMBOL.fullmatch(name)
                or (after == "=" and _KEYWORD.fullmatch(name))):
            raise ConfigError(source, entry, f"symbolic size {elide(repr(text), 80)} names "
                              f"{elide(name, 40)!r}, which torch.export never writes")


def _allowed_operator(target: str, torch: Any) -> bool:
    """An ATen/prims overload, resolved here the way torch will resolve it, or one of the
    plain size operators (operator.add, torch.sym_int, ...) torch writes for sizes."""
    from torch._export.serde.serialize import _SYM_OPS

    parts = target.split(".")
    if len(parts) == 5 and parts[:2] == ["torch", "ops"] and parts[2] in OPERATOR_NAMESPACES \
            and (parts[3] in _DUNDER_OPERATORS or _PLAIN.fullmatch(parts[3])) \
            and _PLAIN.fullmatch(parts[4]):
        packet = getattr(getattr(torch.ops, parts[2]), parts[3], None)
        return isinstance(getattr(packet, parts[4], None), torch._ops.OpOverload)
    return target in {f"{op.__module__}.{op.__name__}" for op in _SYM_OPS}


def _nested_json(value: str) -> list | dict | None:
    """The JSON a text holds (a module's input and output tree specs are JSON inside the
    program's JSON), checked like the rest; None for any other text."""
    if not value.startswith(("[", "{")):
        return None
    try:
        inner = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return inner if isinstance(inner, (list, dict)) else None


def _check_operator(target: Any, source: str, entry: str, torch: Any) -> None:
    if not isinstance(target, str) or not _allowed_operator(target, torch):
        raise ConfigError(source, entry, f"operator {elide(repr(target), 80)} is not an ATen "
                          "operator; only ATen graphs are read")


def _check_text(value: str, source: str, entry: str) -> None:
    if not _PLAIN_TEXT.fullmatch(value):
        raise ConfigError(source, entry, f"text {elide(repr(value), 80)} is not a name "
                          "torch.export writes (letters, digits and _ . + , ; - < > @)")


def check_program(program: Any, source: str, entry: str, torch: Any) -> dict:
    """The program `entry` of archive `source` (parsed JSON), checked and trimmed in place
    (guards dropped, node metadata cut to KEPT_METADATA); one line naming the entry for
    anything torch would run."""
    if not isinstance(program, dict):
        raise ConfigError(source, entry, "is not a torch.export program (a JSON object)")
    program["guards_code"] = []  # Python source torch would exec; the example inputs fit
    stack: list[Any] = [program]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in ("target", "as_operator"):  # a node's operator, an operator argument
                if key in item:
                    _check_operator(item[key], source, entry, torch)
            if isinstance(item.get("metadata"), dict):  # a node's
                item["metadata"] = {k: v for k, v in item["metadata"].items()
                                    if k in KEPT_METADATA}
            if "expr_str" in item:  # sympify evaluates a text, and each text inside a list
                _check_expression(item["expr_str"], source, entry)
                stack.extend(v for k, v in item.items() if k != "expr_str")
            else:
                stack.extend(item.values())
            stack.extend(item.keys())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            inner = _nested_json(item)
            if inner is None:
                _check_text(item, source, entry)
            else:
                stack.append(inner)
    return program


# Containers torch's pytree knows without importing anything: an output tree of any other
# type (transformers' ModelOutput) would make torch look its class up by name.
_BUILTIN_TREES = frozenset({"builtins.tuple", "builtins.list", "builtins.dict", None})


def plain_outputs(program: dict) -> None:
    """The output tree specs of `program`'s module calls with every container torch would
    import (a library's output class: transformers' SequenceClassifierOutput) read as a
    tuple of the same children: the importer reads the output values, never the class a
    library wraps them in, and a class named here is never imported."""
    for call in program.get("graph_module", {}).get("module_call_graph", []) or []:
        signature = call.get("signature") if isinstance(call, dict) else None
        spec = signature.get("out_spec") if isinstance(signature, dict) else None
        tree = _nested_json(spec) if isinstance(spec, str) else None
        if not isinstance(tree, list) or len(tree) != 2:
            continue
        stack = [tree[1]]
        while stack:
            node = stack.pop()
            if not isinstance(node, dict):
                continue
            if node.get("type") not in _BUILTIN_TREES:
                node["type"], node["context"] = "builtins.tuple", "null"
            stack.extend(node.get("children_spec") or [])
        signature["out_spec"] = json.dumps(tree)


def check_names(config: Any, source: str, entry: str) -> None:
    """The texts of a weights or constants config (its tensors' module paths, which torch
    assigns as attributes) obey the program's rule."""
    stack = [config]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend([*item.keys(), *item.values()])
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            _check_text(item, source, entry)
