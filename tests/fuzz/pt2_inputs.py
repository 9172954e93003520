"""Hostile torch.export archives (`archi plan model.pt2`): a small network saved with
torch.export.save, then edited the way a damaged or malicious file would be (entries
dropped, cut or padded, JSON values replaced, operators and symbolic sizes that name
Python, pickles that run code, tensor descriptions that do not fit their bytes)."""

import io
import json
import os
import tempfile
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.inputs import HOSTILE, rarely

# The file a payload creates: outside the case's directory, which the loader could clean.
MARKER = Path(tempfile.gettempdir()) / f"archipelago-fuzz-pt2-payload-{os.getpid()}"
TARGETS = ["torch.os.system", "_operator.call", "builtins.eval", "torch.ops.aten.add.Tensor",
           "torch.ops.aten.relu.default", "torch.ops.higher_order.cond", "#x:y", "math.trunc",
           "torch.ops.aten.__class__.x", "", "torch.ops.aten.linear.default"]
EXPRESSIONS = ["Symbol('s0', positive=True, integer=True)", "Mul(Integer(3), Symbol('s1'))",
               f"__import__('builtins').open('{MARKER}', 'w')", "s0.__class__", "lambda: 1",
               "Integer(2**99)", "FloorDiv(s0, 0)", "'", "", "Max(s0, -1)"]


WEIGHTS = "data/weights/model_weights_config.json"


class Payload:
    """Unpickled, creates MARKER."""

    def __reduce__(self):
        return (open, (str(MARKER), "w"))


@cache
def base_entries() -> tuple[tuple[str, bytes], ...]:
    """The entries of a small convolutional network's archive, by their name under the
    root folder."""
    import torch

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 6 * 6, 5))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "net.pt2"
        torch.export.save(torch.export.export(net, (torch.randn(1, 3, 8, 8),)), str(path))
        with zipfile.ZipFile(path) as archive:
            return tuple((i.filename.split("/", 1)[1], archive.read(i))
                         for i in archive.infolist())


def pickled(obj: Any) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _json_edit(draw: st.DrawFn, doc: Any) -> Any:
    """`doc` with one value somewhere inside it replaced (a hostile value, a list or
    object emptied), or one symbolic size or operator planted in a graph node."""
    containers, stack = [], [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict) and item:
            containers.append(item)
            stack.extend(item.values())
        elif isinstance(item, list) and item:
            containers.append(item)
            stack.extend(item)
    if not containers:
        return draw(HOSTILE)
    where = containers[draw(st.integers(0, len(containers) - 1))]
    key = draw(st.sampled_from(list(where) if isinstance(where, dict) else range(len(where))))
    if isinstance(where, dict) and "target" in where and draw(st.booleans()):
        where["target"] = draw(st.sampled_from(TARGETS))
    elif isinstance(where, dict) and "as_int" in where and draw(st.booleans()):
        where.clear()
        where["as_expr"] = {"expr_str": draw(st.sampled_from(EXPRESSIONS)), "hint": None}
    else:
        where[key] = draw(st.one_of(HOSTILE, st.just([]), st.just({})))
    return doc


def _parsed(data: bytes) -> Any:
    """The JSON an entry holds; None for an entry that is not JSON (or was damaged)."""
    try:
        return json.loads(data)
    except ValueError:
        return None


@st.composite
def pt2_file(draw: st.DrawFn) -> bytes:
    """The bytes of a (mostly valid) archive after 0-3 hostile edits."""
    entries = dict(base_entries())
    for edit in draw(st.lists(st.integers(0, 5), max_size=3)):
        name = draw(st.sampled_from(sorted(entries)))
        if edit == 0:  # an entry missing
            entries.pop(name)
        elif edit == 1:  # an entry cut short or padded
            data = entries[name]
            entries[name] = data[:draw(st.integers(0, len(data)))] + draw(st.binary(max_size=8))
        elif edit in (2, 3) and (doc := _parsed(entries[name])) is not None:  # a JSON value
            entries[name] = json.dumps(_json_edit(draw, doc)).encode()
        elif edit == 4:  # a pickle that runs code, where inputs or a weight go
            target = draw(st.sampled_from(["data/sample_inputs/model.pt",
                                           "data/weights/weight_0"]))
            entries[target] = pickled(draw(st.sampled_from([(Payload(),), Payload()])))
        elif edit == 5:  # every weight said to be pickled
            config = _parsed(entries.get(WEIGHTS, b""))
            if isinstance(config, dict) and isinstance(config.get("config"), dict):
                for payload in config["config"].values():
                    if isinstance(payload, dict):
                        payload["use_pickle"] = True
                entries[WEIGHTS] = json.dumps(config).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(f"model/{name}", data)
    data = buffer.getvalue()
    if draw(rarely(10)):  # the zip itself cut short, or bytes inserted
        at = draw(st.integers(0, len(data)))
        data = data[:at] + (draw(st.binary(min_size=1, max_size=8)) if draw(st.booleans())
                            else b"")
    return data
