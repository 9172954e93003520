"""A request trace: a CSV (header row) or JSON-lines file (`.jsonl`) of arrival time,
prompt tokens and output tokens per request. Column names: `arrival_s, prompt_tokens,
output_tokens`, or those of the public Azure LLM inference traces (`TIMESTAMP,
ContextTokens, GeneratedTokens`, github.com/Azure/AzurePublicDataset), whose TIMESTAMP is a
date and time (`2023-11-16 18:15:46.6805900`) or seconds. Arrivals are kept relative to
the first, at the trace's own rate, so `--rate` can replay it faster or slower."""

import csv
import io
import json
import math
from datetime import datetime
from pathlib import Path

import numpy as np

from archipelago.errors import ConfigError
from archipelago.safe_read import read_text
from archipelago.serving.requests import MAX_REQUESTS, Requests

COLUMNS = (("arrival_s", "TIMESTAMP"), ("prompt_tokens", "ContextTokens"),
           ("output_tokens", "GeneratedTokens"))


def _time(value: object, where: str, source: str) -> float:
    """Seconds, or a date and time as seconds since the epoch (fractions past micro-
    seconds cut)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip()
        try:
            seconds = float(text)
        except ValueError:
            head, dot, frac = text.partition(".")
            try:
                seconds = datetime.fromisoformat(head + dot + frac[:6]).timestamp()
            except ValueError:
                raise ConfigError(source, where, f"arrival '{text[:40]}' is neither seconds "
                                  "nor a date and time") from None
    if not math.isfinite(seconds):
        raise ConfigError(source, where, "arrival must be a finite number of seconds")
    return seconds


def _tokens(value: object, name: str, where: str, source: str) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or len(text) > 9 or int(text) < 1:
        raise ConfigError(source, where, f"{name} '{text[:20]}' must be a whole number of "
                          "tokens, at least 1")
    return int(text)


def _rows(path: Path, text: str) -> list[dict]:
    source = str(path)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ConfigError(source, f"line {number}", f"invalid JSON: {err.msg}") from None
            if not isinstance(row, dict):
                raise ConfigError(source, f"line {number}", "must be a JSON object")
            rows.append(row)
        return rows
    return list(csv.DictReader(io.StringIO(text)))


def read_trace(path: Path) -> tuple[Requests, float]:
    """The trace's requests (unit arrivals at its own rate; `requests.fitted` fits their
    lengths to a model) and that rate (requests per second: the count less one over the
    span; 1 for a trace of one instant)."""
    source = str(path)
    rows = _rows(path, read_text(path, "trace"))
    if not rows:
        raise ConfigError(source, "trace", "has no requests")
    if len(rows) > MAX_REQUESTS:
        raise ConfigError(source, "trace", f"has {len(rows)} requests; at most {MAX_REQUESTS}")
    names = []
    for ours, azure in COLUMNS:
        found = next((n for n in (ours, azure) if n in rows[0]), None)
        if found is None:
            raise ConfigError(source, "trace", f"needs a column {ours} (or {azure}); has "
                              f"{', '.join(map(str, rows[0]))[:80]}")
        names.append(found)
    times = np.empty(len(rows))
    prompt = np.empty(len(rows), dtype=np.int64)
    output = np.empty(len(rows), dtype=np.int64)
    for i, row in enumerate(rows):
        where = f"request {i + 1}"
        times[i] = _time(row.get(names[0]), where, source)
        prompt[i] = _tokens(row.get(names[1]), names[1], where, source)
        output[i] = _tokens(row.get(names[2]), names[2], where, source)
    order = np.argsort(times, kind="stable")
    times = times[order] - times[order][0]
    span = float(times[-1])
    rate = (len(rows) - 1) / span if span > 0 else 1.0
    return Requests(times * rate, prompt[order], output[order]), rate
