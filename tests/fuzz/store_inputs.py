"""Hostile comparison stores (`archi compare --store s.jsonl`): the store a small comparison
writes, then edited the way a user's editor, another program or a damaged disk would
(a field replaced by a hostile value or a figure scaled, dropped or added, a status
flipped, a record's key changed, a value replaced whole, a record repeated with an edit),
sometimes with the file itself cut, a junk line inserted or the header changed."""

import json
import math
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from archipelago.batch.journal import Journal
from archipelago.compare.combos import Task, combinations, evaluate
from archipelago.compare.run import KIND, identity
from archipelago.estimate.workload import parse_tokens
from archipelago.models.zoo import resolve_model
from tests.fuzz.harness import random_kept
from tests.fuzz.inputs import HOSTILE, rarely

MODEL, TOKENS = "gpt2-345m", "16:8"
STRATEGIES, DEVICES, COUNTS, BATCHES = ("lora-q", "gpu-graph"), ("u280", "v100"), (1, 2), (1,)
# `archi compare` of the stored combinations, its store left to the case
ARGS = ["compare", MODEL, "--tokens", TOKENS, "--strategies", ",".join(STRATEGIES),
        "--devices", ",".join(DEVICES), "--counts", ",".join(map(str, COUNTS)), "--batch",
        ",".join(map(str, BATCHES)), "--json", "--engine", "published"]
FIGURES = ("latency_s", "tokens_per_s", "prefill_s", "decode_s_per_token")
STATUSES = ["ok", "infeasible", "refused", "", "OK", "fits"]


@cache
def base_lines() -> tuple[str, tuple[tuple[str, dict[str, Any]], ...]]:
    """The header line and the (key, value) records the comparison of ARGS writes, each
    estimated through the pipeline as `archi compare` does (without Dask). Drawn first
    inside a hypothesis strategy, which refuses a draw that moves the global random (the
    first import of a library may seed it): its state is put back."""
    with random_kept():
        spec = resolve_model(MODEL)
        key, labels = identity(spec, parse_tokens(TOKENS))
        combos = combinations(list(STRATEGIES), DEVICES, COUNTS, BATCHES)
        records = tuple(evaluate(Task(spec, TOKENS, tuple(combos))))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.jsonl"
        Journal.open(path, KIND, key, labels)
        header = path.read_text().splitlines()[0]
    return header, records


def _value_edit(draw: st.DrawFn, value: Any) -> Any:
    """`value` with one field replaced, scaled, dropped, added, or its status flipped (a
    value an earlier edit made no object: another hostile value)."""
    if not isinstance(value, dict):
        return draw(HOSTILE)
    value = json.loads(json.dumps(value))  # a copy
    field = draw(st.sampled_from([*sorted(value), "extra"]))
    how = draw(st.integers(0, 4))
    if how == 0 and isinstance(value.get(field), float):  # scaled: negative, zero, huge, NaN
        value[field] *= draw(st.sampled_from([-1.0, 0.0, 1e300, math.nan, math.inf, 0.5, 2]))
    elif how == 1:
        value.pop(field, None)
    elif how == 2:
        value["status"] = draw(st.sampled_from(STATUSES))
    elif how == 3 and isinstance(value.get(field), dict):  # inside shares or floors
        inner = value[field]
        inner[draw(st.sampled_from([*sorted(inner), "x"]))] = draw(HOSTILE)
    else:
        value[field] = draw(HOSTILE)
    return value


@st.composite
def compare_store(draw: st.DrawFn) -> bytes:
    """The bytes of a (mostly well-formed) store after 0-3 hostile edits."""
    header, base = base_lines()
    records = [list(r) for r in base]
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(records) - 1))
        key, value = records[at]
        edit = draw(st.integers(0, 5))
        if edit <= 2:
            records[at][1] = _value_edit(draw, value)
        elif edit == 3:  # the value replaced whole (a JSON value, maybe not an object)
            records[at][1] = draw(HOSTILE | st.just({}))
        elif edit == 4:  # a record of another combination, or under a foreign key
            records[at][0] = draw(st.sampled_from([k for k, _ in base] + ["x", ""]))
        else:  # the record repeated, the later copy edited (a later value replaces)
            records.append([key, _value_edit(draw, value)])
    lines = [header] + [json.dumps({"key": k, "value": v}) for k, v in records]
    if draw(rarely(10)):  # the header edited: another model, workload or format
        lines[0] = draw(st.sampled_from([header.replace('"16:8"', '"16:9"'),
                                         header.replace('"journal":1', '"journal":2'),
                                         '{"journal":1}', "[]"]))
    if draw(rarely(10)):  # a junk line: not JSON, not a record, nested past any bound
        lines.insert(draw(st.integers(1, len(lines))), draw(st.sampled_from(
            ["{", "[1, 2]", '{"key": 5, "value": {}}', "[" * 5000 + "]" * 5000])))
    data = ("\n".join(lines) + "\n").encode()
    if draw(rarely(10)):  # cut short (a torn last line) or bytes inserted
        at = draw(st.integers(0, len(data)))
        data = data[:at] + (draw(st.binary(min_size=1, max_size=8)) if draw(st.booleans())
                            else b"")
    return data
